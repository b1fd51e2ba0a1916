/* emit.c - the last stage of the pipeline: the bufferized kernel IR becomes one LLVM module,
 * is optimised with LLVM's standard -O pipeline and written as an object, assembly or IR text.
 *
 * The module holds one internal function per kernel (kernel.c), the math helpers they need
 * (math.c), the constants as internal read-only globals (in the section of --weights-section
 * if given; with --emit-weights none: they are in a blob, weights.c, and NAME_run_w takes it
 * as a fourth argument in place of NAME_run; in an x86-64 ELF object the large ones are one
 * hidden symbol whose section elf.c adds, and a big model's kernels are split with a side
 * module compiled on a thread of its own: see "the side module" below), and exactly two
 * public symbols:
 *   int NAME_run(const void *const *inputs, void *const *outputs, void *arena)
 *     checks its arguments and calls the kernels in order, giving each the storage of its
 *     params: inputs[i] / outputs[i], a constant global, or arena + offset for temporaries;
 *     control kernels (If, Loop, Scan) become branches and loops around the calls;
 *   const onnxcc_model_info NAME_info
 *     the description of runtime/model.h.in, laid out with the target's pointer and size_t
 *     width so that it matches what the target's C compiler makes of the header.
 * Everything else is internal so that several models link into one program. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <llvm-c/Analysis.h>
#include <llvm-c/Transforms/PassBuilder.h>

#include "internal.h"

void be_enum_attr(Emitter *e, LLVMValueRef fn, unsigned idx, const char *name) {
    unsigned kind = LLVMGetEnumAttributeKindForName(name, strlen(name));
    if (!kind) die("no LLVM attribute %s", name);
    LLVMAddAttributeAtIndex(fn, idx, LLVMCreateEnumAttribute(e->C, kind, 0));
}

static void str_attr(Emitter *e, LLVMValueRef fn, const char *k, const char *v) {
    LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex,
                            LLVMCreateStringAttribute(e->C, k, (unsigned)strlen(k), v, (unsigned)strlen(v)));
}

void be_fn_attrs(Emitter *e, LLVMValueRef fn) {
    be_enum_attr(e, fn, LLVMAttributeFunctionIndex, "nounwind");
    /* The optimizer's cost models read these, not the TargetMachine: without them the
     * vectoriser would assume a baseline x86-64 (SSE2). */
    str_attr(e, fn, "target-cpu", e->t->cpu);
    if (*e->t->features) str_attr(e, fn, "target-features", e->t->features);
    if (e->t->vector_bytes == 64) str_attr(e, fn, "prefer-vector-width", "512");
    if (e->p && e->p->tsan) be_enum_attr(e, fn, LLVMAttributeFunctionIndex, "sanitize_thread");
}

/* ---- constants ---- */

static LLVMValueRef private_const(Emitter *e, LLVMValueRef init, const char *name, unsigned align) {
    LLVMValueRef g = LLVMAddGlobal(e->M, LLVMTypeOf(init), name);
    LLVMSetInitializer(g, init);
    LLVMSetGlobalConstant(g, 1);
    LLVMSetLinkage(g, LLVMPrivateLinkage);
    LLVMSetUnnamedAddress(g, LLVMGlobalUnnamedAddr);
    if (align) LLVMSetAlignment(g, align);
    return g;
}

static LLVMValueRef cstring(Emitter *e, const char *s) {
    return private_const(e, LLVMConstStringInContext2(e->C, s, strlen(s), 0), "str", 1);
}

/* loads assume element alignment only; on a 64-bit host a cache line keeps vectors whole, on
 * a 32-bit target 64 left up to 63 bytes of padding after each constant (the KWS model's
 * eight one-byte zero points took 512 bytes of flash on the M4), so there 8, and a constant
 * of fewer bytes the largest power of two it fills (a zero point: 1; at 8 the KWS model's
 * took 60 bytes) */
static unsigned const_align(const Emitter *e, size_t n) {
    unsigned align = e->t->ptr_bits == 64 ? 64 : 8;
    while (e->t->ptr_bits == 32 && align > 1 && n < align) align /= 2;
    return align;
}

/* The constants already in the module, shared by the emitters of an object's ISA levels and
 * by the kernels of one level: a weight that lowering laid out alike for both levels (most
 * are) is one global, read by both levels' kernels; and the copies of a layer that row bands
 * make (passes/band_rows.c) pack the same weights into blocks of the same bytes, one global. */
typedef struct ConstPool {
    const void **data;
    size_t *size;
    LLVMValueRef *g;
    int64_t *off;                   /* its offset in the blob, or -1: a global of its own */
    int n, cap;
    /* blob mode (x86-64 ELF objects): constants of BLOB_MIN bytes or more are not globals of
     * the module but parts of one external symbol, `blob` (declared on first use), whose
     * bytes elf.c's join adds to the object LLVM writes: LLVM's object writer took ~9 ms a
     * megabyte of constant data (VGG-16: 6.4 s of an 8 s compile). Smaller constants stay
     * globals, whose loads LLVM can fold. */
    bool blob_mode;
    LLVMValueRef blob;
    const char *blob_name;
    size_t blob_size;
} ConstPool;

enum { BLOB_MIN = 4096 };

static void pool_add(ConstPool *cp, const void *data, size_t n, LLVMValueRef g, int64_t off) {
    if (cp->n == cp->cap) {
        cp->cap = cp->cap ? 2 * cp->cap : 64;
        cp->data = realloc(cp->data, sizeof *cp->data * (size_t)cp->cap);
        cp->size = realloc(cp->size, sizeof *cp->size * (size_t)cp->cap);
        cp->g = realloc(cp->g, sizeof *cp->g * (size_t)cp->cap);
        cp->off = realloc(cp->off, sizeof *cp->off * (size_t)cp->cap);
        if (!cp->data || !cp->size || !cp->g || !cp->off) die("out of memory");
    }
    cp->data[cp->n] = data, cp->size[cp->n] = n, cp->g[cp->n] = g, cp->off[cp->n++] = off;
}

/* &blob[off] (blob mode): the symbol hidden, so LLVM addresses it PC-relative, as it would
 * a constant of the module */
static LLVMValueRef blob_at(Emitter *e, int64_t off) {
    ConstPool *cp = e->pool;
    if (!cp->blob) {
        cp->blob = LLVMAddGlobal(e->M, LLVMArrayType2(e->i8, 0), cp->blob_name);
        LLVMSetGlobalConstant(cp->blob, 1);
        LLVMSetVisibility(cp->blob, LLVMHiddenVisibility);
        LLVMSetAlignment(cp->blob, 64);
    }
    LLVMValueRef ix = LLVMConstInt(e->i64, (unsigned long long)off, 0);
    return LLVMConstInBoundsGEP2(e->i8, cp->blob, &ix, 1);
}

/* The global of n bytes of constant data (n 0: one byte). */
static LLVMValueRef const_global(Emitter *e, const void *data, size_t n, const char *name, unsigned align) {
    static const char zero[1];
    ConstPool *cp = e->pool;
    if (cp && cp->blob_mode && n >= BLOB_MIN) {
        for (int i = 0; i < cp->n; i++)
            if (cp->size[i] == n && cp->off[i] >= 0 && cp->off[i] % align == 0 && !memcmp(cp->data[i], data, n))
                return blob_at(e, cp->off[i]);
        int64_t off = (int64_t)((cp->blob_size + align - 1) / align * align);
        cp->blob_size = (size_t)off + n;
        pool_add(cp, data, n, NULL, off);
        return blob_at(e, off);
    }
    if (cp && n)
        for (int i = 0; i < cp->n; i++)
            if (cp->size[i] == n && cp->off[i] < 0 && !memcmp(cp->data[i], data, n)) {
                if (LLVMGetAlignment(cp->g[i]) < align) LLVMSetAlignment(cp->g[i], align);
                return cp->g[i];
            }
    LLVMValueRef init = LLVMConstStringInContext2(e->C, n ? data : zero, n ? n : 1, 1);
    LLVMValueRef g = private_const(e, init, arena_printf(e->p->arena, "const.%s", name), align);
    if (e->p->weights_section) {    /* --weights-section */
        LLVMSetSection(g, e->p->weights_section);
        /* not mergeable: LLVM would put small constants in sections of their own of the same
         * name, each aligned, and the linked section would be larger than the object says */
        LLVMSetUnnamedAddress(g, LLVMNoUnnamedAddr);
    }
    if (cp && n) pool_add(cp, data, n, g, -1);
    return g;
}

static LLVMValueRef const_buf(Emitter *e, Buf *b) {
    size_t n;
    const void *d = be_const_bytes(e->p, b, &n);
    if (!b->data && n) die("constant buffer %s has no data", b->name);
    return const_global(e, d, n, b->name, const_align(e, n));
}

/* ---- constant blocks ----
 * In the kernels of a quantized model on a microcontroller (be_small_quantized), the
 * constants that only one kernel reads - a conv's weights, biases and requantisation
 * multipliers - are laid out in one global, the kernel's block, which the kernel takes as
 * one pointer and indexes at constant offsets: each call from NAME_run materialised every
 * constant's address (RV32 lui+addi, Cortex-M4 movw+movt: 8 bytes each). Kernels merged by
 * mergefunc have blocks of the same layout (same shapes), so stay one body. One-element
 * constants (zero points, which the outlined epilogues fold, and then deadargelim drops)
 * stay apart. The bytes loaded are the same, so are the results. KWS int8 flash: RV32 -164
 * bytes, Cortex-M4 -156 (a conv call 36 -> 20 bytes on RV32). */
