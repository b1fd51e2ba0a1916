#!/bin/sh
# tests/random.sh - distributions of the random ops (RandomUniform, RandomNormal, their Like
# forms, Bernoulli, Multinomial): tests/random/gen.py writes models that draw 10^6 numbers and
# reduce them to statistics, with numpy's statistics of 10^7 draws as the expected outputs,
# into build/random-tests/; each is checked with `onnxcc check --rtol 0 --atol A` (A from the
# case's atol file, several standard errors) at -O0 and -O2. The generator itself (known
# answers, bit-exact determinism) is tests/unit/test_random.c's.
# Last line: "random-ops: N passed, N failed".
set -u
cd "$(dirname "$0")/.."
. tests/lib.sh
OUT=build/random-tests
gen_models random-ops $OUT tests/random/gen.py
for m in $OUT/*/; do
    name=${m%/}
    name=${name##*/}
    atol=$(cat $m/atol)
    for o in -O0 -O2; do
        if $ONNXCC check $o --rtol 0 --atol $atol $m/model.onnx >$OUT/$name$o.log 2>&1; then
            ok "$name $o"
        else
            fail "$name $o"
            tail -n 5 $OUT/$name$o.log
        fi
    done
done
summary random-ops
