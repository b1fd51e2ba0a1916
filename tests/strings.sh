#!/bin/sh
# tests/strings.sh - string tensors beyond the ONNX test data: tests/strings/gen.py makes Cast
# to and from strings, StringNormalizer and TfIdfVectorizer models with their Python
# references into build/string-tests/, checked with `onnxcc check` at every -O level (strings
# are compared byte for byte; floats within check's atol 1e-4).
# Last line: "strings: N passed, N failed".
set -u
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-/usr/bin/python3}
ONNXCC=${ONNXCC:-./onnxcc}
OUT=build/string-tests
rm -rf $OUT && mkdir -p $OUT
passed=0 failed=0
if ! $PYTHON tests/strings/gen.py $OUT; then
    echo "FAIL strings: tests/strings/gen.py"
    echo "strings: 0 passed, 1 failed"
    exit 1
fi
. tests/check-models.sh
check_models $OUT "-O0 -O1 -O2 -O3"
echo "strings: $passed passed, $failed failed"
[ $failed = 0 ]
