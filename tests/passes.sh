#!/bin/sh
# tests/passes.sh - golden text tests of single passes: each tiny model of tests/passes/gen.py
# is compiled with --print-after=PASS and the dump is compared with tests/passes/NAME.expected
# (diff -u). The target is pinned (x86-64 baseline: 16-byte vectors), so that the dumps of the
# kernel passes, which depend on the vector width, are the same on every host.
#   tests/passes.sh            run the tests; last line "passes: N passed, N failed"
#   tests/passes.sh --update   rewrite the .expected files from the current output (read the
#                              diff before committing it: an expected file is a claim)
set -u
cd "$(dirname "$0")/.."
. tests/lib.sh
B=build/passes-tests
E=tests/passes
TARGET="--target x86_64-unknown-linux-gnu --cpu x86-64"
update=0
[ "${1:-}" = --update ] && update=1
# a failure shows onnxcc's stderr, or the diff of its dump
excerpt() {
    case $1 in
    *.err) sed 's/^/    stderr: /' "$1" | head -n 8 ;;
    *) sed 's/^/    /' "$1" | head -n 40 ;;
    esac
}

if [ ! -x "$ONNXCC" ]; then
    fail "passes: $ONNXCC not built (make)"
    summary passes; exit 1
fi
mkdir -p $B/out
if ! $PYTHON $E/gen.py $B >$B/gen.log 2>&1; then
    fail "passes: tests/passes/gen.py"; cat $B/gen.log
    summary passes; exit 1
fi

# check NAME PASS: compile build/passes-tests/NAME.onnx, compare the dump after PASS.
check() {
    name=$1 pass=$2
    rc=0
    # shellcheck disable=SC2086
    $ONNXCC $TARGET --name "$name" --print-after="$pass" $B/$name.onnx -o $B/out/$name.o \
        </dev/null >$B/$name.out 2>$B/$name.err || rc=$?
    if [ $rc != 0 ] || [ -s $B/$name.err ]; then
        fail "$name ($pass)" "exit status $rc" $B/$name.err
    elif [ $update = 1 ]; then
        cp $B/$name.out $E/$name.expected
        ok "$name ($pass): updated"
    elif [ ! -f $E/$name.expected ]; then
        fail "$name ($pass)" "no $E/$name.expected (tests/passes.sh --update writes it)"
    elif diff -u $E/$name.expected $B/$name.out >$B/$name.diff; then
        ok "$name ($pass)"
    else
        fail "$name ($pass)" "the dump differs from $E/$name.expected" $B/$name.diff
    fi
}

check canon_clip_softmax canonicalize   # opset-9 attributes become inputs; Softmax legacy=1
check infer_reshape infer_shapes        # Shape->Gather->Concat folded: Reshape by const [2,-1]
check simplify_identity simplify        # Identity, Dropout and the zero Pad gone
check fuse_qdq fuse_qdq                 # QLinearConv(xq, .., w int8, .., b int32); Relu QLinearClip
check fuse_batchnorm fuse_batchnorm     # BN folded into the conv: w [2,1,3,-1.5], b [-1,-2.5]
check dead_taps dead_taps               # 1x1 by the centre weights 4, 13; w2 its middle column
check winograd winograd                 # Pad, 16 outputs, U_01 = 1.5, U_11 = 2.25, bias on w11, sizes=[11,11]
check lower_gemm lower                  # y = 0.5 * (x . w^T) + 2 * b
check fuse_conv_add_relu fuse           # one kernel: max(conv + z, 0)
check schedule_matmul schedule                # columns unrolled by 16 and jammed, tail of 8
check bufferize_chain bufferize         # h1 @0, s1 @64 (both live in sm1), h2 reuses @0

summary passes
