#!/bin/sh
# tests/threads.sh - the ISA levels of a default host object and NAME_run_par.
#   1. tests/threads/gen.py writes models whose kernels parallelize splits (a CNN with a
#      depthwise SiLU block, a block of grouped convs of 8 and 4 channels a group, attention-like
#      matmuls, transposes and concats, a dense layer, GRUs (with and without linear_before_reset) and an LSTM in their stepped form,
#      two Winograd convs) with numpy
#      reference outputs into build/threads-tests/; `onnxcc check` runs each at the level this
#      CPU picks and, on x86-64, with --isa 0 (the x86-64-v3 baseline forced: on an AVX-512
#      host the path a CPU without it takes), within atol 1e-4.
#   2. Each, and models/cnn, is compiled with --split-all (every kernel parallelize can split
#      is, however small: the models are test-sized) and linked with tests/threads/threads.c and runtime/onnxcc_pool.c,
#      which requires model_run_par's outputs at 1, 2 and 3 threads (and without a
#      parallel-for, and with callers' parallel-fors that run the tasks in reverse, or
#      shuffled over two threads) to be bitwise model_run's, at every ISA level this CPU has.
#   3. ThreadSanitizer (cnn, attention, movement, winograd): the same program with objects compiled with --sanitize-thread (and
#      --cpu x86-64, whose accesses of at most 16 bytes it can check: it skips wider vectors),
#      linked with -fsanitize=thread, must run clean; and with a parallel-for that runs every
#      task twice at once (THREADS_RACE), it must report the race: the proof that it looks.
#   4. A sample of the ONNX backend tests (convs, dense layers, pools, recurrent and integer
#      ops) checked with --isa 0 against their data.
#   5. The side module (backend/emit.c): with ONNXCC_SPLIT_KERNELS=1 every model's kernels
#      are split over two LLVM modules, compiled on two threads and joined into one object
#      (backend/elf.c; bench-sized models split at the default threshold). Each is checked
#      against its numpy references (the object loaded by LLVM's JIT linker), and the program
#      of step 2 is built from it (the object linked by the C compiler) and must pass.
# Last line: "threads: N passed, N failed".
set -u
cd "$(dirname "$0")/.."
. tests/lib.sh
OUT=build/threads-tests
. tests/check-models.sh
gen_models threads $OUT tests/threads/gen.py
x86=
[ "$(uname -m)" = x86_64 ] && x86=-O2,--isa,0
check_models $OUT "-O2 $x86"
# step 5's check (before the builds below add their directories to $OUT)
if [ -n "$x86" ]; then
    export ONNXCC_SPLIT_KERNELS=1
    check_models $OUT "-O2,-v"
    for m in $OUT/*/; do
        grep -q 'llvm-side .*on a thread of its own: [1-9]' "$OUT/$(basename $m)-O2,-v.log" ||
            fail "$(basename $m): no kernel went to the side module" "$OUT/$(basename $m)-O2,-v.log"
    done
    unset ONNXCC_SPLIT_KERNELS
fi

# the program of step 2 (and 3) for model M (a directory with model.onnx): OBJ-FLAGS CC-FLAGS
build() { # m tag onnxcc-flags cc-flags
    d=$OUT/$2
    mkdir -p $d
    $ONNXCC $3 --name model $1/model.onnx -o $d/model.o >$d/build.log 2>&1 &&
        $CC -std=c11 -D_POSIX_C_SOURCE=200809L -O1 -g -Wall -Wextra -Wpedantic $4 -I$d -Iruntime \
            tests/threads/threads.c runtime/onnxcc_pool.c $d/model.o -pthread -o $d/threads >>$d/build.log 2>&1
}

for m in $OUT/*/ models/cnn/; do
    m=${m%/}
    name=${m##*/}
    if ! build $m $name.run --split-all ""; then
        fail "$name: does not build" $OUT/$name.run/build.log
        continue
    fi
    # the header's arena against its lower bound (bufferize): never below it
    size=$(sed -n 's/^#define model_ARENA_SIZE //p' $OUT/$name.run/model.h)
    bound=$(sed -n 's/^#define model_ARENA_LOWER_BOUND //p' $OUT/$name.run/model.h)
    if [ -n "$size" ] && [ -n "$bound" ] && [ "$bound" -le "$size" ] && { [ "$bound" -gt 0 ] || [ "$size" = 0 ]; }; then
        ok "$name: arena $size B, lower bound $bound B"
    else
        fail "$name: arena '$size' against lower bound '$bound'"
    fi
    if $OUT/$name.run/threads >$OUT/$name.run/out.log 2>&1; then
        ok "$name: run_par bitwise run at 1, 2, 3 threads ($(grep -c '^ok' $OUT/$name.run/out.log) checks, $(tail -n 1 $OUT/$name.run/out.log))"
    else
        fail "$name: run_par" $OUT/$name.run/out.log
    fi
done

# the side module: objects joined from two, checked and linked
if [ -n "$x86" ]; then
    export ONNXCC_SPLIT_KERNELS=1
    for m in $OUT/*/ models/cnn/; do
        m=${m%/}
        name=${m##*/}
        [ -f $m/model.onnx ] || continue
        if ! build $m $name.side "--split-all -v" ""; then
            fail "$name: does not build from two modules" $OUT/$name.side/build.log
        elif ! grep -q 'llvm-side .*on a thread of its own: [1-9]' $OUT/$name.side/build.log; then
            fail "$name: no kernel went to the side module" $OUT/$name.side/build.log
        elif $OUT/$name.side/threads >$OUT/$name.side/out.log 2>&1; then
            ok "$name: joined from two modules, run_par bitwise run ($(tail -n 1 $OUT/$name.side/out.log))"
        else
            fail "$name: joined from two modules, run_par" $OUT/$name.side/out.log
        fi
    done
    unset ONNXCC_SPLIT_KERNELS
