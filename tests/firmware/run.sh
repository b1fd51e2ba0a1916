#!/bin/sh
# tests/firmware/run.sh [PATTERN] - firmware tests on two boards: compile models with onnxcc for
#   m4    Cortex-M4F (thumbv7em-none-eabihf), linked by arm-none-eabi-gcc with startup.c, mps2.ld
#         and newlib's semihosting, run on QEMU's mps2-an386;
#   rv32  RV32IMAFC, ilp32f (riscv32-unknown-elf), linked by riscv64-unknown-elf-gcc with rv32.c
#         and picolibc's semihosting crt0, run on QEMU's virt board;
# each with main.c and the inputs and expected outputs as C arrays from pb2c.py. A case passes
# when QEMU exits 0 and the program printed PASS. Prints the model object's .text/.rodata
# sizes, its arena (which must be within 5% of the header's NAME_ARENA_LOWER_BOUND, and within
# --max-arena for the *_ram cases: KWS int8 at CMSIS-NN's 16,256 B, LeNet int8 at a quarter of
# its float model's arena; and for the mbv2_i8_b* cases, in row bands, whose output must equal
# the model's without bands exactly), the stack its run took (which
# must not exceed the header's NAME_STACK_SIZE;
# the header's NAME_FLASH_SIZE must equal `size`'s text and NAME_MACS agree with macs.py), the
# instructions it executed (QEMU's -icount, read
# through SysTick on the M4 (icount.c) and the cycle CSR on RV32 (rv32.c)) and those per
# multiply-accumulate of the model's Conv/Gemm/MatMul nodes (tests/macs.py); then the sample
# models once more, compiled with --profile, with the instructions and multiply-accumulates of
# each kernel that has any (on the M4 at most 2.5 instructions per multiply-accumulate in each
# conv and dense layer of the float models: issue 16). PATTERN selects cases by "BOARD NAME" (e.g. "rv32 ex").
# Work files and logs: build/fw/BOARD/ (build/fw/BOARD/prof/ for the profiled builds).
# Last line: "firmware: N passed, N failed".
set -u
cd "$(dirname "$0")/../.."
. tests/lib.sh
FW0=build/fw
HERE=tests/firmware
DATA=/usr/share/libonnx-testdata/data/node
PATTERN=${1:-}

# name model data-set: the sample models, node tests covering conv, pooling, gemm, softmax
# and batch normalisation, the int8 models of tests/int8, a Loop with a run-time trip count
# that exits early, and outputs of data-dependent shape (a Loop's scan output after an early
# exit, NonMaxSuppression, NonZero: main.c compares the valid part and the "NAME.dims" outputs),
# and string tensors (StringNormalizer, Cast from string: their bytes, by pb2c.py), and the
# upsampling layers of decoders (tests/firmware/decoder: ConvTranspose k4 s2 and k2 s2, ConvTranspose1d
# s8 k16, a dilated Conv1d; at most 2.5 instructions per MAC on the M4, whole run and, in the
# profiled build, each layer), depthwise convs on maps of a few columns (tests/firmware/depthwise:
# strides, dilations, asymmetric pads, 5x5, a channel multiplier), and the float twins of the int8 models (tests/int8/NAME/float.onnx,
# with onnxruntime's outputs from tests/firmware/floats/gen.py)
CASES="example models/example/model.onnx models/example/test_data_set_0
cnn models/cnn/model.onnx models/cnn/test_data_set_0
mlp models/mlp/model.onnx models/mlp/test_data_set_0
cnn_xflash models/cnn/model.onnx models/cnn/test_data_set_0
conv_with_strides_padding $DATA/test_conv_with_strides_padding/model.onnx $DATA/test_conv_with_strides_padding/test_data_set_0
softmax_axis_1 $DATA/test_softmax_axis_1/model.onnx $DATA/test_softmax_axis_1/test_data_set_0
gemm_all_attributes $DATA/test_gemm_all_attributes/model.onnx $DATA/test_gemm_all_attributes/test_data_set_0
maxpool_2d_pads $DATA/test_maxpool_2d_pads/model.onnx $DATA/test_maxpool_2d_pads/test_data_set_0
batchnorm_example $DATA/test_batchnorm_example/model.onnx $DATA/test_batchnorm_example/test_data_set_0
lenet_i8 tests/int8/lenet/model.onnx tests/int8/lenet/test_data_set_0
lenet_i8_ram tests/int8/lenet/model.onnx tests/int8/lenet/test_data_set_0
lenet_i8_mid tests/int8/lenet/model.onnx tests/int8/lenet/test_data_set_0
kws_i8 tests/int8/kws/model.onnx tests/int8/kws/test_data_set_0
kws_i8_ram tests/int8/kws/model.onnx tests/int8/kws/test_data_set_0
dscnn_i8 tests/int8/dscnn/model.onnx tests/int8/dscnn/test_data_set_0
mbv2_i8 tests/int8/mbv2/model.onnx tests/int8/mbv2/test_data_set_0
mbv2_i8_b100k tests/int8/mbv2/model.onnx tests/int8/mbv2/test_data_set_0
mbv2_i8_b75k tests/int8/mbv2/model.onnx tests/int8/mbv2/test_data_set_0
mbv2_i8_b56k tests/int8/mbv2/model.onnx tests/int8/mbv2/test_data_set_0
mbv2_i8_b46k tests/int8/mbv2/model.onnx tests/int8/mbv2/test_data_set_0
mlp_i8 tests/int8/mlp/model.onnx tests/int8/mlp/test_data_set_0
lenet_qop_i8 tests/int8/lenet_qop/model.onnx tests/int8/lenet_qop/test_data_set_0
ops_i8 tests/int8/ops/model.onnx tests/int8/ops/test_data_set_0
ops_s8 tests/int8/ops_s8/model.onnx tests/int8/ops_s8/test_data_set_0
loop_while models/loop_while/model.onnx models/loop_while/test_data_set_0
loop_exit models/loop_exit/model.onnx models/loop_exit/test_data_set_0
detect models/detect/model.onnx models/detect/test_data_set_1
text models/text/model.onnx models/text/test_data_set_0
decoder $HERE/decoder/model.onnx $HERE/decoder/test_data_set_0
depthwise $HERE/depthwise/model.onnx $HERE/depthwise/test_data_set_0
kws_f32 tests/int8/kws/float.onnx $HERE/floats/kws/test_data_set_0
dscnn_f32 tests/int8/dscnn/float.onnx $HERE/floats/dscnn/test_data_set_0
lenet_f32 tests/int8/lenet/float.onnx $HERE/floats/lenet/test_data_set_0
mlp_f32 tests/int8/mlp/float.onnx $HERE/floats/mlp/test_data_set_0"

