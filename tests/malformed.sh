#!/bin/sh
# tests/malformed.sh - onnxcc on untrusted input: the catalogue of tests/malformed/gen.py
# (crafted models, truncations and byte flips of the samples, bad attributes per op family,
# external data, command-line misuses) and the fuzzer's regression corpus (tests/fuzz/crashes/,
# inputs that once crashed onnxcc or outran the fuzzer's time limit). Every case must end in
# bounded time (timeout) and memory (ulimit -v, except under ASan, which reserves terabytes of
# address space) with the expected exit status, exactly one "onnxcc: error:" line, no internal
# error and no file left behind.
# Last line: "malformed: N passed, N failed".
set -u
cd "$(dirname "$0")/.."
. tests/lib.sh
B=${B:-build}/malformed
TIMEOUT=${TIMEOUT:-30}
MEM_KB=${MEM_KB:-2000000}

rm -rf $B
mkdir -p $B/out
if ! $PYTHON tests/malformed/gen.py $B >$B/gen.log 2>&1; then
    fail "malformed: tests/malformed/gen.py"; cat $B/gen.log
    summary malformed; exit 1
fi
case "$ONNXCC" in /*) ;; *) ONNXCC=$PWD/$ONNXCC ;; esac
limit="ulimit -v $MEM_KB;"
[ -n "${SANITIZE:-}" ] && limit=

# a failure shows onnxcc's stderr
excerpt() { sed 's/^/    stderr: /' "$1" | head -n 6; }

n=0
# run NAME STATUS PATTERN ARGS...: STATUS 1, 2, 0 (must work), or "flip" (0 or 1)
run() {
    name=$1 want=$2 pat=$3
    shift 3
    n=$((n + 1))
    dir=$B/out/$n
    mkdir -p $dir
    rc=0
    sh -c "$limit exec timeout -s KILL $TIMEOUT \"\$@\"" onnxcc $ONNXCC "$@" \
        </dev/null >$B/stdout 2>$B/stderr || rc=$?
    errs=$(grep -c '^onnxcc: error: ' $B/stderr)
    if [ $rc -ge 124 ]; then
        fail "$name" "killed or crashed (exit status $rc)" $B/stderr
    elif grep -q 'internal error\|runtime error\|Sanitizer' $B/stderr; then
        fail "$name" "internal error" $B/stderr
    elif [ "$want" = 0 ] && [ $rc = 0 ]; then
        rm -rf $dir
        ok "$name"
        return
    elif [ "$want" = 0 ]; then
        fail "$name" "exit status $rc, expected 0" $B/stderr
    elif [ "$want" = flip ] && [ $rc = 0 ]; then
        rm -rf $dir
        ok "$name (compiles)"
        return
    elif [ "$want" = flip ] && [ $rc = 1 ] && [ "$errs" -ge 1 ] && [ -z "$(ls -A $dir)" ]; then
        ok "$name"
    elif [ "$want" != flip ] && [ $rc != "$want" ]; then
        fail "$name" "exit status $rc, expected $want" $B/stderr
    elif [ "$want" != flip ] && [ "$errs" != 1 ]; then
        fail "$name" "$errs 'onnxcc: error:' lines, expected 1" $B/stderr
    elif [ -n "$(ls -A $dir 2>/dev/null)" ]; then
        fail "$name" "left $(ls -A $dir | tr '\n' ' ')behind" $B/stderr
    elif [ "$pat" != - ] && ! grep '^onnxcc: error: ' $B/stderr | grep -q -F -- "$pat"; then
        fail "$name" "the error does not mention '$pat'" $B/stderr
    else
        ok "$name"
    fi
}

tab=$(printf '\t')
while IFS=$tab read -r name status pattern args; do
    args=$(echo "$args" | sed "s|@D@|$B/out/$((n + 1))|g; s|@M@|$B|g")
    # shellcheck disable=SC2086
    set -f; run "$name" "$status" "$pattern" $args; set +f
done <$B/cases.txt

# The fuzzer's regression corpus: whatever once crashed must now compile or be refused.
# (A .kir one, from the kernel-IR target, through --run-pass.)
for f in tests/fuzz/crashes/*; do
    [ -f "$f" ] || continue
    case $f in
    *.kir) run "crash ${f##*/}" flip - --run-pass=fuse,schedule,parallelize,bufferize "$f" ;;
    *) run "crash ${f##*/}" flip - "$f" -o "$B/out/$((n + 1))/x.o" ;;
    esac
done

summary malformed
