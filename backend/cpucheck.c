/* cpucheck.c - the guard in front of NAME_run of an x86 object: does the CPU it runs on have
 * the instruction-set extensions the object was compiled for (--cpu, --features)? If not, run
 * returns NAME_ERR_CPU before executing any of them, instead of dying of an illegal
 * instruction. The answer comes from cpuid (and xgetbv: the OS must save the AVX/AVX-512
 * registers too); a yes is kept in one word of the object, so that later calls cost a load, a
 * compare and a call (cpuid traps to the hypervisor in a virtual machine: microseconds). That word is the
 * generated code's only state outside the arena; it only ever goes from 0 to 1. The guard is
 * NAME_run itself, compiled for the architecture's baseline, and calls the real run (built by
 * emit.c, made internal here) only on a yes, so that no instruction the CPU may lack can be
 * scheduled ahead of the test.
 *
 * Which extensions: those of the target's feature list (target.c spells out the x86-64-vN levels
 * and --cpu native's detected features there) that appear in the table below: the vector and
 * bit-manipulation extensions a code generator uses. Others are not checked. */
#include <string.h>

#include "internal.h"

enum { EAX, EBX, ECX, EDX };
#define EXT 0x80000000u
#define XCR_AVX 0x6u                /* SSE and AVX state */
#define XCR_AVX512 0xE6u            /* and opmask, ZMM_Hi256, Hi16_ZMM */

/* LLVM feature name; cpuid leaf, subleaf, register and bit that report it; XCR0 bits the OS
 * must have enabled for its registers. */
static const struct X86Feature {
    const char *name;
    unsigned leaf, sub;
    int reg, bit;
    unsigned xcr;
} features[] = {
    {"sse3", 1, 0, ECX, 0, 0},          {"pclmul", 1, 0, ECX, 1, 0},
    {"ssse3", 1, 0, ECX, 9, 0},         {"fma", 1, 0, ECX, 12, XCR_AVX},
    {"cx16", 1, 0, ECX, 13, 0},         {"sse4.1", 1, 0, ECX, 19, 0},
    {"sse4.2", 1, 0, ECX, 20, 0},       {"movbe", 1, 0, ECX, 22, 0},
    {"popcnt", 1, 0, ECX, 23, 0},       {"aes", 1, 0, ECX, 25, 0},
    {"xsave", 1, 0, ECX, 26, 0},        {"avx", 1, 0, ECX, 28, XCR_AVX},
    {"f16c", 1, 0, ECX, 29, XCR_AVX},   {"rdrnd", 1, 0, ECX, 30, 0},
    {"bmi", 7, 0, EBX, 3, 0},           {"avx2", 7, 0, EBX, 5, XCR_AVX},
    {"bmi2", 7, 0, EBX, 8, 0},          {"avx512f", 7, 0, EBX, 16, XCR_AVX512},
    {"avx512dq", 7, 0, EBX, 17, XCR_AVX512}, {"rdseed", 7, 0, EBX, 18, 0},
    {"adx", 7, 0, EBX, 19, 0},          {"avx512ifma", 7, 0, EBX, 21, XCR_AVX512},
    {"avx512cd", 7, 0, EBX, 28, XCR_AVX512}, {"sha", 7, 0, EBX, 29, 0},
    {"avx512bw", 7, 0, EBX, 30, XCR_AVX512}, {"avx512vl", 7, 0, EBX, 31, XCR_AVX512},
    {"avx512vbmi", 7, 0, ECX, 1, XCR_AVX512}, {"avx512vbmi2", 7, 0, ECX, 6, XCR_AVX512},
    {"gfni", 7, 0, ECX, 8, 0},          {"vaes", 7, 0, ECX, 9, XCR_AVX},
    {"vpclmulqdq", 7, 0, ECX, 10, XCR_AVX}, {"avx512vnni", 7, 0, ECX, 11, XCR_AVX512},
    {"avx512bitalg", 7, 0, ECX, 12, XCR_AVX512}, {"avx512vpopcntdq", 7, 0, ECX, 14, XCR_AVX512},
    {"avx512vp2intersect", 7, 0, EDX, 8, XCR_AVX512}, {"avx512fp16", 7, 0, EDX, 23, XCR_AVX512},
    {"avxvnni", 7, 1, EAX, 4, XCR_AVX}, {"avx512bf16", 7, 1, EAX, 5, XCR_AVX512},
    {"sahf", EXT | 1, 0, ECX, 0, 0},    {"lzcnt", EXT | 1, 0, ECX, 5, 0},
    {"sse4a", EXT | 1, 0, ECX, 6, 0},   {"prfchw", EXT | 1, 0, ECX, 8, 0},
    {"xop", EXT | 1, 0, ECX, 11, XCR_AVX}, {"fma4", EXT | 1, 0, ECX, 16, XCR_AVX},
};
#define NFEATURES (int)(sizeof features / sizeof features[0])

