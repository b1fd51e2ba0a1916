/* fuzz_tune.c - tune_parse (passes/tune.c), the reader of --tune-file's untrusted text, alone:
 * a libFuzzer target, or with -DSTANDALONE a driver that parses each file named on its command
 * line. Built with sanitizers against passes/tune.c and ir/util.c only, e.g.
 *     cc -std=c11 -D_DEFAULT_SOURCE -D_POSIX_C_SOURCE=200809L -g -O1 -DSTANDALONE \
 *        -fsanitize=address,undefined -fno-sanitize-recover=all -I. -Iir -Ipasses \
 *        tests/tune/fuzz_tune.c passes/tune.c ir/util.c -o fuzz_tune
 * (clang -fsanitize=fuzzer,address without -DSTANDALONE for libFuzzer). Errors are printed,
 * as onnxcc prints them; a crash or a sanitizer report is the bug. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "passes/tune.h"

/* tune.c names a type it has no short name for with ir.c's dtype_name, not linked here */
const char *dtype_name(DType t) { (void)t; return "?"; }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    /* an exact-size copy: a read past the end is the sanitizer's to see */
    char *text = malloc(size ? size : 1);
    if (!text) return 0;
    memcpy(text, data, size);
    Arena *a = arena_new();
    Tuning t = {.path = "fuzz.tune"};
    tune_parse(a, text, size, &t);
    arena_free(a);
    free(text);
    return 0;
}

#ifdef STANDALONE
int main(int argc, char **argv) {
    static uint8_t buf[1 << 20];
    for (int i = 1; i < argc; i++) {
        FILE *f = fopen(argv[i], "rb");
        if (!f) { perror(argv[i]); return 1; }
        size_t n = fread(buf, 1, sizeof buf, f);
        fclose(f);
        LLVMFuzzerTestOneInput(buf, n);
    }
    return 0;
}
#endif
