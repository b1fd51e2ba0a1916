#!/bin/sh
# tests/cli.sh - the command line's error paths and options. A user error must give exactly one
# "onnxcc: error: ..." line on stderr (one per unsupported op), exit status 1 (2 for a bad
# command line) and leave no output file (.o, .h, temporaries) behind. Also --help, --emit and
# --print-after-all. Test models: build/cli/ (tests/cli_models.py). Last line: "cli: N passed,
# N failed".
set -u
set -f    # patterns below are regular expressions, not file names
cd "$(dirname "$0")/.."
. tests/lib.sh
B=build/cli

if [ ! -x "$ONNXCC" ]; then
    fail "cli: $ONNXCC not built (make)"
    summary cli; exit 1
fi
rm -rf $B/out
mkdir -p $B/out
if ! $PYTHON tests/cli_models.py $B >$B/models.log 2>&1; then
    fail "cli: tests/cli_models.py"; cat $B/models.log
    summary cli; exit 1
fi
echo "this is not a protobuf" >$B/text.onnx
head -c 2000 models/mlp/model.onnx >$B/truncated.onnx

# a failure shows the stderr of the last onnxcc run
excerpt() { sed 's/^/    stderr: /' "$1" | head -n 8; }

# Runs onnxcc with stdout/stderr in $B/stdout, $B/stderr; sets $rc.
run() {
    rc=0
    $ONNXCC "$@" </dev/null >$B/stdout 2>$B/stderr || rc=$?
}

# expect_error WHAT STATUS NERRORS [PATTERN...] -- ARGS: a fresh, empty output folder
# $B/out/N must stay empty; stderr must have NERRORS error lines ("any": not counted), which
# together mention every PATTERN.
n=0
expect_error() {
    what=$1 status=$2 nerr=$3
    shift 3
    patterns=""
    while [ "$1" != -- ]; do patterns="$patterns $1"; shift; done
    shift
    run "$@"
    errs=$(grep -c '^onnxcc: error: ' $B/stderr)
    if [ $rc != $status ]; then
        fail "$what" "exit status $rc, expected $status" $B/stderr
    elif [ "$nerr" != any ] && [ "$errs" != "$nerr" ]; then
        fail "$what" "$errs 'onnxcc: error:' lines on stderr, expected $nerr" $B/stderr
    elif [ -n "$(ls -A $dir)" ]; then
        fail "$what" "left $(ls -A $dir | tr '\n' ' ')behind" $B/stderr
    else
        for p in $patterns; do
            if ! grep '^onnxcc: error: ' $B/stderr | grep -q -- "$p"; then
                fail "$what" "the error does not mention '$p'" $B/stderr
                return
            fi
        done
        ok "$what"
    fi
}
fresh() { n=$((n + 1)); dir=$B/out/$n; mkdir -p $dir; }

fresh; expect_error "not a protobuf" 1 1 text.onnx -- $B/text.onnx -o $dir/x.o
fresh; expect_error "truncated model" 1 1 truncated.onnx -- $B/truncated.onnx -o $dir/x.o
fresh; expect_error "missing file" 1 1 no_such.onnx -- $B/no_such.onnx -o $dir/x.o
fresh; expect_error "missing file (check)" 1 1 no_such.onnx -- check $B/no_such.onnx
fresh; expect_error "unknown ops: one error per op, each naming its node" 1 2 \
    'foo_node.*FooOp' 'bar_node.*BarOp' -- $B/unknown_ops.onnx -o $dir/x.o
if grep '^onnxcc: error: ' $B/stderr | grep -q relu_node; then
    fail "unknown ops" "the valid node relu_node is reported too" $B/stderr
fi
fresh; expect_error "unresolved symbolic dimension" 1 1 "'batch' (dim 0); fix it with --shape x=1x4\$" -- $B/symbolic.onnx -o $dir/x.o
# every open dim named; a hint of 1 only for the batch, the others' names to be replaced
fresh; expect_error "unresolved height and width" 1 1 "dimensions 'N' (dim 0), 'H' (dim 2) and 'W' (dim 3); fix them with --shape x=1x3xHxW, each name" -- \
    $B/symbolic_hw.onnx -o $dir/x.o
fresh; expect_error "a data-dependent shape feeding Softmax" 1 1 "softmax_node.*'nz'.*NonZero 'nz_node'.*into Softmax" -- \
    $B/dyn_consumer.onnx -o $dir/x.o
