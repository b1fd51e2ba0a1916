/* internal.h - what the backend's files share (not part of the backend's API, backend.h is).
 *
 * emit.c builds the LLVM module from the kernel IR, using the Emitter below as its state;
 * math.c expands the operators that are not single LLVM instructions (exp, log, tanh, erf,
 * pow, floor, ...) into plain float arithmetic; target.c makes the TargetMachine. */
#ifndef ONNXCC_BACKEND_INTERNAL_H
#define ONNXCC_BACKEND_INTERNAL_H
#include <llvm-c/Core.h>
#include <llvm-c/Target.h>
#include <llvm-c/TargetMachine.h>

#include "backend.h"
#include "../ir/krange.h"

typedef struct Emitter {
    Program *p;
    const Target *t;
    LLVMContextRef C;
    LLVMModuleRef M;
    LLVMBuilderRef B;               /* positioned in the function being built */
    LLVMTypeRef i1, i8, i16, i32, i64, idx, f32, f64, ptr, voidt;
    /* math helpers, created on first use: [op][0 float, 1 double] */
    LLVMValueRef mathfn[K_COUNT][2];
    /* the kernel being built */
    Kernel *k;
    /* loads of k->prefetch that prefetched ahead in block prefetch_bb (one prefetch a load) */
    const Expr *prefetched[32];
    int nprefetched;
    LLVMBasicBlockRef prefetch_bb;
    LLVMValueRef fn;
    LLVMValueRef *vars, *scalars;   /* allocas of loop variables and scalar registers */
    KRange *ranges;                 /* of the loop variables at the point being emitted */
    bool contract;                  /* float mul/add may fuse into FMAs (-O2, not --fp-strict) */
    /* inside a vector loop (kernel.c, vloop): its lanes (0 outside), variable and first value;
     * vreg[r] the vector alloca of lane-private register r (NULL: uniform); vcache keeps one
     * alloca per register for the last width used */
    unsigned vw;
    int lanevar;
    int64_t lanelo;
    LLVMValueRef lanebase;          /* vector reductions: lane i is lanebase + lanelo + i */
    LLVMValueRef *vreg, *vcache;
    unsigned *vcache_w;
    /* the runs of adjacent float loads of the reduction loop being emitted that one vldmia
     * loads (kernel.c, vldm_groups) */
    struct LoadRun *runs;
    int nruns;
    /* epilogues called, not inlined (kernel.c, outline): whether the kernel being built does
     * so; whether a helper is being built (its one-element constants are then constants);
     * the helpers made so far (key: the expression's shape); the leaves of the expression
     * of the helper being built and the param each stands for */
    bool outline, building;
    struct Outlined *outlined;
    int noutlined;
    const Expr **oleaf;
    LLVMValueRef *oarg;
    int noleaf;
    /* constant blocks (emit.c, plan_blocks): by kernel id, the one global holding the
     * kernel's constants, or NULL; by root buffer id, a constant's offset in its kernel's
     * block, or -1. pval: the pointers of the params of the kernel being built. */
    LLVMValueRef *kblock;
    int64_t *block_at;
    LLVMValueRef *pval;
    struct ConstPool *pool;         /* constants shared by the ISA levels (emit.c), or NULL */
    /* a task's part of a kernel (kernel.c, be_kernel_task): the loops of its LH_PARALLEL
     * group run the values from par_lo to par_hi (function parameters) of their bounds */
    const Stmt *par;
    LLVMValueRef par_lo, par_hi;
    /* kernel.c, ubs_exact: the last constant buffer checked for pmaddubsw and the answer */
    const struct Buf *ubs_buf;
    bool ubs_ok;
} Emitter;

/* elf.c: relocatable ELF64 objects (parts) joined into one, as `ld -r` would, plus a section
 * of constant data (the blob, may be NULL: its parts data[i] of size[i] bytes at offsets
 * off[i], increasing, -1 for none) that defines `symbol`; the symbols named in `hide` become
 * local. The object goes to sink->write in order. False, before anything is written, if an
 * input has what the join does not handle. */
typedef struct ElfPart {
    const void *data;
    size_t size;
} ElfPart;
typedef struct ElfBlob {
    const char *section, *symbol;
    size_t size, align;
    const void *const *data;
    const size_t *size_of;
    const int64_t *off;
    int n;
} ElfBlob;
typedef struct ElfSink {
    void (*write)(void *ctx, const void *data, size_t n);
    void *ctx;
} ElfSink;
bool be_elf_join(const ElfPart *parts, int nparts, const ElfBlob *blob, const char *const *hide, int nhide,
                 const ElfSink *sink);

