#!/bin/sh
# tests/fuzz/run.sh - `make fuzz`: builds tests/fuzz/fuzz_model.c with every source of the
# compiler but the command line (clang of the same LLVM major as the backend, libFuzzer, ASan
# and UBSan) into build-fuzz/, seeds a corpus with the ONNX backend-test models and models/,
# and fuzzes for FUZZ_SECONDS (default 300) on FUZZ_JOBS processes (default 1). Findings land
# in build-fuzz/findings/; once fixed, copy each into tests/fuzz/crashes/ (tests/malformed.sh
# runs them through the command line). The generated protobuf-c code and header template
# come from build/gen (the Makefile makes them first).
set -eu
cd "$(dirname "$0")/../.."
FUZZ_CC=${FUZZ_CC:-clang-19}
LLVM_CONFIG=${LLVM_CONFIG:-llvm-config-19}
FUZZ_SECONDS=${FUZZ_SECONDS:-300}
FUZZ_JOBS=${FUZZ_JOBS:-1}
TESTDATA=${ONNX_TESTDATA:-/usr/share/libonnx-testdata/data}
F=build-fuzz
GEN=${GEN:-build/gen}
mkdir -p $F/obj $F/corpus $F/findings
if ! command -v $FUZZ_CC >/dev/null; then
    echo "fuzz: $FUZZ_CC not found (tools/install-deps.sh installs clang-19)" >&2
    exit 1
fi
SAN="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined"
CFLAGS="-std=c11 -D_DEFAULT_SOURCE -D_POSIX_C_SOURCE=200809L -g -O1 $SAN -I$GEN
        -isystem $($LLVM_CONFIG --includedir)"
objs=""
for src in frontend/*.c ir/*.c passes/*.c passes/ops/*.c backend/*.c $GEN/onnx.pb-c.c \
           $GEN/header_template.c tests/fuzz/fuzz_model.c; do
    o=$F/obj/$(echo "$src" | tr / _ | sed 's/\.c$/.o/')
    if [ ! -f "$o" ] || [ "$src" -nt "$o" ] || [ -n "$(find ir passes frontend backend -name '*.h' -newer "$o" | head -n 1)" ]; then
        echo "fuzz: cc $src"
        # shellcheck disable=SC2086
        $FUZZ_CC $CFLAGS -c "$src" -o "$o"
    fi
    objs="$objs $o"
done
# shellcheck disable=SC2086
$FUZZ_CC -fsanitize=fuzzer,address,undefined $objs -o $F/fuzz_model \
    $($LLVM_CONFIG --ldflags) $($LLVM_CONFIG --libs) -lprotobuf-c -lz -lm
# the seeds: every backend-test model (small, one op each) and the sample models
if [ -z "$(ls -A $F/corpus)" ]; then
    for m in $TESTDATA/node/*/model.onnx models/*/model.onnx; do
        [ -f "$m" ] && cp "$m" "$F/corpus/$(echo "$m" | tr / _)"
    done
fi
echo "fuzz: $(ls $F/corpus | wc -l) inputs in the corpus; fuzzing for $FUZZ_SECONDS s"
# -close_fd_mask=2: the target's thousands of user errors stay off the terminal
# (several jobs write their logs to $F/fuzz-N.log)
jobs=
[ "$FUZZ_JOBS" -gt 1 ] && jobs="-jobs=$FUZZ_JOBS -workers=$FUZZ_JOBS"
cd $F
# shellcheck disable=SC2086
exec ./fuzz_model -max_total_time=$FUZZ_SECONDS $jobs -print_final_stats=1 \
    -close_fd_mask=2 -rss_limit_mb=4096 -max_len=200000 -timeout=30 \
    -artifact_prefix=findings/ corpus
