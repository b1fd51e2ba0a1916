/* fuzz_kir.c - the libFuzzer target of `make fuzz FUZZ_TARGET=kir` (tests/fuzz/run.sh): one
 * input is one kernel-IR text, taken as `onnxcc --run-pass=fuse,schedule,parallelize,bufferize
 * PROG.kir` takes it: kir_parse, the verifier, then every kernel pass at -O2 and the printer
 * (to a scratch file). A text the reader cannot take must be a user error (fatal() jumps back
 * here); a program it takes must verify and get through the passes. An abort, a crash or a
 * sanitizer report is a finding, kept in tests/fuzz/crashes/ once fixed (tests/malformed.sh
 * runs those with the .kir extension through --run-pass). Seeds: tests/passes/kir/. */
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../ir/kir.h"
#include "../../passes/pipeline.h"

static jmp_buf back;
static char scratch[64];

static void jump_back(int status) { longjmp(back, status ? status : 1); }

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    error_exit = jump_back;
    snprintf(scratch, sizeof scratch, "/tmp/onnxcc-fuzz-kir-%ld.txt", (long)getpid());
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    Arena *volatile a = arena_new();
    FILE *volatile f = NULL;
    if (setjmp(back) == 0) {
        char *text = arena_alloc(a, size + 1);
        if (size) memcpy(text, data, size);
        if (strlen(text) == size) {             /* --run-pass refuses a NUL byte first */
            Program *p = kir_parse(a, "fuzz.kir", text);
            p->opt_level = 2;
            kir_verify(p, "reading fuzz.kir");
            const Pass *ps[4] = {pass_find("fuse"), pass_find("schedule"), pass_find("parallelize"),
                                 pass_find("bufferize")};
            Options o = {.opt_level = 2, .verify = true};
            run_kernel_passes(p, ps, 4, &o);
            if ((f = fopen(scratch, "w"))) kir_print(f, p);
        }
    }
    if (f) fclose(f);
    error_count = 0;
    unlink(scratch);
    arena_free(a);
    return 0;
}