/* Whether the comma-separated list enables feature f ("+avx2"). */
static bool enabled(const char *list, const char *f) {
    size_t n = strlen(f);
    for (const char *s = list; s && *s;) {
        const char *end = strchr(s, ',');
        size_t len = end ? (size_t)(end - s) : strlen(s);
        if (len == n + 1 && s[0] == '+' && !memcmp(s + 1, f, n)) return true;
        s = end ? end + 1 : NULL;
    }
    return false;
}

static bool is_x86(const char *triple) {
    return !strncmp(triple, "x86_64", 6) || !strncmp(triple, "i386", 4) || !strncmp(triple, "i686", 4);
}

/* What a target's object requires: per cpuid (leaf, subleaf) the four register masks. */
typedef struct Need {
    unsigned leaf[4], sub[4], mask[4][4];
    int n;
    unsigned xcr, max_basic, max_ext;
} Need;

static Need needs(const Target *t) {
    Need nd = {0};
    if (!is_x86(t->triple)) return nd;
    for (int i = 0; i < NFEATURES; i++) {
        const struct X86Feature *f = &features[i];
        if (!enabled(t->features, f->name)) continue;
        int j = 0;
        while (j < nd.n && !(nd.leaf[j] == f->leaf && nd.sub[j] == f->sub)) j++;
        if (j == nd.n) {
            if (nd.n == 4) die("cpucheck: more than 4 cpuid leaves");
            nd.leaf[j] = f->leaf, nd.sub[j] = f->sub, nd.n++;
        }
        nd.mask[j][f->reg] |= 1u << f->bit;
        nd.xcr |= f->xcr;
        if (f->leaf & EXT) { if (f->leaf > nd.max_ext) nd.max_ext = f->leaf; }
        else if (f->leaf > nd.max_basic) nd.max_basic = f->leaf;
    }
    return nd;
}

static LLVMValueRef cpuid(Emitter *e, unsigned leaf, unsigned sub) {
    LLVMTypeRef r4[4] = {e->i32, e->i32, e->i32, e->i32};
    LLVMTypeRef st = LLVMStructTypeInContext(e->C, r4, 4, 0);
    LLVMTypeRef args[2] = {e->i32, e->i32};
    LLVMTypeRef fty = LLVMFunctionType(st, args, 2, 0);
    static const char asm_text[] = "cpuid";
    static const char cons[] = "={ax},={bx},={cx},={dx},{ax},{cx},~{dirflag},~{fpsr},~{flags}";
    LLVMValueRef fn = LLVMGetInlineAsm(fty, asm_text, strlen(asm_text), cons, strlen(cons), 0, 0,
                                       LLVMInlineAsmDialectATT, 0);
    LLVMValueRef a[2] = {LLVMConstInt(e->i32, leaf, 0), LLVMConstInt(e->i32, sub, 0)};
    return LLVMBuildCall2(e->B, fty, fn, a, 2, "");
}

/* Continue in a fresh block if ok, else return false from the function. */
static void or_no(Emitter *e, LLVMValueRef fn, LLVMValueRef ok, LLVMBasicBlockRef no) {
    LLVMBasicBlockRef next = LLVMAppendBasicBlockInContext(e->C, fn, "");
    LLVMBuildCondBr(e->B, ok, next, no);
    LLVMPositionBuilderAtEnd(e->B, next);
}

static LLVMValueRef all_set(Emitter *e, LLVMValueRef v, unsigned mask) {
    LLVMValueRef m = LLVMConstInt(e->i32, mask, 0);
    return LLVMBuildICmp(e->B, LLVMIntEQ, LLVMBuildAnd(e->B, v, m, ""), m, "");
}

