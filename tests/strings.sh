#!/bin/sh
# tests/strings.sh - string tensors beyond the ONNX test data: tests/strings/gen.py makes Cast
# to and from strings, StringNormalizer and TfIdfVectorizer models with their Python
# references into build/string-tests/, checked with `onnxcc check` at every -O level (strings
# are compared byte for byte; floats within check's atol 1e-4).
# Last line: "strings: N passed, N failed".
set -u
cd "$(dirname "$0")/.."
. tests/lib.sh
OUT=build/string-tests
. tests/check-models.sh
gen_models strings $OUT tests/strings/gen.py
check_models $OUT "-O0 -O1 -O2 -O3"
summary strings
