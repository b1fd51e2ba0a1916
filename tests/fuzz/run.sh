#!/bin/sh
# tests/fuzz/run.sh - `make fuzz`: builds the libFuzzer targets with every source of the
# compiler but the command line (clang of the same LLVM major as the backend, libFuzzer, ASan
# and UBSan) into build-fuzz/, seeds a corpus, and fuzzes for FUZZ_SECONDS (default 300) on
# FUZZ_JOBS processes (default 1). FUZZ_TARGET picks what:
#   struct (default)  models, mutated by tests/fuzz/mutate.c (LLVMFuzzerCustomMutator: one
#                     dim, dtype, attribute, op type, name, opset, subgraph or raw tensor at
#                     a time) over tests/fuzz/fuzz_model.c: build-fuzz/fuzz_struct
#   bytes             the same target with libFuzzer's byte mutations: build-fuzz/fuzz_model
#   kir               kernel-IR text through the reader and the kernel passes
#                     (tests/fuzz/fuzz_kir.c, seeded with tests/passes/kir/): build-fuzz/fuzz_kir
#   tune              --tune-file's reader alone (tests/tune/fuzz_tune.c over passes/tune.c,
#                     seeded with a tuning file tests/tune.sh would write): build-fuzz/fuzz_tune
# The model targets are seeded with the ONNX backend-test models and models/; each target
# keeps its own corpus (build-fuzz/corpus-TARGET), so that runs can be compared. FUZZ_SEED
# fixes libFuzzer's seed (the smoke run of `make test`, tests/fuzz-smoke.sh). Findings land in
# build-fuzz/findings/; once fixed, copy each into tests/fuzz/crashes/ (tests/malformed.sh
# runs them through the command line: a .kir one through --run-pass). The generated
# protobuf-c code and header template come from build/gen (the Makefile makes them first).
# FUZZ_BUILD_ONLY=1 builds and stops.
set -eu
cd "$(dirname "$0")/../.."
FUZZ_CC=${FUZZ_CC:-clang-19}
LLVM_CONFIG=${LLVM_CONFIG:-llvm-config-19}
FUZZ_SECONDS=${FUZZ_SECONDS:-300}
FUZZ_JOBS=${FUZZ_JOBS:-1}
FUZZ_TARGET=${FUZZ_TARGET:-struct}
TESTDATA=${ONNX_TESTDATA:-/usr/share/libonnx-testdata/data}
F=build-fuzz
GEN=${GEN:-build/gen}
case $FUZZ_TARGET in
struct|bytes|kir|tune) ;;
*) echo "fuzz: FUZZ_TARGET must be struct, bytes, kir or tune, not '$FUZZ_TARGET'" >&2; exit 2 ;;
esac
mkdir -p $F/obj $F/corpus-$FUZZ_TARGET $F/findings
if ! command -v $FUZZ_CC >/dev/null; then
    echo "fuzz: $FUZZ_CC not found (tools/install-deps.sh installs clang-19)" >&2
    exit 1
fi
SAN="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined"
CFLAGS="-std=c11 -D_DEFAULT_SOURCE -D_POSIX_C_SOURCE=200809L -g -O1 $SAN -I$GEN
        -isystem $($LLVM_CONFIG --includedir)"
# cc SRC: its object in $F/obj, rebuilt when it or any header is newer; prints the path
cc1() {
    o=$F/obj/$(echo "$1" | tr / _ | sed 's/\.c$/.o/')
    if [ ! -f "$o" ] || [ "$1" -nt "$o" ] || [ -n "$(find ir passes frontend backend -name '*.h' -newer "$o" | head -n 1)" ] ||
       { [ "$1" = tests/fuzz/mutate.c ] && [ ir/ops.def -nt "$o" ]; }; then
        echo "fuzz: cc $1" >&2
        # shellcheck disable=SC2086
        $FUZZ_CC $CFLAGS -c "$1" -o "$o"
    fi
    echo "$o"
}
objs=""
if [ $FUZZ_TARGET = tune ]; then          # the reader and the arena only
    objs="$(cc1 passes/tune.c) $(cc1 ir/util.c)"
