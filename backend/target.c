/* target.c - which machine the code is for: the host (by default a baseline CPU of its
 * architecture, so that the object runs on other machines too; `--cpu native` is this exact
 * CPU with its features) or a named triple such as thumbv7em-none-eabihf for a Cortex-M4. be_target() fills the Target that the pipeline reads (vector width for tiling,
 * arena alignment for bufferization); be_machine() makes the LLVM TargetMachine for emission. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static void init_llvm(void) {
    static bool done;
    if (done) return;
    done = true;
    LLVMInitializeAllTargetInfos();
    LLVMInitializeAllTargets();
    LLVMInitializeAllTargetMCs();
    LLVMInitializeAllAsmPrinters();
    LLVMInitializeAllAsmParsers();
}

static char *dup(const char *s) {
    char *d = strdup(s ? s : "");
    if (!d) die("out of memory");
    return d;
}

/* Whether a comma-separated LLVM feature list enables `feat` ("+avx2"). */
static bool has_feature(const char *list, const char *feat) {
    size_t n = strlen(feat);
    for (const char *s = list; s && *s;) {
        const char *end = strchr(s, ',');
        size_t len = end ? (size_t)(end - s) : strlen(s);
        if (len == n && !memcmp(s, feat, n)) return true;
        s = end ? end + 1 : NULL;
    }
    return false;
}

static bool starts(const char *s, const char *prefix) { return !strncmp(s, prefix, strlen(prefix)); }

/* The widest float vector worth tiling for. Cortex-M has no float SIMD: one float. */
static int vector_width(const Target *t) {
    const char *tr = t->triple;
    if (starts(tr, "x86_64") || starts(tr, "i386") || starts(tr, "i686")) {
        if (has_feature(t->features, "+avx512f")) return 64;
        if (has_feature(t->features, "+avx2") || has_feature(t->features, "+avx")) return 32;
        return 16;
    }
    if (starts(tr, "aarch64") || starts(tr, "arm64")) return 16;
    if (starts(tr, "thumb") || starts(tr, "arm"))
        return has_feature(t->features, "+neon") || starts(t->cpu, "cortex-a") ? 16 : 4;
    if (starts(tr, "riscv")) return has_feature(t->features, "+v") ? 16 : 4;
    return 16;
}

/* Where contracted multiply-adds are emitted as llvm.fma rather than left to LLVM's own
 * contraction: LLVM 19 never forms vfma on Cortex-M4 from `contract` flags or fmuladd (it
 * rates vfma no faster than vmul + vadd), yet a fused instruction is half the instructions of
 * a dense inner loop. Only where the FPU has the instruction for that width, since elsewhere
 * llvm.fma becomes a call of libm's fmaf/fma: FPv4-SP / FPv5 Cortex-M (float only), VFPv4
 * Cortex-A, RISC-V F (float) and D (double). x86 contracts well by itself. */
static int explicit_fma(const Target *t) {
    const char *tr = t->triple, *c = t->cpu;
    if (starts(tr, "thumb") || starts(tr, "arm")) {
        if (has_feature(t->features, "-fpregs") || has_feature(t->features, "-vfp4") ||
            has_feature(t->features, "-vfp4d16sp"))
            return 0;
        if (starts(c, "cortex-a")) return 64;
        if (starts(c, "cortex-m4") || starts(c, "cortex-m7") || starts(c, "cortex-m33") ||
            starts(c, "cortex-m55") || starts(c, "cortex-m85") || has_feature(t->features, "+vfp4") ||
            has_feature(t->features, "+vfp4d16sp") || has_feature(t->features, "+fp-armv8d16sp"))
            return 32;
        return 0;
    }
    if (starts(tr, "riscv")) return has_feature(t->features, "+d") ? 64 : has_feature(t->features, "+f") ? 32 : 0;
    return 0;
}

/* Whether a little-endian Arm target has the DSP extension (SMLAD, SXTB16): ARMv7E-M
 * (Cortex-M4, M7) has it always, ARMv8-M Mainline (Cortex-M33, M55, M85) as an option, "+dsp". */
static bool arm_dsp(const Target *t) {
    if (!starts(t->triple, "thumb") && !starts(t->triple, "arm")) return false;
    if (starts(t->triple, "thumbeb") || starts(t->triple, "armeb")) return false;  /* word_load */
    if (has_feature(t->features, "-dsp")) return false;
    return starts(t->triple, "thumbv7em") || starts(t->triple, "armv7em") || has_feature(t->features, "+dsp");
}

