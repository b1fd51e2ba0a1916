#!/bin/sh
# tests/int8.sh - integer inference on the quantized models of tests/int8/ (made by
# tests/int8/gen.py, goldens from onnxruntime):
#   - `onnxcc check` at -O0..-O3 on the host, within one quantum of the output (tests/int8/NAME/
#     atol; the models end in a DequantizeLinear, so a quantum is the output scale): -O0 runs
#     the QDQ groups in float as the standard defines them, -O1 and up as integer ops;
#   - fuse_qdq rewrote every Conv and Gemm of the QDQ models (-v names what stays float), and
#     in ops and ops_s8 the Sigmoid, Tanh, LeakyRelu, Relu, Clip, Add, Mul and
#     GlobalAveragePool groups too (all but their broadcasting Add);
#   - the weights stay 8-bit: the object's read-only data at most 0.35x the float model's
#     (tests/int8/NAME/float.onnx) for Cortex-M4 and RV32IMAFC, 0.85x on the host. Not 0.25:
#     per-channel scales stay 4 bytes (biases 2 on Cortex-M4), and the small KWS model's
#     64-channel layers have few weights per channel (0.29 on the M4). The host's default
#     object holds two levels: the float model's conv weights twice where the levels' panels
#     differ (each level's own tiles, conv_tiles), once elsewhere (Gemm panels of 64 columns
#     at both; 4 bytes a weight), while an int8 model whose weights take the AVX2 level's dot2 form
#     keeps two, the AVX-512 level's bytes and the AVX2 level's int16 pairs (docs/int8.md), 3
#     bytes a weight (with the scales and tables: dscnn and kws 0.45 of a float model that
#     holds its conv weights twice, mlp 0.76, lenet 0.71, lenet_qop 0.58; kws_rr's 7-bit
#     weights keep the bytes at both levels, shared: 0.32);
#   - the whole flash (code and data) for Cortex-M4 and RV32IMAFC (as tests/firmware builds
#     them) at most 0.3x the float model's, except the models listed in FLASH_OVER (skipped,
#     and counted so: docs/int8.md, "Flash").
# Work files: build/int8/. Last line: "int8: N passed, N failed, N skipped".
set -u
cd "$(dirname "$0")/.."
. tests/lib.sh
OUT=build/int8
mkdir -p $OUT

# read-only data of an object: the .rodata* sections (weights, tables)
rodata() { size -A "$1" | awk '$1 ~ /^\.rodata/ { s += $2 } END { print s + 0 }'; }

# Over the 0.3x flash goal on Cortex-M4 or RV32 (NAME:TARGET, the triple's first part), and
# why: docs/int8.md ("Flash"). kws and kws_rr on RV32 (0.305x): their residual Adds are fused
# into the convs that write over the block's input (passes/fuse.c), 16,000 B of arena instead
# of 24,000 and fewer instructions, for +0.57 KB of code (one pointwise conv body more); the
# int8 weights, per-channel multipliers and biases alone are 0.27x of the float model's flash.
# dscnn on RV32 (0.3008x, 78 B over): the same weights, and a float model with less code than
# kws's (no Adds).
FLASH_OVER="kws:riscv32 kws_rr:riscv32"
# on x86-64 also the x86-64-v3 level of the dispatching object (AVX2: no VNNI), which a default
# object runs on CPUs without AVX-512 and -O2 alone does not run on an AVX-512 host
isa0=
[ "$(uname -m)" = x86_64 ] && isa0=-O2,--isa,0