static void plan_blocks(Emitter *e) {
    Program *p = e->p;
    e->kblock = ARENA_ARRAY(p->arena, LLVMValueRef, p->nkernels + 1);
    e->block_at = ARENA_ARRAY(p->arena, int64_t, p->nbufs + 1);
    for (int i = 0; i < p->nbufs; i++) e->block_at[i] = -1;
    if (p->weights_external) return;
    int *users = ARENA_ARRAY(p->arena, int, p->nbufs + 1);
    for (int i = 0; i < p->nkernels; i++) {
        Kernel *k = p->kernels[i];
        for (int j = 0; j < k->nparams; j++) users[kir_root(k->params[j])->id]++;
        if (k->cond) users[kir_root(k->cond)->id]++;
        if (k->trip) users[kir_root(k->trip)->id]++;
    }
    for (int i = 0; i < p->nkernels; i++) {
        Kernel *k = p->kernels[i];
        if (k->dead || k->ctl || k->id != i || !be_small_quantized(e, k)) continue;
        Buf **in = ARENA_ARRAY(p->arena, Buf *, k->nparams + 1);
        int n = 0;
        for (int j = 0; j < k->nparams; j++) {
            Buf *r = kir_root(k->params[j]);
            if (r->kind == B_CONST && r->data && kir_numel(r) > 1 && users[r->id] == 1 && !r->nibbles) {
                /* by decreasing alignment, so that no padding is needed between them */
                int at = n++;
                while (at > 0 && const_align(e, kir_nbytes(in[at - 1])) < const_align(e, kir_nbytes(r))) {
                    in[at] = in[at - 1];
                    at--;
                }
                in[at] = r;
            }
        }
        if (n < 2) continue;
        size_t size = 0;
        int64_t *at = ARENA_ARRAY(p->arena, int64_t, n);
        for (int j = 0; j < n; j++) {
            size_t a = const_align(e, kir_nbytes(in[j]));
            size = (size + a - 1) / a * a;
            at[j] = (int64_t)size;
            size += kir_nbytes(in[j]);
        }
        char *data = ARENA_ARRAY(p->arena, char, size);
        for (int j = 0; j < n; j++) {
            memcpy(data + at[j], in[j]->data, kir_nbytes(in[j]));
            e->block_at[in[j]->id] = at[j];
        }
        e->kblock[i] = const_global(e, data, size, k->name, const_align(e, kir_nbytes(in[0])));
    }
}

bool be_in_block(const Emitter *e, Buf *b) { return e->block_at[kir_root(b)->id] >= 0; }

/* ---- NAME_run ---- */

typedef struct RunState {
    LLVMValueRef in, out, arena;
    LLVMValueRef weights;           /* --emit-weights: NAME_run_w's blob, else NULL */
    LLVMValueRef pf, ctx;           /* the caller's parallel-for and its context (NULL: none) */
    LLVMValueRef argv;              /* an array of pointers: a parallel kernel's parameters */
    LLVMValueRef *ptr;              /* by root buffer id: its storage pointer, once computed */
} RunState;

static LLVMValueRef io_ptr(Emitter *e, LLVMValueRef arr, int i) {
    LLVMValueRef ix = LLVMConstInt(e->idx, (unsigned long long)i, 0);
    LLVMValueRef slot = LLVMBuildInBoundsGEP2(e->B, e->ptr, arr, &ix, 1, "");
    return LLVMBuildLoad2(e->B, e->ptr, slot, "");
}

static LLVMValueRef storage(Emitter *e, RunState *rs, Buf *b) {
    Buf *r = kir_root(b);
    if (rs->ptr[r->id]) return rs->ptr[r->id];
    LLVMValueRef v;
    switch (r->kind) {
    case B_INPUT: v = io_ptr(e, rs->in, r->io_index); break;
    case B_OUTPUT: v = io_ptr(e, rs->out, r->io_index); break;
    case B_CONST: {
        if (be_in_block(e, r)) { v = NULL; break; }    /* its kernel's block holds it */
        if (!rs->weights) { v = const_buf(e, r); break; }
        int64_t at = e->p->weight_offset[r->id];        /* --emit-weights: in the blob */
        if (at < 0) die("constant %s is not in the weights blob", r->name);
        LLVMValueRef off = LLVMConstInt(e->idx, (unsigned long long)at, 0);
        v = LLVMBuildInBoundsGEP2(e->B, e->i8, rs->weights, &off, 1, r->name);
        break;
    }
    case B_TEMP: {
        if (r->offset < 0) die("temporary %s has no arena offset (bufferize did not run?)", r->name);
        LLVMValueRef off = LLVMConstInt(e->idx, (unsigned long long)r->offset, 0);
        v = LLVMBuildInBoundsGEP2(e->B, e->i8, rs->arena, &off, 1, r->name);
        break;
    }
    default: die("buffer %s: kind %d", r->name, r->kind);
    }
    return rs->ptr[r->id] = v;
}

/* if (bad) return code; */
static void check(Emitter *e, LLVMValueRef fn, LLVMValueRef bad, int code) {
    LLVMBasicBlockRef fail = LLVMAppendBasicBlockInContext(e->C, fn, "fail");
    LLVMBasicBlockRef ok = LLVMAppendBasicBlockInContext(e->C, fn, "ok");
    LLVMBuildCondBr(e->B, bad, fail, ok);
    LLVMPositionBuilderAtEnd(e->B, fail);
    LLVMBuildRet(e->B, LLVMConstInt(e->i32, (unsigned long long)code, 0));
    LLVMPositionBuilderAtEnd(e->B, ok);
}

/* --profile: NAME_profile, one i64 per kernel, accumulates the clock's ticks spent in that
 * kernel's call (read before and after it): llvm.readcyclecounter on x86 (rdtsc), elsewhere
 * NAME_profile_clock(), which the application defines (LLVM has no cycle counter for
 * Cortex-M; a firmware reads SysTick or DWT). NAME_profile_names and NAME_profile_macs
 * (kir_kernel_cost) say which kernel each counter is. `onnxcc bench` finds the array through
 * the loader; an object compiled without --profile has none of these and no clock read. */
typedef struct Profile {
    LLVMValueRef counters, readfn;
    LLVMTypeRef readty;
} Profile;

static Profile profile_init(Emitter *e) {
    Program *p = e->p;
    Profile pr;
    LLVMTypeRef at = LLVMArrayType2(e->i64, (uint64_t)(p->nkernels > 0 ? p->nkernels : 1));
    pr.counters = LLVMAddGlobal(e->M, at, arena_printf(p->arena, "%s_profile", p->name));
    LLVMSetInitializer(pr.counters, LLVMConstNull(at));
    LLVMSetAlignment(pr.counters, 64);
    pr.readty = LLVMFunctionType(e->i64, NULL, 0, 0);
    const char *tr = e->t->triple;
    bool x86 = !strncmp(tr, "x86_64", 6) || !strncmp(tr, "i386", 4) || !strncmp(tr, "i686", 4);
    pr.readfn = LLVMAddFunction(e->M, x86 ? "llvm.readcyclecounter" : arena_printf(p->arena, "%s_profile_clock", p->name), pr.readty);
    /* which kernel each counter is, and its multiply-accumulates */
    LLVMTypeRef nt = LLVMArrayType2(e->ptr, (uint64_t)(p->nkernels > 0 ? p->nkernels : 1));
    LLVMTypeRef mt = LLVMArrayType2(e->i64, (uint64_t)(p->nkernels > 0 ? p->nkernels : 1));
    LLVMValueRef *names = ARENA_ARRAY(p->arena, LLVMValueRef, p->nkernels + 1);
    LLVMValueRef *macs = ARENA_ARRAY(p->arena, LLVMValueRef, p->nkernels + 1);
    for (int i = 0; i < p->nkernels; i++) {
        int64_t m, bytes;
        kir_kernel_work(p, i, &m, &bytes);
        names[i] = LLVMBuildGlobalStringPtr(e->B, p->kernels[i]->name, "");
        macs[i] = LLVMConstInt(e->i64, (unsigned long long)m, 0);
    }
    if (!p->nkernels) {
        names[0] = LLVMConstNull(e->ptr);
        macs[0] = LLVMConstInt(e->i64, 0, 0);
    }
    int n = p->nkernels > 0 ? p->nkernels : 1;
    LLVMValueRef gn = LLVMAddGlobal(e->M, nt, arena_printf(p->arena, "%s_profile_names", p->name));
    LLVMSetInitializer(gn, LLVMConstArray2(e->ptr, names, (uint64_t)n));
    LLVMSetGlobalConstant(gn, 1);
    LLVMValueRef gm = LLVMAddGlobal(e->M, mt, arena_printf(p->arena, "%s_profile_macs", p->name));
    LLVMSetInitializer(gm, LLVMConstArray2(e->i64, macs, (uint64_t)n));
    LLVMSetGlobalConstant(gm, 1);
    return pr;
}

