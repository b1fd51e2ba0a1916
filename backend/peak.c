/* peak.c - this CPU's single-core float multiply-add peak, measured (`onnxcc bench`'s "% of
 * peak" column).
 *
 * A tiny function is built in LLVM IR for the host, with the vector width the pipeline tiles
 * for (Target.vector_bytes: 64 bytes on AVX-512), compiled by the same TargetMachine as models
 * and run through the in-process JIT:
 *     for (i = 0; i < n; i++) acc_c = acc_c * x + y     (c = 0..CHAINS-1, one vector each)
 * The chains are independent, so the loop is bound by the FMA units' throughput, not by the
 * latency of one chain (4 cycles x 2 units needs at least 8 chains; 24 fill AVX-512's 32
 * registers with room for x, y and the counter). llvm.fmuladd becomes one FMA where the CPU has
 * them and a multiply and an add where not, which is then the peak of that CPU. Measured, not
 * computed from a frequency: the machine's clock under load is what the kernels get too. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <llvm-c/Analysis.h>

#include "internal.h"

typedef void (*PeakFn)(int64_t n, float *out);

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* void onnxcc_peak(i64 n, ptr out): the loop above; the sum of the chains is stored to out so
 * that nothing is dead. */
static void build(Emitter *e, int lanes, int chains) {
    LLVMTypeRef vt = LLVMVectorType(e->f32, (unsigned)lanes);
    LLVMTypeRef pt[2] = {e->i64, e->ptr};
    LLVMValueRef fn = LLVMAddFunction(e->M, "onnxcc_peak", LLVMFunctionType(e->voidt, pt, 2, 0));
    be_fn_attrs(e, fn);
    LLVMTypeRef fty = LLVMFunctionType(vt, (LLVMTypeRef[]){vt, vt, vt}, 3, 0);
    char name[64];
    snprintf(name, sizeof name, "llvm.fmuladd.v%df32", lanes);
    LLVMValueRef fma = LLVMAddFunction(e->M, name, fty);

    LLVMBasicBlockRef entry = LLVMAppendBasicBlockInContext(e->C, fn, "entry");
    LLVMBasicBlockRef loop = LLVMAppendBasicBlockInContext(e->C, fn, "loop");
    LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(e->C, fn, "done");
    LLVMPositionBuilderAtEnd(e->B, entry);
    LLVMBuildBr(e->B, loop);

    LLVMPositionBuilderAtEnd(e->B, loop);
    LLVMValueRef zero = LLVMConstInt(e->i64, 0, 0), one = LLVMConstInt(e->i64, 1, 0);
    LLVMValueRef i = LLVMBuildPhi(e->B, e->i64, "i");
    LLVMValueRef xs[64], ys[64];
    for (int l = 0; l < lanes; l++) xs[l] = LLVMConstReal(e->f32, 0.9999), ys[l] = LLVMConstReal(e->f32, 1e-4);
    /* x and y are constants, but LLVM cannot fold a chain of n fmuladds of unknown n */
    LLVMValueRef xv = LLVMConstVector(xs, (unsigned)lanes), yv = LLVMConstVector(ys, (unsigned)lanes);
    LLVMValueRef acc[32], next[32];
    for (int c = 0; c < chains; c++) acc[c] = LLVMBuildPhi(e->B, vt, "");
    for (int c = 0; c < chains; c++)
        next[c] = LLVMBuildCall2(e->B, fty, fma, (LLVMValueRef[]){acc[c], xv, yv}, 3, "");
    LLVMValueRef i1 = LLVMBuildAdd(e->B, i, one, "");
    LLVMBuildCondBr(e->B, LLVMBuildICmp(e->B, LLVMIntSLT, i1, LLVMGetParam(fn, 0), ""), loop, done);
    LLVMAddIncoming(i, (LLVMValueRef[]){zero, i1}, (LLVMBasicBlockRef[]){entry, loop}, 2);
    for (int c = 0; c < chains; c++) {
        LLVMValueRef start = LLVMConstVector(ys, (unsigned)lanes);
        LLVMAddIncoming(acc[c], (LLVMValueRef[]){start, next[c]}, (LLVMBasicBlockRef[]){entry, loop}, 2);
    }

    LLVMPositionBuilderAtEnd(e->B, done);
    LLVMValueRef sum = next[0];
    for (int c = 1; c < chains; c++) sum = LLVMBuildFAdd(e->B, sum, next[c], "");
    LLVMSetAlignment(LLVMBuildStore(e->B, sum, LLVMGetParam(fn, 1)), 4);
    LLVMBuildRetVoid(e->B);
}

double be_fma_peak(const Target *like, double seconds) {
    /* this core with the instructions the benchmarked object may use (an x86-64-v3 object's
     * peak is half an AVX-512 core's), whatever objects default to */
    Target t = *like;
    int lanes = t.vector_bytes / 4 < 1 ? 1 : t.vector_bytes / 4;
    int chains = t.vector_bytes >= 64 ? 24 : 12;
    Emitter e = {.t = &t};
    e.C = LLVMContextCreate();
    be_listen_remarks(e.C, NULL);       /* frame-size remarks may be on (facts.c) */
    e.M = LLVMModuleCreateWithNameInContext("peak", e.C);
    e.B = LLVMCreateBuilderInContext(e.C);
    e.f32 = LLVMFloatTypeInContext(e.C);
    e.i64 = LLVMInt64TypeInContext(e.C);
    e.ptr = LLVMPointerTypeInContext(e.C, 0);
    e.voidt = LLVMVoidTypeInContext(e.C);
    LLVMSetTarget(e.M, t.triple);
    build(&e, lanes, chains);
    char *err = NULL;
    if (LLVMVerifyModule(e.M, LLVMReturnStatusAction, &err)) die("peak: invalid module: %s", err);
    LLVMDisposeMessage(err);
    /* no IR optimisation: the loop is already what it should be, and must stay so */
    LLVMTargetMachineRef tm = be_machine(&t, 2);
    LLVMMemoryBufferRef buf;
    err = NULL;
    if (LLVMTargetMachineEmitToMemoryBuffer(tm, e.M, LLVMObjectFile, &err, &buf))
        die("peak: cannot compile the FMA loop: %s", err ? err : "?");
    LLVMDisposeBuilder(e.B);
    LLVMDisposeModule(e.M);
    LLVMContextDispose(e.C);
    LLVMDisposeTargetMachine(tm);
    /* t is the caller's: not freed here */
    be_load_buffer(buf, "peak");
    void *addr = be_loaded_symbol("onnxcc_peak");
    if (!addr) die("peak: onnxcc_peak not found");
    PeakFn fn;
    memcpy(&fn, &(uintptr_t){(uintptr_t)addr}, sizeof fn);

    /* about 1 ms per call, best of the calls in the time given (at least 5) */
    float out[64];
    int64_t n = 1000;
    double t0 = now_s(), dt;
    while ((dt = (fn(n, out), now_s() - t0)) < 1e-3) n *= 2, t0 = now_s();
    double best = dt, end = now_s() + seconds;
    for (int k = 0; k < 5 || now_s() < end; k++) {
        t0 = now_s();
        fn(n, out);
        dt = now_s() - t0;
        if (dt < best) best = dt;
    }
    return 2.0 * lanes * chains * (double)n / best / 1e9;
}
