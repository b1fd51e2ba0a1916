/* backend.h - kernel IR -> LLVM IR (LLVM C API) -> object/assembly/bitcode text, written
 * in-process with an LLVM TargetMachine; plus the model's C header and an in-process loader of
 * host objects used by `onnxcc check`. */
#ifndef ONNXCC_BACKEND_H
#define ONNXCC_BACKEND_H
#include "../ir/kir.h"

typedef enum EmitKind { EMIT_OBJ, EMIT_ASM, EMIT_LLVM } EmitKind;

typedef struct Target {
    char *triple;                   /* normalised */
    char *cpu, *features, *abi;
    char *isa;                      /* a name for what it runs on: the CPU and the --features
                                       beyond it ("x86-64-v4+avx512vnni"; the header, NAME_info) */
    bool host;
    bool dispatch;                  /* a default x86-64 host object: its kernels are also compiled
                                       for the upper ISA levels, chosen at run time (be_isa_levels) */
    int ptr_bits;                   /* 32 or 64 */
    int vector_bytes;               /* widest useful float vector (64 on AVX-512, 4 on Cortex-M4) */
    int fma_bits;                   /* fused multiply-adds the backend writes as llvm.fma: 0 none,
                                       32 float, 64 float and double (target.c, explicit_fma) */
    int arena_align;                /* alignment the generated code requires of the arena */
    bool vnni;                      /* x86 AVX-512 VNNI: r + dot4(a, b) is one vpdpbusd */
    int pmaddwd_bytes;              /* x86: the widest vector pmaddwd takes (16 SSE2, 32 AVX2, 64
                                       AVX-512BW), for dot4 without VNNI; 0 elsewhere */
    bool ssse3;                     /* x86 SSSE3 (pmaddubsw; implied by AVX2) */
    bool dsp;                       /* Arm DSP extension (Cortex-M4): r + dot4(a, b) is two smlad */
    bool vldm;                      /* Arm M-profile FPU: adjacent float loads as one vldmia */
    bool round_insn;                /* float round-half-to-even is one instruction (x86 SSE4.1
                                       roundps, AArch64 frintn): llvm.roundeven */
    bool small_code;                /* a microcontroller (32-bit, no float vectors), whose flash
                                       is scarce: some kernels for size (kernel.c, small_kernel) */
    const char *cvt_rne, *cvt_rne_cons; /* float to int32 rounding half to even in one
                                       instruction: inline asm text and constraints (its result
                                       in a float register for "=t"), or NULL (target.c) */
} Target;

/* triple NULL: the host (LLVMGetHostCPUName/Features). Unknown triple/cpu: fatal(). */
void be_target(Target *t, const char *triple, const char *cpu, const char *features, const char *abi);
/* The targets of the ISA levels an object for t holds, lowest first, into levels[]; returns
 * how many. One (a copy of t) unless t->dispatch: then x86-64-v3 and x86-64-v4 with VNNI,
 * which run() chooses between by cpuid (cpucheck.c). Free each with be_target_free. */
#define MAX_ISAS 2
int be_isa_levels(const Target *t, Target *levels);
/* Frees the strings be_target() made. */
void be_target_free(Target *t);
/* Emit the program to `path` (object, assembly or LLVM IR text). opt_level 0..3. With
 * p->profile (--profile, `onnxcc bench`) run() also adds the clock ticks of each kernel's call
 * to NAME_profile[k] (one uint64_t per kernel, in program order), next to NAME_profile_names
 * and NAME_profile_macs; the clock is the cycle counter on x86 and elsewhere
 * NAME_profile_clock(), a function the application defines. Without it there is none of this.
 * p->weights_section puts the constants in that section; with p->weights_external they are left
 * out for be_write_weights' blob and run() is NAME_run_w, taking it as a fourth argument. */
void be_emit(Program *p, const Target *t, int opt_level, EmitKind kind, const char *path);
/* The same for the n ISA levels of one object (be_isa_levels): ps[l] is the program lowered and
 * scheduled for ts[l]; NAME_run chooses among them at run time (cpucheck.c). The facts
 * (flash, stack) are of the whole object, in every ps[l]. n 1 is be_emit. */
void be_emit_levels(Program **ps, const Target *ts, int n, int opt_level, EmitKind kind, const char *path);
/* Multiply-accumulates of one run: kir_kernel_cost over the kernels (facts.c). After be_emit,
 * p->flash_size and p->stack_size hold the object's read-only bytes and the stack one call of
 * NAME_run uses at most (-1: unknown). */
int64_t be_macs(const Program *p);
/* --emit-weights (weights.c): the blob's format; be_weights_layout, before be_emit, places
 * the constants of a program with weights_external in it, be_write_weights writes it. */
#define WEIGHTS_MAGIC "ONNXCCW"         /* and its NUL: 8 bytes */
#define WEIGHTS_VERSION 1
#define WEIGHTS_HEADER 64
#define WEIGHTS_ALIGN 64
void be_weights_layout(Program *p);
void be_write_weights(Program *p, const char *path);
/* The bytes a constant occupies in the object or the blob: its data, or for a 4-bit one
 * (Buf.nibbles) two values a byte, low nibble first, and NIBBLE_PAD zero bytes that a vector
 * load of its last elements may read (kernel.c, nibble_load). */
enum { NIBBLE_PAD = 64 };
const void *be_const_bytes(Program *p, const Buf *b, size_t *n);
/* Write the self-contained C header describing the program's API (runtime/model.h.in); ts[0..nisas)
 * are the targets of the object's ISA levels. */
void be_write_header(Program *p, const Target *ts, int nisas, const char *path);

/* The host's float multiply-add peak in GFLOP/s on one core, measured for about `seconds`
 * with a JIT-compiled loop of independent FMAs on the vectors of `like` (a host target: the
 * peak of the instructions its objects may use) (peak.c). */
double be_fma_peak(const Target *like, double seconds);

/* Load a host object file in-process (LLVM ORC) and return NAME_run. fatal() on failure. */
typedef int (*RunFn)(const void *const *inputs, void *const *outputs, void *arena);
RunFn be_load_object(const char *obj_path, const char *name);
/* The address of the data symbol `sym` in the object be_load_object loaded last (NULL if the
 * object has no such symbol), e.g. NAME_profile of a profiled object (Program.profile). */
void *be_loaded_symbol(const char *sym);

#endif
