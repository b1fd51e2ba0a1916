/* kprint.c - the text form of the kernel IR (kir_print).
 *
 * Used by --print-after / --print-after-all and by the golden-text tests of the kernel passes,
 * so the output must be deterministic and depend on nothing but the Program: buffers in
 * creation order, kernels in run order, loop variables as i<N>, scalar registers as r<N>,
 * buffers as %name. Expressions are printed infix with the fewest parentheses that keep them
 * unambiguous (C precedence); the other operators print as calls, e.g. max(r0, 0.0).
 * ir/kparse.c reads this text back; kir_roundtrip checks that print -> parse -> print gives
 * the same text, so a change here needs the matching change there. */
#include "kir.h"

#include <ctype.h>
#include <math.h>
#include <string.h>

/* The words of the text form, shared with the parser (ir/kparse.c). */
const char *const kir_bufkind_name[] = {"temp", "input", "output", "const"};           /* BufKind */
const char *const kir_kclass_name[] = {"generic", "elementwise", "contraction", "copy"}; /* KernelClass */
const char *const kir_mode_name[] = {"?", "in", "out", "inout"};                     /* ParamMode */
const char *const kir_hint_name[] = {"tile", "reduction", "vector", "redo", "parallel", NULL}; /* LH_* bit i */

static void indent(FILE *f, int depth) {
    for (int i = 0; i < depth; i++) fputs("  ", f);
}

static void print_dims(FILE *f, const Buf *b) {
    fputc('[', f);
    for (int d = 0; d < b->rank; d++) fprintf(f, "%s%lld", d ? "," : "", (long long)b->dims[d]);
    fputc(']', f);
}

static void print_buf(FILE *f, const Buf *b) {
    fprintf(f, "  buf %%%s: %s", b->name, dtype_name(b->dtype));
    print_dims(f, b);
    if (b->alias) {
        fprintf(f, " view of %%%s\n", b->alias->name);
        return;
    }
    fprintf(f, " %s", kir_bufkind_name[b->kind]);
    if (b->kind == B_INPUT || b->kind == B_OUTPUT) fprintf(f, " %d", b->io_index);
    if (b->string) fputs(" string", f);
    if (b->nibbles) fputs(b->crumbs ? " crumbs" : " nibbles", f);
    if (b->dims_of) fprintf(f, " dims of %%%s", b->dims_of->name);
    if (b->kind == B_TEMP) {
        if (b->offset < 0) fputs(" @?", f);
        else if (b->first < 0) fputs(" unused", f);
        else fprintf(f, " @%lld", (long long)b->offset);
        if (b->first >= 0) fprintf(f, " live %d..%d", b->first, b->last);
    }
    fputc('\n', f);
}

/* Float constants always show a '.', 'e', "inf" or "nan" so they read differently from
 * integers; %.9g round-trips a float32 (float16 and bfloat16 constants hold float32 values).
 * Every type but float32 and index is written after a colon. */
static void print_const(FILE *f, const Expr *e) {
    if (dtype_is_float(e->type)) {
        char s[64];
        if (isnan(e->f)) snprintf(s, sizeof s, "nan");
        else if (isinf(e->f)) snprintf(s, sizeof s, "%sinf", e->f < 0 ? "-" : "");
        else {
            snprintf(s, sizeof s, e->type == DT_DOUBLE ? "%.17g" : "%.9g", e->f);
            if (!strpbrk(s, ".e")) strcat(s, ".0");
        }
        if (e->type == DT_FLOAT) fputs(s, f);
        else fprintf(f, "%s:%s", s, dtype_name(e->type));
    } else if (e->type == DT_BOOL) {
        fputs(e->i ? "true" : "false", f);
    } else if (e->type == DT_INDEX) {
        fprintf(f, "%lld", (long long)e->i);
    } else if (e->type == DT_UINT64) {
        fprintf(f, "%llu:%s", (unsigned long long)e->i, dtype_name(e->type));
    } else {
        fprintf(f, "%lld:%s", (long long)e->i, dtype_name(e->type));
    }
}