/* The instruction that converts a float to int32 rounding half to even, where the target's
 * FPU has one and LLVM does not use it for fptosi(roundeven(x)): Arm's VFP vcvtr (in the
 * FPSCR's rounding mode, round to nearest even unless the program changed it, which m_round's
 * additions assume too), RISC-V F's fcvt.w.s with the static mode rne. A quantized output is
 * then the conversion, an integer add and two compares (rule_quantize), where m_round's
 * float rounding took nine instructions on Cortex-M4. */
static void cvt_rne(Target *t) {
    if ((starts(t->triple, "thumb") || starts(t->triple, "arm")) && t->fma_bits >= 32)
        t->cvt_rne = "vcvtr.s32.f32 $0, $1", t->cvt_rne_cons = "=t,t";
    if (starts(t->triple, "riscv") && has_feature(t->features, "+f"))
        t->cvt_rne = "fcvt.w.s $0, $1, rne", t->cvt_rne_cons = "=r,f";
}

/* The x86-64 microarchitecture levels, spelled out as features: the vector width and the
 * run-time CPU check (cpucheck.c) read the feature list, and LLVM's CPU name alone leaves it
 * empty. Each level includes the one before it. */
static const struct { const char *cpu, *features; } x86_levels[] = {
    {"x86-64", ""},
    {"x86-64-v2", "+cx16,+popcnt,+sahf,+sse3,+ssse3,+sse4.1,+sse4.2"},
    {"x86-64-v3", "+avx,+avx2,+bmi,+bmi2,+f16c,+fma,+lzcnt,+movbe,+xsave"},
    {"x86-64-v4", "+avx512f,+avx512bw,+avx512cd,+avx512dq,+avx512vl"},
};

/* x86 CPUs by name (LLVM 19's), as the level they have and the features beyond it that the
 * schedule or the CPU check read. LLVM's CPU name alone implies its features to LLVM but
 * leaves our feature list empty, so `--cpu skylake-avx512` or `--cpu znver4` got 16-byte
 * vector schedules for AVX-512 code: ResNet-18 49 ms, where `--cpu native` on the same Zen 5
 * runs it in 11 ms. A name not listed keeps that empty list (SSE-width schedules, no check). */
static const struct {
    const char *cpu;
    int level;                      /* its index in x86_levels */
    const char *more;
} x86_cpus[] = {
    {"nehalem", 1, ""}, {"westmere", 1, ""}, {"silvermont", 1, ""}, {"slm", 1, ""},
    {"goldmont", 1, ""}, {"goldmont-plus", 1, ""}, {"tremont", 1, ""},
    {"sandybridge", 1, "+avx,+xsave"}, {"corei7-avx", 1, "+avx,+xsave"},
    {"ivybridge", 1, "+avx,+xsave,+f16c"}, {"core-avx-i", 1, "+avx,+xsave,+f16c"},
    {"btver2", 1, "+avx,+xsave,+f16c,+movbe"}, {"bdver1", 1, "+avx,+xsave,+fma4,+xop"},
    {"bdver2", 1, "+avx,+xsave,+f16c,+fma,+fma4,+xop"}, {"bdver3", 1, "+avx,+xsave,+f16c,+fma,+fma4,+xop"},
    {"haswell", 2, ""}, {"core-avx2", 2, ""}, {"broadwell", 2, ""}, {"skylake", 2, ""},
    {"alderlake", 2, "+avxvnni"}, {"raptorlake", 2, "+avxvnni"}, {"meteorlake", 2, "+avxvnni"},
    {"arrowlake", 2, "+avxvnni"}, {"arrowlake-s", 2, "+avxvnni"}, {"lunarlake", 2, "+avxvnni"},
    {"gracemont", 2, "+avxvnni"}, {"sierraforest", 2, "+avxvnni"}, {"grandridge", 2, "+avxvnni"},
    {"clearwaterforest", 2, "+avxvnni"}, {"pantherlake", 2, "+avxvnni"}, {"bdver4", 2, "+fma4,+xop"},
    {"znver1", 2, ""}, {"znver2", 2, ""}, {"znver3", 2, ""},
    {"skylake-avx512", 3, ""}, {"skx", 3, ""}, {"cannonlake", 3, ""},
    {"cascadelake", 3, "+avx512vnni"}, {"cooperlake", 3, "+avx512vnni,+avx512bf16"},
    {"icelake-client", 3, "+avx512vnni"}, {"icelake-server", 3, "+avx512vnni"},
    {"tigerlake", 3, "+avx512vnni"}, {"rocketlake", 3, "+avx512vnni"},
    {"sapphirerapids", 3, "+avx512vnni,+avx512bf16"}, {"emeraldrapids", 3, "+avx512vnni,+avx512bf16"},
    {"graniterapids", 3, "+avx512vnni,+avx512bf16"}, {"graniterapids-d", 3, "+avx512vnni,+avx512bf16"},
    {"znver4", 3, "+avx512vnni,+avx512bf16"}, {"znver5", 3, "+avx512vnni,+avx512bf16"},
};