/* bool cpu_has(void): the cpuid/xgetbv test of nd, as an internal function. */
static LLVMValueRef has_fn(Emitter *e, const Need *nd) {
    LLVMTypeRef fty = LLVMFunctionType(e->i1, NULL, 0, 0);
    LLVMValueRef fn = LLVMAddFunction(e->M, "cpu_has", fty);
    LLVMSetLinkage(fn, LLVMInternalLinkage);
    be_enum_attr(e, fn, LLVMAttributeFunctionIndex, "noinline");
    LLVMBasicBlockRef saved = LLVMGetInsertBlock(e->B);
    LLVMPositionBuilderAtEnd(e->B, LLVMAppendBasicBlockInContext(e->C, fn, "entry"));
    LLVMBasicBlockRef no = LLVMAppendBasicBlockInContext(e->C, fn, "no");
    /* a leaf above the highest one the CPU has reads as another leaf: ask first */
    if (nd->max_basic)
        or_no(e, fn, LLVMBuildICmp(e->B, LLVMIntUGE, LLVMBuildExtractValue(e->B, cpuid(e, 0, 0), EAX, ""),
                                   LLVMConstInt(e->i32, nd->max_basic, 0), ""), no);
    if (nd->max_ext)
        or_no(e, fn, LLVMBuildICmp(e->B, LLVMIntUGE, LLVMBuildExtractValue(e->B, cpuid(e, EXT, 0), EAX, ""),
                                   LLVMConstInt(e->i32, nd->max_ext, 0), ""), no);
    LLVMValueRef ok = LLVMConstInt(e->i1, 1, 0);
    for (int j = 0; j < nd->n; j++) {
        LLVMValueRef r = cpuid(e, nd->leaf[j], nd->sub[j]);
        for (int reg = 0; reg < 4; reg++)
            if (nd->mask[j][reg])
                ok = LLVMBuildAnd(e->B, ok, all_set(e, LLVMBuildExtractValue(e->B, r, (unsigned)reg, ""), nd->mask[j][reg]), "");
    }
    if (nd->xcr) {
        /* xgetbv faults unless the OS enabled XSAVE (OSXSAVE, leaf 1 ECX bit 27) */
        LLVMValueRef r1 = cpuid(e, 1, 0);
        ok = LLVMBuildAnd(e->B, ok, all_set(e, LLVMBuildExtractValue(e->B, r1, ECX, ""), 1u << 27), "");
        or_no(e, fn, ok, no);
        LLVMTypeRef r2[2] = {e->i32, e->i32};
        LLVMTypeRef st = LLVMStructTypeInContext(e->C, r2, 2, 0);
        LLVMTypeRef at[1] = {e->i32};
        LLVMTypeRef xty = LLVMFunctionType(st, at, 1, 0);
        static const char asm_text[] = "xgetbv";
        static const char cons[] = "={ax},={dx},{cx},~{dirflag},~{fpsr},~{flags}";
        LLVMValueRef x = LLVMGetInlineAsm(xty, asm_text, strlen(asm_text), cons, strlen(cons), 0, 0,
                                          LLVMInlineAsmDialectATT, 0);
        LLVMValueRef zero = LLVMConstInt(e->i32, 0, 0);
        LLVMValueRef xcr0 = LLVMBuildExtractValue(e->B, LLVMBuildCall2(e->B, xty, x, &zero, 1, ""), 0, "");
        ok = all_set(e, xcr0, nd->xcr);
    }
    LLVMBuildRet(e->B, ok);
    LLVMPositionBuilderAtEnd(e->B, no);
    LLVMBuildRet(e->B, LLVMConstInt(e->i1, 0, 0));
    LLVMPositionBuilderAtEnd(e->B, saved);
    return fn;
}

/* The function attributes of code that must run on any CPU of the architecture: the test
 * itself and the guard around it (LLVM would otherwise use, say, BMI's andn for its masks). */
static void baseline(Emitter *e, LLVMValueRef fn) {
    const char *cpu = e->t->ptr_bits == 64 ? "x86-64" : "i686";
    LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex,
                            LLVMCreateStringAttribute(e->C, "target-cpu", 10, cpu, (unsigned)strlen(cpu)));
    LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex,
                            LLVMCreateStringAttribute(e->C, "target-features", 15, "", 0));
    be_enum_attr(e, fn, LLVMAttributeFunctionIndex, "nounwind");
}

/* The one word of state: the guard's "checked" (0, then 1) or the chosen level (0 until
 * chosen, then level + 1). Relaxed atomics: racing first calls each ask cpuid and store the
 * same value. */