/* Binding strength of infix operators (C's order); 0 = printed as a call. */
static int prec(const Expr *e) {
    if (e->kind != E_BIN) return e->kind == E_UN && e->op == K_NEG ? 7 : 10;
    switch (e->op) {
    case K_MUL: case K_DIV: case K_REM: return 6;
    case K_ADD: case K_SUB: return 5;
    case K_LT: case K_LE: case K_GT: case K_GE: return 4;
    case K_EQ: case K_NE: return 3;
    default: return 10;
    }
}

static const char *infix(KOp op) {
    switch (op) {
    case K_MUL: return "*"; case K_DIV: return "/"; case K_REM: return "%";
    case K_ADD: return "+"; case K_SUB: return "-";
    case K_LT: return "<"; case K_LE: return "<="; case K_GT: return ">"; case K_GE: return ">=";
    case K_EQ: return "=="; case K_NE: return "!=";
    default: return NULL;
    }
}

static void print_opname(FILE *f, KOp op) {
    for (const char *c = kop_name[op]; *c; c++) fputc(tolower((unsigned char)*c), f);
}

static void print_expr(FILE *f, const Expr *e);

static void print_operand(FILE *f, const Expr *e, int min_prec) {
    bool paren = prec(e) < min_prec;
    if (paren) fputc('(', f);
    print_expr(f, e);
    if (paren) fputc(')', f);
}

static void print_args(FILE *f, Expr *const *args, int n) {
    for (int i = 0; i < n; i++) {
        if (i) fputs(", ", f);
        print_expr(f, args[i]);
    }
}

static void print_expr(FILE *f, const Expr *e) {
    switch (e->kind) {
    case E_CONST: print_const(f, e); return;
    case E_VAR: fprintf(f, "i%d", e->var); return;
    case E_SCALAR: fprintf(f, "r%d", e->var); return;
    case E_LOAD:
        fprintf(f, "%%%s[", e->buf->name);
        print_args(f, e->args, e->nargs);
        fputc(']', f);
        return;
    case E_UN:
        if (e->op == K_NEG) {
            fputc('-', f);
            print_operand(f, e->args[0], 7);
            return;
        }
        if (e->op == K_CAST) fprintf(f, "cast<%s>(", dtype_name(e->type));
        else if (e->op == K_BITCAST) fprintf(f, "bitcast<%s>(", dtype_name(e->type));
        else { print_opname(f, e->op); fputc('(', f); }
        print_expr(f, e->args[0]);
        fputc(')', f);
        return;
    case E_BIN: {
        const char *s = infix(e->op);
        if (!s) {
            print_opname(f, e->op);
            fputc('(', f);
            print_args(f, e->args, 2);
            fputc(')', f);
            return;
        }
        /* Left-associative: a right operand of equal strength needs parentheses. */
        print_operand(f, e->args[0], prec(e));
        fprintf(f, " %s ", s);
        print_operand(f, e->args[1], prec(e) + 1);
        return;
    }
    case E_SELECT:
        fputs("select(", f);
        print_args(f, e->args, 3);
        fputc(')', f);
        return;
    }
    die("kir_print: expression kind %d", e->kind);
}

static void print_hints(FILE *f, const Stmt *s) {
    unsigned h = s->hints;
    if (!h) return;
    fputs(" [", f);
    for (int i = 0, first = 1; kir_hint_name[i]; i++) {
        if (!(h & (1u << i))) continue;
        fprintf(f, "%s%s", first ? "" : ", ", kir_hint_name[i]);
        first = 0;
        if (1u << i == LH_REDO) fprintf(f, " %lld", (long long)s->redo);
        if (1u << i == LH_PARALLEL) fprintf(f, " %lld", (long long)s->tasks);
    }
    fputc(']', f);
}