static LLVMValueRef profile_now(Emitter *e, const Profile *pr) {
    return LLVMBuildCall2(e->B, pr->readty, pr->readfn, NULL, 0, "");
}

/* counters[k] += dt */
static void profile_count(Emitter *e, const Profile *pr, int k, LLVMValueRef dt) {
    LLVMValueRef ix[2] = {LLVMConstInt(e->i64, 0, 0), LLVMConstInt(e->i64, (unsigned long long)k, 0)};
    LLVMValueRef slot = LLVMBuildInBoundsGEP2(e->B, LLVMGlobalGetValueType(pr->counters), pr->counters, ix, 2, "");
    LLVMBuildStore(e->B, LLVMBuildAdd(e->B, LLVMBuildLoad2(e->B, e->i64, slot, ""), dt, ""), slot);
}

static void profile_add(Emitter *e, const Profile *pr, int k, LLVMValueRef t0) {
    profile_count(e, pr, k, LLVMBuildSub(e->B, profile_now(e, pr), t0, ""));
}

/* Element 0 of a one-element integer or bool buffer, as an i64 (control kernels). */
static LLVMValueRef load_scalar(Emitter *e, RunState *rs, Buf *b) {
    LLVMTypeRef t = LLVMIntTypeInContext(e->C, (unsigned)(8 * dtype_size(b->dtype)));
    LLVMValueRef v = LLVMBuildLoad2(e->B, t, storage(e, rs, b), "");
    return dtype_is_unsigned(b->dtype) || b->dtype == DT_BOOL ? LLVMBuildZExt(e->B, v, e->i64, "")
                                                              : LLVMBuildSExt(e->B, v, e->i64, "");
}

typedef struct Calls {
    LLVMValueRef fn, *kfn;
    LLVMValueRef *ktask;            /* by kernel: its task function (be_kernel_task), or NULL */
    RunState *rs;
    Profile *pr;                    /* NULL without --profile */
} Calls;

static void emit_kernels(Emitter *e, Calls *c, int lo, int hi);

/* if (cond[]) then-kernels else else-kernels; returns the index of the region's end. */
static int emit_if(Emitter *e, Calls *c, int i) {
    Program *p = e->p;
    Kernel *k = p->kernels[i];
    int m = kir_ctl_match(p, i), end = p->kernels[m]->ctl == KCTL_ELSE ? kir_ctl_match(p, m) : m;
    LLVMBasicBlockRef then = LLVMAppendBasicBlockInContext(e->C, c->fn, "then");
    LLVMBasicBlockRef els = LLVMAppendBasicBlockInContext(e->C, c->fn, "else");
    LLVMBasicBlockRef join = LLVMAppendBasicBlockInContext(e->C, c->fn, "endif");
    LLVMValueRef cond = LLVMBuildICmp(e->B, LLVMIntNE, load_scalar(e, c->rs, k->cond), LLVMConstInt(e->i64, 0, 0), "");
    LLVMBuildCondBr(e->B, cond, then, els);
    LLVMPositionBuilderAtEnd(e->B, then);
    emit_kernels(e, c, i + 1, m);
    LLVMBuildBr(e->B, join);
    LLVMPositionBuilderAtEnd(e->B, els);
    if (m != end) emit_kernels(e, c, m + 1, end);
    LLVMBuildBr(e->B, join);
    LLVMPositionBuilderAtEnd(e->B, join);
    return end;
}

/* The loop of kir.h's KCTL_LOOP; returns the index of its end. */
static int emit_loop(Emitter *e, Calls *c, int i) {
    Program *p = e->p;
    Kernel *k = p->kernels[i];
    int end = kir_ctl_match(p, i);
    LLVMValueRef trip = k->trip ? load_scalar(e, c->rs, k->trip)
                      : k->ntrip >= 0 ? LLVMConstInt(e->i64, (unsigned long long)k->ntrip, 0) : NULL;
    LLVMValueRef counter = storage(e, c->rs, k->counter);
    LLVMBuildStore(e->B, LLVMConstInt(e->i64, 0, 0), counter);
    LLVMBasicBlockRef head = LLVMAppendBasicBlockInContext(e->C, c->fn, "loop");
    LLVMBasicBlockRef body = LLVMAppendBasicBlockInContext(e->C, c->fn, "body");
    LLVMBasicBlockRef exit = LLVMAppendBasicBlockInContext(e->C, c->fn, "endloop");
    LLVMBuildBr(e->B, head);
    LLVMPositionBuilderAtEnd(e->B, head);
    LLVMValueRef n = LLVMBuildLoad2(e->B, e->i64, counter, "iter");
    LLVMValueRef go = LLVMConstInt(e->i1, 1, 0);
    if (trip) go = LLVMBuildICmp(e->B, LLVMIntSLT, n, trip, "");
    if (k->cond) {
        LLVMValueRef cv = LLVMBuildICmp(e->B, LLVMIntNE, load_scalar(e, c->rs, k->cond), LLVMConstInt(e->i64, 0, 0), "");
        go = LLVMBuildAnd(e->B, go, cv, "");
    }
    LLVMBuildCondBr(e->B, go, body, exit);
    LLVMPositionBuilderAtEnd(e->B, body);
    if (k->max >= 0)                /* the arena holds `max` iterations' scan outputs */
        check(e, c->fn, LLVMBuildICmp(e->B, LLVMIntSGE, n, LLVMConstInt(e->i64, (unsigned long long)k->max, 0), ""), 4);
    emit_kernels(e, c, i + 1, end);
    LLVMValueRef n1 = LLVMBuildLoad2(e->B, e->i64, counter, "");
    LLVMBuildStore(e->B, LLVMBuildAdd(e->B, n1, LLVMConstInt(e->i64, 1, 0), ""), counter);
    LLVMBuildBr(e->B, head);
    LLVMPositionBuilderAtEnd(e->B, exit);
    return end;
}

/* if (pf) { params[] = args; pf(ctx, tasks, task, params); } else ...: the branch, the
 * parallel side built and the builder left at its end; *ser and *join are the blocks of the
 * other side and of the join, for the caller to fill and branch to. */
static void branch_parallel(Emitter *e, Calls *c, LLVMValueRef *args, unsigned n, int64_t tasks, LLVMValueRef task,
                            LLVMBasicBlockRef *ser, LLVMBasicBlockRef *join) {
    LLVMBuilderRef B = e->B;
    RunState *rs = c->rs;
    LLVMBasicBlockRef par = LLVMAppendBasicBlockInContext(e->C, c->fn, "par");
    *ser = LLVMAppendBasicBlockInContext(e->C, c->fn, "serial");
    *join = LLVMAppendBasicBlockInContext(e->C, c->fn, "joined");
    LLVMBuildCondBr(B, LLVMBuildICmp(B, LLVMIntNE, rs->pf, LLVMConstNull(e->ptr), ""), par, *ser);
    LLVMPositionBuilderAtEnd(B, par);
    for (unsigned j = 0; j < n; j++) {
        LLVMValueRef ix = LLVMConstInt(e->idx, j, 0);
        LLVMBuildStore(B, args[j], LLVMBuildInBoundsGEP2(B, e->ptr, rs->argv, &ix, 1, ""));
    }
    LLVMTypeRef pt[4] = {e->ptr, e->i32, e->ptr, e->ptr};
    LLVMValueRef pa[4] = {rs->ctx, LLVMConstInt(e->i32, (unsigned long long)tasks, 0), task, rs->argv};
    LLVMBuildCall2(B, LLVMFunctionType(e->voidt, pt, 4, 0), rs->pf, pa, 4, "");
}

/* A kernel with tasks: given a parallel-for, pf(ctx, tasks, task, params) with the params in
 * an array; else the kernel whole, as NAME_run calls it. */
static void call_parallel(Emitter *e, Calls *c, Kernel *k, LLVMValueRef task, LLVMValueRef *args, unsigned n,
                          LLVMValueRef kfn) {
    LLVMBasicBlockRef ser, join;
    branch_parallel(e, c, args, n, kir_parallel_loop(k)->tasks, task, &ser, &join);
    LLVMBuildBr(e->B, join);
    LLVMPositionBuilderAtEnd(e->B, ser);
    LLVMBuildCall2(e->B, LLVMGlobalGetValueType(kfn), kfn, args, n, "");
    LLVMBuildBr(e->B, join);
    LLVMPositionBuilderAtEnd(e->B, join);
}

/* Kernel k's arguments into args (the storage of its params outside the constant block, then
 * the block); returns their count. */
static unsigned kernel_args(Emitter *e, Calls *c, const Kernel *k, LLVMValueRef *args) {
    unsigned n = 0;
    for (int j = 0; j < k->nparams; j++)
        if (!be_in_block(e, k->params[j])) args[n++] = storage(e, c->rs, k->params[j]);
    if (e->kblock[k->id]) args[n++] = e->kblock[k->id];
    return n;
}

/* The most arguments kernels lo .. end - 1 pass (kernel_args: the params outside the constant
 * block, and the block), the live ones: the slots of the params array they fill. */
static int run_slots(const Program *p, int lo, int end) {
    int n = 0;
    for (int i = lo; i < end; i++)
        if (!p->kernels[i]->dead) n += p->kernels[i]->nparams + 1;
    return n;
}