/* "a,b" of two comma-separated lists, either possibly empty or NULL. */
static char *join(const char *a, const char *b) {
    a = a ? a : "", b = b ? b : "";
    size_t n = strlen(a) + strlen(b) + 2;
    char *r = malloc(n);
    if (!r) die("out of memory");
    snprintf(r, n, "%s%s%s", a, *a && *b ? "," : "", b);
    return r;
}

/* The features of an x86-64 level CPU name (those of the levels up to it), or of a named x86
 * CPU (x86_cpus), else "". */
static char *level_features(const char *cpu) {
    size_t n = sizeof x86_levels / sizeof x86_levels[0], k = n;
    const char *more = "";
    for (size_t i = 0; i < n; i++)
        if (!strcmp(cpu, x86_levels[i].cpu)) k = i;
    for (size_t i = 0; i < sizeof x86_cpus / sizeof x86_cpus[0]; i++)
        if (!strcmp(cpu, x86_cpus[i].cpu)) k = (size_t)x86_cpus[i].level, more = x86_cpus[i].more;
    char *r = dup(more);
    for (size_t i = 0; k < n && i <= k; i++) {
        char *r2 = join(r, x86_levels[i].features);
        free(r);
        r = r2;
    }
    return r;
}

/* The CPU's implied features (x86-64 levels) followed by the user's. */
static char *cpu_features(const char *cpu, const char *user) {
    char *lev = level_features(cpu), *r = join(lev, user);
    free(lev);
    return r;
}

/* The CPU a host object is compiled for unless --cpu says otherwise: x86-64-v3 (AVX2 and FMA:
 * Intel since Haswell, 2013, AMD since Excavator and every Zen) keeps most of the speed of
 * 256-bit vectors, and a CPU below it gets NAME_ERR_CPU from run(); AArch64's generic CPU
 * (ARMv8.0-A with NEON) is the baseline there. Elsewhere: this machine's CPU. */
static const char *host_baseline(const char *triple) {
    if (starts(triple, "x86_64")) return "x86-64-v3";
    if (starts(triple, "aarch64") || starts(triple, "arm64")) return "generic";
    return "native";
}

/* The CPU followed by each feature given with its sign: "x86-64-v4+avx512vnni". */
static char *isa_name(const char *cpu, const char *features) {
    size_t n = strlen(cpu) + 2 * strlen(features ? features : "") + 1;
    char *r = malloc(n), *w = r;
    if (!r) die("out of memory");
    w += snprintf(w, n, "%s", cpu);
    for (const char *s = features; s && *s;) {
        size_t len = strcspn(s, ",");
        if (len) w += snprintf(w, n - (size_t)(w - r), "%s%.*s", *s == '+' || *s == '-' ? "" : "+", (int)len, s);
        s += len + (s[len] == ',');
    }
    return r;
}

