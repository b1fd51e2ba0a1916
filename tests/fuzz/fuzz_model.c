/* fuzz_model.c - the libFuzzer target of `make fuzz` (tests/fuzz/run.sh builds and runs it):
 * one input is one model file, taken through the whole compiler in-process as `onnxcc -O0
 * --emit=llvm` would take it: nesting pre-scan, protobuf import, every graph and kernel pass
 * (at -O2, so that fusion and scheduling run too), then LLVM IR from the backend (written to a
 * scratch file; LLVM's own optimisation and code generation are not ours to fuzz and would
 * slow each run down tenfold).
 *
 * A user error must end the compilation cleanly: fatal() and exit_if_errors() call
 * error_exit, which jumps back here instead of exiting; the arena holds everything the
 * compilation allocated and is freed either way. An abort (internal error), a crash or a
 * sanitizer report is a finding: copy it into tests/fuzz/crashes/ once fixed, where
 * tests/malformed.sh runs it through the command line for ever after. */
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../backend/backend.h"
#include "../../frontend/frontend.h"
#include "../../passes/pipeline.h"

static jmp_buf back;
static Target target;
static char scratch[64];

static void jump_back(int status) { longjmp(back, status ? status : 1); }

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    error_exit = jump_back;
    be_target(&target, NULL, NULL, NULL, NULL);
    snprintf(scratch, sizeof scratch, "/tmp/onnxcc-fuzz-%ld.ll", (long)getpid());
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    Arena *volatile a = arena_new();
    if (setjmp(back) == 0) {
        uint8_t *copy = arena_alloc(a, size + 1);   /* the importer may keep pointers into it */
        if (size) memcpy(copy, data, size);
        Graph *g = fe_parse_model(a, copy, size, "fuzz.onnx");
        g->name = "fuzz";
        Options o = {.opt_level = 2, .verify = true, .vector_bytes = target.vector_bytes,
                     .arena_align = target.arena_align};
        Program *p = run_pipeline(g, &o);
        be_emit(p, &target, 0, EMIT_LLVM, scratch);
    }
    error_count = 0;
    out_remove_all();
    unlink(scratch);
    arena_free(a);
    return 0;
}