/* The kernels lo .. end - 1, a run of joined kernels (Kernel.joined), given a parallel-for: one
 * parallel-for whose task t calls task t of each with its arguments, which lie end to end in
 * the params array (runner(argv, t) { task_lo(argv, t); task_lo+1(argv + n_lo, t); ... });
 * without one, each kernel whole. With --profile, the run's ticks are shared among its
 * kernels by their work (multiply-accumulates, or bytes moved). */
static void call_joined(Emitter *e, Calls *c, int lo, int end) {
    Program *p = e->p;
    LLVMBuilderRef B = e->B;
    int nk = 0;
    LLVMValueRef *args = ARENA_ARRAY(p->arena, LLVMValueRef, run_slots(p, lo, end) + 1);
    int *at = ARENA_ARRAY(p->arena, int, end - lo + 1), *ks = ARENA_ARRAY(p->arena, int, end - lo + 1);
    unsigned n = 0;
    for (int i = lo; i < end; i++) {
        if (p->kernels[i]->dead) continue;
        if (!c->ktask || !c->ktask[i]) die("joined kernel %s without a task function", p->kernels[i]->name);
        ks[nk] = i, at[nk++] = (int)n;
        n += kernel_args(e, c, p->kernels[i], args + n);
    }
    at[nk] = (int)n;
    LLVMValueRef t0 = c->pr ? profile_now(e, c->pr) : NULL;
    /* the runner */
    LLVMTypeRef tt[2] = {e->ptr, e->i32};
    LLVMTypeRef tty = LLVMFunctionType(e->voidt, tt, 2, 0);
    LLVMValueRef run = LLVMAddFunction(e->M, arena_printf(p->arena, "%s.k%d.joined", p->name, lo), tty);
    LLVMSetLinkage(run, LLVMInternalLinkage);
    be_fn_attrs(e, run);
    LLVMBasicBlockRef here = LLVMGetInsertBlock(B);
    LLVMPositionBuilderAtEnd(B, LLVMAppendBasicBlockInContext(e->C, run, "entry"));
    for (int m = 0; m < nk; m++) {
        LLVMValueRef off = LLVMConstInt(e->idx, (unsigned long long)at[m], 0);
        LLVMValueRef a[2] = {LLVMBuildInBoundsGEP2(B, e->ptr, LLVMGetParam(run, 0), &off, 1, ""), LLVMGetParam(run, 1)};
        LLVMBuildCall2(B, tty, c->ktask[ks[m]], a, 2, "");
    }
    LLVMBuildRetVoid(B);
    LLVMPositionBuilderAtEnd(B, here);
    /* the call: the runner on the parallel-for, or each kernel whole */
    LLVMBasicBlockRef ser, join;
    branch_parallel(e, c, args, n, kir_parallel_loop(p->kernels[lo])->tasks, run, &ser, &join);
    if (c->pr) {                    /* the run's ticks, shared by work */
        LLVMValueRef dt = LLVMBuildSub(B, profile_now(e, c->pr), t0, "");
        double *wk = ARENA_ARRAY(p->arena, double, nk + 1), w = 0;
        for (int m = 0; m < nk; m++) {
            int64_t macs, bytes;
            kir_kernel_work(p, ks[m], &macs, &bytes);
            w += wk[m] = (double)(macs > 0 ? macs : bytes);
        }
        for (int m = 0; m < nk; m++) {
            uint64_t share = w > 0 ? (uint64_t)(wk[m] / w * 65536.0) : 0;
            LLVMValueRef part = LLVMBuildLShr(B, LLVMBuildMul(B, dt, LLVMConstInt(e->i64, share, 0), ""),
                                              LLVMConstInt(e->i64, 16, 0), "");
            profile_count(e, c->pr, ks[m], part);
        }
    }
    LLVMBuildBr(B, join);
    LLVMPositionBuilderAtEnd(B, ser);
    for (int m = 0; m < nk; m++) {
        LLVMValueRef s0 = c->pr ? profile_now(e, c->pr) : NULL;
        LLVMBuildCall2(B, LLVMGlobalGetValueType(c->kfn[ks[m]]), c->kfn[ks[m]], args + at[m], (unsigned)(at[m + 1] - at[m]), "");
        if (c->pr) profile_add(e, c->pr, ks[m], s0);
    }
    LLVMBuildBr(B, join);
    LLVMPositionBuilderAtEnd(B, join);
}

static void emit_kernels(Emitter *e, Calls *c, int lo, int hi) {
    Program *p = e->p;
    for (int i = lo; i < hi; i++) {
        Kernel *k = p->kernels[i];
        if (k->dead) continue;
        if (k->ctl == KCTL_IF) { i = emit_if(e, c, i); continue; }
        if (k->ctl == KCTL_LOOP) { i = emit_loop(e, c, i); continue; }
        if (k->ctl) die("control kernel %s outside its region", k->name);
        int end = kir_joined_end(p, i);
        if (end > i + 1 && end <= hi && c->ktask) {
            call_joined(e, c, i, end);
            i = end - 1;
            continue;
        }
        LLVMValueRef *args = ARENA_ARRAY(p->arena, LLVMValueRef, k->nparams + 1);
        unsigned n = kernel_args(e, c, k, args);
        LLVMValueRef t0 = c->pr ? profile_now(e, c->pr) : NULL;
        if (c->ktask && c->ktask[i]) call_parallel(e, c, k, c->ktask[i], args, n, c->kfn[i]);
        else LLVMBuildCall2(e->B, LLVMGlobalGetValueType(c->kfn[i]), c->kfn[i], args, n, "");
        if (c->pr) profile_add(e, c->pr, i, t0);
    }
}

/* --emit-weights: if (the blob is NULL, misaligned or not this compilation's) return code;
 * the magic, version and key of weights.c's header are read as two 64-bit words and one. */
static void check_weights(Emitter *e, LLVMValueRef fn, LLVMValueRef w, int code) {
    Program *p = e->p;
    check(e, fn, LLVMBuildICmp(e->B, LLVMIntEQ, w, LLVMConstNull(e->ptr), ""), code);
    LLVMValueRef addr = LLVMBuildPtrToInt(e->B, w, e->idx, "");
    LLVMValueRef mis = LLVMBuildAnd(e->B, addr, LLVMConstInt(e->idx, WEIGHTS_ALIGN - 1, 0), "");
    check(e, fn, LLVMBuildICmp(e->B, LLVMIntNE, mis, LLVMConstNull(e->idx), ""), code);
    uint64_t magic = 0;
    for (int i = 0; i < 8; i++) magic |= (uint64_t)(unsigned char)WEIGHTS_MAGIC[i] << (8 * i);
    uint64_t want[3] = {magic, (uint64_t)WEIGHTS_VERSION | (uint64_t)WEIGHTS_HEADER << 32, p->weights_key};
    int at[3] = {0, 8, 24};
    LLVMValueRef bad = LLVMConstInt(e->i1, 0, 0);
    for (int i = 0; i < 3; i++) {
        LLVMValueRef off = LLVMConstInt(e->idx, (unsigned long long)at[i], 0);
        LLVMValueRef v = LLVMBuildLoad2(e->B, e->i64, LLVMBuildInBoundsGEP2(e->B, e->i8, w, &off, 1, ""), "");
        LLVMSetAlignment(v, 8);
        bad = LLVMBuildOr(e->B, bad, LLVMBuildICmp(e->B, LLVMIntNE, v, LLVMConstInt(e->i64, want[i], 0), ""), "");
    }
    check(e, fn, bad, code);
}

/* NAME_run(inputs, outputs, arena), or with --emit-weights NAME_run_w(..., weights). */
/* The body of NAME_run(inputs, outputs, arena), or with --emit-weights NAME_run_w(..., weights);
 * with ktask (a target with threads) two parameters more, the caller's parallel-for and its
 * context (NULL: every kernel whole). Named `name`; the entry points call it (emit_entries). */