void be_target(Target *t, const char *triple, const char *cpu, const char *features, const char *abi) {
    init_llvm();
    memset(t, 0, sizeof *t);
    t->host = triple == NULL;
    bool cpu_given = cpu != NULL;
    if (t->host) {
        char *tr = LLVMGetDefaultTargetTriple();
        t->triple = dup(tr);
        LLVMDisposeMessage(tr);
        if (!cpu) cpu = host_baseline(t->triple);
        if (!strcmp(cpu, "native")) {
            char *c = LLVMGetHostCPUName(), *f = LLVMGetHostCPUFeatures();
            t->cpu = dup(c);
            t->features = join(f, features);
            LLVMDisposeMessage(c);
            LLVMDisposeMessage(f);
        } else {
            t->cpu = dup(cpu);
            t->features = cpu_features(cpu, features);
        }
    } else {
        if (cpu && !strcmp(cpu, "native"))
            fatal(NULL, "--cpu native means this machine's CPU: it does not go with --target");
        /* Normalise: raw "thumbv7em-none-eabihf" reads "eabihf" as the OS and silently
         * loses the hard-float ABI. */
        char *tr = LLVMNormalizeTargetTriple(triple);
        t->triple = dup(tr);
        LLVMDisposeMessage(tr);
        /* A bare Cortex-M triple means the M4 (the chip whose FPU eabihf expects). */
        if (!cpu && starts(triple, "thumbv7em")) cpu = "cortex-m4";
        t->cpu = dup(cpu ? cpu : "generic");
        t->features = cpu_features(t->cpu, features);
    }
    t->abi = abi && *abi ? dup(abi) : NULL;
    t->dispatch = t->host && starts(t->triple, "x86_64") && !cpu_given && !(features && *features);
    t->isa = isa_name(t->cpu, features);

    LLVMTargetRef target;
    char *err = NULL;
    if (LLVMGetTargetFromTriple(t->triple, &target, &err))
        fatal(NULL, "unknown target '%s': %s", triple ? triple : t->triple, err ? err : "not supported by LLVM");
    LLVMTargetMachineRef tm = be_machine(t, 0);
    LLVMTargetDataRef td = LLVMCreateTargetDataLayout(tm);
    t->ptr_bits = (int)LLVMPointerSize(td) * 8;
    LLVMDisposeTargetData(td);
    LLVMDisposeTargetMachine(tm);
    if (t->ptr_bits != 32 && t->ptr_bits != 64)
        fatal(NULL, "unknown target '%s': %d-bit pointers are not supported", t->triple, t->ptr_bits);
    t->vector_bytes = vector_width(t);
    t->fma_bits = explicit_fma(t);
    t->vnni = has_feature(t->features, "+avx512vnni") && has_feature(t->features, "+avx512vl");
    if (starts(t->triple, "x86_64")) {
        t->pmaddwd_bytes = has_feature(t->features, "+avx512bw") ? 64 : has_feature(t->features, "+avx2") ? 32 : 16;
        t->ssse3 = has_feature(t->features, "+ssse3") || has_feature(t->features, "+avx2");
    }
    t->dsp = arm_dsp(t);
    t->vldm = (starts(t->triple, "thumb") || starts(t->triple, "arm")) && t->fma_bits >= 32 && t->vector_bytes < 16;
    t->round_insn = has_feature(t->features, "+sse4.1") || !strncmp(t->triple, "aarch64", 7);
    cvt_rne(t);
    t->small_code = t->ptr_bits == 32 && t->vector_bytes < 16;
    /* Loads use natural alignment, so the arena needs only the widest element (8 bytes);
     * on the host a cache line keeps vector loops from splitting lines. */
    t->arena_align = t->ptr_bits == 64 ? 64 : 8;
}

void be_target_free(Target *t) {
    free(t->triple);
    free(t->cpu);
    free(t->features);
    free(t->abi);
    free(t->isa);
    memset(t, 0, sizeof *t);
}

int be_isa_levels(const Target *t, Target *levels) {
    if (!t->dispatch) {
        levels[0] = *t;
        levels[0].triple = dup(t->triple), levels[0].cpu = dup(t->cpu), levels[0].features = dup(t->features);
        levels[0].abi = t->abi ? dup(t->abi) : NULL, levels[0].isa = dup(t->isa);
        return 1;
    }
    /* AVX-512 with VNNI: Intel since Cascade Lake and Ice Lake, AMD since Zen 4 */
    be_target(&levels[0], NULL, t->cpu, NULL, t->abi);
    be_target(&levels[1], NULL, "x86-64-v4", "+avx512vnni", t->abi);
    levels[0].dispatch = levels[1].dispatch = false;   /* each is one level */
    return 2;
}

LLVMTargetMachineRef be_machine(const Target *t, int opt_level) {
    init_llvm();
    LLVMTargetRef target;
    char *err = NULL;
    if (LLVMGetTargetFromTriple(t->triple, &target, &err))
        fatal(NULL, "unknown target '%s': %s", t->triple, err ? err : "not supported by LLVM");
    static const LLVMCodeGenOptLevel levels[] = {
        LLVMCodeGenLevelNone, LLVMCodeGenLevelLess, LLVMCodeGenLevelDefault, LLVMCodeGenLevelAggressive,
    };
    LLVMTargetMachineOptionsRef o = LLVMCreateTargetMachineOptions();
    LLVMTargetMachineOptionsSetCPU(o, t->cpu);
    LLVMTargetMachineOptionsSetFeatures(o, t->features);
    if (t->abi) LLVMTargetMachineOptionsSetABI(o, t->abi);
    LLVMTargetMachineOptionsSetCodeGenOptLevel(o, levels[opt_level < 0 ? 0 : opt_level > 3 ? 3 : opt_level]);
    /* The host object is loaded in-process (PIE, ORC); firmware links statically. */
    LLVMTargetMachineOptionsSetRelocMode(o, t->host ? LLVMRelocPIC : LLVMRelocStatic);
    LLVMTargetMachineRef tm = LLVMCreateTargetMachineWithOptions(target, t->triple, o);
    LLVMDisposeTargetMachineOptions(o);
    if (!tm) fatal(NULL, "unknown target '%s': LLVM cannot make a target machine for it", t->triple);
    return tm;
}
