#!/bin/sh
# tests/models.sh - tests on the sample models of models/ (made by models/gen_models.py):
#   - `onnxcc check` (default and -O0) of every models/NAME/model.onnx against its
#     numpy-computed test data,
#   - the same for a gzip-compressed copy of one (onnxcc reads .onnx.gz transparently),
#   - mlp and cnn compiled separately and linked into ONE C program (models/link_two.c) that
#     checks the header contract and that runs are independent of the arena's contents,
#   - models/detect (outputs of data-dependent shape) linked into models/dyn_contract.c, which
#     checks the header contract for them (dims outputs, valid part, zeroed rest),
#   - models/text (string tensors) linked into models/str_contract.c, which checks the header
#     contract for strings (char[NAME_STRLEN] elements, info, packed kept words, dims),
#   - models/loop_while compiled with --max-trip loop=3 linked into models/trip_bound.c: runs
#     within the bound give numpy's outputs, one past it returns NAME_ERR_TRIP (4),
#   - `nm -u` of a model object: it may need nothing but memcpy/memset/memmove,
#   - the header's NAME_STACK_SIZE against a painted-stack measurement on the host
#     (tests/host_stack.c), NAME_FLASH_SIZE against size(1), NAME_MACS against tests/macs.py,
#   - x86 hosts: run() of an object compiled for CPU features this machine lacks returns
#     NAME_ERR_CPU (tests/cpu_guard.c), whatever /proc/cpuinfo says is lacking.
# Work files: build/models/. Last line: "models: N passed, N failed".
set -u
cd "$(dirname "$0")/.."
. tests/lib.sh
OUT=build/models

# Runs the checker program build/models/NAME, which prints ok/FAIL lines: counts them, and a
# non-zero status without any FAIL line is a failure too.
run_checker() { # name
    rc=0
    $OUT/$1 >$OUT/$1.out 2>&1 || rc=$?
    tally $OUT/$1.out
    [ $rc != 0 ] && ! grep -q '^FAIL' $OUT/$1.out && fail "$1 exited with status $rc" $OUT/$1.out
}

if [ ! -x "$ONNXCC" ]; then
    fail "models: $ONNXCC not built (make)"
    summary models; exit 1
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

# Two models in one program; then the same with each object joined from two LLVM modules
# (ONNXCC_SPLIT_KERNELS=1: every kernel split, backend/emit.c's side module), whose hidden
# functions and weights the join makes local: the two objects must still link together.
for split in 0 1; do
    log=$OUT/link_two.log
    : >$log
    built=1
    for name in mlp cnn; do
        rm -f $OUT/$name.o $OUT/$name.h
        if [ $split = 1 ]; then
            ONNXCC_SPLIT_KERNELS=1 $ONNXCC -v models/$name/model.onnx -o $OUT/$name.o </dev/null >>$log 2>&1 || built=0
            grep -q 'llvm-side .*on a thread of its own: [1-9]' $log || built=0
        else
            $ONNXCC models/$name/model.onnx -o $OUT/$name.o </dev/null >>$log 2>&1 || built=0
        fi
        $PYTHON tests/firmware/pb2c.py --prefix t_$name models/$name/test_data_set_0 \
            >$OUT/t_$name.h 2>>$log || built=0
    done
    if [ $built = 1 ] && $CC -std=c11 -O1 -Wall -Wextra -Wpedantic -Werror -I$OUT -Itests/firmware \
            models/link_two.c $OUT/mlp.o $OUT/cnn.o -o $OUT/link_two >>$log 2>&1; then
        run_checker link_two
    else
        fail "mlp + cnn linked into one program (models/link_two.c)$([ $split = 1 ] && echo ', each joined from two modules')" $log
    fi
done

# Outputs of data-dependent shape (models/detect) as a user's program sees them.
log=$OUT/dyn_contract.log
rm -f $OUT/detect.o $OUT/detect.h
if $ONNXCC models/detect/model.onnx -o $OUT/detect.o </dev/null >$log 2>&1 &&
        $PYTHON tests/firmware/pb2c.py --prefix t_detect models/detect/test_data_set_1 >$OUT/t_detect.h 2>>$log &&
        $CC -std=c11 -O1 -Wall -Wextra -Wpedantic -Werror -I$OUT -Itests/firmware \
            models/dyn_contract.c $OUT/detect.o -o $OUT/dyn_contract >>$log 2>&1; then
    run_checker dyn_contract
else
    fail "detect linked into models/dyn_contract.c" $log
fi

# String tensors (models/text) as a user's program sees them.
log=$OUT/str_contract.log
rm -f $OUT/text.o $OUT/text.h
if $ONNXCC models/text/model.onnx -o $OUT/text.o </dev/null >$log 2>&1 &&
        $CC -std=c11 -O1 -Wall -Wextra -Wpedantic -Werror -I$OUT \
            models/str_contract.c $OUT/text.o -o $OUT/str_contract >>$log 2>&1; then
    run_checker str_contract
else
    fail "text linked into models/str_contract.c" $log
fi