static LLVMValueRef emit_run(Emitter *e, LLVMValueRef *kfn, LLVMValueRef *ktask, bool profile, const char *name) {
    Program *p = e->p;
    bool ext = p->weights_external;
    LLVMTypeRef pt[6] = {e->ptr, e->ptr, e->ptr, e->ptr, e->ptr, e->ptr};
    unsigned np = (ext ? 4 : 3) + (ktask ? 2 : 0);
    LLVMTypeRef fty = LLVMFunctionType(e->i32, pt, np, 0);
    LLVMValueRef fn = LLVMAddFunction(e->M, name, fty);
    be_fn_attrs(e, fn);
    RunState rs = {LLVMGetParam(fn, 0), LLVMGetParam(fn, 1), LLVMGetParam(fn, 2), ext ? LLVMGetParam(fn, 3) : NULL,
                   ktask ? LLVMGetParam(fn, np - 2) : NULL, ktask ? LLVMGetParam(fn, np - 1) : NULL, NULL,
                   ARENA_ARRAY(p->arena, LLVMValueRef, p->nbufs + 1)};
    if (ext) LLVMSetValueName2(rs.weights, "weights", 7);
    LLVMSetValueName2(rs.in, "inputs", 6);
    LLVMSetValueName2(rs.out, "outputs", 7);
    LLVMSetValueName2(rs.arena, "arena", 5);
    LLVMPositionBuilderAtEnd(e->B, LLVMAppendBasicBlockInContext(e->C, fn, "entry"));
    if (ktask) {
        int most = 1;
        for (int i = 0; i < p->nkernels; i++) {    /* a kernel's params and block, or a run's */
            int n = ktask[i] ? run_slots(p, i, kir_joined_end(p, i)) : 0;
            if (n > most) most = n;
        }
        rs.argv = LLVMBuildAlloca(e->B, LLVMArrayType2(e->ptr, (uint64_t)most), "params");
    }
    LLVMValueRef null = LLVMConstNull(e->ptr);
    if (p->arena_size > 0) check(e, fn, LLVMBuildICmp(e->B, LLVMIntEQ, rs.arena, null, ""), 1);
    LLVMValueRef addr = LLVMBuildPtrToInt(e->B, rs.arena, e->idx, "");
    LLVMValueRef mis = LLVMBuildAnd(e->B, addr, LLVMConstInt(e->idx, (unsigned long long)p->arena_align - 1, 0), "");
    check(e, fn, LLVMBuildICmp(e->B, LLVMIntNE, mis, LLVMConstNull(e->idx), ""), 2);
    if (p->ninputs > 0) check(e, fn, LLVMBuildICmp(e->B, LLVMIntEQ, rs.in, null, ""), 3);
    if (p->noutputs > 0) check(e, fn, LLVMBuildICmp(e->B, LLVMIntEQ, rs.out, null, ""), 3);
    if (ext) check_weights(e, fn, rs.weights, 6);   /* NAME_ERR_WEIGHTS */
    /* Every storage pointer up front: computed inside a branch or loop, it would not
     * dominate its uses after it. */
    for (int i = 0; i < p->nkernels; i++)
        for (int j = 0; j < p->kernels[i]->nparams; j++) storage(e, &rs, p->kernels[i]->params[j]);
    Profile pr = {0};
    if (profile) pr = profile_init(e);
    Calls c = {fn, kfn, ktask, &rs, profile ? &pr : NULL};
    emit_kernels(e, &c, 0, p->nkernels);
    LLVMBuildRet(e->B, LLVMConstInt(e->i32, 0, 0));
    return fn;
}

/* The public entry points around `body` (the checked run of a target with threads, taking a
 * parallel-for): NAME_run (or NAME_run_w) without one, and NAME_run_par (NAME_run_w_par) with
 * one; returns NAME_run's function, *run_par gets NAME_run_par (NULL with --emit-weights:
 * NAME_info's run_par has NAME_run's parameters, and NAME_run_w_par has one more). */
static LLVMValueRef emit_entries(Emitter *e, LLVMValueRef body, LLVMValueRef *run_par) {
    Program *p = e->p;
    bool ext = p->weights_external;
    LLVMSetValueName2(body, "run.checked", 11);
    LLVMSetLinkage(body, LLVMInternalLinkage);
    LLVMTypeRef bty = LLVMGlobalGetValueType(body), pt[6] = {e->ptr, e->ptr, e->ptr, e->ptr, e->ptr, e->ptr};
    LLVMValueRef fns[2] = {NULL, NULL};
    for (int par = 0; par < 2; par++) {
        unsigned np = (ext ? 4 : 3) + (par ? 2 : 0);
        const char *name = arena_printf(p->arena, par ? ext ? "%s_run_w_par" : "%s_run_par" : ext ? "%s_run_w" : "%s_run", p->name);
        LLVMValueRef fn = LLVMAddFunction(e->M, name, LLVMFunctionType(e->i32, pt, np, 0));
        be_entry_attrs(e, fn);
        LLVMPositionBuilderAtEnd(e->B, LLVMAppendBasicBlockInContext(e->C, fn, "entry"));
        LLVMValueRef args[6];
        unsigned n = ext ? 4 : 3;
        for (unsigned i = 0; i < n; i++) args[i] = LLVMGetParam(fn, i);
        args[n] = par ? LLVMGetParam(fn, n) : LLVMConstNull(e->ptr);
        args[n + 1] = par ? LLVMGetParam(fn, n + 1) : LLVMConstNull(e->ptr);
        LLVMValueRef call = LLVMBuildCall2(e->B, bty, body, args, n + 2, "");
        LLVMSetTailCall(call, 1);
        LLVMBuildRet(e->B, call);
        fns[par] = fn;
    }
    *run_par = ext ? NULL : fns[1];
    return fns[0];
}

/* ---- NAME_info ---- */

/* the fields of onnxcc_model_info (runtime/model.h.in), in its order */
enum { INFO_FIELDS = 14 };
typedef struct InfoTypes { LLVMTypeRef size, tensor, model; } InfoTypes;

static InfoTypes info_types(Emitter *e, LLVMTargetDataRef td) {
    InfoTypes it;
    it.size = LLVMIntPtrTypeInContext(e->C, td);            /* size_t */
    LLVMTypeRef tf[6] = {e->ptr, e->i32, e->i32, e->ptr, it.size, e->i32};
    it.tensor = LLVMStructTypeInContext(e->C, tf, 6, 0);
    LLVMTypeRef mf[INFO_FIELDS] = {e->ptr, it.size, it.size, e->i32, e->i32, e->ptr, e->ptr, e->ptr, it.size, e->ptr,
                                   e->i32, e->ptr, e->ptr, e->ptr};
    it.model = LLVMStructTypeInContext(e->C, mf, INFO_FIELDS, 0);
    return it;
}

static LLVMValueRef tensor_infos(Emitter *e, InfoTypes *it, Buf **bufs, int n, const char *what) {
    if (n == 0) return LLVMConstNull(e->ptr);
    LLVMValueRef *elems = ARENA_ARRAY(e->p->arena, LLVMValueRef, n);
    for (int i = 0; i < n; i++) {
        Buf *b = bufs[i];
        int rank = kir_io_rank(b);      /* a string's bytes are not a dim of its ONNX shape */
        LLVMValueRef dims = LLVMConstNull(e->ptr);
        if (rank > 0) {
            LLVMValueRef d[MAX_RANK];
            for (int j = 0; j < rank; j++) d[j] = LLVMConstInt(e->i64, (unsigned long long)b->dims[j], 1);
            dims = private_const(e, LLVMConstArray2(e->i64, d, (uint64_t)rank), "dims", 8);
        }
        LLVMValueRef f[6] = {
            cstring(e, b->name), LLVMConstInt(e->i32, (unsigned long long)kir_io_dtype(b), 0),
            LLVMConstInt(e->i32, (unsigned long long)rank, 0), dims,
            LLVMConstInt(it->size, kir_io_nbytes(b), 0),
            LLVMConstInt(e->i32, (unsigned long long)(int64_t)kir_dims_output(e->p, b), 1),
        };
        elems[i] = LLVMConstNamedStruct(it->tensor, f, 6);
    }
    return private_const(e, LLVMConstArray2(it->tensor, elems, (uint64_t)n), what, 0);
}

static void emit_info(Emitter *e, LLVMTargetDataRef td, LLVMValueRef run, const Target *ts, int n, LLVMValueRef isa,
                      LLVMValueRef run_par) {
    Program *p = e->p;
    InfoTypes it = info_types(e, td);
    bool ext = p->weights_external;
    LLVMValueRef names[MAX_ISAS];
    for (int l = 0; l < n; l++) names[l] = cstring(e, ts[l].isa);
    LLVMValueRef f[INFO_FIELDS] = {
        cstring(e, p->name),
        LLVMConstInt(it.size, (unsigned long long)p->arena_size, 0),
        LLVMConstInt(it.size, (unsigned long long)p->arena_align, 0),
        LLVMConstInt(e->i32, (unsigned long long)p->ninputs, 0),
        LLVMConstInt(e->i32, (unsigned long long)p->noutputs, 0),
        tensor_infos(e, &it, p->inputs, p->ninputs, "inputs"),
        tensor_infos(e, &it, p->outputs, p->noutputs, "outputs"),
        ext ? LLVMConstNull(e->ptr) : run,
        LLVMConstInt(it.size, ext ? (unsigned long long)p->weights_size : 0, 0),
        ext ? run : LLVMConstNull(e->ptr),
        LLVMConstInt(e->i32, (unsigned long long)n, 0),
        private_const(e, LLVMConstArray2(e->ptr, names, (uint64_t)n), "isa_names", 0),
        isa ? isa : LLVMConstNull(e->ptr),
        run_par ? run_par : LLVMConstNull(e->ptr),
    };
    LLVMValueRef g = LLVMAddGlobal(e->M, it.model, arena_printf(p->arena, "%s_info", p->name));
    LLVMSetInitializer(g, LLVMConstNamedStruct(it.model, f, INFO_FIELDS));
    LLVMSetGlobalConstant(g, 1);
}

/* ---- the module ---- */

static void init_types(Emitter *e) {
    LLVMContextRef C = e->C;
    e->i1 = LLVMInt1TypeInContext(C);
    e->i8 = LLVMInt8TypeInContext(C);
    e->i16 = LLVMInt16TypeInContext(C);
    e->i32 = LLVMInt32TypeInContext(C);
    e->i64 = LLVMInt64TypeInContext(C);
    e->idx = e->t->ptr_bits == 32 ? e->i32 : e->i64;
    e->f32 = LLVMFloatTypeInContext(C);
    e->f64 = LLVMDoubleTypeInContext(C);
    e->ptr = LLVMPointerTypeInContext(C, 0);
    e->voidt = LLVMVoidTypeInContext(C);
}