/* A TargetMachine for t (PIC on the host, static elsewhere). */
LLVMTargetMachineRef be_machine(const Target *t, int opt_level);
/* nounwind plus target-cpu/target-features matching the TargetMachine. */
void be_fn_attrs(Emitter *e, LLVMValueRef fn);
void be_enum_attr(Emitter *e, LLVMValueRef fn, unsigned idx, const char *name);

/* Frame sizes LLVM's code generator reported, by function name (facts.c). */
typedef struct Frames {
    char **name;
    int64_t *bytes;
    int n, cap;
} Frames;
/* Take C's diagnostics: errors abort, warnings go to -v, frame sizes to fr (may be NULL). */
void be_listen_remarks(LLVMContextRef C, Frames *fr);
void be_frames_free(Frames *fr);
/* Bytes of stack one call of `run` uses at most, from fr and e->M's call graph, and from
 * side_fr and the side module's (emit.c; NULL without one). */
int64_t be_stack_bound(Emitter *e, Frames *fr, LLVMValueRef run, LLVMModuleRef side, Frames *side_fr);
/* Bytes of the allocated read-only sections of an object in memory; -1 if not ELF. Those of
 * the section named `skip` (--weights-section; may be NULL) are not counted but go to *skipped. */
int64_t be_flash_size(const char *obj, size_t size, const char *skip, int64_t *skipped);

/* x86: wrap run in a NAME_run that returns `code` on a CPU lacking the features the object
 * was compiled for (cpucheck.c); returns the function to export (run itself elsewhere). */
LLVMValueRef be_cpu_guard(Emitter *e, LLVMValueRef run, int code);
/* x86, several ISA levels (es[l] emitting runs[l], lowest first): NAME_run, compiled for the
 * baseline, runs the highest level this CPU has (asked once by cpuid), or returns `code` on a
 * CPU below the lowest; and NAME_isa, which reports or forces the level (cpucheck.c). Returns
 * the function named `name`; *isa_fn gets NAME_isa. */
LLVMValueRef be_cpu_dispatch(Emitter *es, LLVMValueRef *runs, int n, int code, LLVMValueRef *isa_fn, const char *name);
/* The attributes of an entry point that must run on any CPU of the architecture (x86: the
 * baseline, so that NAME_ERR_CPU can be returned), else be_fn_attrs. */
void be_entry_attrs(Emitter *e, LLVMValueRef fn);

/* Link an object held in memory into a fresh in-process JIT (load.c; takes ownership of buf);
 * be_loaded_symbol then finds its symbols. */
void be_load_buffer(LLVMMemoryBufferRef buf, const char *where);

/* The internal function computing kernel k (kernel.c): void(ptr param0, ptr param1, ...),
 * the params in a constant block (be_in_block) replaced by one pointer to the block, last. */
/* With `task` (a target with threads), a kernel with an LH_PARALLEL group (kir_parallel_loop)
 * also gets a task function, void(ptr params[], i32 task), into *task (else NULL); the kernel
 * function and the tasks then share one body (kernel.c, kernel_parallel). */
LLVMValueRef be_kernel(Emitter *e, Kernel *k, LLVMValueRef *task);
/* Whether param b of a kernel is in its kernel's constant block (emit.c, plan_blocks). */
bool be_in_block(const Emitter *e, Buf *b);
/* A float add/sub/mul v, marked contractible into FMAs where the program allows (-O2 and
 * above, not --fp-strict). */
LLVMValueRef be_fop(Emitter *e, LLVMValueRef v);
/* Whether kernel k is one of a quantized model (an 8-bit param) compiled for a
 * microcontroller (Target.small_code) at -O2 and up: the size-first policies' kernels. */
bool be_small_quantized(const Emitter *e, const Kernel *k);
/* In-memory LLVM type of a dtype (bool: i8) and its register type (bool: i1). */
LLVMTypeRef be_mem_type(Emitter *e, DType t);
LLVMTypeRef be_reg_type(Emitter *e, DType t);

/* Unary (b NULL) or binary float math of type t (DT_FLOAT or DT_DOUBLE) that is not a single
 * instruction: K_EXP, K_LOG, K_TANH, K_SIGMOID, K_ERF, K_FLOOR, K_CEIL, K_ROUND, K_POW,
 * K_REM (floats); also K_POW on integers. Emitted as a call of an internal helper (always
 * inline for the float ones). */
LLVMValueRef be_math(Emitter *e, KOp op, DType t, LLVMValueRef a, LLVMValueRef b);
/* Whether be_math handles op on floats. */
bool be_math_op(KOp op);

#endif