# Semihosting console on QEMU's stdout; no display, serial or monitor.
QEMU_IO="-display none -serial none -monitor none -chardev stdio,id=sh0
         -semihosting-config enable=on,target=native,chardev=sh0"

# Sets what differs between the boards: onnxcc's target options (TARGET), the C compiler and its
# flags (XCC, CFLAGS, LDFLAGS; -ffp-contract=off keeps GCC from fusing the comparison's
# arithmetic differently from the host), the board's own sources (SUPPORT), `size` (SIZE) and
# the QEMU command (QEMU).
board() {
    FW=$FW0/$1
    case $1 in
    m4)
        TARGET="--target thumbv7em-none-eabihf --cpu cortex-m4"
        XCC=arm-none-eabi-gcc SIZE=arm-none-eabi-size
        CFLAGS="-mcpu=cortex-m4 -mthumb -mfpu=fpv4-sp-d16 -mfloat-abi=hard -O2 -ffp-contract=off
                -std=c11 -Wall -Wextra --specs=rdimon.specs --specs=nano.specs"
        LDFLAGS="-u _printf_float -nostartfiles -T $HERE/mps2.ld -Wl,--gc-sections -Wl,--no-warn-execstack"
        SUPPORT="$HERE/startup.c $HERE/icount.c $HERE/measure.c"
        # Virtual time advances 2^6 ns per executed instruction: SysTick counts instructions.
        QEMU="qemu-system-arm -M mps2-an386 -cpu cortex-m4 -icount shift=6" ;;
    rv32)
        TARGET="--target riscv32-unknown-elf --cpu generic-rv32 --features +m,+a,+f,+c --abi ilp32f"
        XCC=riscv64-unknown-elf-gcc SIZE=riscv64-unknown-elf-size
        # picolibc's semihosting crt0 (its default one spins after main instead of exiting);
        # flash and RAM where QEMU's virt board has its DRAM; the stack is the top 32 KB.
        CFLAGS="-march=rv32imafc -mabi=ilp32f -O2 -ffp-contract=off -std=c11 -Wall -Wextra
                --specs=picolibc.specs --oslib=semihost --crt0=semihost"
        LDFLAGS="-Wl,--defsym=__flash=0x80000000,--defsym=__flash_size=0x200000
                 -Wl,--defsym=__ram=0x80200000,--defsym=__ram_size=0x200000
                 -Wl,--defsym=__stack_size=0x8000 -Wl,--gc-sections"
        SUPPORT="$FW/rv32.o $HERE/measure.c"
        # 1 ns of virtual time per instruction, which the cycle CSR reads.
        QEMU="qemu-system-riscv32 -M virt -bios none -icount shift=0" ;;
    esac
    mkdir -p $FW
}

