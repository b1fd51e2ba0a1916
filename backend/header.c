/* header.c - the model's C header, written next to its object: runtime/model.h.in (embedded
 * into onnxcc at build time as be_header_template) with its @KEY@ placeholders filled from
 * the Program: the model name, arena size and alignment, flash, stack and work, and per
 * input/output a documentation line, size macros and a parameter of the typed convenience
 * wrapper NAME_run_typed(). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"

extern const char be_header_template[];    /* build/gen/header_template.c */

/* The C element type of a tensor of dtype t as seen by the caller. */
static const char *ctype(DType t) {
    switch (t) {
    case DT_FLOAT: return "float";
    case DT_DOUBLE: return "double";
    case DT_INT8: return "int8_t";
    case DT_UINT8: case DT_BOOL: return "uint8_t";
    case DT_FLOAT8E4M3FN: case DT_FLOAT8E4M3FNUZ: case DT_FLOAT8E5M2: case DT_FLOAT8E5M2FNUZ: return "uint8_t";
    case DT_FLOAT4E2M1: case DT_FLOAT8E8M0: return "uint8_t";
    case DT_INT16: return "int16_t";
    case DT_UINT16: case DT_FLOAT16: case DT_BFLOAT16: return "uint16_t";
    case DT_INT32: return "int32_t";
    case DT_UINT32: return "uint32_t";
    case DT_INT64: return "int64_t";
    case DT_UINT64: return "uint64_t";
    default: return "void";
    }
}

/* ... of an input or output: a string's chars, 4-bit values' packed bytes */
static const char *io_ctype(const Buf *b) { return b->string ? "char" : b->nibbles ? "uint8_t" : ctype(b->dtype); }

/* A value name inside a C comment: nothing that could close or break the comment. */
static void put_name(FILE *f, const char *s) {
    for (; *s; s++) {
        if (*s == '*' && s[1] == '/') fputs("*_", f), s++;
        else if ((unsigned char)*s < ' ') fputc('?', f);
        else fputc(*s, f);
    }
}

static void put_shape(FILE *f, const Buf *b) {
    int rank = kir_io_rank(b);
    fprintf(f, "%s[", dtype_name((DType)kir_io_dtype(b)));
    for (int d = 0; d < rank; d++) fprintf(f, "%s%lld", d ? "," : "", (long long)b->dims[d]);
    fputc(']', f);
    if (b->string) fprintf(f, " (char[%lld] each)", (long long)b->dims[rank]);
    if (b->nibbles) fputs(b->crumbs ? " (four a byte, the first in the lowest two bits)" : " (two a byte, the first in the low nibble)", f);
}

static bool has_strings(const Program *p) {
    for (int i = 0; i < p->ninputs; i++)
        if (p->inputs[i]->string) return true;
    for (int i = 0; i < p->noutputs; i++)
        if (p->outputs[i]->string) return true;
    return false;
}

static void io_doc(FILE *f, Program *p) {
    for (int io = 0; io < 2; io++) {
        Buf **bufs = io ? p->outputs : p->inputs;
        int n = io ? p->noutputs : p->ninputs;
        fprintf(f, " * %s (%d):\n", io ? "Outputs" : "Inputs", n);
        for (int i = 0; i < n; i++) {
            fprintf(f, " *   %d  \"", i);
            put_name(f, bufs[i]->name);
            fputs("\"  ", f);
            put_shape(f, bufs[i]);
            fprintf(f, "  %zu bytes", kir_io_nbytes(bufs[i]));
            int d = io ? kir_dims_output(p, bufs[i]) : -1;
            if (d >= 0) fprintf(f, " at most: the shape depends on the data, its dims go to output %d", d);
            if (bufs[i]->dims_of) fprintf(f, ": the actual dims of output %d", bufs[i]->dims_of->io_index);
            fputc('\n', f);
        }
    }
}

static void io_macros(FILE *f, Program *p) {
    for (int io = 0; io < 2; io++) {
        Buf **bufs = io ? p->outputs : p->inputs;
        int n = io ? p->noutputs : p->ninputs;
        const char *kind = io ? "OUTPUT" : "INPUT";
        for (int i = 0; i < n; i++) {
            Buf *b = bufs[i];
            int64_t bytes = b->string ? b->dims[b->rank - 1] : 1;
            fprintf(f, "#define %s_%s_%d_DTYPE %d\n", p->name, kind, i, kir_io_dtype(b));
            fprintf(f, "#define %s_%s_%d_RANK %d\n", p->name, kind, i, kir_io_rank(b));
            fprintf(f, "#define %s_%s_%d_NUMEL %lld\n", p->name, kind, i, (long long)(kir_numel(b) / bytes));
            fprintf(f, "#define %s_%s_%d_SIZE %zu\n", p->name, kind, i, kir_io_nbytes(b));
        }
    }
}

