/* mutate_check.c - a check of tests/fuzz/mutate.c without libFuzzer (tests/fuzz-smoke.sh):
 * for each model named on the command line and 200 seeds, the mutator's output must be a
 * ModelProto that parses again and differs from its input, on most calls; the byte
 * mutation it falls back to (stubbed here: one byte changed) must stay the exception. A
 * mutator that silently stopped mutating, or that wrote models protobuf-c cannot read, fails
 * this. Prints the counts and "mutate: N passed, N failed" (one case per model). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx.pb-c.h"

size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned seed);

static int fallbacks;

size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t max_size) {
    (void)max_size;
    fallbacks++;
    if (size) data[size / 2] ^= 1;
    return size;
}

int main(int argc, char **argv) {
    int passed = 0, failed = 0;
    for (int i = 1; i < argc; i++) {
        FILE *f = fopen(argv[i], "rb");
        if (!f) { printf("FAIL %s: cannot open\n", argv[i]); failed++; continue; }
        static uint8_t in[1 << 22], buf[1 << 22];
        size_t n = fread(in, 1, sizeof in, f);
        fclose(f);
        int parsed = 0, changed = 0, same = 0;
        fallbacks = 0;
        for (unsigned seed = 1; seed <= 200; seed++) {
            memcpy(buf, in, n);
            size_t m = LLVMFuzzerCustomMutator(buf, n, sizeof buf, seed);
            Onnx__ModelProto *mp = onnx__model_proto__unpack(NULL, m, buf);
            if (mp) {
                parsed++;
                onnx__model_proto__free_unpacked(mp, NULL);
            }
            if (m != n || memcmp(buf, in, n)) changed++;
            else same++;
        }
        /* one call in eight takes bytes on purpose; a few more where a mutation finds
         * nothing to change (a model without attributes or subgraphs) */
        int ok = parsed >= 140 && changed >= 150 && fallbacks <= 60;
        printf("%s %s: 200 mutations, %d parse, %d changed, %d unchanged, %d byte-level\n",
               ok ? "ok  " : "FAIL", argv[i], parsed, changed, same, fallbacks);
        ok ? passed++ : failed++;
    }
    printf("mutate: %d passed, %d failed\n", passed, failed);
    return failed != 0;
}
