#!/bin/sh
# tests/tune.sh - --autotune and --tune-file (passes/tune.c, cli/tune.c, passes/schedule.c):
#   - a round trip on a small model (tests/tune/gen.py: convs, a pool and a Gemm with a numpy
#     reference): --autotune with a tiny budget for this CPU's ISA levels and for --cpu native;
#     the file then gives the same object bytes on two builds, and `check` against the
#     reference passes with it at -O0 and -O2, on each ISA level;
#   - the same with every entry forced onto a candidate other than the default (force.py), so
#     that the non-default schedules are checked against the reference whatever autotune
#     measured on a noisy machine; that object differs from the default one;
#   - bench marks the kernels whose schedule came from the file;
#   - malformed tuning files: each an error naming FILE:LINE, exit 1, never a crash (a
#     catalogue, and 24 random edits of a good file: mutate.py); and the flags' misuses (exit 2).
# Last line: "tune: N passed, N failed".
set -u
cd "$(dirname "$0")/.."
. tests/lib.sh
OUT=build/tune-tests
gen_models tune $OUT tests/tune/gen.py
M=$OUT/small/model.onnx

run() { # what, command...: ok if it exits 0
    what=$1; shift
    if "$@" >$OUT/log 2>&1; then ok "$what"; else fail "$what" $OUT/log; fi
}

# autotune: the default object's levels, and --cpu native
run "autotune (ISA levels)" $ONNXCC --autotune --tune-file $OUT/levels.tune --seconds 0.01 $M
run "autotune --cpu native, then -o" $ONNXCC --autotune --cpu native --tune-file $OUT/native.tune --seconds 0.01 --name small $M -o $OUT/auto.o
n=$(grep -c '^x86_64\|^aarch64' $OUT/native.tune)
[ "$n" -ge 3 ] && ok "native.tune has $n entries" || fail "native.tune has $n entries (want 3 or more)" $OUT/native.tune
run "forced candidates" $PYTHON tests/tune/force.py $OUT/native.tune $OUT/forced.tune
[ -f $OUT/forced.tune ] || cp $OUT/native.tune $OUT/forced.tune

# deterministic, and what --autotune -o wrote is what --tune-file builds
for f in native forced; do
    $ONNXCC --cpu native --tune-file $OUT/$f.tune --name small $M -o $OUT/$f.1.o &&
        $ONNXCC --cpu native --tune-file $OUT/$f.tune --name small $M -o $OUT/$f.2.o
    cmp -s $OUT/$f.1.o $OUT/$f.2.o && ok "$f: the same object twice" || fail "$f: objects differ"
done
cmp -s $OUT/auto.o $OUT/native.1.o && ok "--autotune -o is --tune-file's object" || fail "--autotune -o differs from --tune-file's object"
$ONNXCC --cpu native --name small $M -o $OUT/default.o
cmp -s $OUT/default.o $OUT/forced.1.o && fail "forced: the object is the default one" || ok "forced: another object than the default"
run "forced: schedule lines say tuned" sh -c "$ONNXCC --cpu native --tune-file $OUT/forced.tune --print-after=schedule $M -o /dev/null | grep -q 'tuned(.*file)'"

# the smallest and largest numbers a file may hold, clamped to the loops
sed -e 's/ pixels [0-9]*/ pixels 1/' -e 's/ tile [0-9]* [0-9]*/ tile 1 1/' $OUT/forced.tune >$OUT/small.tune
sed -e 's/ pixels [0-9]*/ pixels 64/' -e 's/ tile [0-9]* [0-9]*/ tile 64 15/' $OUT/forced.tune >$OUT/large.tune

# against the reference, at -O0 and -O2, each ISA level
for f in small large; do
    run "check $f -O2 --cpu native" $ONNXCC check --cpu native --atol 1e-4 --tune-file $OUT/$f.tune $M
done
for f in native forced; do
    for o in -O0 -O2; do
        run "check $f $o --cpu native" $ONNXCC check $o --cpu native --atol 1e-4 --tune-file $OUT/$f.tune $M
    done
done
run "check levels -O2" $ONNXCC check --atol 1e-4 --tune-file $OUT/levels.tune $M
if grep -qw avx512f /proc/cpuinfo 2>/dev/null; then
    run "check levels -O2 --isa 0" $ONNXCC check --isa 0 --atol 1e-4 --tune-file $OUT/levels.tune $M
fi

# bench marks the kernels the file chose
$ONNXCC bench --seconds 0.02 --tune-file $OUT/forced.tune $M >$OUT/bench.log 2>&1
grep -q '^tuning: .*(marked \*)' $OUT/bench.log && grep -q '^\*' $OUT/bench.log && ok "bench marks tuned kernels" ||
    fail "bench marks tuned kernels" $OUT/bench.log

