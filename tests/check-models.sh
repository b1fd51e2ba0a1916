# tests/check-models.sh - sourced by the runners whose generators write models with numpy
# reference outputs (tests/convs.sh, tests/rnn.sh): check_models OUT LEVELS runs
# `onnxcc check --atol 1e-4` on every OUT/NAME/model.onnx (and its test_data_set_*) at each
# -O level of LEVELS, counting with tests/lib.sh's ok and fail. A level may carry more options
# after commas (-O2,--cpu,native), and a model the options in its file OUT/NAME/flags, if any,
# at every level. atol 1e-4: the references compute in float64, the compiled code in float32.
check_models() { # out-dir levels
    for m in $1/*/; do
        name=${m%/}
        name=${name##*/}
        for o in $2; do
            if $ONNXCC check $(echo $o | tr , ' ') $(cat $m/flags 2>/dev/null) --atol 1e-4 $m/model.onnx >$1/$name$o.log 2>&1; then
                ok "$name $o"
            else
                fail "$name $o"
                tail -n 5 $1/$name$o.log
            fi
        done
    done
}
