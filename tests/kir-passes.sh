#!/bin/sh
# tests/kir-passes.sh - golden tests of single kernel passes on kernel-IR text, in the manner of
# QBE's and cproc's tests: each tests/passes/kir/NAME.kir is a program as kir_print writes it,
# whose comment line "# passes: fuse[,schedule...]" names the passes to run;
# `onnxcc --run-pass=PASSES NAME.kir` must print NAME.expected exactly (diff -u), and
# NAME.expected must itself read back unchanged and pass the verifier. A test with a comment
# line "# error: ..." must instead fail with status 1 and print NAME.expected on stderr.
# The programs carry their target facts (alignment, vector width) in their header, so the
# results do not depend on this machine.
#   tests/kir-passes.sh            run the tests; last line "kir-passes: N passed, N failed"
#   tests/kir-passes.sh --update   rewrite the .expected files from the current output (read
#                                  the diff before committing it: an expected file is a claim)
set -u
cd "$(dirname "$0")/.."
. tests/lib.sh
D=tests/passes/kir
B=build/kir-passes
update=0
[ "${1:-}" = --update ] && update=1
mkdir -p $B
excerpt() { sed 's/^/    /' "$1" | head -n 40; }

if [ ! -x "$ONNXCC" ]; then
    fail "kir-passes: $ONNXCC not built (make)"
    summary kir-passes; exit 1
fi

for t in $D/*.kir; do
    name=${t##*/}
    name=${name%.kir}
    passes=$(sed -n 's/^# passes: *//p' $t | head -n 1)
    want_error=$(grep -c '^# error' $t)
    exp=$D/$name.expected
    if [ -z "$passes" ]; then fail $name "no '# passes:' line"; continue; fi
    rc=0
    $ONNXCC --run-pass="$passes" $t >$B/$name.out 2>$B/$name.err </dev/null || rc=$?
    if [ $want_error != 0 ]; then
        got=$B/$name.err
        if [ $rc != 1 ]; then fail $name "expected exit status 1, got $rc" $B/$name.err; continue; fi
    else
        got=$B/$name.out
        if [ $rc != 0 ] || [ -s $B/$name.err ]; then fail $name "exit status $rc" $B/$name.err; continue; fi
    fi
    if [ $update = 1 ]; then
        cp $got $exp
        ok "$name ($passes): updated"
        continue
    fi
    if [ ! -f $exp ]; then fail $name "no $exp (tests/kir-passes.sh --update writes it)"; continue; fi
    if ! diff -u $exp $got >$B/$name.diff; then
        fail $name "the output differs from $exp" $B/$name.diff
        continue
    fi
    # The expected program reads back as it is and passes the verifier.
    if [ $want_error = 0 ]; then
        rc=0
        $ONNXCC --run-pass= $exp >$B/$name.reread 2>$B/$name.err </dev/null || rc=$?
        if [ $rc != 0 ] || ! cmp -s $exp $B/$name.reread; then
            fail $name "$exp does not read back unchanged (exit status $rc)" $B/$name.err
            continue
        fi
    fi
    ok "$name ($passes)"
done

summary kir-passes