static LLVMValueRef state_word(Emitter *e, const char *name) {
    LLVMValueRef w = LLVMAddGlobal(e->M, e->i32, name);
    LLVMSetInitializer(w, LLVMConstInt(e->i32, 0, 0));
    LLVMSetLinkage(w, LLVMInternalLinkage);
    LLVMSetAlignment(w, 4);
    return w;
}

static LLVMValueRef atomic_load(Emitter *e, LLVMValueRef w) {
    LLVMValueRef v = LLVMBuildLoad2(e->B, e->i32, w, "");
    LLVMSetOrdering(v, LLVMAtomicOrderingMonotonic);
    LLVMSetAlignment(v, 4);
    return v;
}

static void atomic_store(Emitter *e, LLVMValueRef v, LLVMValueRef w) {
    LLVMValueRef st = LLVMBuildStore(e->B, v, w);
    LLVMSetOrdering(st, LLVMAtomicOrderingMonotonic);
    LLVMSetAlignment(st, 4);
}

/* return callee(fn's parameters...), a tail call. */
static void forward(Emitter *e, LLVMValueRef fn, LLVMValueRef callee) {
    LLVMValueRef args[6];           /* NAME_run's 3 or NAME_run_w's 4, and a parallel-for's 2 */
    unsigned n = LLVMCountParams(fn);
    if (n > 6) die("run has %u parameters", n);
    for (unsigned i = 0; i < n; i++) args[i] = LLVMGetParam(fn, i);
    LLVMValueRef call = LLVMBuildCall2(e->B, LLVMGlobalGetValueType(callee), callee, args, n, "");
    LLVMSetTailCall(call, 1);
    LLVMBuildRet(e->B, call);
}

LLVMValueRef be_cpu_guard(Emitter *e, LLVMValueRef run, int code) {
    Need nd = needs(e->t);
    if (nd.n == 0) return run;
    /* run becomes the internal body; a new NAME_run, compiled for the baseline, asks first */
    size_t len;
    const char *name = LLVMGetValueName2(run, &len);
    char *pub = arena_printf(e->p->arena, "%.*s", (int)len, name);
    LLVMSetValueName2(run, "run_body", 8);
    LLVMSetLinkage(run, LLVMInternalLinkage);
    be_enum_attr(e, run, LLVMAttributeFunctionIndex, "noinline");
    LLVMValueRef fn = LLVMAddFunction(e->M, pub, LLVMGlobalGetValueType(run));
    baseline(e, fn);
    LLVMBasicBlockRef saved = LLVMGetInsertBlock(e->B);
    LLVMPositionBuilderAtEnd(e->B, LLVMAppendBasicBlockInContext(e->C, fn, "entry"));

    LLVMValueRef has = has_fn(e, &nd);
    baseline(e, has);
    LLVMValueRef seen = state_word(e, "cpu_checked");
    LLVMBasicBlockRef ask = LLVMAppendBasicBlockInContext(e->C, fn, "ask");
    LLVMBasicBlockRef yes = LLVMAppendBasicBlockInContext(e->C, fn, "yes");
    LLVMBasicBlockRef no = LLVMAppendBasicBlockInContext(e->C, fn, "no");
    LLVMBasicBlockRef go = LLVMAppendBasicBlockInContext(e->C, fn, "go");
    LLVMValueRef v = atomic_load(e, seen);
    LLVMBuildCondBr(e->B, LLVMBuildICmp(e->B, LLVMIntEQ, v, LLVMConstInt(e->i32, 1, 0), ""), go, ask);
    LLVMPositionBuilderAtEnd(e->B, ask);
    LLVMBuildCondBr(e->B, LLVMBuildCall2(e->B, LLVMGlobalGetValueType(has), has, NULL, 0, ""), yes, no);
    LLVMPositionBuilderAtEnd(e->B, yes);
    atomic_store(e, LLVMConstInt(e->i32, 1, 0), seen);
    LLVMBuildBr(e->B, go);
    LLVMPositionBuilderAtEnd(e->B, no);
    LLVMBuildRet(e->B, LLVMConstInt(e->i32, (unsigned long long)code, 0));
    LLVMPositionBuilderAtEnd(e->B, go);
    forward(e, fn, run);
    LLVMPositionBuilderAtEnd(e->B, saved);
    return fn;
}

