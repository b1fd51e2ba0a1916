#!/bin/sh
# tests/fuzz-smoke.sh - the fuzzers, briefly, in `make test` (issue 22): that a regression in
# the mutator or the harnesses shows before anyone runs `make fuzz` for half an hour.
#   1. tests/fuzz/mutate_check.c: the structure-aware mutator (tests/fuzz/mutate.c) writes
#      models that parse and differ from their input, over the sample models and a few
#      backend tests;
#   2. the libFuzzer targets build (tests/fuzz/run.sh, FUZZ_BUILD_ONLY), and the structure-aware
#      one runs every input of tests/fuzz/crashes/ once (those the kernel-IR target found, the
#      .kir ones, through that target) without a finding;
#   3. FUZZ_SMOKE_RUNS (default 20000, about a minute) runs of structure-aware fuzzing from a
#      fixed seed (1) over the sample models (models/, whose sizes all differ), 20000 of the
#      kernel-IR target and 5000 of the tuning-file reader (tests/tune/fuzz_tune.c): no
#      finding. A count of runs from seeds in a fixed order, not seconds, so that the same
#      inputs run on every machine.
# Needs clang-19 and its libFuzzer (tools/install-deps.sh); without them the steps are skipped
# and counted so. Work files: build-fuzz/ (its objects are kept between runs).
set -u
cd "$(dirname "$0")/.."
. tests/lib.sh
FUZZ_CC=${FUZZ_CC:-clang-19}
RUNS_STRUCT=${FUZZ_SMOKE_RUNS:-20000}
F=build-fuzz
GEN=${B:-build}/gen      # build-san/gen under make SANITIZE=1 test
mkdir -p $F
if ! command -v $FUZZ_CC >/dev/null; then
    echo "skip: $FUZZ_CC not found (tools/install-deps.sh installs it)"
    skipped=8
    summary fuzz-smoke
    exit $?
fi
make -s $GEN/onnx.pb-c.c $GEN/header_template.c >/dev/null 2>&1 || true

# 1. the mutator on its own
log=$F/mutate_check.log
if $FUZZ_CC -std=c11 -D_DEFAULT_SOURCE -g -O1 -fsanitize=address,undefined -I$GEN tests/fuzz/mutate_check.c \
        tests/fuzz/mutate.c ir/util.c $GEN/onnx.pb-c.c -lprotobuf-c -o $F/mutate_check >$log 2>&1 &&
   $F/mutate_check models/*/model.onnx \
        ${ONNX_TESTDATA:-/usr/share/libonnx-testdata/data}/node/test_conv_with_strides_padding/model.onnx \
        ${ONNX_TESTDATA:-/usr/share/libonnx-testdata/data}/node/test_loop11/model.onnx >>$log 2>&1; then
    ok "mutator: $(grep -c '^ok' $log) models mutated into models that parse"
else
    fail "mutator" $log
fi

# 2. build; replay the regression corpus
for t in struct kir tune; do
    log=$F/build-$t.log
    if FUZZ_TARGET=$t FUZZ_BUILD_ONLY=1 GEN=$GEN sh tests/fuzz/run.sh >$log 2>&1; then
        ok "build the $t target"
    else
        fail "build the $t target" $log
    fi
done
log=$F/replay.log
models=$(ls tests/fuzz/crashes/* 2>/dev/null | grep -v '\.kir$')
kirs=$(ls tests/fuzz/crashes/*.kir 2>/dev/null)
# shellcheck disable=SC2086
if [ -x $F/fuzz_struct ] && $F/fuzz_struct -close_fd_mask=2 $models >$log 2>&1 &&
   { [ -z "$kirs" ] || $F/fuzz_kir -close_fd_mask=2 $kirs >>$log 2>&1; }; then
    ok "replay tests/fuzz/crashes ($(echo $models $kirs | wc -w) inputs)"
else
    fail "replay tests/fuzz/crashes" $log
fi

# 3. a minute from a fixed seed, on a scratch copy of the seeds
for t in struct kir tune; do
    runs=$RUNS_STRUCT
    [ $t = kir ] && runs=20000
    [ $t = tune ] && runs=5000
    rm -rf $F/corpus-smoke-$t
    mkdir -p $F/corpus-smoke-$t $F/smoke-findings
    if [ $t = kir ]; then
        cp tests/passes/kir/*.kir $F/corpus-smoke-$t/
        bin=fuzz_kir
    elif [ $t = tune ]; then
        cp build-fuzz/corpus-tune/seed.tune $F/corpus-smoke-$t/ 2>/dev/null ||
            printf 'onnxcc-tune 1\nx86_64-pc-linux-gnu:x86-64-v3 Conv c 0123456789abcdef tile 4 2\n' >$F/corpus-smoke-$t/seed.tune
        bin=fuzz_tune
    else
        # the sample models only: their sizes differ, so libFuzzer's order of the seeds (by
        # size, ties in directory order) and with it every run is the same on every machine
        for m in models/*/model.onnx; do
            cp "$m" "$F/corpus-smoke-$t/$(echo "$m" | tr / _)"
        done
        bin=fuzz_struct
    fi
    log=$F/smoke-$t.log
    if [ -x $F/$bin ] && (cd $F && ./$bin -seed=1 -runs=$runs -print_final_stats=1 -close_fd_mask=2 \
            -rss_limit_mb=4096 -max_len=200000 -timeout=30 -artifact_prefix=smoke-findings/ corpus-smoke-$t) >$log 2>&1; then
        ok "$runs runs of the $t fuzzer from seed 1 ($(sed -n 's/^Done [0-9]* runs in \([0-9]*\) second.*/\1/p' $log) s), no finding"
    else
        fail "$runs runs of the $t fuzzer from seed 1 (findings: $F/smoke-findings/)" $log
    fi
    rm -rf $F/corpus-smoke-$t
done
summary fuzz-smoke