# malformed files: NAME, contents (printf), the message expected after FILE:LINE:
bad() { # name line message contents
    printf "$4" >$OUT/bad-$1.tune
    $ONNXCC --cpu native --tune-file $OUT/bad-$1.tune $M -o $OUT/bad.o >$OUT/bad.log 2>&1
    rc=$?
    if [ $rc = 1 ] && grep -q "$OUT/bad-$1.tune:$2: .*$3" $OUT/bad.log && [ ! -e $OUT/bad.o ]; then
        ok "malformed $1"
    else
        fail "malformed $1 (exit $rc)" $OUT/bad.log
    fi
    rm -f $OUT/bad.o
}
E="x86_64-pc-linux-gnu:znver5 Conv f32[1,2] 0123456789abcdef"
bad empty 1 "not a tuning file" ""
bad comments-only 2 "not a tuning file" "# nothing\n\n"
bad header 1 "expected 'onnxcc-tune 1'" "onnxcc-tuning 1\n"
bad version 1 "version '2'" "onnxcc-tune 2\n"
bad version-huge 1 "version '99999999999999999999'" "onnxcc-tune 99999999999999999999\n"
bad fields 2 "got 3 fields" "onnxcc-tune 1\na b c\n"
bad target 2 "bad target" "onnxcc-tune 1\nx86 Conv f32[1] 0123456789abcdef default\n"
bad sig-short 2 "bad signature" "onnxcc-tune 1\nx:y Conv f32[1] 0123 default\n"
bad sig-upper 2 "bad signature" "onnxcc-tune 1\nx:y Conv f32[1] 0123456789ABCDEF default\n"
bad sig-zero 2 "bad signature" "onnxcc-tune 1\nx:y Conv f32[1] 0000000000000000 default\n"
bad choice 2 "bad choice 'unroll'" "onnxcc-tune 1\n$E unroll 4\n"
bad default-arg 2 "bad choice 'default'" "onnxcc-tune 1\n$E default 1\n"
bad tile-one 2 "bad choice 'tile'" "onnxcc-tune 1\n$E tile 4\n"
bad tile-zero 2 "bad tile '0 2'" "onnxcc-tune 1\n$E tile 0 2\n"
bad tile-big 2 "bad tile '4 99'" "onnxcc-tune 1\n$E tile 4 99\n"
bad tile-neg 2 "bad tile '-1 2'" "onnxcc-tune 1\n$E tile -1 2\n"
bad tile-overflow 2 "bad tile" "onnxcc-tune 1\n$E tile 99999999999999999999999 2\n"
bad tile-x 2 "bad choice 'tile'" "onnxcc-tune 1\n$E tile 4x2\n"
bad pixels 3 "bad pixels '65'" "onnxcc-tune 1\n\n$E pixels 65\n"
bad fields-many 2 "too many fields" "onnxcc-tune 1\n$E tile 1 2 3 4 5 6\n"
bad conflict 3 "another choice than line 2" "onnxcc-tune 1\n$E tile 4 2\n$E tile 2 2\n"
bad nul 2 "NUL byte" "onnxcc-tune 1\n$E de\0fault\n"
bad control 2 "control or non-ASCII" "onnxcc-tune 1\n$E\001 default\n"
bad utf8 2 "control or non-ASCII" "onnxcc-tune 1\n$E d\303\251fault\n"
# every bad line is reported, not only the first
printf "onnxcc-tune 1\n$E tile 0 1\n$E pixels 0\n" >$OUT/bad-two.tune
$ONNXCC --cpu native --tune-file $OUT/bad-two.tune $M -o /dev/null >$OUT/bad.log 2>&1
[ $? = 1 ] && grep -q "bad-two.tune:2:" $OUT/bad.log && grep -q "bad-two.tune:3:" $OUT/bad.log &&
    ok "malformed: every bad line reported" || fail "malformed: every bad line reported" $OUT/bad.log
# a file that parses but whose entries fit no kernel, and a duplicate of the same choice: fine
printf "onnxcc-tune 1\n$E tile 4 2\n$E tile 4 2   # again\n" >$OUT/other.tune
run "entries of other kernels are ignored" $ONNXCC --cpu native --tune-file $OUT/other.tune $M -o /dev/null
$ONNXCC --cpu native --tune-file $OUT/missing.tune $M -o /dev/null >$OUT/bad.log 2>&1
[ $? = 1 ] && grep -q "missing.tune" $OUT/bad.log && ok "missing file" || fail "missing file" $OUT/bad.log

# random edits of a good file: exit 0, or 1 with an error at FILE:LINE; never a crash
$PYTHON tests/tune/mutate.py $OUT/native.tune $OUT/mut 24
crashed=0
for f in $OUT/mut/*.tune; do
    $ONNXCC --cpu native --tune-file $f $M -o /dev/null >$OUT/bad.log 2>&1
    rc=$?
    if [ $rc -gt 1 ] || { [ $rc = 1 ] && ! grep -q "$f:[0-9]*: " $OUT/bad.log; }; then
        crashed=$((crashed + 1)); echo "  $f: exit $rc"; head -n 3 $OUT/bad.log
    fi
done
[ $crashed = 0 ] && ok "24 mutated files: exit 0 or a FILE:LINE error" || fail "$crashed mutated files crashed or gave no FILE:LINE"

# flags
usage_err() { # what, args...: exit 2
    what=$1; shift
    $ONNXCC "$@" >$OUT/log 2>&1
    [ $? = 2 ] && ok "$what" || fail "$what: want exit 2" $OUT/log
}
usage_err "--autotune without --tune-file" --autotune $M
usage_err "--autotune in check" check --autotune --tune-file $OUT/x.tune $M
usage_err "--autotune with --target" --autotune --tune-file $OUT/x.tune --target aarch64-linux-gnu $M
summary tune
