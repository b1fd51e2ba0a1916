# tests/lib.sh - what the shell test runners share, sourced once each has cd'ed to the top
# directory: the tools' defaults, the counters, ok/fail and the closing line that
# tests/run-all.sh adds up. A runner reads:
#     #!/bin/sh
#     set -u
#     cd "$(dirname "$0")/.."
#     . tests/lib.sh
#     if $ONNXCC check $m >$log 2>&1; then ok "check $m"; else fail "check $m" $log; fi
#     summary NAME        # last line "NAME: N passed, N failed"; the runner's exit status
# The environment overrides ONNXCC, PYTHON and CC (make test gives the compiler under test, and
# with SANITIZE=1 a CC that sanitizes the programs built around generated objects).
ONNXCC=${ONNXCC:-./onnxcc}
PYTHON=${PYTHON:-/usr/bin/python3}
CC=${CC:-cc}
passed=0 failed=0
skipped=                # a runner that skips tests sets it; the closing line then counts them

ok() { echo "ok   $1"; passed=$((passed + 1)); }

# fail WHAT [REASON] [LOG]: prints "FAIL WHAT" (": REASON" after it) and an excerpt of LOG.
# With two arguments, the second is a LOG if such a file exists, a REASON otherwise.
# (Positional parameters only: a variable set here would overwrite the runner's own.)
fail() {
    if [ $# -ge 3 ] || { [ $# = 2 ] && [ ! -f "$2" ]; }; then
        echo "FAIL $1: $2"
    else
        echo "FAIL $1"
    fi
    [ $# -ge 2 ] && [ -f "${3:-$2}" ] && excerpt "${3:-$2}"
    failed=$((failed + 1))
}

# The lines of a log that a failure shows; a runner that wants others defines its own
# excerpt after sourcing this file.
excerpt() { tail -n 10 "$1" | sed 's/^/    /'; }

# tally FILE: shows the output of a checker program (ok and FAIL lines of its own) and counts them.
tally() {
    cat "$1"
    passed=$((passed + $(grep -c '^ok' "$1"))) failed=$((failed + $(grep -c '^FAIL' "$1")))
}

# summary NAME: the closing line, "NAME: N passed, N failed[, N skipped]"; fails if anything
# failed, so that as a runner's last command it gives the exit status.
summary() {
    echo "$1: $passed passed, $failed failed${skipped:+, $skipped skipped}"
    [ $failed = 0 ]
}

# gen_models NAME OUT GEN.py...: empties OUT and runs each model generator on it (they write
# models and their reference outputs there); if one fails, the runner NAME ends at once with
# its closing line.
gen_models() {
    local gen
    rm -rf "$2" && mkdir -p "$2"
    for gen in $(shift 2; echo "$@"); do
        if ! $PYTHON $gen "$2"; then
            fail "$1: $gen"
            summary "$1"
            exit 1
        fi
    done
}
