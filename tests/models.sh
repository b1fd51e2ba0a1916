#!/bin/sh
# tests/models.sh - tests on the sample models of models/ (made by models/gen_models.py):
#   - `onnxcc check` (default and -O0) of every models/NAME/model.onnx against its
#     numpy-computed test data,
#   - the same for a gzip-compressed copy of one (onnxcc reads .onnx.gz transparently),
#   - mlp and cnn compiled separately and linked into ONE C program (models/link_two.c) that
#     checks the header contract and that runs are independent of the arena's contents,
#   - models/detect (outputs of data-dependent shape) linked into models/dyn_contract.c, which
#     checks the header contract for them (dims outputs, valid part, zeroed rest),
#   - `nm -u` of a model object: it may need nothing but memcpy/memset/memmove.
# Work files: build/models/. Last line: "models: N passed, N failed".
set -u
cd "$(dirname "$0")/.."
ONNXCC=${ONNXCC:-./onnxcc}
PYTHON=${PYTHON:-/usr/bin/python3}
CC=${CC:-cc}
OUT=build/models
passed=0 failed=0

ok() { echo "ok   $1"; passed=$((passed + 1)); }
fail() { # what log
    echo "FAIL $1"
    [ -f "$2" ] && tail -n 10 "$2" | sed 's/^/    /'
    failed=$((failed + 1))
}

if [ ! -x "$ONNXCC" ]; then
    echo "FAIL models: $ONNXCC not built (make)"
    echo "models: 0 passed, 1 failed"
    exit 1
fi
mkdir -p $OUT

for m in models/*/model.onnx; do
    d=${m%/model.onnx}
    name=${d##*/}
    # at the default level, and without fusion or tiling (-O0), which take other code paths
    for opt in "" -O0; do
        log=$OUT/check_$name$opt.log
        if $ONNXCC check $opt $m </dev/null >$log 2>&1; then
            ok "check $opt${opt:+ }$m"
        else
            fail "check $opt${opt:+ }$m" $log
        fi
    done
done

gzip -9 -c models/cnn/model.onnx >$OUT/cnn.onnx.gz
if $ONNXCC check $OUT/cnn.onnx.gz models/cnn/test_data_set_0 </dev/null >$OUT/check_gz.log 2>&1; then
    ok "check $OUT/cnn.onnx.gz (gzip-compressed model)"
else
    fail "check $OUT/cnn.onnx.gz (gzip-compressed model)" $OUT/check_gz.log
fi

# Two models in one program.
log=$OUT/link_two.log
: >$log
built=1
for name in mlp cnn; do
    rm -f $OUT/$name.o $OUT/$name.h
    $ONNXCC models/$name/model.onnx -o $OUT/$name.o </dev/null >>$log 2>&1 || built=0
    $PYTHON tests/firmware/pb2c.py --prefix t_$name models/$name/test_data_set_0 \
        >$OUT/t_$name.h 2>>$log || built=0
done
if [ $built = 1 ] && $CC -std=c11 -O1 -Wall -Wextra -Wpedantic -Werror -I$OUT -Itests/firmware \
        models/link_two.c $OUT/mlp.o $OUT/cnn.o -o $OUT/link_two >>$log 2>&1; then
    rc=0
    $OUT/link_two >$OUT/link_two.out 2>&1 || rc=$?
    cat $OUT/link_two.out
    n=$(grep -c '^ok' $OUT/link_two.out)
    f=$(grep -c '^FAIL' $OUT/link_two.out)
    passed=$((passed + n)) failed=$((failed + f))
    [ $rc != 0 ] && [ $f = 0 ] && fail "link_two exited with status $rc" $OUT/link_two.out
else
    fail "mlp + cnn linked into one program (models/link_two.c)" $log
fi

# Outputs of data-dependent shape (models/detect) as a user's program sees them.
log=$OUT/dyn_contract.log
rm -f $OUT/detect.o $OUT/detect.h
if $ONNXCC models/detect/model.onnx -o $OUT/detect.o </dev/null >$log 2>&1 &&
        $PYTHON tests/firmware/pb2c.py --prefix t_detect models/detect/test_data_set_1 >$OUT/t_detect.h 2>>$log &&
        $CC -std=c11 -O1 -Wall -Wextra -Wpedantic -Werror -I$OUT -Itests/firmware \
            models/dyn_contract.c $OUT/detect.o -o $OUT/dyn_contract >>$log 2>&1; then
    rc=0
    $OUT/dyn_contract >$OUT/dyn_contract.out 2>&1 || rc=$?
    cat $OUT/dyn_contract.out
    n=$(grep -c '^ok' $OUT/dyn_contract.out)
    f=$(grep -c '^FAIL' $OUT/dyn_contract.out)
    passed=$((passed + n)) failed=$((failed + f))
    [ $rc != 0 ] && [ $f = 0 ] && fail "dyn_contract exited with status $rc" $OUT/dyn_contract.out
else
    fail "detect linked into models/dyn_contract.c" $log
fi

# The generated code needs no runtime library: at most the C library's mem* functions.
for name in mlp cnn; do
    [ -f $OUT/$name.o ] || continue
    extra=$(nm -u $OUT/$name.o | awk '{ print $NF }' | grep -v -x -E 'memcpy|memset|memmove')
    if [ -z "$extra" ]; then
        ok "nm -u $name.o: no undefined symbols but mem*"
    else
        echo "$extra" >$OUT/nm_$name.log
        fail "nm -u $name.o: needs $(echo $extra)" /dev/null
    fi
done

echo "models: $passed passed, $failed failed"
[ $failed = 0 ]
