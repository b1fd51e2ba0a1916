/* facts.c - what the emitted object costs its target, stated in the header (NAME_FLASH_SIZE,
 * NAME_STACK_SIZE) and in -v's memory report, measured on the code LLVM generated rather than
 * estimated from the kernel IR (the multiply-accumulates, NAME_MACS, are the kernel IR's):
 *   flash  the bytes of the object's allocated, read-only sections (code, constants, unwind
 *          tables): what `size` calls text, read from the ELF section headers, less the
 *          section of --weights-section (NAME_WEIGHTS_SIZE), meant for another memory;
 *   stack  the deepest stack one call of NAME_run uses: the frame of every function as LLVM's
 *          prologue/epilogue inserter laid it out (its "stack bytes in function" remark; the
 *          C API offers neither -stack-size-section nor the frame info), summed along the
 *          deepest path of the module's call graph (run -> kernels -> math helpers), plus what
 *          codegen may add unseen: return addresses on x86, frame realignment for wide vector
 *          spills, and a library routine (memcpy, memset, 64-bit division helpers) at the end.
 * The remarks are switched on once for the process; every LLVM context that generates code
 * must then take them through be_listen_remarks, or LLVM prints them on stderr. */
#include <stdlib.h>
#include <string.h>

#include <llvm-c/Support.h>

#include "internal.h"

/* Stack a library routine the generated code calls may use below its caller: memcpy/memset
 * of newlib, picolibc and glibc push at most a few registers; libgcc's 64-bit division on
 * 32-bit targets goes two calls deep with small frames. */
#define LIBCALL_STACK 64

static void on_diag(LLVMDiagnosticInfoRef di, void *ctx) {
    Frames *fr = ctx;
    char *msg = LLVMGetDiagInfoDescription(di);
    LLVMDiagnosticSeverity sev = LLVMGetDiagInfoSeverity(di);
    const char *at = strstr(msg, " stack bytes in function");
    if (sev == LLVMDSError) die("LLVM: %s", msg);
    if (sev == LLVMDSWarning) progress("LLVM warning: %s", msg);
    if (sev == LLVMDSRemark && at && fr) {
        /* "<loc>: N stack bytes in function 'NAME'" (quotes in some LLVM versions) */
        const char *num = at;
        while (num > msg && num[-1] >= '0' && num[-1] <= '9') num--;
        const char *name = at + strlen(" stack bytes in function");
        while (*name == ' ' || *name == '\'') name++;
        size_t len = strlen(name);
        while (len && (name[len - 1] == '\'' || name[len - 1] == '\n')) len--;
        if (fr->n == fr->cap) {
            fr->cap = fr->cap ? 2 * fr->cap : 64;
            fr->name = realloc(fr->name, (size_t)fr->cap * sizeof *fr->name);
            fr->bytes = realloc(fr->bytes, (size_t)fr->cap * sizeof *fr->bytes);
            if (!fr->name || !fr->bytes) die("out of memory");
        }
        fr->name[fr->n] = strndup(name, len);
        if (!fr->name[fr->n]) die("out of memory");
        fr->bytes[fr->n++] = strtoll(num, NULL, 10);
    }
    LLVMDisposeMessage(msg);
}

void be_listen_remarks(LLVMContextRef C, Frames *fr) {
    static bool on;
    if (!on) {
        const char *argv[] = {"onnxcc", "-pass-remarks-analysis=prologepilog"};
        LLVMParseCommandLineOptions(2, argv, NULL);
        on = true;
    }
    LLVMContextSetDiagnosticHandler(C, on_diag, fr);
}

void be_frames_free(Frames *fr) {
    for (int i = 0; i < fr->n; i++) free(fr->name[i]);
    free(fr->name);
    free(fr->bytes);
    memset(fr, 0, sizeof *fr);
}

/* ---- stack: the deepest call path ---- */

typedef struct Walk {
    const Target *t;
    Frames *fr[2];                  /* the module's, the side module's (may be NULL) */
    LLVMValueRef *fn;               /* defined functions, in module order, the side's after */
    int64_t *depth;                 /* -1 unknown, -2 on the current path */
    int n;
} Walk;

/* f's index; a declaration's is that of the function of its name the other module defines
 * (emit.c's side module: kernels compiled apart, called by NAME_run) */
static int fn_index(Walk *w, LLVMValueRef f) {
    for (int i = 0; i < w->n; i++)
        if (w->fn[i] == f) return i;
    if (!LLVMIsDeclaration(f)) return -1;
    size_t len, l2;
    const char *name = LLVMGetValueName2(f, &len);
    for (int i = 0; i < w->n; i++) {
        const char *n2 = LLVMGetValueName2(w->fn[i], &l2);
        if (l2 == len && !memcmp(n2, name, len)) return i;
    }
    return -1;
}

static int64_t frame_of(Walk *w, LLVMValueRef f) {
    size_t len;
    const char *name = LLVMGetValueName2(f, &len);
    for (int m = 0; m < 2; m++) {
        Frames *fr = w->fr[m];
        for (int i = fr ? fr->n - 1 : -1; i >= 0; i--)  /* the last codegen's frame wins */
            if (strlen(fr->name[i]) == len && !memcmp(fr->name[i], name, len)) return fr->bytes[i];
    }
    die("no stack size from LLVM for function %.*s", (int)len, name);
}

static bool is_x86(const Target *t) {
    return !strncmp(t->triple, "x86_64", 6) || !strncmp(t->triple, "i386", 4) || !strncmp(t->triple, "i686", 4);
}