static void print_stmts(FILE *f, const Stmt *s, int depth) {
    for (; s; s = s->next) {
        indent(f, depth);
        switch (s->kind) {
        case S_LOOP:
            fprintf(f, "for i%d in ", s->var);
            print_expr(f, s->lo);
            fputs("..", f);
            print_expr(f, s->hi);
            if (s->step != 1) fprintf(f, " step %lld", (long long)s->step);
            print_hints(f, s);
            fputs(":\n", f);
            print_stmts(f, s->body, depth + 1);
            break;
        case S_STORE:
            fprintf(f, "%%%s[", s->buf->name);
            print_args(f, s->idx, s->buf->rank);
            fputs("] = ", f);
            print_expr(f, s->val);
            fputc('\n', f);
            break;
        case S_SET:
            fprintf(f, "r%d = ", s->var);
            print_expr(f, s->val);
            fputc('\n', f);
            break;
        case S_IF:
            fputs("if ", f);
            print_expr(f, s->cond);
            fputs(":\n", f);
            print_stmts(f, s->then, depth + 1);
            if (s->els) {
                indent(f, depth);
                fputs("else:\n", f);
                print_stmts(f, s->els, depth + 1);
            }
            break;
        }
    }
}

/* A control kernel is one line: `loop NAME (counter %c, trip %m | trip N, while %b, max N):`,
 * `if NAME (%b):`, `else NAME:`, `end NAME:`. */
static void print_ctl(FILE *f, const Kernel *k) {
    static const char *const word[] = {"", "loop", "if", "else", "end"};
    fprintf(f, "%s %s", word[k->ctl], k->name);
    if (k->ctl == KCTL_LOOP) {
        fprintf(f, " (counter %%%s", k->counter->name);
        if (k->trip) fprintf(f, ", trip %%%s", k->trip->name);
        else if (k->ntrip >= 0) fprintf(f, ", trip %lld", (long long)k->ntrip);
        if (k->cond) fprintf(f, ", while %%%s", k->cond->name);
        if (k->max >= 0) fprintf(f, ", max %lld", (long long)k->max);
        fputc(')', f);
    } else if (k->ctl == KCTL_IF) {
        fprintf(f, " (%%%s)", k->cond->name);
    }
    fputs(":\n", f);
}

static void print_kernel(FILE *f, const Kernel *k) {
    if (k->ctl) {
        print_ctl(f, k);
        return;
    }
    if (k->sched) fprintf(f, "; schedule %s: %s\n", k->name, k->sched);
    fprintf(f, "kernel %s (%s, %s)%s (", k->name, k->ops, kir_kclass_name[k->kclass],
            k->dead ? " dead" : "");
    for (int i = 0; i < k->nparams; i++)
        fprintf(f, "%s%s %%%s", i ? ", " : "", kir_mode_name[k->modes[i] & 3], k->params[i]->name);
    fputc(')', f);
    if (k->prefetch) fprintf(f, " prefetch %%%s %lld", k->prefetch->name, (long long)k->prefetch_ahead);
    if (k->prefetch && k->prefetch_row) {
        fputs(" next ", f);
        print_expr(f, k->prefetch_row);
        fprintf(f, " of %lld", (long long)k->prefetch_rows);
    }
    if (k->joined) fputs(" joined", f);
    fputs(":\n", f);
    if (k->nscalars) {
        fputs("  scalars", f);
        for (int i = 0; i < k->nscalars; i++) fprintf(f, " r%d:%s", i, dtype_name(k->scalars[i]));
        fputc('\n', f);
    }
    print_stmts(f, k->body, 1);
}

void kir_print(FILE *f, Program *p) {
    fprintf(f, "program %s (arena %lld bytes, align %d", p->name, (long long)p->arena_size,
            p->arena_align);
    /* schedule depends on the vector width; the 16-byte default (x86-64 baseline, kir_program_new)
     * is left out so that dumps for the pinned test target stay as they were. */
    if (p->vector_bytes != 16) fprintf(f, ", vector %d", p->vector_bytes);
    if (p->ram_first) fputs(", ram-first", f);
    fputs(")\n", f);
    for (int i = 0; i < p->nbufs; i++) print_buf(f, p->bufs[i]);
    for (int i = 0; i < p->nkernels; i++) print_kernel(f, p->kernels[i]);
}
