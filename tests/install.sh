#!/bin/sh
# tests/install.sh - `make install` and the CMake module it installs:
#   - make install DESTDIR=... PREFIX=/usr puts onnxcc, onnxcc.1 and onnxcc.cmake in place, and
#     the installed onnxcc runs;
#   - the man page names every option that `onnxcc --help` lists;
#   - a tiny CMake project (tests/cmake/) using onnxcc_add_model, configured for the host (built
#     and run: outputs against the data set, stack bound) and for a Cortex-M4 with a toolchain
#     file (built and run under QEMU, as tests/firmware/ does); then the model is touched and
#     the host build must compile it again, and only then.
# Work files: build/install/ (build-san/install/ with SANITIZE=1). Last line: "install: N passed, N failed".
set -u
cd "$(dirname "$0")/.."
SRC=$PWD
. tests/lib.sh
excerpt() { tail -n 15 "$1" | sed 's/^/    /'; }
W=$SRC/${B:-build}/install
STAGE=$W/stage
rm -rf $W
mkdir -p $W

if make -s install SANITIZE=${SANITIZE:-} DESTDIR=$STAGE PREFIX=/usr >$W/install.log 2>&1 &&
        [ -x $STAGE/usr/bin/onnxcc ] && [ -f $STAGE/usr/share/man/man1/onnxcc.1 ] &&
        [ -f $STAGE/usr/share/onnxcc/cmake/onnxcc.cmake ] &&
        [ -f $STAGE/usr/share/onnxcc/runtime/onnxcc_pool.c ] && [ -f $STAGE/usr/share/onnxcc/runtime/onnxcc_pool.h ] &&
        $STAGE/usr/bin/onnxcc --version >>$W/install.log 2>&1; then
    ok "make install DESTDIR=... PREFIX=/usr: bin/onnxcc, share/man/man1/onnxcc.1, share/onnxcc/cmake/onnxcc.cmake, share/onnxcc/runtime/onnxcc_pool.[ch]"
else
    fail "make install" $W/install.log
    summary install; exit 1
fi
ONNXCC=$STAGE/usr/bin/onnxcc

# Every option of --help in the man page (roff writes '-' as '\-').
sed 's/\\-/-/g' $STAGE/usr/share/man/man1/onnxcc.1 >$W/man.txt
missing=""
for o in $($ONNXCC --help | grep -o -E '(^| )--?[a-zA-Z][a-zA-Z0-9-]*' | sort -u); do
    grep -q -e "$o" $W/man.txt || missing="$missing $o"
done
if [ -z "$missing" ]; then
    ok "onnxcc.1 names every option of --help"
else
    fail "onnxcc.1 lacks:$missing"
fi

if ! command -v cmake >/dev/null 2>&1; then
    fail "cmake not installed (sh tools/install-deps.sh)"
    summary install; exit 1
fi
cp models/example/model.onnx $W/example.onnx
mkdir -p $W/case
$PYTHON tests/firmware/pb2c.py --model example models/example/test_data_set_0 >$W/case/case.h
CMAKE_VARS="-DONNXCC_CMAKE_DIR=$STAGE/usr/share/onnxcc/cmake -DMODEL=$W/example.onnx
            -DCASE_DIR=$W/case -DSRC=$SRC"

# Host: the installed onnxcc is found next to the module (PREFIX/bin).
log=$W/host.log
if cmake -S tests/cmake -B $W/host $CMAKE_VARS >$log 2>&1 && cmake --build $W/host >>$log 2>&1 &&
        grep -q 'onnxcc: compiling' $log && $W/host/app >>$log 2>&1; then
    ok "CMake, host: onnxcc_add_model built and linked the model; $(grep -o 'stack [0-9]* bytes (bound [0-9]*)' $log)"
else
    fail "CMake, host: configure, build or run" $log
fi
if [ -x $W/host/app_par ] && $W/host/app_par >$W/par.log 2>&1; then
    ok "CMake, host: onnxcc_link_pool: NAME_run_par on the installed pool, bitwise NAME_run at 1-3 threads"
else
    fail "CMake, host: onnxcc_link_pool" $W/par.log
fi
# Nothing changed: no onnxcc step. The model touched: one.
cmake --build $W/host >$W/again.log 2>&1
sleep 1
touch $W/example.onnx
cmake --build $W/host >$W/touched.log 2>&1
if ! grep -q 'onnxcc: compiling' $W/again.log && grep -q 'onnxcc: compiling' $W/touched.log &&
        [ $W/host/onnxcc/example.o -nt $W/example.onnx ]; then
    ok "CMake, host: the model is compiled again when it changes, and only then"
else
    fail "CMake, host: rebuild on a model change" $W/touched.log
fi

# Cortex-M4: a toolchain file as firmware projects have; the program runs under QEMU.
log=$W/m4.log
if cmake -S tests/cmake -B $W/m4 $CMAKE_VARS -DCMAKE_TOOLCHAIN_FILE=$SRC/tests/cmake/toolchain-m4.cmake \
        >$log 2>&1 && cmake --build $W/m4 >>$log 2>&1 &&
        timeout 30 qemu-system-arm -M mps2-an386 -cpu cortex-m4 -display none -serial none \
            -monitor none -chardev stdio,id=sh0 -semihosting-config enable=on,target=native,chardev=sh0 \
            -kernel $W/m4/app </dev/null >$W/m4.out 2>>$log && grep -qx PASS $W/m4.out; then
    ok "CMake, Cortex-M4 toolchain: the model compiled for thumbv7em, run under QEMU: $(grep -o 'stack [0-9]* bytes' $W/m4.out)"
else
    cat $W/m4.out >>$log 2>/dev/null
    fail "CMake, Cortex-M4: configure, build or run" $log
fi

summary install