fresh; expect_error "bad flag" 2 1 -- models/mlp/model.onnx --frobnicate -o $dir/x.o
fresh; expect_error "bad --shape" 2 1 -- $B/symbolic.onnx --shape x=2xq -o $dir/x.o
fresh; expect_error "no output given" 2 1 -- models/mlp/model.onnx
fresh; expect_error "unwritable output path" 1 1 -- models/mlp/model.onnx -o /nonexistent/dir/x.o
# where the weights go (tests/weights.sh checks what they hold)
fresh; expect_error "unwritable --emit-weights path" 1 1 /nonexistent/dir -- models/mlp/model.onnx \
    --emit-weights /nonexistent/dir/w.bin -o $dir/x.o
fresh; expect_error "--emit-weights to a directory" 1 1 -- models/mlp/model.onnx --emit-weights $dir -o $dir/x.o
fresh; expect_error "unwritable --report path" 1 1 /nonexistent/dir -- models/mlp/model.onnx \
    --report /nonexistent/dir/r.html -o $dir/x.o
fresh; expect_error "unwritable --report path (check)" 1 1 /nonexistent/dir -- check models/mlp/model.onnx \
    --report /nonexistent/dir/r.html
fresh; expect_error "--report to a directory" 1 1 -- models/mlp/model.onnx --report $dir -o $dir/x.o
fresh; expect_error "--report and a bad model: no page left" 1 1 -- $B/text.onnx --report $dir/r.html -o $dir/x.o
fresh; expect_error "--report is the output" 2 1 output -- models/mlp/model.onnx --report $dir/x.o -o $dir/x.o
fresh; expect_error "--report-counts without --report" 2 1 needs -- models/mlp/model.onnx --report-counts README.md -o $dir/x.o
fresh; expect_error "--report-counts of a file without counts" 1 1 README.md -- models/mlp/model.onnx \
    --report $dir/r.html --report-counts README.md -o $dir/x.o
fresh; expect_error "--report is the header" 2 1 header -- models/mlp/model.onnx --report $dir/x.h -o $dir/x.o
fresh; expect_error "--report with --run-pass" 2 1 run-pass -- --run-pass=fuse tests/kir-passes/x.kir --report $dir/r.html
fresh; expect_error "--emit-weights and a bad model: no blob left" 1 1 -- $B/text.onnx --emit-weights $dir/w.bin -o $dir/x.o
fresh; expect_error "--emit-weights is the output" 2 1 output -- models/mlp/model.onnx --emit-weights $dir/x.o -o $dir/x.o
fresh; expect_error "--emit-weights is the header" 2 1 header -- models/mlp/model.onnx --emit-weights $dir/x.h -o $dir/x.o
fresh; expect_error "--weights-section with --emit-weights" 2 1 both -- models/mlp/model.onnx \
    --weights-section .ext --emit-weights $dir/w.bin -o $dir/x.o
fresh; expect_error "bad --weights-section" 2 1 "'a b'" -- models/mlp/model.onnx --weights-section 'a b' -o $dir/x.o
fresh; expect_error "empty --weights-section" 2 1 -- models/mlp/model.onnx --weights-section= -o $dir/x.o
fresh; expect_error "check --emit-weights" 2 1 check -- check models/mlp/model.onnx --emit-weights $dir/w.bin
fresh; expect_error "bench --weights-section" 2 1 bench -- bench models/mlp/model.onnx --weights-section .ext
fresh
run models/mlp/model.onnx --emit=asm --emit-weights $dir/w.bin -o $dir/x.s
if [ $rc = 0 ] && [ -s $dir/w.bin ] && grep -q 'mlp_run_w\|x_run_w' $dir/x.s && grep -q '_run_w(' $dir/x.h; then
    ok "--emit-weights with --emit=asm: assembly with NAME_run_w, header and blob"
else
    fail "--emit-weights with --emit=asm" "exit status $rc; $(ls $dir | tr '\n' ' ')" $B/stderr
fi
fresh; expect_error "check with another model's test data" 1 any -- \
    check models/mlp/model.onnx models/cnn/test_data_set_0

# Strings: only some ops take them; capacities (--max-strlen) are checked at compile time
fresh; expect_error "a string into an op without strings" 1 1 "id_node.*'s' is a string tensor; Identity" -- \
    $B/str_identity.onnx -o $dir/x.o
fresh; expect_error "a string constant longer than the capacity" 1 1 "40 bytes long.*--max-strlen" -- \
    $B/str_long_const.onnx -o $dir/x.o
fresh; run $B/str_long_const.onnx --max-strlen 40 -o $dir/x.o
if [ $rc = 0 ]; then ok "--max-strlen 40 holds it"; else fail "--max-strlen 40 holds it" "exit status $rc" $B/stderr; fi
fresh; expect_error "Cast to string with a capacity under 19" 1 1 "cast_node.*at least 19" -- \
    $B/str_cast.onnx --max-strlen 18 -o $dir/x.o
