#!/bin/sh
# tests/golden.sh [-O0..-O3] [--isa0] [--update] [PATTERN] - golden numerical tests on the ONNX backend test data:
# `onnxcc check DIR/model.onnx` (compile for the host, run every test_data_set_*, compare) for
# each test under node/, pytorch-converted/, pytorch-operator/ and simple/ of the Debian
# libonnx-testdata package, two at a time (JOBS=N to change), each under `timeout 60`.
#
# tests/golden-expected-unsupported.txt lists the tests that are known not to pass yet (one
# `node/test_abs` per line, # comments). Every other test must pass. A listed test is still run:
# if it passes, it is reported as XPASS and counted as failed, so that the list only shrinks.
# PATTERN (a grep -E expression on `node/test_abs`) runs a subset. --update rewrites the list
# from this run's results (for the tests run; the others keep their entries), with the first
# error line of each as a comment. Logs: build/golden/SUITE/TEST.log; the bookkeeping of one
# run lives in its own build/golden/run.PID/, so that runs at the same time do not mix.
# Every compilation also checks the kernel IR's text form (onnxcc --roundtrip-kir): after each
# kernel pass the program is printed, parsed (ir/kparse.c) and printed again, and the two texts
# must be the same; a line before the last counts the models for which that held and those for
# which it did not (the latter are failures, listed or not).
# -O0 .. -O3 compiles at that level (default: onnxcc's, -O2): `make test` runs the suite at
# every level, with the same list, since a level changes how the code runs, not what it supports.
# The name in the summary lines then carries the level ("golden-O0: ..."), logs go to
# build/golden-O0/. --isa0 (x86-64) runs ISA level 0 of the default dispatching object, the
# x86-64-v3 baseline, instead of the best this CPU has (check --isa 0): `make test` runs -O1 and
# -O3 so on an AVX-512 host, so that both levels' code meets the data ("golden-O1-isa0: ...").
# Last line: "golden: N passed, N failed, N skipped"; exit 1 on any failure.
set -u
SELF=$(cd "$(dirname "$0")" && pwd)/${0##*/}
cd "$(dirname "$0")/.."
. tests/lib.sh
skipped=0               # the listed tests that failed
DATA=${ONNX_TESTDATA:-/usr/share/libonnx-testdata/data}
LIST=tests/golden-expected-unsupported.txt
if [ "${1:-}" != --one ]; then          # the --one runs below take these from the parent
    LOGS=build/golden NAME=golden OPT=""
    for arg; do
        case $arg in -O[0-3]) OPT=$arg NAME=golden$arg LOGS=build/golden$arg ;; esac
    done
    for arg; do             # after the level: the name and the logs carry both
        case $arg in --isa0) OPT="$OPT --isa 0" NAME=$NAME-isa0 LOGS=$LOGS-isa0 ;; esac
    done
fi
JOBS=${JOBS:-2}
SUITES="node pytorch-converted pytorch-operator simple"
export ONNXCC DATA LOGS OPT

# One test (run by xargs): its log goes to build/golden/, its exit status to $RUN/results.txt.
if [ "${1:-}" = --one ]; then
    mkdir -p "$LOGS/${2%/*}"
    rc=0
    timeout 60 $ONNXCC check $OPT --roundtrip-kir "$DATA/$2/model.onnx" </dev/null >"$LOGS/$2.log" 2>&1 || rc=$?
    [ $rc = 124 ] && echo "golden: timed out after 60 s" >>"$LOGS/$2.log"
    echo "$2 $rc" >>"$RUN/results.txt"
    exit 0
fi

update=0 pattern=""
for arg; do
    case $arg in
    --update) update=1 ;;
    -O[0-3]|--isa0) ;;
    -*) echo "usage: tests/golden.sh [-O0..-O3] [--isa0] [--update] [PATTERN]" >&2; exit 2 ;;
    *) pattern=$arg ;;
    esac
done

if [ ! -x "$ONNXCC" ] || [ ! -d "$DATA" ]; then
    fail "$NAME: need $ONNXCC (make) and $DATA (libonnx-testdata)"
    summary $NAME; exit 1
fi

RUN=$LOGS/run.$$
export RUN
rm -rf $RUN
mkdir -p $RUN
trap 'rm -rf $RUN' EXIT
# A snapshot of the compiler: a relink of ./onnxcc during the run must not fail tests.
cp "$ONNXCC" $RUN/onnxcc
ONNXCC=$RUN/onnxcc
tests=$RUN/tests.txt
# (no basename/dirname forks: a thousand of them take a minute on a busy machine)
for s in $SUITES; do
    for m in "$DATA/$s"/*/model.onnx; do
        [ -f "$m" ] || continue
        d=${m%/model.onnx}
        echo "$s/${d##*/}"
    done