/* Bytes below the caller's stack pointer that a call of f may touch. */
static int64_t depth(Walk *w, int i) {
    if (w->depth[i] >= 0) return w->depth[i];
    if (w->depth[i] == -2) die("recursion in the generated code");
    w->depth[i] = -2;
    LLVMValueRef f = w->fn[i];
    int64_t self = frame_of(w, f);
    if (is_x86(w->t)) {
        self += w->t->ptr_bits / 8;                 /* the return address the call pushed */
        /* a frame realigned for vector spills may drop the stack pointer by up to this
         * much more than its size says (the ABI guarantees 16-byte alignment) */
        if (w->t->vector_bytes > 16) self += w->t->vector_bytes - 16;
    }
    int64_t callees = LIBCALL_STACK;
    for (LLVMBasicBlockRef b = LLVMGetFirstBasicBlock(f); b; b = LLVMGetNextBasicBlock(b))
        for (LLVMValueRef ins = LLVMGetFirstInstruction(b); ins; ins = LLVMGetNextInstruction(ins)) {
            if (!LLVMIsACallInst(ins)) continue;
            LLVMValueRef g = LLVMGetCalledValue(ins);
            int j = g && LLVMIsAFunction(g) ? fn_index(w, g) : -1;
            if (j >= 0) {
                int64_t d = depth(w, j);
                if (d > callees) callees = d;
            }
        }
    return w->depth[i] = self + callees;
}

int64_t be_stack_bound(Emitter *e, Frames *fr, LLVMValueRef run, LLVMModuleRef side, Frames *side_fr) {
    Walk w = {.t = e->t, .fr = {fr, side_fr}};
    LLVMModuleRef mods[2] = {e->M, side};
    for (int m = 0; m < 2 && mods[m]; m++)
        for (LLVMValueRef f = LLVMGetFirstFunction(mods[m]); f; f = LLVMGetNextFunction(f))
            if (!LLVMIsDeclaration(f)) w.n++;
    w.fn = ARENA_ARRAY(e->p->arena, LLVMValueRef, w.n + 1);
    w.depth = ARENA_ARRAY(e->p->arena, int64_t, w.n + 1);
    int n = 0;
    for (int m = 0; m < 2 && mods[m]; m++)
        for (LLVMValueRef f = LLVMGetFirstFunction(mods[m]); f; f = LLVMGetNextFunction(f))
            if (!LLVMIsDeclaration(f)) w.depth[n] = -1, w.fn[n++] = f;
    int r = fn_index(&w, run);
    if (r < 0) die("NAME_run is not in the module");
    return depth(&w, r);
}

/* ---- work ---- */

int64_t be_macs(const Program *p) {
    int64_t total = 0;
    for (int i = 0; i < p->nkernels; i++) {
        int64_t macs, bytes;
        kir_kernel_work(p, i, &macs, &bytes);
        total = sat_add(total, macs);    /* each kernel saturates at INT64_MAX (kcost) */
    }
    return total;
}

/* ---- flash: the object's read-only allocated sections, but the weights' own ---- */

static uint64_t rd(const unsigned char *p, int n, bool be) {
    uint64_t v = 0;
    for (int i = 0; i < n; i++) v |= (uint64_t)p[be ? n - 1 - i : i] << (8 * i);
    return v;
}

/* Whether section header sh is named `name`. */
static bool is_named(const unsigned char *o, size_t size, uint64_t shstr, const unsigned char *sh, bool be,
                     const char *name) {
    size_t n = strlen(name);
    if (shstr == UINT64_MAX) return false;
    uint64_t at = shstr + rd(sh, 4, be);
    return at + n + 1 <= size && !memcmp(o + at, name, n + 1);
}

int64_t be_flash_size(const char *obj, size_t size, const char *skip, int64_t *skipped) {
    const unsigned char *o = (const unsigned char *)obj;
    if (size < 52 || memcmp(o, "\177ELF", 4)) return -1;    /* not ELF: unknown */
    bool is64 = o[4] == 2, be = o[5] == 2;
    uint64_t shoff = is64 ? rd(o + 40, 8, be) : rd(o + 32, 4, be);
    int shentsize = (int)rd(o + (is64 ? 58 : 46), 2, be);
    int shnum = (int)rd(o + (is64 ? 60 : 48), 2, be);
    int shstrndx = (int)rd(o + (is64 ? 62 : 50), 2, be);
    /* the file offset of the section names (--weights-section looks one up) */
    uint64_t shstr = UINT64_MAX;
    if (shstrndx < shnum && shoff + (uint64_t)(shstrndx + 1) * (uint64_t)shentsize <= size) {
        const unsigned char *sh = o + shoff + (uint64_t)shstrndx * (uint64_t)shentsize;
        shstr = is64 ? rd(sh + 24, 8, be) : rd(sh + 16, 4, be);
    }
    enum { SHT_NOBITS = 8, SHF_WRITE = 1, SHF_ALLOC = 2 };
    int64_t total = 0;
    for (int i = 0; i < shnum; i++) {
        if (shoff + (uint64_t)(i + 1) * (uint64_t)shentsize > size) return -1;
        const unsigned char *sh = o + shoff + (uint64_t)i * (uint64_t)shentsize;
        uint64_t type = rd(sh + 4, 4, be);
        uint64_t flags = is64 ? rd(sh + 8, 8, be) : rd(sh + 8, 4, be);
        uint64_t bytes = is64 ? rd(sh + 32, 8, be) : rd(sh + 20, 4, be);
        if (!(flags & SHF_ALLOC) || (flags & SHF_WRITE) || type == SHT_NOBITS) continue;
        if (skip && is_named(o, size, shstr, sh, be, skip)) *skipped += (int64_t)bytes;
        else total += (int64_t)bytes;
    }
    return total;
}