fresh; expect_error "bad --max-strlen" 2 1 max-strlen -- $B/str_cast.onnx --max-strlen 0 -o $dir/x.o
fresh; expect_error "StringNormalizer with a locale beyond ASCII" 1 1 "norm_node.*locale 'tr_TR'" -- \
    $B/str_locale.onnx -o $dir/x.o
fresh; run $B/str_cast.onnx -o $dir/x.o
if [ $rc = 0 ] && grep -q '#define x_STRLEN 32' $dir/x.h && grep -q 'string\[2\] (char\[32\] each)' $dir/x.h; then
    ok "a string output in the header: NAME_STRLEN and its documentation line"
else
    fail "a string output in the header" "exit status $rc or no x_STRLEN 32" $B/stderr
fi

# Control flow: a scan output sized by a run-time trip count needs --max-trip; If branches
# must agree on their shapes; Slice's run-time starts need ends = starts + a constant, step 1.
fresh; expect_error "Loop scan output without a bound" 1 1 loop_node "max-trip loop_node=N" -- \
    $B/loop_scan.onnx -o $dir/x.o
fresh; expect_error "--max-trip of an unknown node" 1 1 nosuch -- \
    $B/loop_scan.onnx --max-trip nosuch=4 -o $dir/x.o
fresh; expect_error "bad --max-trip" 2 1 -- $B/loop_scan.onnx --max-trip loop_node=x -o $dir/x.o
fresh; expect_error "If branches of different ranks" 1 1 if_node "\[2,3\]" "float32\[\]" -- \
    $B/if_shapes.onnx -o $dir/x.o
fresh; expect_error "Slice with run-time starts and unrelated ends" 1 2 slice_node "starts 's'" -- \
    $B/slice_dyn.onnx -o $dir/x.o
fresh; expect_error "Slice with run-time starts and step 2" 1 1 slice_node "step 2" -- \
    $B/slice_step.onnx -o $dir/x.o
fresh
run $B/loop_scan.onnx --max-trip loop_node=8 -o $dir/ls.o
if [ $rc = 0 ] && grep -q '#define ls_OUTPUT_1_NUMEL 24' $dir/ls.h && grep -q 'ls_ERR_TRIP 4' $dir/ls.h; then
    ok "--max-trip sizes the scan output (8 rows)"
else
    fail "--max-trip sizes the scan output (8 rows)" "status $rc or header without OUTPUT_1_NUMEL 24" $B/stderr
fi
fresh
run $B/topk_u64.onnx -o $dir/tk.o
if [ $rc = 0 ] && grep -q '"v"  float32\[10\]' $dir/tk.h; then
    ok "TopK k = Min(uint64 2^63+5, c): capacity the axis' 10"
else
    fail "TopK k = Min(uint64 2^63+5, c): capacity the axis' 10" "status $rc or header without \"v\" float32[10]" $B/stderr
fi

# Sequences and optionals: an input's structure comes from --seq (models/seq_ops: input 's').
fresh; expect_error "sequence input without --seq" 1 1 "'s'" "seq s=N" -- models/seq_ops/model.onnx -o $dir/x.o
fresh; expect_error "--seq of an unknown input" 1 any nosuch -- models/seq_ops/model.onnx --seq s=2 --seq nosuch=1 -o $dir/x.o
fresh; expect_error "bad --seq" 2 1 -- models/seq_ops/model.onnx --seq s=-3 -o $dir/x.o
fresh; expect_error "Loop growing a sequence by a run-time trip count" 1 1 seq_loop "trip count" -- $B/seq_loop.onnx -o $dir/x.o
fresh; expect_error "Loop growing a sequence for 5000 iterations" 1 1 seq_loop 4096 -- $B/seq_loop_long.onnx -o $dir/x.o
fresh; expect_error "SequenceMap over sequences of different lengths" 1 1 map_node "a sequence of 3 elements" -- $B/seq_map2.onnx --seq a=2 --seq b=3 -o $dir/x.o
fresh
run $B/seq_map2.onnx --seq a=2 --seq b=2 -o $dir/sm.o
if [ $rc = 0 ] && grep -q '"y.1"' $dir/sm.h; then
    ok "SequenceMap of two sequences of 2: outputs y.0, y.1"
else
    fail "SequenceMap of two sequences of 2: outputs y.0, y.1" "status $rc or header without y.1" $B/stderr
fi
fresh
run models/seq_ops/model.onnx --seq s=2 -o $dir/sq.o
if [ $rc = 0 ] && grep -q '"s.1"' $dir/sq.h && grep -q '"out_seq.1"' $dir/sq.h; then
    ok "--seq s=2: inputs s.0, s.1; outputs out_seq.0, out_seq.1"
