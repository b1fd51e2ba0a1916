#!/bin/sh
# tests/weights.sh - where the weights go (backend/weights.c, emit.c):
#   --weights-section: for the host, every initializer of models/mlp is in the named section of
#     the object and in no other data section (tests/weights_check.py reads the ELF and the ONNX
#     file); for Cortex-M4, whose passes rearrange them, every tensor of the --emit-weights blob
#     of the same compilation is; readelf shows the section with NAME_WEIGHTS_SIZE bytes, and NAME_FLASH_SIZE
#     plus NAME_WEIGHTS_SIZE is size(1)'s text (tests/firmware/run.sh links one into a firmware);
#   --emit-weights: the blob has the layout the README documents, holding each initializer at
#     its header offset, the object none of them; a host program (tests/weights_blob.c) loads
#     the blob and runs NAME_run_w on the test data set, for the sample models (mlp and cnn at
#     -O0 too) and two int8 ones, and checks the refusals (NULL, misaligned, changed or another compilation's blob);
#     --emit=asm gives the same blob; a GELU's constant `1`, changed in its blob, is the one the
#     code uses (tests/weights_gelu.c: the backend folds no blob value).
# Work files: build/weights/. Last line: "weights: N passed, N failed".
set -u
cd "$(dirname "$0")/.."
. tests/lib.sh
OUT=build/weights

if [ ! -x "$ONNXCC" ]; then
    fail "weights: $ONNXCC not built (make)"
    summary weights; exit 1
fi
rm -rf $OUT
mkdir -p $OUT
M=models/mlp/model.onnx

# --weights-section, on the host and for Cortex-M4 (binutils' readelf and size read both).
while read -r board opts; do
    D=$OUT/$board log=$OUT/$board/section.log
    mkdir -p $D
    if ! $ONNXCC $M $opts --weights-section .extflash -o $D/ws.o </dev/null >$log 2>&1; then
        fail "$board --weights-section: onnxcc" $log; continue
    fi
    # -O2's schedule repacks weights (Gemm panels): the tensors its blob holds; at -O1 the
    # initializers themselves
    $ONNXCC $M $opts --name wb --emit-weights $D/wb.bin -o $D/wb.o </dev/null >>$log 2>&1
    $PYTHON tests/weights_check.py section-blob $M $D/ws.o .extflash $D/wb.bin $D/wb.h wb >$D/check.out 2>&1
    if [ $board = host ]; then
        $ONNXCC $M -O1 --weights-section .extflash -o $D/ws1.o </dev/null >>$log 2>&1
        $PYTHON tests/weights_check.py section $M $D/ws1.o .extflash >>$D/check.out 2>&1
    fi
    [ -s $D/check.out ] || echo "FAIL weights_check.py said nothing" >$D/check.out
    tally $D/check.out
    wsize=$(sed -n 's/^#define ws_WEIGHTS_SIZE //p' $D/ws.h)
    flash=$(sed -n 's/^#define ws_FLASH_SIZE //p' $D/ws.h)
    sect=$(readelf -SW $D/ws.o | sed 's/^ *\[ *[0-9]*\] *//' | awk '$1 == ".extflash" { print $5 }')
    if [ -n "$wsize" ] && [ "$sect" = "$(printf %0${#sect}x "$wsize")" ]; then
        ok "$board: readelf: one section .extflash of ws_WEIGHTS_SIZE = $wsize bytes"
    else
        fail "$board: readelf: .extflash '$sect', ws_WEIGHTS_SIZE '${wsize:-missing}'"
    fi
    text=$(size $D/ws.o | awk 'NR == 2 { print $1 }')
    if [ -n "$flash" ] && [ -n "$wsize" ] && [ $((flash + wsize)) = "$text" ]; then
        ok "$board: ws_FLASH_SIZE $flash + ws_WEIGHTS_SIZE $wsize = size's text"
    else
        fail "$board: ws_FLASH_SIZE ${flash:-missing} + ws_WEIGHTS_SIZE ${wsize:-missing}, size's text $text"
    fi
done <<END
host
m4 --target thumbv7em-none-eabihf --cpu cortex-m4
END

# --emit-weights: the blob's layout, then a program that loads it.
D=$OUT/blob log=$OUT/blob/mlp.log
mkdir -p $D
# (-O1: no schedule, so the blob holds the initializers themselves, not repacked copies)
if $ONNXCC $M -O1 --name wb --emit-weights $D/wb.bin -o $D/wb.o </dev/null >$log 2>&1 &&
        $ONNXCC $M -O1 --name wb --emit-weights $D/asm.bin --emit=asm -o $D/wb.s </dev/null >>$log 2>&1; then
    { $PYTHON tests/weights_check.py blob $M $D/wb.bin $D/wb.h wb
      $PYTHON tests/weights_check.py absent $M $D/wb.o; } >$D/check.out 2>&1
    tally $D/check.out
    if cmp -s $D/wb.bin $D/asm.bin; then ok "--emit=asm writes the same blob"; else fail "--emit=asm: another blob" $log; fi
    text=$(size $D/wb.o | awk 'NR == 2 { print $1 }')
    flash=$(sed -n 's/^#define wb_FLASH_SIZE //p' $D/wb.h)
    if [ "${flash:-x}" = "$text" ]; then
        ok "wb_FLASH_SIZE $flash = size's text (the blob not counted)"
    else
        fail "wb_FLASH_SIZE ${flash:-missing}, size's text $text"
    fi
