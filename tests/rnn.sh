#!/bin/sh
# tests/rnn.sh - RNN, GRU and LSTM with hidden 37, input 19, sequence 7, batch 3, both
# directions, peepholes, clip, linear_before_reset, sequence_lens, layout 1 and custom
# activations (tests/rnn/gen.py makes the models and a numpy reference from the ONNX formulas
# into build/rnn-tests/), checked with `onnxcc check` at every -O: the input projection, the
# transposed weights and the vectorised recurrence of passes/ops/rnn.c on shapes the ONNX test
# data lacks. atol 1e-4: the reference computes in float64, the compiled code in float32.
# Last line: "rnn: N passed, N failed".
set -u
cd "$(dirname "$0")/.."
. tests/lib.sh
OUT=build/rnn-tests
. tests/check-models.sh
gen_models rnn $OUT tests/rnn/gen.py
check_models $OUT "-O0 -O1 -O2 -O3"
summary rnn