else
    fail "--seq s=2: inputs s.0, s.1; outputs out_seq.0, out_seq.1" "status $rc or header without s.1/out_seq.1" $B/stderr
fi

# --bind: a shape input fixed at compile time (ONNX's reshape test: inputs 'data', 'shape').
R=${ONNX_TESTDATA:-/usr/share/libonnx-testdata/data}/node/test_reshape_reordered_all_dims
fresh; expect_error "--bind of an unknown input" 1 1 nosuch -- \
    $R/model.onnx --bind nosuch=$R/test_data_set_0/input_1.pb -o $dir/x.o
fresh; expect_error "--bind with a file of the wrong type" 1 1 shape -- \
    $R/model.onnx --bind shape=$R/test_data_set_0/input_0.pb -o $dir/x.o
fresh; expect_error "--bind without =FILE" 2 1 -- $R/model.onnx --bind shape -o $dir/x.o
fresh
run $R/model.onnx --bind shape=$R/test_data_set_0/input_1.pb -o $dir/rs.o
if [ $rc = 0 ] && grep -q '#define rs_NUM_INPUTS 1' $dir/rs.h; then
    ok "--bind makes the input a constant (one input left)"
else
    fail "--bind makes the input a constant" "exit status $rc" $B/stderr
fi

# Sequences are resolved at compile time: a Loop that grows one by its trip count and
# condition compiles once --bind makes both constants (it is unrolled; the If in its body
# returns a sequence, whose rebuilding nodes come after the If), and an If whose condition
# --bind fixes returns an optional that holds a value or not.
for t in loop13_seq loop16_seq_none; do
    L=${ONNX_TESTDATA:-/usr/share/libonnx-testdata/data}/node/test_$t
    run check $L/model.onnx --bind trip_count=$L/test_data_set_0/input_0.pb --bind cond=$L/test_data_set_0/input_1.pb
    if [ $rc = 0 ] && grep -q '^check: [1-9][0-9]* passed, 0 failed' $B/stdout; then
        ok "check test_$t with --bind trip_count, cond"
    else
        fail "check test_$t with --bind trip_count, cond" "exit status $rc; $(tail -n 1 $B/stdout)" $B/stderr
    fi
done
L=${ONNX_TESTDATA:-/usr/share/libonnx-testdata/data}/node/test_if_opt
run check $L/model.onnx --bind cond=$L/test_data_set_0/input_0.pb
if [ $rc = 0 ] && grep -q '^check: 1 passed, 0 failed' $B/stdout; then
    ok "check test_if_opt with --bind cond"
else
    fail "check test_if_opt with --bind cond" "exit status $rc; $(tail -n 1 $B/stdout)" $B/stderr
fi
# An If with a constant condition: the branch not taken is neither inferred nor checked.
fresh
run $B/if_const.onnx -o $dir/ifc.o
if [ $rc = 0 ] && [ -s $dir/ifc.o ]; then
    ok "If with a constant condition and an untyped value in the other branch"
else
    fail "If with a constant condition and an untyped value in the other branch" "exit status $rc" $B/stderr
fi

# A data set whose expected output is wrong (cnn's logits for mlp's input): a failed check,
# reported in the summary line, not an error of the model.
mkdir -p $B/wrong_data
cp models/mlp/test_data_set_0/input_0.pb models/cnn/test_data_set_0/output_0.pb $B/wrong_data/
run check models/mlp/model.onnx $B/wrong_data
if [ $rc = 1 ] && grep -q '^check: 0 passed, 1 failed' $B/stdout; then
    ok "check with wrong expected outputs"
else
    fail "check with wrong expected outputs" "exit status $rc; $(tail -n 1 $B/stdout)" $B/stderr
fi

# The symbolic model compiles once --shape fixes the symbol.
fresh
run $B/symbolic.onnx --shape x=2x4 -o $dir/sym.o
if [ $rc = 0 ] && [ -s $dir/sym.o ] && [ -s $dir/sym.h ] && grep -q 'sym_run' $dir/sym.h; then
    ok "--shape x=2x4 resolves the symbol"
else
    fail "--shape x=2x4 resolves the symbol" "exit status $rc" $B/stderr
fi

# --help: exit 0, every option mentioned.
run --help
missing=""
for opt in -o --name --emit -O0 -O1 -O2 -O3 --target --cpu --features --abi --shape \
        --bind --print-after --print-after-all --verify --no-verify -v --rtol --atol --help --version \
        --weights-section --emit-weights check; do
    grep -q -- "$opt\\b" $B/stdout || missing="$missing $opt"
done
if [ $rc = 0 ] && [ -z "$missing" ]; then ok "--help mentions every option"
else fail "--help" "exit status $rc, not mentioned:$missing" $B/stderr; fi

