#!/bin/sh
# tests/run-all.sh - `make test`: every test of onnxcc, in order
#   unit tests (tests/unit/test_*.c: IR and passes), tests/passes.sh (single passes, text in,
#   text out), tests/kir-passes.sh (single kernel passes, .kir in, .kir out), tests/convs.sh
#   (convolutions with constant weights against numpy), tests/tune.sh (--autotune and
#   --tune-file: round trip, determinism, reference, malformed files), tests/rnn.sh (RNN/GRU/LSTM
#   against numpy), tests/opsets.sh (opsets 19 to 26 against numpy), tests/dyn.sh (data-
#   dependent values inside the graph against onnxruntime), tests/types.sh (float8,
#   int4 weights and BitCast against numpy), tests/strings.sh (string models
#   against Python references), tests/random.sh (the random ops' distributions against
#   numpy's), tests/cli.sh (command line and error paths), tests/report.sh (--report's pages,
#   checked, and opened in headless Chromium), tests/malformed.sh (untrusted input:
#   tests/malformed/gen.py's
#   catalogue and the fuzzer's regression corpus), tests/fuzz-smoke.sh (the structure-aware
#   mutator checked, the fuzz targets built, the regression corpus replayed in them, a fixed
#   number of fuzzing runs from a fixed seed), tests/golden.sh (ONNX backend test data, at
#   -O2 and again at -O0, -O1 and -O3), tests/models.sh (the sample models, two models in one
#   program), tests/threads.sh (ISA levels, NAME_run_par bitwise NAME_run at 1-3 threads,
#   ThreadSanitizer), tests/guard.sh (generated code of every op family against guard pages, with
#   garbage arenas and on two threads), tests/weights.sh (--weights-section, --emit-weights),
#   tests/int8.sh (quantized models against onnxruntime's outputs) and
#   tests/firmware/run.sh (Cortex-M4 and RV32IMAFC under QEMU), tests/install.sh (make install,
#   the man page, the CMake module for the host and a Cortex-M4).
# Each runner's last line reads "NAME: N passed, N failed[, N skipped]" (the shell runners print
# it with tests/lib.sh's summary, the unit tests themselves); this script shows each
# runner's failures and that line, and sums them up. Full logs: $B/test/NAME.log.
# Last line: "test: N passed, N failed"; exit 1 if anything failed.
# B (build dir, default build) and BIN (the compiler, default ./onnxcc) come from the Makefile;
# with SANITIZE=1 (build-san, build-san/onnxcc) the unit tests get the same -fsanitize flags,
# and every sanitizer report goes to $B/test/san/ and counts as a failure, whatever the exit
# status of the process that made it (some tests expect onnxcc to fail).
set -u
cd "$(dirname "$0")/.."
CC=${CC:-cc}
LLVM_CONFIG=${LLVM_CONFIG:-llvm-config-19}
SANITIZE=${SANITIZE:-}
B=${B:-build${SANITIZE:+-san}}
BIN=${BIN:-./${SANITIZE:+build-san/}onnxcc}
LOGS=$B/test
total_passed=0 total_failed=0
mkdir -p $LOGS
SAN=
if [ -n "$SANITIZE" ]; then
    SAN="-fsanitize=address,undefined -fno-omit-frame-pointer"
    rm -rf $LOGS/san
    mkdir -p $LOGS/san
    # Reports go to files (NAME.PID), so that none hides in a log that a runner does not show.
    # Stop at the first report, with a stack trace. No leak is suppressed: LLVM frees what it
    # allocates once its objects are disposed of (the JITs of `onnxcc check` at exit).
    ASAN_OPTIONS="halt_on_error=1:abort_on_error=1:detect_leaks=1:log_path=$PWD/$LOGS/san/asan"
    UBSAN_OPTIONS="halt_on_error=1:abort_on_error=1:print_stacktrace=1:log_path=$PWD/$LOGS/san/ubsan"
    export ASAN_OPTIONS UBSAN_OPTIONS
fi

# Adds a runner's last line to the totals; a crash or a missing summary counts as one failure.
tally() { # name status log
    last=$(tail -n 1 "$3")
    p=$(echo "$last" | sed -n 's/.*[A-Za-z0-9_-]: \([0-9]*\) passed, \([0-9]*\) failed.*/\1/p')
    f=$(echo "$last" | sed -n 's/.*[A-Za-z0-9_-]: \([0-9]*\) passed, \([0-9]*\) failed.*/\2/p')
    if [ -z "$p" ]; then
        echo "FAIL $1: no summary line (exit status $2)"
        p=0 f=1
    elif [ "$2" != 0 ] && [ "$f" = 0 ]; then
        echo "FAIL $1: exit status $2"
        f=1
    fi
    total_passed=$((total_passed + p)) total_failed=$((total_failed + f))
}