else
    for src in frontend/*.c ir/*.c passes/*.c passes/ops/*.c backend/*.c $GEN/onnx.pb-c.c $GEN/header_template.c; do
        objs="$objs $(cc1 "$src")"
    done
fi
LIBS="$($LLVM_CONFIG --ldflags) $($LLVM_CONFIG --libs) -lprotobuf-c -lz -lm"
case $FUZZ_TARGET in
struct) bin=fuzz_struct; extra="$(cc1 tests/fuzz/fuzz_model.c) $(cc1 tests/fuzz/mutate.c)" ;;
bytes) bin=fuzz_model; extra="$(cc1 tests/fuzz/fuzz_model.c)" ;;
kir) bin=fuzz_kir; extra="$(cc1 tests/fuzz/fuzz_kir.c)" ;;
tune) bin=fuzz_tune; extra="$(CFLAGS="$CFLAGS -I. -Iir -Ipasses" cc1 tests/tune/fuzz_tune.c)"; LIBS= ;;
esac
if [ ! -f $F/$bin ] || [ -n "$(find $F/obj -name '*.o' -newer $F/$bin | head -n 1)" ]; then
    # shellcheck disable=SC2086
    $FUZZ_CC -fsanitize=fuzzer,address,undefined $objs $extra -o $F/$bin $LIBS
fi
[ "${FUZZ_BUILD_ONLY:-0}" = 1 ] && exit 0
# a tuning file of the form --autotune writes (passes/tune.c), for the tune target's corpus
tune_seed() {
    printf '%s\n' 'onnxcc-tune 1' \
        '# target ops output signature choice' \
        'x86_64-pc-linux-gnu:x86-64-v3 Conv+Relu conv1 0123456789abcdef tile 4 2  # 10.5 us, cost 1.0' \
        'x86_64-pc-linux-gnu:x86-64-v4+avx512vnni Conv conv2 fedcba9876543210 pixels 14' \
        'x86_64-pc-linux-gnu:x86-64-v3 Gemm fc 00000000000000ff default' >"$1"
}
# the seeds: every backend-test model (small, one op each) and the sample models; for kir the
# kernel-IR tests
C=$F/corpus-$FUZZ_TARGET
if [ -z "$(ls -A $C)" ]; then
    if [ $FUZZ_TARGET = kir ]; then
        for k in tests/passes/kir/*.kir; do cp "$k" "$C/$(basename "$k")"; done
    elif [ $FUZZ_TARGET = tune ]; then
        tune_seed "$C/seed.tune"
    else
        for m in $TESTDATA/node/*/model.onnx models/*/model.onnx; do
            [ -f "$m" ] && cp "$m" "$C/$(echo "$m" | tr / _)"
        done
    fi
fi
echo "fuzz: $FUZZ_TARGET: $(ls $C | wc -l) inputs in the corpus; fuzzing for $FUZZ_SECONDS s"
# -close_fd_mask=2: the target's thousands of user errors stay off the terminal
# (several jobs write their logs to $F/fuzz-N.log)
jobs=
[ "$FUZZ_JOBS" -gt 1 ] && jobs="-jobs=$FUZZ_JOBS -workers=$FUZZ_JOBS"
seed=
[ -n "${FUZZ_SEED:-}" ] && seed="-seed=$FUZZ_SEED"
cd $F
# shellcheck disable=SC2086
exec ./$bin -max_total_time=$FUZZ_SECONDS $jobs $seed -print_final_stats=1 \
    -close_fd_mask=2 -rss_limit_mb=4096 -max_len=200000 -timeout=30 \
    -artifact_prefix=findings/ corpus-$FUZZ_TARGET