# --emit: assembly and LLVM IR text, for the host and for Cortex-M4.
fresh
for emit in asm llvm; do
    for target in "" "--target thumbv7em-none-eabihf --cpu cortex-m4"; do
        run models/mlp/model.onnx --emit=$emit $target -o $dir/mlp.$emit
        what="--emit=$emit${target:+ (cortex-m4)}"
        if [ $rc != 0 ] || [ ! -s $dir/mlp.$emit ]; then
            fail "$what" "exit status $rc, file empty or missing" $B/stderr
        elif [ $emit = llvm ] && ! grep -q '^define .*@mlp_run' $dir/mlp.$emit; then
            fail "$what" "no definition of @mlp_run in the LLVM IR" $B/stderr
        elif [ $emit = asm ] && ! grep -q 'mlp_run' $dir/mlp.$emit; then
            fail "$what" "no mlp_run in the assembly" $B/stderr
        else
            ok "$what"
        fi
        rm -f $dir/mlp.$emit
    done
done

# --print-after-all: one section per pass, in the order --help lists them.
passes=$($ONNXCC --help | sed -n 's/^passes://p')
run models/cnn/model.onnx --print-after-all -o $dir/cnn.o
missing="" order=""
for p in $passes; do
    grep -q -- "after $p\\b" $B/stdout || missing="$missing $p"
done
got=$(sed -n 's/.*after \([a-z_]*\).*/\1/p' $B/stdout | tr '\n' ' ')
if [ $rc = 0 ] && [ -n "$passes" ] && [ -z "$missing" ]; then
    ok "--print-after-all prints every pass ($(echo $passes | wc -w))"
else
    fail "--print-after-all" "exit status $rc; no section for:$missing (saw: $got)" $B/stderr
fi
run models/cnn/model.onnx --print-after=lower -o $dir/cnn.o --cpu x86-64-v3
if [ $rc = 0 ] && [ "$(grep -c 'after ' $B/stdout)" = 1 ] && grep -q 'after lower ---' $B/stdout; then
    ok "--print-after=lower prints one section"
else
    fail "--print-after=lower" "exit status $rc" $B/stderr
fi
# a named x86 CPU gives the vector width of its features (backend/target.c, x86_cpus): an
# AVX-512 CPU 64 bytes, an AVX2 one 32 (the name alone once left the feature list empty: 16,
# which the program line leaves out)
if [ "$(uname -m)" = x86_64 ]; then
    for cv in skylake-avx512:64 znver4:64 haswell:32 znver3:32; do
        run models/cnn/model.onnx --print-after=lower -o $dir/cnn.o --cpu ${cv%:*}
        if [ $rc = 0 ] && grep -q "^program .*, vector ${cv#*:}" $B/stdout; then
            ok "--cpu ${cv%:*}: ${cv#*:}-byte vectors"
        else
            fail "--cpu ${cv%:*}: ${cv#*:}-byte vectors" "exit status $rc; $(grep -m1 '^program' $B/stdout)" $B/stderr
        fi
    done
fi
# a default x86-64 host object holds two ISA levels, each lowered on its own: one section each
if [ "$(uname -m)" = x86_64 ]; then
    run models/cnn/model.onnx --print-after=lower -o $dir/cnn.o
    if [ $rc = 0 ] && [ "$(grep -c 'after ' $B/stdout)" = 2 ] && grep -q 'after lower (x86-64-v3) ---' $B/stdout &&
       grep -q 'after lower (x86-64-v4+avx512vnni) ---' $B/stdout; then
        ok "--print-after=lower prints a section per ISA level of a default host object"
    else
        fail "--print-after=lower, two ISA levels" "exit status $rc" $B/stderr
    fi
fi
fresh; expect_error "--print-after=nosuchpass" 2 1 nosuchpass -- models/mlp/model.onnx \
    --print-after=nosuchpass -o $dir/x.o
# --max-arena: over the budget, an error naming the least arena and what is live there; within
# it, the object as without
fresh; expect_error "--max-arena below the arena" 1 1 "over --max-arena 100" "goes below 1280 bytes" \
    "live at kernel" -- models/cnn/model.onnx --max-arena 100 -o $dir/x.o
fresh; expect_error "--max-arena not a size" 2 1 "max-arena" -- models/cnn/model.onnx --max-arena lots -o $dir/x.o
fresh
run models/cnn/model.onnx --max-arena 2k -o $dir/x.o
if [ $rc = 0 ] && grep -q 'ARENA_SIZE 1280' $dir/x.h && grep -q 'ARENA_LOWER_BOUND 1280' $dir/x.h; then
    ok "--max-arena within the budget: compiled, arena and lower bound in the header"