/* i32 choose(void): the highest level whose features the CPU has, plus one; 0 for none. */
static LLVMValueRef choose_fn(Emitter *es, LLVMValueRef *has, int n) {
    Emitter *e = &es[0];
    LLVMValueRef fn = LLVMAddFunction(e->M, "isa_choose", LLVMFunctionType(e->i32, NULL, 0, 0));
    LLVMSetLinkage(fn, LLVMInternalLinkage);
    baseline(e, fn);
    be_enum_attr(e, fn, LLVMAttributeFunctionIndex, "noinline");
    LLVMPositionBuilderAtEnd(e->B, LLVMAppendBasicBlockInContext(e->C, fn, "entry"));
    for (int l = n - 1; l >= 0; l--) {
        LLVMBasicBlockRef yes = LLVMAppendBasicBlockInContext(e->C, fn, "yes");
        LLVMBasicBlockRef next = LLVMAppendBasicBlockInContext(e->C, fn, "next");
        LLVMBuildCondBr(e->B, LLVMBuildCall2(e->B, LLVMGlobalGetValueType(has[l]), has[l], NULL, 0, ""), yes, next);
        LLVMPositionBuilderAtEnd(e->B, yes);
        LLVMBuildRet(e->B, LLVMConstInt(e->i32, (unsigned long long)l + 1, 0));
        LLVMPositionBuilderAtEnd(e->B, next);
    }
    LLVMBuildRet(e->B, LLVMConstInt(e->i32, 0, 0));
    return fn;
}

/* v = the level word; if 0, v = choose() and, if not 0, stored. Leaves the builder where v
 * is known; `none` is where a CPU with no level goes. */
static LLVMValueRef chosen(Emitter *e, LLVMValueRef fn, LLVMValueRef word, LLVMValueRef choose, LLVMBasicBlockRef none) {
    LLVMBasicBlockRef entry = LLVMGetInsertBlock(e->B);
    LLVMBasicBlockRef ask = LLVMAppendBasicBlockInContext(e->C, fn, "ask");
    LLVMBasicBlockRef keep = LLVMAppendBasicBlockInContext(e->C, fn, "keep");
    LLVMBasicBlockRef go = LLVMAppendBasicBlockInContext(e->C, fn, "go");
    LLVMValueRef v = atomic_load(e, word);
    LLVMBuildCondBr(e->B, LLVMBuildICmp(e->B, LLVMIntEQ, v, LLVMConstInt(e->i32, 0, 0), ""), ask, go);
    LLVMPositionBuilderAtEnd(e->B, ask);
    LLVMValueRef c = LLVMBuildCall2(e->B, LLVMGlobalGetValueType(choose), choose, NULL, 0, "");
    LLVMBuildCondBr(e->B, LLVMBuildICmp(e->B, LLVMIntEQ, c, LLVMConstInt(e->i32, 0, 0), ""), none, keep);
    LLVMPositionBuilderAtEnd(e->B, keep);
    atomic_store(e, c, word);
    LLVMBuildBr(e->B, go);
    LLVMPositionBuilderAtEnd(e->B, go);
    LLVMValueRef phi = LLVMBuildPhi(e->B, e->i32, "level");
    LLVMValueRef vals[2] = {v, c};
    LLVMBasicBlockRef from[2] = {entry, keep};
    LLVMAddIncoming(phi, vals, from, 2);
    return phi;
}

/* int NAME_isa(int level): level < 0 asks which level run() uses (choosing it as run() would),
 * -1 if this CPU has none; level 0..n-1 makes run() use that level from now on, if this CPU
 * has its features (returns level), else changes nothing and returns -1. */