fi

# ThreadSanitizer, where the C compiler has it
if [ -n "$x86" ] && echo 'int main(void) { return 0; }' >$OUT/t.c &&
   $CC -fsanitize=thread $OUT/t.c -o $OUT/t >/dev/null 2>&1; then
    for name in cnn attention movement winograd; do
        if ! build $OUT/$name $name.tsan "--sanitize-thread --split-all --cpu x86-64" -fsanitize=thread; then
            fail "$name: the ThreadSanitizer build" $OUT/$name.tsan/build.log
            continue
        fi
        if $OUT/$name.tsan/threads >$OUT/$name.tsan/out.log 2>&1 && ! grep -q ThreadSanitizer $OUT/$name.tsan/out.log; then
            ok "$name: ThreadSanitizer finds no race in the pool and the generated code"
        else
            fail "$name: ThreadSanitizer" $OUT/$name.tsan/out.log
        fi
    done
    THREADS_RACE=1 $OUT/attention.tsan/threads >$OUT/race.log 2>&1
    if grep -q 'ThreadSanitizer: data race' $OUT/race.log && grep -q 'task' $OUT/race.log; then
        ok "ThreadSanitizer reports tasks run twice at once in the generated code"
    else
        fail "ThreadSanitizer missed a race in the generated code" $OUT/race.log
    fi
else
    skipped=1
    echo "skip ThreadSanitizer: not an x86-64 host, or $CC has no -fsanitize=thread"
fi

# the baseline level of a dispatching object on backend test data
if [ -n "$x86" ]; then
    data=/usr/share/libonnx-testdata/data/node
    for t in test_conv_with_strides_padding test_gemm_default_matrix_bias test_matmul_3d \
             test_averagepool_2d_pads test_maxpool_2d_pads test_softmax_axis_1 test_lstm_defaults \
             test_qlinearconv test_qlinearmatmul_3D test_convinteger_with_padding test_matmulinteger \
             test_convtranspose test_batchnorm_example test_gru_defaults; do
        [ -d $data/$t ] || { fail "$t: not in $data"; continue; }
        if $ONNXCC check --isa 0 $data/$t/model.onnx >$OUT/$t.log 2>&1; then
            ok "$t --isa 0"
        else
            fail "$t --isa 0" $OUT/$t.log
        fi
    done
fi
summary threads