static void typed_run(FILE *f, Program *p) {
    fprintf(f, "/* The same as %s_run%s with one typed pointer per tensor. */\n", p->name, p->weights_external ? "_w" : "");
    fprintf(f, "static inline int %s_run_typed(", p->name);
    for (int i = 0; i < p->ninputs; i++) {
        fprintf(f, "\n    const %s *in_%d /* \"", io_ctype(p->inputs[i]), i);
        put_name(f, p->inputs[i]->name);
        fputs("\" */,", f);
    }
    for (int i = 0; i < p->noutputs; i++) {
        fprintf(f, "\n    %s *out_%d /* \"", io_ctype(p->outputs[i]), i);
        put_name(f, p->outputs[i]->name);
        fputs("\" */,", f);
    }
    fputs(p->weights_external ? "\n    void *arena, const void *weights) {\n" : "\n    void *arena) {\n", f);
    if (p->ninputs) {
        fputs("    const void *const inputs[] = {", f);
        for (int i = 0; i < p->ninputs; i++) fprintf(f, "%sin_%d", i ? ", " : "", i);
        fputs("};\n", f);
    }
    if (p->noutputs) {
        fputs("    void *const outputs[] = {", f);
        for (int i = 0; i < p->noutputs; i++) fprintf(f, "%sout_%d", i ? ", " : "", i);
        fputs("};\n", f);
    }
    fprintf(f, "    return %s_run%s(%s, %s, arena%s);\n}\n", p->name, p->weights_external ? "_w" : "",
            p->ninputs ? "inputs" : "(const void *const *)0", p->noutputs ? "outputs" : "(void *const *)0",
            p->weights_external ? ", weights" : "");
}

/* --profile only: what the instrumented run() keeps (backend/emit.c). */
static void profile_decls(FILE *f, Program *p) {
    if (!p->profile) return;
    const char *n = p->name;
    fprintf(f, "\n/* --profile: %s_run adds to %s_profile[k] the clock ticks spent in kernel k (named\n"
               " * %s_profile_names[k], %s_profile_macs[k] multiply-accumulates per run). The clock is\n"
               " * the cycle counter on x86; on other targets it is %s_profile_clock(), which you define\n"
               " * (e.g. from SysTick or the DWT cycle counter). Not for release builds. */\n", n, n, n, n, n);
    fprintf(f, "#define %s_NUM_KERNELS %d\n", n, p->nkernels > 0 ? p->nkernels : 1);
    fprintf(f, "extern uint64_t %s_profile[%s_NUM_KERNELS];\n", n, n);
    fprintf(f, "extern const char *const %s_profile_names[%s_NUM_KERNELS];\n", n, n);
    fprintf(f, "extern const uint64_t %s_profile_macs[%s_NUM_KERNELS];\n", n, n);
    fprintf(f, "uint64_t %s_profile_clock(void);\n", n);
}

/* What the object costs (backend/facts.c): flash, stack, work. */
static void cost_facts(FILE *f, Program *p) {
    const char *n = p->name;
    fprintf(f, "/* flash: code and read-only data of the object, in bytes (what `size` calls text, less the\n"
               " * weights when --weights-section or --emit-weights puts them elsewhere) */\n");
    fprintf(f, "#define %s_FLASH_SIZE %lld\n", n, (long long)(p->flash_size < 0 ? 0 : p->flash_size));
    fprintf(f, "/* stack: bytes one call of %s_run uses at most below the caller's stack pointer, on the\n"
               " * target it was compiled for, a library memcpy/memset included */\n", n);
    fprintf(f, "#define %s_STACK_SIZE %lld\n", n, (long long)(p->stack_size < 0 ? 0 : p->stack_size));
    fprintf(f, "/* the least arena any placement of this program's temporaries could have: the most bytes\n"
               " * live at one kernel (an output written over an input that dies there counted once) */\n");
    fprintf(f, "#define %s_ARENA_LOWER_BOUND %lld\n", n, (long long)p->arena_lower_bound);
    fprintf(f, "/* multiply-accumulates per run (padding included, as in op-level counts) */\n");
    fprintf(f, "#define %s_MACS %lld\n", n, (long long)be_macs(p));
}