done | grep -E -- "${pattern:-.}" >$tests
if [ ! -s $tests ]; then
    echo "$NAME: no test matches '$pattern'"
    summary $NAME; exit 0
fi

: >$RUN/results.txt
xargs -P "$JOBS" -n 1 sh "$SELF" --one <$tests

# Classify in one awk: the expected list, then this run's results. Prints PASS/XPASS/FAIL/SKIP
# per test and writes failing.txt: each failing test with its first error line as the reason.
verdicts=$RUN/verdicts.txt
newfails=$RUN/failing.txt
sort $RUN/results.txt | awk -v logs=$LOGS -v data="$DATA/" -v fails=$newfails '
    FNR == NR { sub(/#.*/, ""); if (NF) expected[$1] = 1; next }
    function reason(t,    f, line, r, summary) {
        f = logs "/" t ".log"
        while ((getline line < f) > 0) {
            if (r == "" && line ~ /error|FAIL|timed out|Assertion|Segmentation|internal/) r = line
            if (summary == "" && line ~ /^check:/) summary = line
        }
        close(f)
        if (r == "") r = summary
        if (r == "") r = "exit status " $2
        sub(/^onnxcc: error: /, "", r); gsub(data, "", r); sub(/^[^ ]*model.onnx: /, "", r)
        return substr(r, 1, 100)
    }
    $2 == 0 { print (($1 in expected) ? "XPASS " : "PASS ") $1; next }
    { printf "%-50s # %s\n", $1, reason($1) > fails; print (($1 in expected) ? "SKIP " : "FAIL ") $1, $2 }
' $LIST - >$verdicts
[ -f $newfails ] || : >$newfails

grep '^XPASS' $verdicts | while read -r v t; do
    echo "XPASS $t: now passes, remove it from $LIST"
done
grep '^FAIL' $verdicts | while read -r v t rc; do
    echo "FAIL $t (exit status $rc; log $LOGS/$t.log)"
    tail -n 6 "$LOGS/$t.log" | sed 's/^/    /'
done
passed=$(grep -c '^PASS' $verdicts)
skipped=$(grep -c '^SKIP' $verdicts)
failed=$(grep -c -E '^(FAIL|XPASS)' $verdicts)
missing=$(($(wc -l <$tests) - $(wc -l <$verdicts)))
if [ $missing != 0 ]; then
    echo "FAIL $NAME: $missing tests left no result"
    failed=$((failed + missing))
fi

# The kernel-IR round trip, from the logs of this run (one grep over all of them).
sed "s|.*|$LOGS/&.log|" $tests >$RUN/logs.txt
rt_ok=$(xargs grep -l -F 'kernel IR text read back identically' <$RUN/logs.txt | wc -l)
xargs grep -l -F 'does not read back' <$RUN/logs.txt >$RUN/rt-bad.txt
rt_bad=$(wc -l <$RUN/rt-bad.txt)
while read -r log; do
    echo "FAIL kernel IR round trip: $(grep -m 1 -F 'does not read back' "$log") (log $log)"
done <$RUN/rt-bad.txt
echo "$NAME: kernel IR text read back identically for $rt_ok models, $rt_bad mismatched"
failed=$((failed + rt_bad))

if [ $update = 1 ]; then
    # Keep the entries of tests that were not run this time, replace the others by this run's.
    {
        grep -v '^#' $LIST 2>/dev/null | grep . | while read -r line; do
            t=${line%%[ #]*}
            grep -qxF "$t" $tests || echo "$line"
        done
        cat $newfails
    } | sort -u >$RUN/entries.txt
    {
        echo "# Tests of tests/golden.sh known not to pass yet, one SUITE/TEST per line (# comments)."
        echo "# A listed test is still run; once it passes, golden.sh reports XPASS until it is"
        echo "# removed. Regenerate: tests/golden.sh --update [PATTERN] (after make)."
        cat $RUN/entries.txt
    } >$LIST
    echo "$NAME: updated $LIST: $(wc -l <$RUN/entries.txt) tests expected to fail"
    # The list now matches this run: what failed is expected from here on.
    failed=0 skipped=$(wc -l <$newfails) passed=$((passed + $(grep -c '^XPASS' $verdicts)))
fi
summary $NAME