/* -O2's pipeline. The kernel IR arrives with its vector loops and register blocking done
 * (passes/schedule.c), so LLVM's default<O2> spends most of its time (indvars, repeated
 * instcombine, full unrolling) redoing nothing: this list keeps inlining (small kernels
 * called per LSTM step), the clean-ups that pay, loop rotation for LICM, full unrolling of
 * short constant loops (a conv's 3 taps: without it and indvars the DS-CNN keyword spotter
 * ran 20% slower, 58 -> 70 us), the vectorisers for the elementwise loops left scalar, and
 * one late unroll (depthwise kernels need it).
 * ResNet-18: LLVM's optimisation 3.4 s -> ~1.3 s (whole compile ~5 -> ~3 s), run times
 * unchanged within noise. mergefunc, before inlining and at the end, keeps one copy of kernels
 * that compile to the same code (a model's repeated blocks: the keyword spotter's four
 * depthwise convs, 7 KB each on AVX-512; its flash 67 -> 44 KB int8, 115 -> 100 KB float).
 * Without indvars, a third of what was left (its scalar evolution work on the inlined
 * kernels), the loops still unroll fully (their bounds are constants): MobileNetV2 for AVX2
 * compiled in ~3.1 s instead of ~4.1, ResNet-18 ~2.1 instead of ~2.4, with the same run
 * times (ResNet-18 for AVX2 ~40 ms, AVX-512 ~18, MobileNetV2 ~6.4, the DS-CNN ~44 us; CPU
 * time, rough). */
static const char o2_pipeline[] =
    "mergefunc,cgscc(inline),function(sroa,early-cse<memssa>,instcombine<no-verify-fixpoint>,simplifycfg,"
    "loop-mssa(loop-rotate,licm),loop(loop-unroll-full),gvn,instcombine<no-verify-fixpoint>,dse,simplifycfg,"
    "loop-vectorize,slp-vectorizer,instcombine<no-verify-fixpoint>,simplifycfg,"
    "loop-unroll<O2>,instcombine<no-verify-fixpoint>),mergefunc";

/* -O3: LLVM's default<O3> without its own loop unrolling, then -O2's unrolling (full unrolling
 * of short constant loops, one O2-level partial unroll). default<O3>'s unroller unrolled the
 * padded convs' reduction loops until they spilled: ResNet-18 ran ~27 ms at -O3 against ~19 at
 * -O2, its 3x3 convs at ~50% of peak instead of ~85%; with this list -O3 is at -O2's speed
 * (ResNet-18 ~19 ms, MobileNetV2 a little faster, DS-CNN and LSTM the same; rough, loaded
 * machine). */
static const char o3_pipeline[] =
    "mergefunc,default<O3>,function(loop-mssa(licm),loop(indvars,loop-unroll-full),loop-unroll<O2>,instcombine<no-verify-fixpoint>),"
    "mergefunc";

/* After the pipeline, where kernels call outlined epilogues (backend/kernel.c, outline: only
 * on microcontrollers, for quantized models), two clean-ups for code size:
 *   - the parameters of the one-element constants that the helpers hold folded (each conv's
 *     output zero point) are left unused, yet every call still materialised their addresses
 *     (RV32 lui+addi, Cortex-M4 movw+movt: 8 bytes a call): deadargelim drops them and
 *     globaldce the constants (KWS int8: RV32 -72 bytes of flash, Cortex-M4 -86);
 *   - a register tile's accesses b[i + 1], b[i + 2]... reach codegen as separate index
 *     computations (instcombine makes the adds `or disjoint`, which neither backend folds
 *     into a load's offset: on RV32 a shift, an add and the load per channel of the tile);
 *     separate-const-offset-from-gep splits the constants off into the GEP, which folds,
 *     and early-cse shares the base (KWS int8, after the constant blocks of plan_blocks: RV32
 *     -132 bytes and 4.16 -> 4.12 instructions per multiply-accumulate, Cortex-M4 -60 bytes
 *     and 2.84 -> 2.82).
 * Other modules do not run it, so their objects stay as they were. */
static const char outlined_cleanup[] = "deadargelim,globaldce,function(separate-const-offset-from-gep,early-cse)";

static void optimize(LLVMModuleRef M, LLVMTargetMachineRef tm, int opt_level, bool outlined, bool tsan) {
    char *err = NULL;
    if (LLVMVerifyModule(M, LLVMReturnStatusAction, &err)) die("backend made an invalid module: %s", err);
    LLVMDisposeMessage(err);
    static const char *const pipelines[] = {"default<O0>", "default<O1>", o2_pipeline, o3_pipeline};
    LLVMPassBuilderOptionsRef o = LLVMCreatePassBuilderOptions();
    bool vec = opt_level >= 2;
    LLVMPassBuilderOptionsSetLoopVectorization(o, vec);
    LLVMPassBuilderOptionsSetSLPVectorization(o, vec);
    LLVMPassBuilderOptionsSetLoopInterleaving(o, vec);
    LLVMPassBuilderOptionsSetLoopUnrolling(o, opt_level == 2);   /* -O3: its own list */
    LLVMErrorRef perr = LLVMRunPasses(M, pipelines[opt_level], tm, o);
    if (perr) die("LLVM passes: %s", LLVMGetErrorMessage(perr));
    if (outlined && (perr = LLVMRunPasses(M, outlined_cleanup, tm, o)))
        die("LLVM passes: %s", LLVMGetErrorMessage(perr));
    /* --sanitize-thread: every memory access of the optimised code reported to ThreadSanitizer's
     * run time (which the program links, cc -fsanitize=thread), as clang does last */
    if (tsan && (perr = LLVMRunPasses(M, "tsan-module,function(tsan)", tm, o)))
        die("LLVM passes: %s", LLVMGetErrorMessage(perr));
    LLVMDisposePassBuilderOptions(o);
}

/* The output is made in memory and written by out_write (a temporary file renamed over a
 * regular PATH, /dev/null and other special files written directly). An object is generated
 * in any case, so that its sections can be measured (facts.c): p->flash_size; for assembly and
 * IR text, one is generated for the measurement alone. */
/* The object straight into a temporary file next to `path` (out_temp), read back through
 * mmap for its flash size, and renamed over `path`: ResNet-18's 75 MB object no longer passes
 * through LLVM's growing memory buffer, a copy of that and a write of the copy. Returns false
 * if `path` is a special file (out_write then writes it). */