/* The entry points: NAME_run, or with --emit-weights NAME_run_w taking the blob; on targets
 * with threads NAME_run_par (NAME_run_w_par) too. */
static void run_decl(FILE *f, Program *p) {
    const char *n = p->name;
    bool ext = p->weights_external;
    if (!ext) {
        fprintf(f, "int %s_run(const void *const *inputs, void *const *outputs, void *arena);   /* 0 on success */\n", n);
    } else {
        fprintf(f, "/* --emit-weights: as %s_run would be, with the weights blob %s_WEIGHTS_SIZE bytes long,\n"
                   " * loaded unchanged at an address aligned to %s_WEIGHTS_ALIGN; read only, it may be shared\n"
                   " * by calls running at the same time. 0 on success, %s_ERR_WEIGHTS for a blob that is not\n"
                   " * this object's. */\n", n, n, n, n);
        fprintf(f, "int %s_run_w(const void *const *inputs, void *const *outputs, void *arena, const void *weights);\n", n);
    }
    if (p->vector_bytes < 16) return;   /* a microcontroller: no threads */
    int64_t most = 0;
    for (int i = 0; i < p->nkernels; i++) {
        const Stmt *l = kir_parallel_loop(p->kernels[i]);
        if (l && l->tasks > most) most = l->tasks;
    }
    const char *run = ext ? "run_w" : "run";
    fprintf(f, "\n/* Several cores: %s_%s_par is %s_%s with a parallel-for of the caller's (onnxcc_parallel_for\n"
               " * above; runtime/onnxcc_pool.h has a small pthreads pool), through which the large kernels\n"
               " * run as up to %s_MAX_TASKS tasks each; NULL runs every kernel whole. The object creates no\n"
               " * thread. The outputs are bitwise those of %s_%s for any number of threads, and the arena\n"
               " * is the same %s_ARENA_SIZE bytes (the tasks need no scratch of their own). %s_STACK_SIZE\n"
               " * is the calling thread's; each thread running tasks needs about as much. */\n",
            n, run, n, run, n, n, run, n, n);
    fprintf(f, "#define %s_MAX_TASKS %lld\n", n, (long long)most);
    if (ext)
        fprintf(f, "int %s_run_w_par(const void *const *inputs, void *const *outputs, void *arena, const void *weights,\n"
                   "    onnxcc_parallel_for *parallel_for, void *ctx);\n", n);
    else
        fprintf(f, "int %s_run_par(const void *const *inputs, void *const *outputs, void *arena,\n"
                   "    onnxcc_parallel_for *parallel_for, void *ctx);\n", n);
}

/* Where the weights are (--weights-section, --emit-weights; backend/weights.c lays the blob). */
static void weights_facts(FILE *f, Program *p) {
    const char *n = p->name;
    if (p->weights_section) {
        fprintf(f, "/* --weights-section: the constant tensors are in this section of the object, %s_WEIGHTS_SIZE\n"
                   " * bytes that %s_FLASH_SIZE does not count; the linker script places it */\n", n, n);
        fprintf(f, "#define %s_WEIGHTS_SECTION \"%s\"\n", n, p->weights_section);
        fprintf(f, "#define %s_WEIGHTS_SIZE %lld\n", n, (long long)p->weights_size);
    }
    if (!p->weights_external) return;
    fprintf(f, "/* --emit-weights: the constant tensors are not in the object but in a blob of %s_WEIGHTS_SIZE\n"
               " * bytes, which %s_run_w takes (%s_FLASH_SIZE does not count it). Its layout, integers\n"
               " * little-endian: bytes 0-7 \"ONNXCCW\\0\", 8-11 the format version, 12-15 the header's size,\n"
               " * 16-23 the blob's size, 24-31 %s_WEIGHTS_KEY, zeros to %s_WEIGHTS_HEADER; then each tensor,\n"
               " * packed row-major, at %s_WEIGHT_<k>_OFFSET (a multiple of %s_WEIGHTS_ALIGN): */\n",
            n, n, n, n, n, n, n);
    for (int i = 0; i < p->nweights; i++) {
        Buf *b = p->weights[i];
        fprintf(f, "/*   %d  \"", i);
        put_name(f, b->name);
        fputs("\"  ", f);
        put_shape(f, b);
        fputs(" */\n", f);
        fprintf(f, "#define %s_WEIGHT_%d_OFFSET %lld\n", n, i, (long long)p->weight_offset[b->id]);
        size_t sz;
        be_const_bytes(p, b, &sz);
        fprintf(f, "#define %s_WEIGHT_%d_SIZE %zu\n", n, i, sz);
    }
    fprintf(f, "#define %s_NUM_WEIGHTS %d\n", n, p->nweights);
    fprintf(f, "#define %s_WEIGHTS_SIZE %lld\n", n, (long long)p->weights_size);
    fprintf(f, "#define %s_WEIGHTS_ALIGN %d\n", n, WEIGHTS_ALIGN);
    fprintf(f, "#define %s_WEIGHTS_HEADER %d\n", n, WEIGHTS_HEADER);
    fprintf(f, "#define %s_WEIGHTS_VERSION %d\n", n, WEIGHTS_VERSION);
    fprintf(f, "#define %s_WEIGHTS_KEY 0x%016llxull\n", n, (unsigned long long)p->weights_key);
}

