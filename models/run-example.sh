#!/bin/sh
# run-example.sh - `make run`: compile the example digit classifier with onnxcc, link it into
# models/demo.c with a plain `cc` (no -lm, no runtime library) and run it on the held-out digits
# of models/example/samples.h. Prints predictions, accuracy, object and arena size; exits
# non-zero if any step fails.
set -eu
cd "$(dirname "$0")/.."
ONNXCC=${ONNXCC:-./onnxcc}
CC=${CC:-cc}
OUT=build/example

mkdir -p $OUT
echo "run-example: $ONNXCC models/example/model.onnx -o $OUT/example.o"
$ONNXCC models/example/model.onnx -o $OUT/example.o
$CC -std=c11 -O2 -Wall -Wextra -Wpedantic -I$OUT -Imodels/example models/demo.c $OUT/example.o \
    -o $OUT/demo
./$OUT/demo
echo "object: $(wc -c <$OUT/example.o) bytes ($OUT/example.o)"
size $OUT/example.o 2>/dev/null | tail -n 1 | awk '{ printf "  text %s, data %s, bss %s\n", $1, $2, $3 }'