# Runs a runner script; shows everything but its "ok" lines.
runner() { # name command...
    name=$1
    shift
    echo "== $name"
    rc=0
    "$@" >$LOGS/$name.log 2>&1 </dev/null || rc=$?
    grep -v '^ok' $LOGS/$name.log
    tally $name $rc $LOGS/$name.log
}

if ! make -s "${BIN#./}" >$LOGS/make.log 2>&1; then
    echo "FAIL make onnxcc"
    tail -n 20 $LOGS/make.log
    echo "test: 0 passed, 1 failed"
    exit 1
fi
# Every runner tests the same snapshot of the compiler, even if ./onnxcc is relinked meanwhile.
if [ -z "${ONNXCC:-}" ]; then
    cp "$BIN" $LOGS/onnxcc
    ONNXCC=$LOGS/onnxcc
    export ONNXCC
fi

# Unit tests link against the compiler's objects through an archive, so that each test pulls
# only what it uses and may define stand-ins (an empty op table, say) for the rest.
lib=$LOGS/libonnxcc.a
rm -f $lib
ar rcs $lib $(ls $B/ir/*.o $B/passes/*.o $B/passes/ops/*.o $B/frontend/*.o $B/backend/*.o \
    $B/cli/*.o $B/gen/*.o 2>/dev/null | grep -v -x $B/cli/main.o)
LLVM_FLAGS="-isystem $($LLVM_CONFIG --includedir)"
LLVM_LIBS="$($LLVM_CONFIG --ldflags) $($LLVM_CONFIG --libs)"
for t in tests/unit/test_*.c; do
    [ -f "$t" ] || continue
    name=${t##*/}
    name=${name%.c}
    exe=$LOGS/$name
    if ! $CC -std=c11 -D_DEFAULT_SOURCE -D_POSIX_C_SOURCE=200809L -g -O1 -Wall -Wextra $SAN \
            -I. -Iir -Ipasses -I$B/gen $LLVM_FLAGS $t $lib $LLVM_LIBS -lprotobuf-c -lz -lm \
            -o $exe >$LOGS/$name.log 2>&1; then
        echo "== $name"
        echo "FAIL $name: does not build"
        tail -n 15 $LOGS/$name.log
        total_failed=$((total_failed + 1))
        continue
    fi
    runner $name timeout 300 $exe
done
# Programs that the runners build around generated objects (models.sh's link_two) are sanitized
# too; the generated code itself is not instrumented.
if [ -n "$SANITIZE" ]; then CC="$CC $SAN"; export CC; fi

runner passes sh tests/passes.sh
runner kir-passes sh tests/kir-passes.sh
runner convs sh tests/convs.sh
runner tune sh tests/tune.sh
runner rnn sh tests/rnn.sh
runner opsets sh tests/opsets.sh
runner dyn sh tests/dyn.sh
runner types sh tests/types.sh
runner strings sh tests/strings.sh
runner random-ops sh tests/random.sh
runner cli sh tests/cli.sh
runner report sh tests/report.sh
runner malformed sh tests/malformed.sh
runner fuzz-smoke sh tests/fuzz-smoke.sh
runner golden sh tests/golden.sh ${GOLDEN_PATTERN:-}
# -O1 and -O3 run the x86-64-v3 level of the dispatching objects (golden.sh --isa0), -O2 and
# -O0 the level this CPU picks: both levels' code meets the data
isa0=
[ "$(uname -m)" = x86_64 ] && isa0=--isa0
for o in -O0 -O1 -O3; do
    case $o in -O0) runner golden$o sh tests/golden.sh $o ${GOLDEN_PATTERN:-} ;;
    *) runner golden$o${isa0:+-isa0} sh tests/golden.sh $o $isa0 ${GOLDEN_PATTERN:-} ;; esac
done
runner models sh tests/models.sh
runner threads sh tests/threads.sh
runner guard sh tests/guard.sh
runner weights sh tests/weights.sh
runner int8 sh tests/int8.sh
runner firmware sh tests/firmware/run.sh
runner install sh tests/install.sh

# Sanitizer reports, wherever they came from (a test may have expected its process to fail).
if [ -n "$SANITIZE" ]; then
    for r in $LOGS/san/*; do
        [ -f "$r" ] || continue
        echo "FAIL sanitizer report $r:"
        grep -m 1 -E 'ERROR|runtime error' "$r"
        total_failed=$((total_failed + 1))
    done
fi

echo "test: $total_passed passed, $total_failed failed"
[ $total_failed = 0 ]