# A Loop bounded by --max-trip (models/loop_while): a run that needs more iterations returns
# NAME_ERR_TRIP (models/trip_bound.c).
log=$OUT/trip_bound.log
: >$log
built=1
rm -f $OUT/lw3.o $OUT/lw3.h
$ONNXCC models/loop_while/model.onnx --max-trip loop=3 --name lw3 -o $OUT/lw3.o </dev/null >>$log 2>&1 || built=0
for k in 0 1 2 3; do
    $PYTHON tests/firmware/pb2c.py --prefix t_set$k models/loop_while/test_data_set_$k \
        >$OUT/t_set$k.h 2>>$log || built=0
done
if [ $built = 1 ] && $CC -std=c11 -O1 -Wall -Wextra -Wpedantic -Werror -I$OUT -Itests/firmware \
        models/trip_bound.c $OUT/lw3.o -o $OUT/trip_bound >>$log 2>&1; then
    run_checker trip_bound
else
    fail "loop_while --max-trip loop=3 linked into models/trip_bound.c" $log
fi

# The generated code needs no runtime library: at most the C library's mem* functions.
for name in mlp cnn; do
    [ -f $OUT/$name.o ] || continue
    extra=$(nm -u $OUT/$name.o | awk '{ print $NF }' | grep -v -x -E 'memcpy|memset|memmove')
    if [ -z "$extra" ]; then
        ok "nm -u $name.o: no undefined symbols but mem*"
    else
        echo "$extra" >$OUT/nm_$name.log
        fail "nm -u $name.o: needs $(echo $extra)"
    fi
done

# The header's facts on the host: the stack bound against a painted-stack measurement
# (tests/host_stack.c), flash against `size`'s text column, work against tests/macs.py.
for name in example cnn mlp; do
    D=$OUT/facts/$name log=$OUT/facts_$name.log
    mkdir -p $D
    if ! { $ONNXCC models/$name/model.onnx -o $D/$name.o &&
           $PYTHON tests/firmware/pb2c.py --model $name models/$name/test_data_set_0 >$D/case.h &&
           $CC -std=c11 -O2 -Wall -Wextra -I$D -Itests/firmware tests/host_stack.c $D/$name.o \
               -pthread -o $D/host_stack; } </dev/null >$log 2>&1; then
        fail "header facts of $name: build" $log; continue
    fi
    if $D/host_stack >$D/out 2>&1; then
        ok "$name on the host: $(sed -n 's/.*\(stack .*\)/\1/p' $D/out)"
    else
        fail "$name on the host: stack bound or outputs" $D/out
    fi
    flash=$(sed -n "s/^#define ${name}_FLASH_SIZE //p" $D/$name.h)
    text=$(size $D/$name.o | awk 'NR == 2 { print $1 }')
    if [ -n "$flash" ] && [ "$flash" = "$text" ]; then
        ok "$name: ${name}_FLASH_SIZE $flash = size's text"
    else
        fail "$name: ${name}_FLASH_SIZE ${flash:-missing}, size's text $text"
    fi
    macs=$(sed -n "s/^#define ${name}_MACS //p" $D/$name.h)
    ref=$($PYTHON tests/macs.py models/$name/model.onnx 2>>$log)
    if [ -n "$macs" ] && [ "$macs" = "$ref" ]; then
        ok "$name: ${name}_MACS $macs = macs.py"
    else
        fail "$name: ${name}_MACS ${macs:-missing}, macs.py $ref" $log
    fi
done

# Host objects check the CPU (backend/cpucheck.c): compiled for a feature this machine lacks,
# run returns NAME_ERR_CPU (5) and writes nothing; /proc/cpuinfo says which it has (LLVM
# feature name, cpuinfo flag). The default baseline (x86-64-v3) and native must run.
# Lines: what | onnxcc options | cpuinfo flag of the feature that decides.
if [ "$(uname -m)" = x86_64 ] && [ -r /proc/cpuinfo ]; then
    flags=" $(grep -m 1 '^flags' /proc/cpuinfo | cut -d: -f2) "
    D=$OUT/cpu
    mkdir -p $D
    $PYTHON tests/firmware/pb2c.py --model cg models/mlp/test_data_set_0 >$D/case.h 2>$D/pb2c.log
    while IFS='|' read -r what opts flag; do
        log=$D/$what.log
        want=0
        case "$flags" in *" $flag "*) ;; *) want=5 ;; esac
        rm -f $D/cg.o $D/cg.h $D/guard
        if ! { $ONNXCC models/mlp/model.onnx --name cg $opts -o $D/cg.o &&
               $CC -std=c11 -O1 -Wall -I$D -Itests/firmware tests/cpu_guard.c $D/cg.o -o $D/guard; } \
                </dev/null >$log 2>&1; then
            fail "cpu check $what: build" $log; continue
        fi
        got=$($D/guard 2>&1)
        st=$?
        if [ $st = 0 ] && [ "$got" = "run returned $want" ]; then
            ok "cpu check $what: run returned $want (cpuinfo flag $flag$( [ $want = 4 ] && echo ' absent'))"
        else
            echo "$got" >>$log
            fail "cpu check $what: want $want, $got (exit $st)" $log
        fi
    done <<END
default||avx2
native|--cpu=native|sse2
x86-64-v4|--cpu=x86-64-v4|avx512vl
xop|--features=+xop|xop
fma4|--features=+fma4|fma4
avx512vnni|--cpu=x86-64-v4 --features=+avx512vnni|avx512_vnni
avx512fp16|--cpu=x86-64-v4 --features=+avx512fp16|avx512_fp16
END
fi

summary models