for d in tests/int8/*/; do
    d=${d%/}
    name=${d##*/}
    [ -f $d/model.onnx ] || continue
    atol=$(cat $d/atol)
    for opt in -O0 -O1 -O2 -O3 $isa0; do
        log=$OUT/check_$name$opt.log
        # mbv2 at -O0 (QDQ groups in float): 23 layers deep, a tie rounded the other way in
        # one layer moves the output by a few quanta (1.9 of scale 0.47); its integer -O1 and
        # up match onnxruntime exactly
        atol=$(cat $d/atol)
        [ "$name$opt" = mbv2-O0 ] && atol=$(awk -v a=$atol 'BEGIN { printf "%.9g", a * 8 }')
        if $ONNXCC check $(echo $opt | tr , ' ') --atol $atol --rtol 0 $d/model.onnx </dev/null >$log 2>&1; then
            ok "check $opt $d (atol $atol)"
        else
            fail "check $opt $d (atol $atol)" $log
        fi
    done
    # the non-product groups the ops models have (tables, Clip, Add, Mul, pool)
    case $name in ops) ops=6 ;; ops_s8) ops=7 ;; *) ops= ;; esac
    log=$OUT/fuse_$name.log
    $ONNXCC -v -O2 $d/model.onnx -o $OUT/$name.o </dev/null >$log 2>&1
    if grep -q "^onnxcc: fuse_qdq: .*(\(Conv\|Gemm\|MatMul\)) stays float" $log; then
        fail "$d: a Conv or Gemm stayed float" $log
    elif [ -n "$ops" ] && [ "$(grep -c "fuse_qdq: [^ ]*: \(.* table\|.*QLinearClip.*\|QLinearMul\|QLinearAdd\|QLinearGlobalAveragePool\)$" $log)" != $ops ]; then
        fail "$d: fuse_qdq left one of the $ops non-product groups float" $log
    elif [ -n "$ops" ]; then
        ok "$d: its $ops non-product groups as integer ops"
    elif [ "$name" = lenet_qop ] || grep -q "fuse_qdq: .*QLinearConv" $log; then
        ok "$d: Conv and Gemm as integer ops"
    else
        fail "$d: fuse_qdq rewrote nothing" $log
    fi
    [ -f $d/float.onnx ] || continue     # ops*: no float model to compare the size with
    for target in host thumbv7em-none-eabihf riscv32-unknown-elf; do
        case $target in
        host) opts= ;;
        riscv32-*) opts="--target $target --cpu generic-rv32 --features +m,+a,+f,+c --abi ilp32f" ;;
        *) opts="--target $target" ;;
        esac
        log=$OUT/size_${name}_$target.log
        if $ONNXCC $opts $d/model.onnx -o $OUT/$name.$target.o >$log 2>&1 &&
           $ONNXCC $opts $d/float.onnx -o $OUT/${name}_float.$target.o >>$log 2>&1; then
            q=$(rodata $OUT/$name.$target.o) f=$(rodata $OUT/${name}_float.$target.o)
            echo "info $d: $target flash (text + data) $(size $OUT/$name.$target.o | awk 'NR == 2 { print $4 }')" \
                 "bytes, float $(size $OUT/${name}_float.$target.o | awk 'NR == 2 { print $4 }')"
            lim=35
            [ $target = host ] && lim=85
            if [ $((q * 100)) -le $((f * lim)) ]; then
                ok "$d: $target read-only data $q bytes, float $f"
            else
                echo "rodata $q bytes, float model $f" >>$log
                fail "$d: $target read-only data $q bytes > 0.$lim x float $f" $log
            fi
            # the whole flash (code and data) of the firmware build: at most 0.3x the float
            # model's, but for the models of FLASH_OVER (counted as skipped, each named)
            if [ $target != host ]; then
                qf=$(size $OUT/$name.$target.o | awk 'NR == 2 { print $1 + $2 }')
                ff=$(size $OUT/${name}_float.$target.o | awk 'NR == 2 { print $1 + $2 }')
                under=$((qf * 100 <= ff * 30))
                case " $FLASH_OVER " in
                *" $name:${target%%-*} "*)
                    if [ $under = 1 ]; then
                        fail "$d: $target flash $qf bytes is now <= 0.3 x float $ff: take $name out of FLASH_OVER"
                    else
                        echo "skip $d: $target flash $qf bytes > 0.3 x float $ff (FLASH_OVER: docs/int8.md)"
                        skipped=$((${skipped:-0} + 1))
                    fi ;;
                *)
                    if [ $under = 1 ]; then
                        ok "$d: $target flash $qf bytes <= 0.3 x float $ff"
                    else
                        fail "$d: $target flash $qf bytes > 0.3 x float $ff"
                    fi ;;
                esac
            fi
        else
            fail "$d: $target compile" $log
        fi
    done
done
# pmaddubsw at the edge of exactness (tests/int8_ubs.py): on the AVX2 level it is taken for
# weights that cannot saturate it and not for weights that can; both exact against numpy.
# Likewise the float32 accumulation of integer convs outside the dot4 form.
# check_exact NAME WHAT LOG: tests/int8_ubs.py's model NAME matches its numpy reference exactly
# at -O2, at the default object's ISA level 0, and at -O0
check_exact() {
    for opt in -O2 -O2,--isa,0 -O0; do
        if $ONNXCC check $(echo $opt | tr , ' ') $OUT/ubs/$1/model.onnx </dev/null >$3 2>&1; then
            ok "check $opt $2 (exact)"
        else
            fail "check $opt $2 (exact)" $3
        fi
    done
}
if [ "$(uname -m)" = x86_64 ]; then
    if ${PYTHON:-/usr/bin/python3} tests/int8_ubs.py $OUT/ubs >$OUT/ubs.log 2>&1; then
        for m in edge over; do
            log=$OUT/ubs_$m.log
            check_exact $m "pmaddubsw $m" $log
            n=$($ONNXCC --cpu x86-64-v3 --emit=asm $OUT/ubs/$m/model.onnx -o $OUT/ubs_$m.s 2>>$log && grep -c vpmaddubsw $OUT/ubs_$m.s)
            case $m:${n:-0} in
            edge:0) fail "pmaddubsw edge: not taken on x86-64-v3" $log ;;
            over:0) ok "pmaddubsw over: not taken (65 + 64 would saturate)" ;;
            over:*) fail "pmaddubsw over: taken although 255 * (65 + 64) saturates" $log ;;
            *) ok "pmaddubsw edge: taken ($n) on x86-64-v3" ;;
            esac
        done
        # float32 accumulation of a depthwise conv: taken below 2^24, not above; both exact
        for m in fx_edge fx_over; do
            log=$OUT/ubs_$m.log
            check_exact $m "float accumulation $m" $log
            n=$($ONNXCC --print-after=lower $OUT/ubs/$m/model.onnx -o /dev/null 2>>$log | grep -c 'scalars r0:float32')
            case $m:$n in
            fx_edge:0) fail "$m: not accumulated in float32" $log ;;
            fx_over:0) ok "$m: accumulated in int32 (529 taps * 255 * 128 > 2^24)" ;;
            fx_over:*) fail "$m: accumulated in float32 although its sums reach 2^24" $log ;;
            *) ok "$m: accumulated in float32" ;;
            esac
        done
        # QLinearMatMul by a constant int8 B: fuse_qdq's 1x1 QLinearConv, exact at both levels
        for m in qmm_u8 qmm_s8; do
            log=$OUT/ubs_$m.log
            check_exact $m "QLinearMatMul $m" $log
            if $ONNXCC -v $OUT/ubs/$m/model.onnx -o $OUT/ubs_$m.o 2>&1 | grep -q "QLinearMatMul as a 1x1 QLinearConv"; then
                ok "$m: a 1x1 QLinearConv"
            else
                fail "$m: fuse_qdq left the QLinearMatMul" $log
            fi
        done
    else
        fail "tests/int8_ubs.py" $OUT/ubs.log
    fi
fi
summary int8