static LLVMValueRef isa_fn(Emitter *es, LLVMValueRef *has, int n, LLVMValueRef word, LLVMValueRef choose) {
    Emitter *e = &es[0];
    LLVMTypeRef i32 = e->i32;
    LLVMValueRef fn = LLVMAddFunction(e->M, arena_printf(e->p->arena, "%s_isa", e->p->name), LLVMFunctionType(i32, &i32, 1, 0));
    baseline(e, fn);
    LLVMValueRef arg = LLVMGetParam(fn, 0);
    LLVMPositionBuilderAtEnd(e->B, LLVMAppendBasicBlockInContext(e->C, fn, "entry"));
    LLVMBasicBlockRef query = LLVMAppendBasicBlockInContext(e->C, fn, "query");
    LLVMBasicBlockRef set = LLVMAppendBasicBlockInContext(e->C, fn, "set");
    LLVMBasicBlockRef no = LLVMAppendBasicBlockInContext(e->C, fn, "no");
    LLVMBuildCondBr(e->B, LLVMBuildICmp(e->B, LLVMIntSLT, arg, LLVMConstInt(i32, 0, 0), ""), query, set);
    LLVMPositionBuilderAtEnd(e->B, query);
    LLVMValueRef v = chosen(e, fn, word, choose, no);
    LLVMBuildRet(e->B, LLVMBuildSub(e->B, v, LLVMConstInt(i32, 1, 0), ""));
    LLVMPositionBuilderAtEnd(e->B, set);
    LLVMValueRef sw = LLVMBuildSwitch(e->B, arg, no, (unsigned)n);
    for (int l = 0; l < n; l++) {
        LLVMBasicBlockRef b = LLVMAppendBasicBlockInContext(e->C, fn, "level");
        LLVMBasicBlockRef ok = LLVMAppendBasicBlockInContext(e->C, fn, "ok");
        LLVMAddCase(sw, LLVMConstInt(i32, (unsigned long long)l, 0), b);
        LLVMPositionBuilderAtEnd(e->B, b);
        LLVMBuildCondBr(e->B, LLVMBuildCall2(e->B, LLVMGlobalGetValueType(has[l]), has[l], NULL, 0, ""), ok, no);
        LLVMPositionBuilderAtEnd(e->B, ok);
        atomic_store(e, LLVMConstInt(i32, (unsigned long long)l + 1, 0), word);
        LLVMBuildRet(e->B, LLVMConstInt(i32, (unsigned long long)l, 0));
    }
    LLVMPositionBuilderAtEnd(e->B, no);
    LLVMBuildRet(e->B, LLVMConstInt(i32, (unsigned long long)-1, 1));
    return fn;
}

void be_entry_attrs(Emitter *e, LLVMValueRef fn) {
    if (is_x86(e->t->triple)) baseline(e, fn);
    else be_fn_attrs(e, fn);
}

LLVMValueRef be_cpu_dispatch(Emitter *es, LLVMValueRef *runs, int n, int code, LLVMValueRef *isa, const char *name) {
    Emitter *e = &es[0];
    LLVMBasicBlockRef saved = LLVMGetInsertBlock(e->B);
    LLVMValueRef has[MAX_ISAS];
    for (int l = 0; l < n; l++) {
        Need nd = needs(es[l].t);
        if (nd.n == 0) die("cpucheck: ISA level %s checks no feature", es[l].t->isa);
        has[l] = has_fn(e, &nd);
        baseline(e, has[l]);
        LLVMSetLinkage(runs[l], LLVMInternalLinkage);
        be_enum_attr(e, runs[l], LLVMAttributeFunctionIndex, "noinline");
    }
    LLVMValueRef word = state_word(e, "isa_level"), choose = choose_fn(es, has, n);
    *isa = isa_fn(es, has, n, word, choose);
    LLVMTypeRef fty = LLVMGlobalGetValueType(runs[0]);
    LLVMValueRef fn = LLVMAddFunction(e->M, name, fty);
    baseline(e, fn);
    LLVMPositionBuilderAtEnd(e->B, LLVMAppendBasicBlockInContext(e->C, fn, "entry"));
    LLVMBasicBlockRef none = LLVMAppendBasicBlockInContext(e->C, fn, "none");
    LLVMValueRef v = chosen(e, fn, word, choose, none);
    LLVMValueRef sw = LLVMBuildSwitch(e->B, v, none, (unsigned)n);
    for (int l = 0; l < n; l++) {
        LLVMBasicBlockRef b = LLVMAppendBasicBlockInContext(e->C, fn, "call");
        LLVMAddCase(sw, LLVMConstInt(e->i32, (unsigned long long)l + 1, 0), b);
        LLVMPositionBuilderAtEnd(e->B, b);
        forward(e, fn, runs[l]);
    }
    LLVMPositionBuilderAtEnd(e->B, none);
    LLVMBuildRet(e->B, LLVMConstInt(e->i32, (unsigned long long)code, 0));
    LLVMPositionBuilderAtEnd(e->B, saved);
    return fn;
}