static bool write_object_file(Program *p, LLVMModuleRef M, LLVMTargetMachineRef tm, const char *path) {
    if (out_is_special(path)) return false;
    int fd;
    char *tmp = out_temp(path, &fd), *err = NULL;
    close(fd);
    if (LLVMTargetMachineEmitToFile(tm, M, tmp, LLVMObjectFile, &err)) {
        unlink(tmp);
        free(tmp);
        fatal(path, "cannot generate code: %s", err ? err : "unknown LLVM error");
    }
    bool ok = false;
    int e = EIO;
    struct stat st;
    if ((fd = open(tmp, O_RDONLY)) >= 0 && fstat(fd, &st) == 0 && st.st_size > 0) {
        void *obj = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (obj != MAP_FAILED) {
            int64_t in_section = 0;
            p->flash_size = be_flash_size((const char *)obj, (size_t)st.st_size, p->weights_section, &in_section);
            if (p->weights_section) p->weights_size = in_section;
            munmap(obj, (size_t)st.st_size);
            ok = true;
        }
    }
    if (!ok) e = errno ? errno : EIO;
    if (fd >= 0) close(fd);
    out_finish(path, tmp, ok, e);
    return true;
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

/* ---- the side module ----
 * LLVM optimises and generates code on one thread a module. Where a model has many kernels
 * (SPLIT_KERNELS) and its object goes through the join anyway (blob mode), about half of its
 * kernels' code goes to a second module in a context of its own, which a thread of its own
 * optimises and compiles while the main thread does the rest; elf.c joins the two objects.
 * Kernels are given to the module that has the fewer LLVM instructions so far (SIDE_SHARE;
 * each kernel built whole into one); those of the side are exported under a name of their
 * own (".sN"), declared in the main module for NAME_run to call, and made local again by the
 * join. The split depends only on the model and the flags, so the object does not depend on
 * the machine. Lost: inlining a side kernel into NAME_run (the models where that pays, an
 * RNN's small step kernels, have fewer kernels than the threshold) and mergefunc across the
 * two modules. ONNXCC_SPLIT_KERNELS sets the threshold (tests: 1 splits every model). */
/* SIDE_SHARE: the side takes a kernel while its instructions are below 125% of the main
 * module's, since the main thread also builds NAME_run, then joins and writes the object
 * (ResNet-18: 55% of the kernels' instructions to the side; against 50%, compile times
 * within this machine's noise, 1.83/2.02 s against 1.69/2.11 s min/median) */
enum { SPLIT_KERNELS = 24, SIDE_SHARE = 125 };

typedef struct Side {
    Emitter e;                      /* its context, module and builder */
    Emitter es[MAX_ISAS];           /* its emitter of each ISA level */
    LLVMTargetMachineRef tm;
    int opt_level;
    bool outlined;
    Frames fr;
    LLVMMemoryBufferRef obj;
    char *err;
    const char **names;             /* its functions NAME_run calls, which the join hides */
    int nnames;
    int64_t size, main_size;        /* LLVM instructions of the kernels in it, in the main module */
    int nkernels;                   /* kernels in it */
    double ms;                      /* its thread's time */
    pthread_t thread;
    bool joined;
} Side;

/* A module for target t in a new context, like the main one. */
static void new_module(Emitter *e, const Target *t, LLVMTargetDataRef td, const char *name) {
    e->C = LLVMContextCreate();
    e->M = LLVMModuleCreateWithNameInContext(name, e->C);
    e->B = LLVMCreateBuilderInContext(e->C);
    LLVMSetTarget(e->M, t->triple);
    char *dl = LLVMCopyStringRepOfTargetData(td);
    LLVMSetDataLayout(e->M, dl);
    LLVMDisposeMessage(dl);
    if (t->abi)     /* what clang records; the ELF float-ABI flags follow it */
        LLVMAddModuleFlag(e->M, LLVMModuleFlagBehaviorError, "target-abi", 10,
                          LLVMValueAsMetadata(LLVMMDStringInContext(e->C, t->abi, (unsigned)strlen(t->abi))));
    init_types(e);
}

/* LLVM instructions in the functions of M after `after` (NULL: all) */
static int64_t fns_size(LLVMModuleRef M, LLVMValueRef after) {
    int64_t n = 0;
    for (LLVMValueRef f = after ? LLVMGetNextFunction(after) : LLVMGetFirstFunction(M); f; f = LLVMGetNextFunction(f))
        for (LLVMBasicBlockRef b = LLVMGetFirstBasicBlock(f); b; b = LLVMGetNextBasicBlock(b))
            for (LLVMValueRef i = LLVMGetFirstInstruction(b); i; i = LLVMGetNextInstruction(i)) n++;
    return n;
}

static LLVMTypeRef type_in(Emitter *e, LLVMTypeRef t) {
    switch (LLVMGetTypeKind(t)) {
    case LLVMVoidTypeKind: return e->voidt;
    case LLVMPointerTypeKind: return e->ptr;
    case LLVMIntegerTypeKind: return LLVMIntTypeInContext(e->C, LLVMGetIntTypeWidth(t));
    default: die("emit: a kernel parameter of type kind %d", (int)LLVMGetTypeKind(t));
    }
}

/* Side function f exported, and declared in the main module (returned) for NAME_run. */
static LLVMValueRef export_fn(Emitter *main, Side *s, LLVMValueRef f) {
    size_t len;
    const char *orig = LLVMGetValueName2(f, &len);
    const char *name = arena_printf(main->p->arena, "%.*s.s%d", (int)len, orig, s->nnames);
    LLVMSetValueName2(f, name, strlen(name));
    LLVMSetLinkage(f, LLVMExternalLinkage);
    LLVMSetVisibility(f, LLVMHiddenVisibility);
    s->names = realloc(s->names, sizeof *s->names * (size_t)(s->nnames + 1));
    if (!s->names) die("out of memory");
    s->names[s->nnames++] = name;
    LLVMTypeRef ft = LLVMGlobalGetValueType(f);
    unsigned np = LLVMCountParamTypes(ft);
    LLVMTypeRef *pt = ARENA_ARRAY(main->p->arena, LLVMTypeRef, np + 1);
    LLVMGetParamTypes(ft, pt);
    for (unsigned i = 0; i < np; i++) pt[i] = type_in(main, pt[i]);
    LLVMValueRef d = LLVMAddFunction(main->M, name, LLVMFunctionType(type_in(main, LLVMGetReturnType(ft)), pt, np, 0));
    LLVMSetVisibility(d, LLVMHiddenVisibility);
    be_enum_attr(main, d, LLVMAttributeFunctionIndex, "nounwind");
    return d;
}

static void *side_main(void *v) {
    Side *s = v;
    double t0 = now_ms();
    optimize(s->e.M, s->tm, s->opt_level, s->outlined, false);
    if (LLVMTargetMachineEmitToMemoryBuffer(s->tm, s->e.M, LLVMObjectFile, &s->err, &s->obj)) s->obj = NULL;
    s->ms = now_ms() - t0;
    return NULL;
}

/* Waits for the side's thread; its object, or false (s->err says why, if LLVM said). */
static bool side_wait(Side *s, ElfPart *part) {
    if (!s->joined && pthread_join(s->thread, NULL) != 0) die("emit: cannot join the side module's thread");
    s->joined = true;
    if (!s->obj) return false;
    *part = (ElfPart){LLVMGetBufferStart(s->obj), LLVMGetBufferSize(s->obj)};
    return true;
}

/* Blob mode: LLVM's object, now without the large constants, and the blob joined into one
 * (elf.c) straight into the output file: the constants are written from where they are, not
 * copied into an object in memory first (VGG-16's 730 MB: a copy took ~2 s here, most of it
 * page faults). */
typedef struct FdSink {
    int fd, err;
    size_t n;
    char buf[1 << 16];
} FdSink;

static void fd_write(FdSink *s, const char *d, size_t n) {
    if (!s->err && !write_all(s->fd, d, n)) s->err = errno ? errno : EIO;
}

static void fd_flush(FdSink *s) {
    fd_write(s, s->buf, s->n);
    s->n = 0;
}

static void fd_put(void *ctx, const void *data, size_t n) {
    FdSink *s = ctx;
    if (s->n + n > sizeof s->buf) fd_flush(s);
    if (n >= sizeof s->buf) fd_write(s, data, n);
    else memcpy(s->buf + s->n, data, n), s->n += n;
}

static void write_joined(Program *p, LLVMModuleRef M, LLVMTargetMachineRef tm, ConstPool *cp, Side *side,
                         const char *path) {
    char *err = NULL;
    LLVMMemoryBufferRef obj = NULL;
    if (LLVMTargetMachineEmitToMemoryBuffer(tm, M, LLVMObjectFile, &err, &obj))
        fatal(path, "cannot generate code: %s", err ? err : "unknown LLVM error");
    ElfPart part[2] = {{LLVMGetBufferStart(obj), LLVMGetBufferSize(obj)}};
    int nparts = 1, nhide = 0;
    const char **hide = ARENA_ARRAY(p->arena, const char *, (side ? side->nnames : 0) + 2);
    if (cp->blob) hide[nhide++] = cp->blob_name;
    if (side) {
        if (!side_wait(side, &part[1]))
            fatal(path, "cannot generate code: %s", side->err ? side->err : "unknown LLVM error");
        nparts = 2;
        for (int i = 0; i < side->nnames; i++) hide[nhide++] = side->names[i];
    }
    ElfBlob blob = {".rodata.weights", cp->blob_name, cp->blob_size, 64, cp->data, cp->size, cp->off, cp->n};
    int64_t in_section = 0;
    p->flash_size = (int64_t)cp->blob_size;
    for (int i = 0; i < nparts; i++) p->flash_size += be_flash_size(part[i].data, part[i].size, NULL, &in_section);
    FdSink *s = calloc(1, sizeof *s);
    if (!s) die("out of memory");
    char *tmp = out_temp(path, &s->fd);     /* NULL: a special file, written in place */
    ElfSink sink = {fd_put, s};
    if (!be_elf_join(part, nparts, cp->blob ? &blob : NULL, hide, nhide, &sink)) {
        if (tmp) unlink(tmp);
        die("emit: cannot join LLVM's objects and the weights");
    }
    fd_flush(s);
    if (close(s->fd) != 0 && !s->err) s->err = errno;
    LLVMDisposeMemoryBuffer(obj);
    int e = s->err;
    free(s);
    out_finish(path, tmp, e == 0, e);
}

static void write_out(Program *p, LLVMModuleRef M, LLVMTargetMachineRef tm, ConstPool *cp, Side *side,
                      EmitKind kind, const char *path) {
    if (kind == EMIT_OBJ && (cp->blob || side)) {
        write_joined(p, M, tm, cp, side, path);
        return;
    }
    if (side) die("emit: a side module without an object to join it to");
    if (kind == EMIT_OBJ && write_object_file(p, M, tm, path)) return;
    char *err = NULL, *ir = kind == EMIT_LLVM ? LLVMPrintModuleToString(M) : NULL;
    LLVMMemoryBufferRef obj = NULL, text = NULL;
    if ((kind == EMIT_ASM && LLVMTargetMachineEmitToMemoryBuffer(tm, M, LLVMAssemblyFile, &err, &text)) ||
        LLVMTargetMachineEmitToMemoryBuffer(tm, M, LLVMObjectFile, &err, &obj))
        fatal(path, "cannot generate code: %s", err ? err : "unknown LLVM error");
    int64_t in_section = 0;
    p->flash_size = be_flash_size(LLVMGetBufferStart(obj), LLVMGetBufferSize(obj), p->weights_section, &in_section);
    if (p->weights_section) p->weights_size = in_section;
    if (ir) out_write(path, ir, strlen(ir));
    else if (text) out_write(path, LLVMGetBufferStart(text), LLVMGetBufferSize(text));
    else out_write(path, LLVMGetBufferStart(obj), LLVMGetBufferSize(obj));
    if (ir) LLVMDisposeMessage(ir);
    if (text) LLVMDisposeMemoryBuffer(text);
    LLVMDisposeMemoryBuffer(obj);
}


static void emit_module(Program **ps, const Target *ts, int n, int opt_level, EmitKind kind, const char *path) {
    Program *p = ps[0];
    const Target *t = &ts[0];
    if (opt_level < 0 || opt_level > 3) die("opt level %d", opt_level);
    if (n < 1 || n > MAX_ISAS || (n > 1 && (p->weights_external || p->profile))) die("emit: %d ISA levels", n);
    for (int l = 0; l < n; l++)
        if (ps[l]->arena_align <= 0 || (ps[l]->arena_align & (ps[l]->arena_align - 1)))
            die("arena_align %d", ps[l]->arena_align);
    /* each tensor is below the limit (infer_shapes); the arena holding many may not be */
    int64_t limit = t->ptr_bits == 32 ? IR_MAX_BYTES_32 : IR_MAX_BYTES_64;
    if (p->arena_size > limit)
        fatal(path, "the model needs an arena of %lld bytes, over onnxcc's limit of %lld bytes "
              "for this target", (long long)p->arena_size, (long long)limit);
    LLVMTargetMachineRef tm = be_machine(t, opt_level);
    LLVMTargetDataRef td = LLVMCreateTargetDataLayout(tm);
    Emitter e = {.p = p, .t = t};
    new_module(&e, t, td, p->name);

    if (p->weights_external && LLVMByteOrder(td) == LLVMBigEndian)    /* the blob is little-endian */
        fatal(path, "--emit-weights: big-endian targets are not supported");
    if (p->weights_external) be_weights_layout(p);
    /* one emitter per ISA level, in one module: each level's kernels carry its target's
     * attributes (be_fn_attrs), and LLVM compiles each function for those. Targets with float
     * vectors have threads (NAME_run_par); microcontrollers do not, and keep NAME_run alone. */
    bool threads = p->vector_bytes >= 16;
    ConstPool pool = {0};
    /* blob mode: objects for x86-64 ELF, the weights not asked elsewhere (ThreadSanitizer's
     * module constructor comes in a section group, which the join does not take) */
    const char *tr = t->triple;
    pool.blob_mode = kind == EMIT_OBJ && !p->weights_section && !p->weights_external && !p->tsan &&
                     !strncmp(tr, "x86_64", 6) && !strstr(tr, "apple") && !strstr(tr, "darwin") &&
                     !strstr(tr, "windows") && !strstr(tr, "win32") && !strstr(tr, "mingw") && !strstr(tr, "cygwin") &&
                     !strstr(tr, "uefi");
    pool.blob_name = arena_printf(p->arena, "%s.weights", p->name);
    int nk = 0;
    for (int l = 0; l < n; l++)
        for (int i = 0; i < ps[l]->nkernels; i++) nk += !ps[l]->kernels[i]->ctl;
    const char *sk = getenv("ONNXCC_SPLIT_KERNELS");
    Side *side = NULL;
    if (pool.blob_mode && opt_level >= 1 && nk >= (sk ? atoi(sk) : SPLIT_KERNELS)) {
        side = calloc(1, sizeof *side);
        if (!side) die("out of memory");
        side->e = (Emitter){.p = p, .t = t};
        new_module(&side->e, t, td, arena_printf(p->arena, "%s.side", p->name));
        side->opt_level = opt_level;
    }
    Emitter es[MAX_ISAS];
    LLVMValueRef runs[MAX_ISAS];
    double t0 = now_ms();
    for (int l = 0; l < n; l++) {
        es[l] = e;
        es[l].p = ps[l], es[l].t = &ts[l];
        es[l].pool = &pool;
        Emitter *el = &es[l];
        plan_blocks(el);
        if (side) {
            side->es[l] = side->e;
            side->es[l].p = ps[l], side->es[l].t = &ts[l];
            side->es[l].kblock = el->kblock, side->es[l].block_at = el->block_at;
        }
        LLVMValueRef *kfn = ARENA_ARRAY(p->arena, LLVMValueRef, ps[l]->nkernels + 1);
        LLVMValueRef *ktask = threads ? ARENA_ARRAY(p->arena, LLVMValueRef, ps[l]->nkernels + 1) : NULL;
        for (int i = 0; i < ps[l]->nkernels; i++) {
            if (ps[l]->kernels[i]->ctl) continue;
            Emitter *ek = side && 100 * side->size < SIDE_SHARE * side->main_size ? &side->es[l] : el;
            LLVMValueRef last = LLVMGetLastFunction(ek->M);
            kfn[i] = be_kernel(ek, ps[l]->kernels[i], ktask ? &ktask[i] : NULL);
            if (!side) continue;
            int64_t size = fns_size(ek->M, last);
            if (ek == el) {
                side->main_size += size;
                continue;
            }
            side->size += size;
            side->nkernels++;
            kfn[i] = export_fn(el, side, kfn[i]);
            if (ktask && ktask[i]) ktask[i] = export_fn(el, side, ktask[i]);
        }
        const char *name = arena_printf(p->arena, p->weights_external ? "%s_run_w" : "%s_run", p->name);
        if (n > 1 || threads) name = arena_printf(p->arena, "run.%s", ts[l].isa);
        runs[l] = emit_run(el, kfn, ktask, p->profile, name);
    }
    /* NAME_ERR_CPU: a guard on x86, or the choice among the levels */
    LLVMValueRef run, isa = NULL, run_par = NULL;
    if (n > 1) run = be_cpu_dispatch(es, runs, n, 5, &isa, arena_printf(p->arena, "%s_run", p->name));
    else run = be_cpu_guard(&es[0], runs[0], 5);
    if (threads) run = emit_entries(&es[0], run, &run_par);
    emit_info(&es[0], td, run, ts, n, isa, run_par);
    e.noutlined = 0;
    for (int l = 0; l < n; l++) e.noutlined += es[l].noutlined;

    /* -v times the building of the module and LLVM's two phases like the passes before them */
    progress("%-15s %8.2f ms", "llvm-build", now_ms() - t0);
    Frames fr = {0};
    be_listen_remarks(e.C, &fr);    /* before the side's thread: it switches the remarks on */
    if (side) {
        for (int l = 0; l < n; l++) side->outlined |= side->es[l].noutlined > 0;
        side->tm = be_machine(t, opt_level);
        be_listen_remarks(side->e.C, &side->fr);
        if (pthread_create(&side->thread, NULL, side_main, side) != 0) die("emit: cannot start a thread");
    }
    t0 = now_ms();
    optimize(e.M, tm, opt_level, e.noutlined > 0, p->tsan);
    progress("%-15s %8.2f ms", "llvm-opt", now_ms() - t0);
    t0 = now_ms();
    write_out(p, e.M, tm, &pool, side, kind, path);
    progress("%-15s %8.2f ms", kind == EMIT_LLVM ? "llvm-print" : "llvm-codegen", now_ms() - t0);
    if (side)
        progress("%-15s %8.2f ms (on a thread of its own: %d of %d kernels, %lld of their %lld LLVM instructions)",
                 "llvm-side", side->ms, side->nkernels, nk, (long long)side->size, (long long)(side->size + side->main_size));
    p->stack_size = be_stack_bound(&e, &fr, run, side ? side->e.M : NULL, side ? &side->fr : NULL);
    for (int l = 1; l < n; l++) {
        ps[l]->flash_size = p->flash_size, ps[l]->stack_size = p->stack_size;
        ps[l]->weights_size = p->weights_size;
    }
    be_frames_free(&fr);
    if (side) {
        be_frames_free(&side->fr);
        if (side->obj) LLVMDisposeMemoryBuffer(side->obj);
        if (side->err) LLVMDisposeMessage(side->err);
        free(side->names);
        LLVMDisposeTargetMachine(side->tm);
        LLVMDisposeBuilder(side->e.B);
        LLVMDisposeModule(side->e.M);
        LLVMContextDispose(side->e.C);
        free(side);
    }
    free(pool.data);
    free(pool.size);
    free(pool.g);
    free(pool.off);
    LLVMDisposeBuilder(e.B);
    LLVMDisposeModule(e.M);
    LLVMContextDispose(e.C);
    LLVMDisposeTargetData(td);
    LLVMDisposeTargetMachine(tm);
}

void be_emit_levels(Program **ps, const Target *ts, int n, int opt_level, EmitKind kind, const char *path) {
    Program *p = ps[0];
    emit_module(ps, ts, n, opt_level, kind, path);
    if (p->weights_size)
        progress("weights: %lld B in %s%s, not counted in flash", (long long)p->weights_size,
                 p->weights_section ? "section " : "", p->weights_section ? p->weights_section : "the blob");
    if (n > 1) {
        char list[256] = "";
        for (int l = 0; l < n; l++)
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", l ? ", " : "", ts[l].isa);
        progress("ISA levels: %s (chosen at run time; flash counts all)", list);
    }
    progress("memory: flash %lld B (code and constants), arena %lld B (align %d; lower bound %lld B), stack %lld B "
             "at most; %lld multiply-accumulates per run", (long long)p->flash_size, (long long)p->arena_size,
             p->arena_align, (long long)p->arena_lower_bound, (long long)p->stack_size, (long long)be_macs(p));
}

void be_emit(Program *p, const Target *t, int opt_level, EmitKind kind, const char *path) {
    be_emit_levels(&p, t, 1, opt_level, kind, path);
}