else
    fail "--max-arena within the budget" "exit status $rc" $B/stderr
fi
# over the budget, row bands (band_rows), then lowered again, one conv at a time: on the
# Cortex-M4 the int8 LeNet's default arena is 26656 B (its two convs' im2col words); under
# 20000 B its first conv, Clip and MaxPool in 2 bands (16800 B), under 10000 the same bands
# and the convs reading their input in place (3536 B); below the 2776 B live at its second
# conv the error names them. KWS int8 fits CMSIS-NN's 16,256 B by default (its residual Adds
# fused into the convs that write over the block's input).
fresh
for b in 0 20000 10000; do
    if [ $b = 0 ]; then run tests/int8/lenet/model.onnx --target thumbv7em-none-eabihf -o $dir/a$b.o
    else run tests/int8/lenet/model.onnx --target thumbv7em-none-eabihf --max-arena $b -o $dir/a$b.o; fi
done
run tests/int8/kws/model.onnx --target thumbv7em-none-eabihf --max-arena 16256 -o $dir/x.o
if [ $rc = 0 ] && grep -q 'ARENA_SIZE 26656' $dir/a0.h && grep -q 'ARENA_SIZE 16800' $dir/a20000.h &&
   grep -q 'ARENA_SIZE 3536' $dir/a10000.h && grep -q 'ARENA_SIZE 16000' $dir/x.h; then
    ok "--max-arena over the default arena: smaller schedules (LeNet int8 on the M4 26656 -> 16800 -> 3536 B; KWS 16000 B)"
else
    fail "--max-arena over the default arena, smaller schedules" "exit status $rc" $B/stderr
fi
fresh; expect_error "--max-arena below the smallest schedule" 1 1 "over --max-arena 2000" \
    "goes below 2776 bytes" -- tests/int8/lenet/model.onnx --target thumbv7em-none-eabihf --max-arena 2000 -o $dir/x.o
# row bands (band_rows): the MobileNetV2-style int8 model's 138,240 B layer by layer, under a
# third of it on the M4 in 12 bands with line buffers (34,080 B; tests/firmware checks their
# outputs); below that, the error names it
fresh
run tests/int8/mbv2/model.onnx --target thumbv7em-none-eabihf --max-arena 46080 -v -o $dir/x.o
if [ $rc = 0 ] && grep -q 'ARENA_SIZE 34080' $dir/x.h && grep -q 'band_rows: 12 bands' $B/stderr; then
    ok "--max-arena 46080: row bands (mbv2 int8 138240 -> 34080 B in 12 bands)"
else
    fail "--max-arena 46080: row bands" "exit status $rc" $B/stderr
fi
fresh; expect_error "--max-arena below the smallest row bands" 1 1 "over --max-arena 20000" \
    "goes below 34080 bytes" "_band" -- tests/int8/mbv2/model.onnx --target thumbv7em-none-eabihf --max-arena 20000 -o $dir/x.o
# row bands of a float CNN on the host (tests/bands: a conv, a MaxPool of stride 2, a dilated
# conv with a residual Add, a strided conv): 64000 B without bands; within 40000 B in 4 bands
# and 30000 B in 10, its output as torch's (onnxcc check); below 21120 B the error
for b in 40000:4 30000:10; do
    fresh
    run check -v --max-arena ${b%:*} tests/bands/model.onnx
    if [ $rc = 0 ] && grep -q "band_rows: ${b#*:} bands" $B/stderr && grep -q "output 'y'.*: ok" $B/stdout; then
        ok "--max-arena ${b%:*}: a float CNN in ${b#*:} row bands, outputs checked"
    else
        fail "--max-arena ${b%:*}: a float CNN in row bands" "exit status $rc" $B/stderr
    fi
done
fresh; expect_error "--max-arena below a float CNN's smallest row bands" 1 1 "over --max-arena 20000" \
    "goes below 21120 bytes" -- check --max-arena 20000 tests/bands/model.onnx

# ---- onnxcc bench ----
# The table lists exactly the kernels of the compiled program (as --print-after=bufferize names
# them), and the work line counts the multiply-accumulates an op-level formula gives (computed
# here in Python, not by onnxcc) for a MatMul and two Convs.
run bench models/example/model.onnx --seconds 0.1
want=$($ONNXCC --cpu native --print-after=bufferize models/example/model.onnx -o $dir/ex.o 2>/dev/null |
       sed -n 's/^kernel \([^ ]*\) (.*/\1/p' | sort | tr '\n' ' ')