excerpt() { tail -n 15 "$1" | sed 's/^/    /'; }

# Sum of the sizes of all sections of an object whose names start with $2 (.text, .rodata).
section_size() {
    $SIZE -A "$1" | awk -v s="$2" 'index($1, s) == 1 { n += $2 } END { print n + 0 }'
}

# Whether the linked ELF $1 has section .extflash of $2 bytes at 0x21000000 (mps2.ld's XFLASH),
# nothing left in .rodata of that size, and the arena at 0x01000000 (TCM).
placed() {
    readelf -SW "$1" | awk -v n="$(printf %06x "$2")" '
        { sub(/^ *\[ *[0-9]+\] */, "") }
        $1 == ".extflash" { x = ($3 == "21000000" && $5 == n) }
        $1 == ".tcm" { t = ($3 == "01000000") }
        END { if (!x || !t) { print "readelf: .extflash or .tcm missing or misplaced"; exit 1 } }' &&
        readelf -sW "$1" | awk '$NF == "arena" { a = 1; if ($2 !~ /^0100/) { print "arena at " $2; exit 1 } }
                                END { if (!a) { print "no symbol arena"; exit 1 } }'
}

run_case() { # name model data-set [profile]
    name=$1 D=$FW log=$FW/$1.log opts="" cdefs=""
    # placement (M4 only; mps2.ld has the regions): the weights in their own section, linked
    # into the "external flash", and the arena into the "TCM", as the README shows
    case $name in *_xflash) opts="--weights-section .extflash" cdefs='-DARENA_SECTION=".tcm"' ;; esac
    # RAM budgets, under which onnxcc lowers again, one conv at a time, until the arena fits:
    # CMSIS-NN's 16,256 B for the KWS model (two 8,000 B activation buffers and its scratch;
    # the default build fits it), a quarter of the float LeNet's 23,520 B for the int8 one
    # (row bands), 20,000 B for the int8 LeNet (row bands of its first stage);
    # the MobileNetV2-style int8 model (138,240 B layer by layer) in row bands (band_rows) at
    # four budgets (3, 4, 6 and 12 bands), 46,080 B being a third of its lower bound without
    # bands
    case $name in
    kws_i8_ram) opts="--max-arena 16256" ;;
    lenet_i8_ram) opts="--max-arena 5880" ;;
    lenet_i8_mid) opts="--max-arena 20000" ;;
    mbv2_i8_b100k) opts="--max-arena 100000" ;;
    mbv2_i8_b75k) opts="--max-arena 75000" ;;
    mbv2_i8_b56k) opts="--max-arena 56000" ;;
    mbv2_i8_b46k) opts="--max-arena 46080" ;;
    esac
    if [ -n "${4:-}" ]; then            # a --profile build of its own, in $FW/prof
        D=$FW/prof log=$FW/prof/$1.log opts="$opts --profile"
    fi
    mkdir -p $D/$name
    rm -f $D/$name.o $D/$name.h $D/$name.elf $D/$name.out
    if ! $ONNXCC "$2" $TARGET $opts -o $D/$name.o \
            </dev/null >$log 2>&1; then
        fail "$BOARD $name" "onnxcc failed" $log; return
    fi
    if ! $PYTHON $HERE/pb2c.py --model $name --header $D/$name.h "$3" >$D/$name/case.h 2>>$log; then
        fail "$BOARD $name" "pb2c.py failed" $log; return
    fi
    # the int8 models (tests/int8/NAME/model.onnx, not their float twins): within one output
    # quantum, as on the host
    tol=
    [ "${2##*/}" = model.onnx ] && [ -f "${2%/*}/atol" ] && tol="-DATOL=$(cat "${2%/*}/atol") -DRTOL=0"
    if ! $XCC $CFLAGS $tol $cdefs -I$D/$name -I$D -I$HERE $LDFLAGS \
            $HERE/main.c $SUPPORT $D/$name.o -o $D/$name.elf >>$log 2>&1; then
        fail "$BOARD $name" "link failed" $log; return
    fi
    rc=0
    timeout 30 $QEMU $QEMU_IO -kernel $D/$name.elf \
        </dev/null >$D/$name.out 2>>$log || rc=$?
    cat $D/$name.out >>$log
    if [ $rc != 0 ] || ! grep -qx PASS $D/$name.out; then
        fail "$BOARD $name" "qemu exit status $rc" $log; return
    fi
    if [ -n "${4:-}" ]; then            # the kernels that multiply-accumulate, per MAC
        sed -n 's/^kernel \([^:]*\): \([0-9]*\) instructions, \([0-9]*\) MACs$/\1 \2 \3/p' $D/$name.out |
            awk -v b=$BOARD -v m=$name '$3 > 0 { printf "ok   %-4s %-26s profile: kernel %-22s insns %7d  MACs %6d (%.2f/MAC)\n", b, m, $1, $2, $3, $2 / $3 }'
        # on the M4, issue 19's bound for the decoder and issue 16's for the sample models and
        # the float twins: 2.5 instructions per MAC, the decoder's per layer (a node's kernels,
        # those without MACs included: a ConvTranspose's phases and any interleaving copy;
        # its kernel names are NODE or NODE_N, the nodes Op_I), the others' per kernel (their
        # node names are the exporters': /conv/Conv, conv_7)
        case "$BOARD $name" in
        "m4 decoder") layer='[A-Za-z]*_[0-9]*' ;;
        "m4 example"|"m4 cnn"|"m4 mlp"|"m4 "*_f32) layer='[^:]*' ;;
        *) layer= ;;
        esac
        if [ -n "$layer" ]; then
            over=$(sed -n "s/^kernel \\($layer\\)[^:]*: \\([0-9]*\\) instructions, \\([0-9]*\\) MACs\$/\\1 \\2 \\3/p" $D/$name.out |
                   awk '{ i[$1] += $2; n[$1] += $3 } END { for (l in n) if (n[l] > 0) printf "%s %.2f\n", l, i[l] / n[l] }' |
                   sort | tee -a $log | awk '$2 > 2.5 { printf "%s %s/MAC ", $1, $2 }')
            if [ -n "$over" ]; then
                fail "$BOARD $name" "over 2.5 instructions per MAC: $over" $log; return
            fi
        fi
        passed=$((passed + 1))
        return
    fi
    err=$(grep -o 'max abs error [^,]*' $FW/$name.out | awk '{ if ($4 > m) m = $4 } END { print m + 0 }')
    stack=$(sed -n 's/.*stack \([0-9]*\) bytes.*/\1/p' $FW/$name.out)
    arena=$(sed -n 's/.*arena \([0-9]*\) bytes.*/\1/p' $FW/$name.out)
    insns=$(sed -n 's/.* \([0-9]*\) instructions.*/\1/p' $FW/$name.out)
    macs=$($PYTHON tests/macs.py "$2" 2>>$log)
    per=$(awk -v i="${insns:-0}" -v m="${macs:-0}" 'BEGIN { if (m > 0) printf "%.2f", i / m; else print "-" }')
    # The header's facts against independent figures: flash against `size` (its text column:
    # the object's read-only allocated sections), work against macs.py. main.c checked the stack.
    hflash=$(sed -n "s/^#define ${name}_FLASH_SIZE //p" $FW/$name.h)
    hstack=$(sed -n "s/^#define ${name}_STACK_SIZE //p" $FW/$name.h)
    hmacs=$(sed -n "s/^#define ${name}_MACS //p" $FW/$name.h)
    hweights=$(sed -n "s/^#define ${name}_WEIGHTS_SIZE //p" $FW/$name.h)
    text=$($SIZE $FW/$name.o | awk 'NR == 2 { print $1 }')
    if [ "${hflash:-x}" != "$((text - ${hweights:-0}))" ]; then
        fail "$BOARD $name" "header FLASH_SIZE ${hflash:-missing} (+ WEIGHTS_SIZE ${hweights:-0}), size(1) says text $text" $log; return
    fi
    # the arena within 5% of the lower bound bufferize reports (no placement does better), plus
    # 16 B for the boards' 8-byte alignment of the smallest buffers; and within --max-arena
    hbound=$(sed -n "s/^#define ${name}_ARENA_LOWER_BOUND //p" $FW/$name.h)
    harena=$(sed -n "s/^#define ${name}_ARENA_SIZE //p" $FW/$name.h)
    if [ -z "$hbound" ] || [ -z "$harena" ] || [ $((harena * 100)) -gt $((hbound * 105 + 1600)) ]; then
        fail "$BOARD $name" "arena ${harena:-missing} B, over 1.05 x its lower bound ${hbound:-missing} B + 16" $log; return
    fi
    case $opts in --max-arena*)
        if [ "$harena" -gt "${opts#--max-arena }" ]; then
            fail "$BOARD $name" "arena $harena B over $opts" $log; return
        fi ;;
    esac
    # row bands recompute the same values: the MobileNetV2-style model's output bit for bit
    case $name in mbv2_i8*)
        if [ "$err" != 0 ]; then
            fail "$BOARD $name" "max abs error $err, not 0" $log; return
        fi ;;
    esac
    # issue 20's goal for the DS-CNN keyword spotters on the M4 with default flags: CMSIS-NN's
    # 16,256 B of RAM at no more than 2.80 instructions per multiply-accumulate
    if { [ "$BOARD $name" = "m4 kws_i8" ] || [ "$BOARD $name" = "m4 dscnn_i8" ]; } && { [ "$harena" -gt 16256 ] || [ $((${insns:-0} * 100)) -gt $((${macs:-1} * 280)) ]; }; then
        fail "$BOARD $name" "arena $harena B (over 16256?), $per instructions per MAC (over 2.80?)" $log; return
    fi
    if [ -n "$opts" ] && [ "${opts%% *}" = --weights-section ] && ! placed $FW/$name.elf $hweights >>$log 2>&1; then
        fail "$BOARD $name" "weights or arena not where mps2.ld puts them" $log; return
    fi
    # NAME_MACS counts every multiply-add of the loop nests, macs.py only Conv/Gemm/MatMul/RNN
    # products: equal on the sample models and the plain convolution, never fewer elsewhere.
    case $name in
    example|cnn|mlp|conv_*) exact=1 ;;
    *) exact= ;;
    esac
    if [ -z "$hmacs" ] || [ "$hmacs" -lt "${macs:-0}" ] || { [ -n "$exact" ] && [ "$hmacs" != "$macs" ]; }; then
        fail "$BOARD $name" "header MACS ${hmacs:-missing}, macs.py counts ${macs:-?}" $log; return
    fi
    # the decoder's upsampling layers (ConvTranspose 2-D and 1-D, a dilated Conv1d): issue 19's
    # bound of 2.5 instructions per multiply-accumulate on the M4, whole run
    if [ "$BOARD $name" = "m4 decoder" ] && ! awk -v p="$per" 'BEGIN { exit !(p != "-" && p <= 2.5) }'; then
        fail "$BOARD $name" "$per instructions per MAC, over 2.5" $log; return
    fi
    ok "$(printf '%-4s %-26s .text %6d B  .rodata %6d B  flash %6d B  arena %6d B  stack %5d B (bound %5d)  insns %8d  MACs %7d (%s/MAC)  max err %s' \
        $BOARD $name "$(section_size $FW/$name.o .text)" "$(section_size $FW/$name.o .rodata)" \
        "$hflash" "${arena:-0}" "${stack:-0}" "$hstack" "${insns:-0}" "${macs:-0}" "$per" "$err")"
}