/* The ISA levels the object holds (be_isa_levels) and how run() picks one. */
static void isa_decls(FILE *f, Program *p, const Target *ts, int n) {
    const char *m = p->name;
    fprintf(f, "/* ISA levels: the instruction sets this object's kernels are compiled for, lowest first */\n");
    fprintf(f, "#define %s_NUM_ISAS %d\n", m, n);
    for (int l = 0; l < n; l++) fprintf(f, "#define %s_ISA_%d \"%s\"\n", m, l, ts[l].isa);
    if (n < 2) return;
    fprintf(f, "/* %s_run runs the highest level this CPU has, chosen by cpuid on the first call (thread-safe;\n"
               " * on a CPU below level 0 it returns %s_ERR_CPU). %s_isa(-1) returns the level run() uses\n"
               " * (-1: none); %s_isa(L) makes run() use level L from then on, for every thread, if this CPU\n"
               " * has it (returns L, else -1 and nothing changes). Every level computes the same outputs\n"
               " * within rounding; %s_FLASH_SIZE counts them all. */\n", m, m, m, m, m);
    fprintf(f, "int %s_isa(int level);\n", m);
}

typedef struct Hdr { Program *p; const Target *ts; int n; } Hdr;

static void fill(FILE *f, const Hdr *h, const char *key, size_t len) {
    Program *p = h->p;
#define IS(k) (len == strlen(k) && !memcmp(key, k, len))
    if (IS("NAME")) fputs(p->name, f);
    else if (IS("GUARD")) fprintf(f, "%s_H_INCLUDED", p->name);
    else if (IS("ARENA_SIZE")) fprintf(f, "%lld", (long long)p->arena_size);
    else if (IS("ARENA_ALIGN")) fprintf(f, "%d", p->arena_align);
    else if (IS("NUM_INPUTS")) fprintf(f, "%d", p->ninputs);
    else if (IS("NUM_OUTPUTS")) fprintf(f, "%d", p->noutputs);
    else if (IS("IO_DOC")) io_doc(f, p);
    else if (IS("IO_MACROS")) io_macros(f, p);
    else if (IS("STRINGS")) {
        if (has_strings(p))
            fprintf(f, "/* string tensors: bytes per element (--max-strlen; see \"Strings\" above) */\n"
                       "#define %s_STRLEN %zu\n", p->name, ir_strlen);
    }
    else if (IS("TYPED_RUN")) typed_run(f, p);
    else if (IS("PROFILE")) profile_decls(f, p);
    else if (IS("COST_FACTS")) cost_facts(f, p);
    else if (IS("WEIGHTS")) weights_facts(f, p);
    else if (IS("RUN_DECL")) run_decl(f, p);
    else if (IS("ISA")) isa_decls(f, p, h->ts, h->n);
    else die("runtime/model.h.in: unknown placeholder @%.*s@", (int)len, key);
#undef IS
}

static void expand(FILE *f, const Hdr *h) {
    for (const char *s = be_header_template; *s;) {
        const char *at = strchr(s, '@');
        const char *end = at ? strchr(at + 1, '@') : NULL;
        if (!at || !end) { fputs(s, f); break; }
        fwrite(s, 1, (size_t)(at - s), f);
        fill(f, h, at + 1, (size_t)(end - at - 1));
        s = end + 1;
    }
}

/* Made in memory, written by out_write (temporary file and rename, or directly to a special
 * file such as /dev/null). */
void be_write_header(Program *p, const Target *ts, int nisas, const char *path) {
    Hdr h = {p, ts, nisas};
    char *text = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&text, &n);
    if (!f) die("open_memstream: %s", strerror(errno));
    expand(f, &h);
    if (ferror(f) | fclose(f)) die("writing the header in memory failed");
    out_write(path, text, n);
    free(text);
}