else
    fail "mlp --emit-weights: onnxcc" $log
fi

# A blob's constants are read at run time: a GELU whose `+ 1` the backend would fold into
# one erf-plus-one (backend/kernel.c, erf_plus_one) runs with that constant changed in the blob
# (tests/weights_gelu.c).
G=$D/gelu log=$D/gelu.log
mkdir -p $G
if $PYTHON - $G/model.onnx >$log 2>&1 <<'PY' &&
import sys, numpy as np, onnx
from onnx import helper as h, TensorProto as T, numpy_helper as nh
nodes = [h.make_node('Div', ['x', 'r2'], ['d']), h.make_node('Erf', ['d'], ['e']), h.make_node('Add', ['e', 'one'], ['a']),
         h.make_node('Mul', ['x', 'a'], ['m']), h.make_node('Mul', ['m', 'half'], ['y'])]
inits = [nh.from_array(np.array(v, np.float32), n) for n, v in (('r2', np.sqrt(2)), ('one', 1), ('half', 0.5))]
g = h.make_graph(nodes, 'g', [h.make_tensor_value_info('x', T.FLOAT, [4000])], [h.make_tensor_value_info('y', T.FLOAT, [4000])], inits)
m = h.make_model(g, opset_imports=[h.make_opsetid('', 13)]); m.ir_version = 8
onnx.save(m, sys.argv[1])
PY
   $ONNXCC $G/model.onnx --name g --emit-weights $G/g.bin -o $G/g.o </dev/null >>$log 2>&1 &&
   $CC -std=c11 -O1 -Wall -Wextra -Wpedantic -Werror -I$G tests/weights_gelu.c $G/g.o -lm -o $G/run >>$log 2>&1; then
    $G/run $G/g.bin >$G/out 2>&1
    st=$?
    tally $G/out
    [ $st != 0 ] && ! grep -q '^FAIL' $G/out && fail "gelu: weights_gelu exited with status $st" $G/out
else
    fail "gelu --emit-weights: build" $log
fi

# name model data-set onnxcc-options: the sample models (control flow among them) and two
# int8 ones, whose outputs are compared within one quantum (their atol file)
while read -r name model data opt; do
    W=$D/$name log=$D/$name.log
    mkdir -p $W
    # the blob of another compilation: another model, with the same name
    other=models/cnn/model.onnx; [ $model = $other ] && other=models/mlp/model.onnx
    tol=
    [ -f "${model%/*}/atol" ] && tol="-DATOL=$(cat "${model%/*}/atol") -DRTOL=0"
    # on a host with threads, NAME_run_w_par too (--split-all: its kernels do run as tasks)
    pool= split=
    if [ "$(uname -m)" = x86_64 ] || [ "$(uname -m)" = aarch64 ]; then
        pool="-DWB_POOL -Iruntime runtime/onnxcc_pool.c -lpthread" split=--split-all
    fi
    if ! { $ONNXCC $model $opt $split --name wb --emit-weights $W/wb.bin -o $W/wb.o &&
           $ONNXCC $other --name wb --emit-weights $W/other.bin -o $W/other.o --header $W/other.h &&
           $PYTHON tests/firmware/pb2c.py --prefix t $data >$W/case.h &&
           $CC -std=c11 -O1 -Wall -Wextra -Wpedantic -Werror $tol -I$W -Itests/firmware \
               tests/weights_blob.c $W/wb.o $pool -o $W/run; } </dev/null >$log 2>&1; then
        fail "$name --emit-weights: build" $log; continue
    fi
    $W/run $W/wb.bin $W/other.bin >$W/out 2>&1
    st=$?
    sed "s/^\(ok  \|FAIL\) /\1 $name: /" $W/out >$W/out.tagged
    tally $W/out.tagged
    [ $st != 0 ] && ! grep -q '^FAIL' $W/out && fail "$name: weights_blob exited with status $st" $W/out
done <<END
mlp models/mlp/model.onnx models/mlp/test_data_set_0
mlp-O0 models/mlp/model.onnx models/mlp/test_data_set_0 -O0
cnn models/cnn/model.onnx models/cnn/test_data_set_0
cnn-O0 models/cnn/model.onnx models/cnn/test_data_set_0 -O0
example models/example/model.onnx models/example/test_data_set_0
if_branch models/if_branch/model.onnx models/if_branch/test_data_set_1
loop_while models/loop_while/model.onnx models/loop_while/test_data_set_2
scan_rnn models/scan_rnn/model.onnx models/scan_rnn/test_data_set_0
lenet_i8 tests/int8/lenet/model.onnx tests/int8/lenet/test_data_set_0
kws_i8 tests/int8/kws/model.onnx tests/int8/kws/test_data_set_0
END

summary weights
