/* load.c - run a compiled model inside onnxcc itself (`onnxcc check`): the host object file is
 * linked in-process by LLVM's ORC JIT linker, exactly as the system linker would link it
 * into a program, and NAME_run is looked up. A generator that searches the process's own
 * symbols resolves the few libc imports (memcpy/memset). The JITs live until the process
 * exits, so that the returned functions stay valid; an atexit handler disposes of them (before
 * LLVM's own static destructors, which were registered earlier). be_loaded_symbol finds other
 * symbols of the last object (`onnxcc bench`: the profile counters). */
#include <llvm-c/Error.h>
#include <llvm-c/LLJIT.h>
#include <llvm-c/Orc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static _Noreturn void jit_fail(const char *where, LLVMErrorRef err) {
    char *msg = LLVMGetErrorMessage(err);
    fatal(where, "cannot load: %s", msg);
}

static LLVMOrcLLJITRef *jits;
static int njits;

static void dispose_jits(void) {
    for (int i = 0; i < njits; i++) {
        LLVMErrorRef err = LLVMOrcDisposeLLJIT(jits[i]);
        if (err) LLVMConsumeError(err);             /* at exit: nothing left to report it to */
    }
    free(jits);
    jits = NULL;
    njits = 0;
}

static void keep_jit(LLVMOrcLLJITRef jit) {
    if (!jits) atexit(dispose_jits);
    LLVMOrcLLJITRef *j = realloc(jits, sizeof *j * (size_t)(njits + 1));
    if (!j) die("out of memory");
    jits = j;
    jits[njits++] = jit;
}

/* the JIT of the last object loaded, for be_loaded_symbol */
static LLVMOrcLLJITRef last_jit;

static LLVMOrcExecutorAddress lookup(LLVMOrcLLJITRef jit, const char *sym, const char *where) {
    LLVMOrcExecutorAddress addr = 0;
    LLVMErrorRef err = LLVMOrcLLJITLookup(jit, &addr, sym);
    if (err) {
        if (!where) {           /* a missing symbol the caller may expect: not fatal */
            LLVMConsumeError(err);
            return 0;
        }
        jit_fail(where, err);
    }
    return addr;
}

void *be_loaded_symbol(const char *sym) {
    if (!last_jit) die("be_loaded_symbol before be_load_object");
    return (void *)(uintptr_t)lookup(last_jit, sym, NULL);
}

void be_load_buffer(LLVMMemoryBufferRef buf, const char *where) {
    Target host;
    be_target(&host, NULL, NULL, NULL, NULL);       /* initialises LLVM's targets */
    be_target_free(&host);

    LLVMOrcLLJITRef jit;
    LLVMErrorRef err = LLVMOrcCreateLLJIT(&jit, NULL);
    if (err) jit_fail(where, err);
    keep_jit(jit);
    LLVMOrcJITDylibRef jd = LLVMOrcLLJITGetMainJITDylib(jit);
    LLVMOrcDefinitionGeneratorRef gen;
    err = LLVMOrcCreateDynamicLibrarySearchGeneratorForProcess(&gen, LLVMOrcLLJITGetGlobalPrefix(jit), NULL, NULL);
    if (err) jit_fail(where, err);
    LLVMOrcJITDylibAddGenerator(jd, gen);
    err = LLVMOrcLLJITAddObjectFile(jit, jd, buf);     /* takes ownership of buf */
    if (err) jit_fail(where, err);
    last_jit = jit;
}

RunFn be_load_object(const char *obj_path, const char *name) {
    LLVMMemoryBufferRef buf;
    char *msg = NULL;
    if (LLVMCreateMemoryBufferWithContentsOfFile(obj_path, &buf, &msg))
        fatal(obj_path, "cannot read: %s", msg ? msg : "?");
    be_load_buffer(buf, obj_path);

    size_t n = strlen(name) + 5;
    char *sym = malloc(n);
    if (!sym) die("out of memory");
    snprintf(sym, n, "%s_run", name);
    LLVMOrcExecutorAddress addr = lookup(last_jit, sym, obj_path);
    free(sym);
    if (!addr) fatal(obj_path, "cannot load: no symbol %s_run", name);
    RunFn fn;
    /* ISO C has no object-to-function pointer conversion; the address is a function's. */
    uintptr_t a = (uintptr_t)addr;
    memcpy(&fn, &a, sizeof fn);
    return fn;
}