got=$(sed -n '/^kernel  *ops/,$p' $B/stdout | sed 1d | awk '{ print $1 }' | sort | tr '\n' ' ')
rm -f $dir/ex.o $dir/ex.h
if [ $rc = 0 ] && [ -n "$want" ] && [ "$got" = "$want" ] && grep -q '^latency: median' $B/stdout &&
   grep -q '^peak: [0-9.]* GFLOP/s' $B/stdout; then
    ok "bench prints latency, the peak and a row per kernel ($want)"
else
    fail "bench example" "exit status $rc; kernels in the table: '$got', in the program: '$want'" $B/stderr
fi
# --top 1: the slowest kernel (one of the program's) on a row, the others on one line
run bench models/example/model.onnx --seconds 0.05 --top 1
rows=$(sed -n '/^kernel  *ops/,$p' $B/stdout | sed 1d)
first=$(echo "$rows" | sed -n 1p | awk '{ print $1 }')
nk=$(echo "$want" | wc -w)
if [ $rc = 0 ] && [ "$(echo "$rows" | wc -l)" = 2 ] && case " $want" in *" $first "*) true ;; *) false ;; esac &&
   echo "$rows" | sed -n 2p | grep -q "^($((nk - 1)) more) "; then
    ok "bench --top 1: one kernel row, then the other $((nk - 1)) as one line"
else
    fail "bench --top 1" "exit status $rc, rows: $rows" $B/stderr
fi
fresh; expect_error "bench --top: not a number" 2 1 "--top" -- bench models/example/model.onnx --top many
if $PYTHON - $B >$B/bench_models.log 2>&1 <<'PY'
import sys
from onnx import TensorProto, helper, numpy_helper, save
import numpy as np
out = sys.argv[1]
f = TensorProto.FLOAT
def model(name, nodes, ins, outs, inits=()):
    g = helper.make_graph(nodes, name, [helper.make_tensor_value_info(*i) for i in ins],
                          [helper.make_tensor_value_info(*o) for o in outs], list(inits))
    save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), "%s/%s.onnx" % (out, name))
m, k, n = 3, 17, 29
# a node name longer than the table's name column (48): its row keeps the head and the tail
model("bench_mm", [helper.make_node("MatMul", ["a", "b"], ["c"], name="matmul_" + "x" * 50 + "_end")],
      [("a", f, [m, k]), ("b", f, [k, n])], [("c", f, [m, n])])