missing=""
for tool in arm-none-eabi-gcc arm-none-eabi-size qemu-system-arm riscv64-unknown-elf-gcc \
        riscv64-unknown-elf-size qemu-system-riscv32; do
    command -v $tool >/dev/null 2>&1 || missing="$missing $tool"
done
if [ -n "$missing" ]; then
    fail "firmware: missing$missing (sh tools/install-deps.sh)"
    summary firmware; exit 1
fi

for BOARD in m4 rv32; do
    board $BOARD
    if [ $BOARD = rv32 ]; then
        # Reading the counters takes Zicsr, which GCC 12's multilib names do not include.
        if ! $XCC $CFLAGS -march=rv32imafc_zicsr -c $HERE/rv32.c -o $FW/rv32.o >$FW/rv32.log 2>&1; then
            fail "$BOARD rv32.c" "does not compile" $FW/rv32.log
            continue
        fi
    fi
    while read -r name model data; do
        case "$BOARD $name" in *$PATTERN*) ;; *) continue ;; esac
        case "$BOARD $name" in "rv32 "*_xflash) continue ;; esac
        run_case $name $model $data
    done <<END
$CASES
END
    # The sample models, the int8 ones and their float twins again, compiled with --profile:
    # instructions per kernel (their clock is the instruction count, main.c), so the figure per
    # multiply-accumulate is the layer's own.
    while read -r name model data; do
        case "$BOARD $name" in *$PATTERN*) ;; *) continue ;; esac
        run_case $name $model $data profile
    done <<END
$(echo "$CASES" | grep -E "^(example|cnn|mlp|decoder|lenet_i8|kws_i8|dscnn_i8|mlp_i8|lenet_qop_i8|kws_f32|dscnn_f32|lenet_f32|mlp_f32${PROFILE_MORE:-}) ")
END
done
summary firmware