print("bench_mm", m * n * k)
for name, stride, group in (("bench_conv", 1, 1), ("bench_conv_s2g2", 2, 2)):
    cin, cout, h, w, kh = 4, 8, 10, 12, 3
    oh, ow = (h + 2 - kh) // stride + 1, (w + 2 - kh) // stride + 1
    wt = numpy_helper.from_array(np.ones((cout, cin // group, kh, kh), np.float32), "w")
    model(name, [helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1], strides=[stride] * 2,
                                  group=group)],
          [("x", f, [1, cin, h, w])], [("y", f, [1, cout, oh, ow])], [wt])
    print(name, cout * oh * ow * (cin // group) * kh * kh)
PY
then
    while read name macs; do
        run bench $B/$name.onnx --seconds 0.02
        got=$(sed -n 's/^work: \([0-9]*\) MACs.*/\1/p' $B/stdout)
        row=$(sed -n '/^kernel  *ops/{n;p;}' $B/stdout | awk '{ print $1 }')
        if [ $name = bench_mm ] && ! expr "$row" : 'matmul_x*\.\.x*_end$' >/dev/null ||
           [ $name = bench_mm ] && [ ${#row} != 48 ]; then
            fail "bench $name" "the long kernel name is shown as '$row', not its head..tail in 48 columns" $B/stdout
        elif [ $rc = 0 ] && [ "$got" = "$macs" ]; then
            ok "bench $name: $macs MACs"
        else
            fail "bench $name" "exit status $rc, $got MACs, want $macs" $B/stderr
        fi
    done <$B/bench_models.log
else
    fail "bench MAC models" "$(tail -n 1 $B/bench_models.log)" $B/stderr
fi
# --profile: an instrumented object whose header declares the counters, for the host and for a
# target whose clock the application supplies; a normal build declares none of it.
fresh
run models/example/model.onnx --profile -o $dir/p.o
hn=$(grep -c -e '^extern .* p_profile\(_names\|_macs\)*\[p_NUM_KERNELS\];$' -e '^uint64_t p_profile_clock(void);$' $dir/p.h)
if [ $rc = 0 ] && [ "$hn" = 4 ] && grep -q '^#define p_NUM_KERNELS 4$' $dir/p.h && nm $dir/p.o | grep -q ' p_profile$'; then
    ok "--profile: counters in the object and the header"
else
    fail "--profile" "exit status $rc, $hn declarations" $B/stderr
fi
run models/example/model.onnx --profile --target thumbv7em-none-eabihf --cpu cortex-m4 -o $dir/m.o
if [ $rc = 0 ] && nm $dir/m.o | grep -q ' U m_profile_clock$'; then
    ok "--profile on Cortex-M4: the clock is the application's m_profile_clock"
else
    fail "--profile on Cortex-M4" "exit status $rc or no m_profile_clock import" $B/stderr
fi
run models/example/model.onnx -o $dir/n.o
if [ $rc = 0 ] && ! grep -q profile $dir/n.h && ! nm $dir/n.o | grep -q profile; then
    ok "no --profile: no counters"
else
    fail "no --profile" "a normal build mentions profile" $B/stderr
fi
# Outputs: a special file (here a FIFO, as /dev/null would be) is written directly, never
# replaced, and gets no header unless --header asks; --header puts the header anywhere.
fresh
mkfifo $dir/pipe
cat $dir/pipe >$B/pipe.o &
run models/mlp/model.onnx -o $dir/pipe
wait
if [ $rc = 0 ] && [ -p $dir/pipe ] && [ "$(ls -A $dir)" = pipe ] \
   && [ "$(head -c 4 $B/pipe.o | od -An -c | tr -d ' ')" = "177ELF" ]; then
    ok "-o FIFO: the object goes through it, it stays a FIFO, no header"
else
    fail "-o FIFO" "exit status $rc; folder holds: $(ls -A $dir | tr '\n' ' ')" $B/stderr
fi
cat $dir/pipe >/dev/zero &
run models/mlp/model.onnx -o $dir/pipe --header $dir/pipe.h
wait
if [ $rc = 0 ] && [ -p $dir/pipe ] && grep -q 'pipe_run' $dir/pipe.h; then
    ok "-o FIFO --header PATH: the header is written"
else
    fail "-o FIFO --header PATH" "exit status $rc" $B/stderr
fi
rm -f $dir/pipe.h
cat $dir/pipe >/dev/zero &
run $B/unknown_ops.onnx -o $dir/pipe
# a reader that never gets a writer: open it ourselves so that cat ends
[ -p $dir/pipe ] && : >$dir/pipe
wait
if [ $rc = 1 ] && [ -p $dir/pipe ]; then
    ok "a failed compilation does not remove a special output"
else
    fail "failed compilation with a FIFO output" "exit status $rc; pipe still a FIFO: $([ -p $dir/pipe ] && echo yes || echo no)" $B/stderr
fi
# A symbolic link is written through: the target is replaced, the link stays; a dangling one
# is refused and nothing is left behind.
fresh
mkdir -p $dir/t
echo old >$dir/t/real.o
ln -s t/real.o $dir/link.o
run models/mlp/model.onnx -o $dir/link.o
if [ $rc = 0 ] && [ -L $dir/link.o ] && [ "$(head -c 4 $dir/t/real.o | od -An -c | tr -d ' ')" = "177ELF" ] \
   && grep -q 'link_run' $dir/link.h && [ "$(ls -A $dir/t)" = real.o ]; then
    ok "-o SYMLINK: written through to its target, the link stays"
else
    fail "-o SYMLINK" "exit status $rc; folder holds: $(ls -A $dir $dir/t | tr '\n' ' ')" $B/stderr
fi
fresh
ln -s $dir/nowhere/x.o $dir/../dangling.o
expect_error "-o DANGLING-SYMLINK is refused" 1 1 symbolic -- models/mlp/model.onnx -o $dir/../dangling.o
if [ -L $dir/../dangling.o ] && [ ! -e $dir/../dangling.h ]; then
    ok "-o DANGLING-SYMLINK: the link stays, no header"
else
    fail "-o DANGLING-SYMLINK" "the link is gone or a header was written" $B/stderr
fi
rm -f $dir/../dangling.o
fresh
mkdir -p $dir/inc
run models/mlp/model.onnx -o $dir/m.o --header $dir/inc/mlp.h
if [ $rc = 0 ] && [ -s $dir/m.o ] && grep -q 'm_run' $dir/inc/mlp.h && [ ! -e $dir/m.h ] \
   && [ -z "$(ls $dir | grep -v -x -e m.o -e inc)" ]; then
    ok "--header PATH: the header there, none beside the object, no temporary left"
else
    fail "--header PATH" "exit status $rc; folder: $(ls -A $dir | tr '\n' ' ')" $B/stderr
fi
fresh; expect_error "bench --target" 2 1 target -- bench models/mlp/model.onnx --target thumbv7em-none-eabihf
fresh; expect_error "bench: missing model" 1 1 nosuch -- bench $dir/nosuch.onnx

summary cli
