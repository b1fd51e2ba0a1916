/* kparse.c - reads the text form of the kernel IR back (kir_parse), the inverse of kir_print.
 *
 * With it a kernel pass can be tested on its own: a .kir file in, `onnxcc --run-pass=PASS`,
 * the printed result compared with an expected .kir (tests/kir-passes.sh). kir_roundtrip
 * checks the other direction on real programs: print -> parse -> print must give the same
 * text (tests/golden.sh runs it after every kernel pass of every model it compiles).
 *
 * The text is line-based with two spaces of indentation per level:
 *   program NAME (arena N bytes, align A[, vector V])
 *     buf %NAME: DTYPE[D0,D1,..] input I | output I | const | temp (@OFF | @? | unused)
 *         [live F..L] | view of %NAME
 *   ; schedule NAME: STEPS                             (optional, right before its kernel)
 *   kernel NAME (OPS, CLASS)[ dead] (MODE %NAME, ...):
 *     scalars r0:DTYPE r1:DTYPE ...
 *     for iN in LO..HI[ step S][ [HINT, HINT N, ...]]:   |  if COND:  ...  else:
 *     %NAME[IDX, ...] = EXPR                              |  rN = EXPR
 * Expressions are C-like: * / % over + - over < <= > >= over == !=, unary minus, calls
 * (exp(x), max(a, b), select(c, a, b), cast<DTYPE>(x)), loads %NAME[IDX, ...], i<N>, r<N>
 * and constants: 12 (index), 12:int32, 1.5 (float32), 1.5:float64, inf, nan, true, false.
 * Types are never written on expressions: they follow from buffers, registers and constants.
 * Lines whose first non-blank character is '#' or ';' are comments (so a --print-after dump
 * reads as it is), except that a line `; schedule NAME: STEPS` right before `kernel NAME` is the
 * kernel's schedule line (Kernel.sched). Constants come back without contents (see kir.h). Buffer names are unique
 * in a program (kir_buf_new), so a name is all a reference needs. */
#include "kir.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

typedef struct Parser {
    Arena *a;
    Program *p;
    const char *path;
    bool internal;                  /* reading our own printout: a failure is our bug */
    char **lines;
    int nlines, ln;                 /* current line */
    const char *s;                  /* position in lines[ln] */
    Kernel *k;                      /* the kernel being read */
    bool *in_scope;                 /* loop variables whose loop encloses the current point */
    bool free_vars;                 /* a kernel header's expression: any loop variable */
    int capvars;
} Parser;

static _Noreturn void perr(Parser *P, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static _Noreturn void perr(Parser *P, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    int line = P->ln + 1, col = P->ln < P->nlines ? (int)(P->s - P->lines[P->ln]) + 1 : 1;
    if (P->internal)
        die("the kernel IR text of %s does not read back: line %d, column %d: %s\n  %s", P->path,
            line, col, msg, P->ln < P->nlines ? P->lines[P->ln] : "(end)");
    fatal(arena_printf(P->a, "%s:%d:%d", P->path, line, col), "%s", msg);
}

/* ---- lexing within a line ---- */
static void skip_sp(Parser *P) {
    while (*P->s == ' ' || *P->s == '\t') P->s++;
}

static bool accept(Parser *P, const char *tok) {
    skip_sp(P);
    size_t n = strlen(tok);
    if (strncmp(P->s, tok, n) != 0) return false;
    /* A word must not run on into a longer word ("in" is not "inout"). */
    if (isalpha((unsigned char)tok[n - 1]) && (isalnum((unsigned char)P->s[n]) || P->s[n] == '_'))
        return false;
    P->s += n;
    return true;
}

static void expect(Parser *P, const char *tok) {
    if (!accept(P, tok)) perr(P, "expected '%s'", tok);
}

static void expect_end(Parser *P) {
    skip_sp(P);
    if (*P->s) perr(P, "unexpected '%s' at the end of the line", P->s);
}

static bool is_word_char(char c) { return isalnum((unsigned char)c) || c == '_'; }

/* [A-Za-z_][A-Za-z0-9_]*, or NULL (nothing consumed). */
static char *word(Parser *P) {
    skip_sp(P);
    const char *b = P->s;
    if (!isalpha((unsigned char)*b) && *b != '_') return NULL;
    while (is_word_char(*P->s)) P->s++;
    return arena_printf(P->a, "%.*s", (int)(P->s - b), b);
}

static char *expect_word(Parser *P, const char *what) {
    char *w = word(P);
    if (!w) perr(P, "expected %s", what);
    return w;
}

/* Everything up to a blank or one of `stops`: names as the printer writes them. */
static char *token(Parser *P, const char *stops, const char *what) {
    skip_sp(P);
    const char *b = P->s;
    while (*P->s && *P->s != ' ' && *P->s != '\t' && !strchr(stops, *P->s)) P->s++;
    if (P->s == b) perr(P, "expected %s", what);
    return arena_printf(P->a, "%.*s", (int)(P->s - b), b);
}

static int64_t integer(Parser *P, const char *what) {
    skip_sp(P);
    if (!isdigit((unsigned char)*P->s) && !(*P->s == '-' && isdigit((unsigned char)P->s[1])))
        perr(P, "expected %s", what);
    char *end;
    errno = 0;
    long long v = strtoll(P->s, &end, 10);
    if (errno) perr(P, "%s out of range", what);
    P->s = end;
    return v;
}

static DType dtype_named(const char *w) {
    if (strcmp(w, dtype_name(DT_INDEX)) == 0) return DT_INDEX;
    for (int t = 1; t < 32; t++)
        if (dtype_supported((DType)t) && strcmp(w, dtype_name((DType)t)) == 0) return (DType)t;
    return DT_UNDEF;
}

static DType expect_dtype(Parser *P) {
    const char *b = (skip_sp(P), P->s);
    char *w = expect_word(P, "a type (float32, int64, ...)");
    DType t = dtype_named(w);
    if (t == DT_UNDEF) { P->s = b; perr(P, "unknown type '%s'", w); }
    return t;
}

static int lookup(Parser *P, const char *const *names, int n, const char *what) {
    const char *b = (skip_sp(P), P->s);
    char *w = expect_word(P, what);
    for (int i = 0; i < n; i++)
        if (names[i] && strcmp(names[i], w) == 0) return i;
    P->s = b;
    perr(P, "unknown %s '%s'", what, w);
}

/* ---- lines ---- */
static bool blank_or_comment(const char *l) {
    while (*l == ' ' || *l == '\t') l++;
    return !*l || *l == '#' || *l == ';';
}

/* Moves to the next line that holds something; false at the end. */
static bool next_line(Parser *P) {
    while (P->ln < P->nlines && blank_or_comment(P->lines[P->ln])) P->ln++;
    if (P->ln >= P->nlines) return false;
    P->s = P->lines[P->ln];
    return true;
}

static int indent_of(Parser *P) {
    int n = 0;
    while (P->lines[P->ln][n] == ' ') n++;
    if (P->lines[P->ln][n] == '\t') { P->s = P->lines[P->ln] + n; perr(P, "tab in the indentation"); }
    return n;
}

/* ---- buffers ---- */
static Buf *find_buf(Program *p, const char *name) {
    for (int i = 0; i < p->nbufs; i++)
        if (strcmp(p->bufs[i]->name, name) == 0) return p->bufs[i];
    return NULL;
}

static int dims(Parser *P, int64_t *d) {
    expect(P, "[");
    int rank = 0;
    if (accept(P, "]")) return 0;
    do {
        if (rank == MAX_RANK) perr(P, "more than %d dimensions", MAX_RANK);
        d[rank] = integer(P, "a dimension");
        if (d[rank] < 0) perr(P, "negative dimension");
        rank++;
    } while (accept(P, ","));
    expect(P, "]");
    return rank;
}

static void temp_place(Parser *P, Buf *b) {
    if (accept(P, "@?")) b->offset = -1;
    else if (accept(P, "unused")) b->offset = 0;
    else if (accept(P, "@")) {
        b->offset = integer(P, "an arena offset");
        if (b->offset < 0) perr(P, "negative arena offset");
    } else perr(P, "expected '@OFFSET', '@?' or 'unused'");
    if (accept(P, "live")) {
        b->first = (int)integer(P, "a kernel index");
        expect(P, "..");
        b->last = (int)integer(P, "a kernel index");
        if (b->first < 0 || b->last < b->first) perr(P, "bad live range");
    }
}

static void parse_buf(Parser *P, Buf ***ios, int *nio) {
    Program *p = P->p;
    expect(P, "buf");
    expect(P, "%");
    char *name = token(P, "", "a buffer name");
    size_t n = strlen(name);
    if (n < 2 || name[n - 1] != ':') perr(P, "expected ':' after the buffer name");
    name[n - 1] = 0;
    if (find_buf(p, name)) { P->s -= n; perr(P, "a second buffer named %%%s", name); }
    DType t = expect_dtype(P);
    int64_t d[MAX_RANK];
    int rank = dims(P, d);
    if (accept(P, "view")) {
        expect(P, "of");
        expect(P, "%");
        const char *at = P->s;
        char *ofname = token(P, "", "a buffer name");
        Buf *of = find_buf(p, ofname);
        if (!of) { P->s = at; perr(P, "view of unknown buffer %%%s", ofname); }
        Buf probe = {.rank = rank};
        memcpy(probe.dims, d, sizeof d);
        if (of->dtype != t) { P->s = at; perr(P, "a view of %%%s must have its type %s", of->name, dtype_name(of->dtype)); }
        if (kir_numel(&probe) != kir_numel(of)) { P->s = at; perr(P, "view and %%%s differ in size", of->name); }
        kir_view_new(p, of, name, rank, d);
        expect_end(P);
        return;
    }
    BufKind kind = (BufKind)lookup(P, kir_bufkind_name, 4, "buffer kind");
    Buf *b = kir_buf_new(p, name, t, rank, d, kind);
    if (kind == B_INPUT || kind == B_OUTPUT) {
        const char *at = (skip_sp(P), P->s);
        int64_t i = integer(P, "an input/output position");
        if (i < 0 || i >= 4096) { P->s = at; perr(P, "bad input/output position %lld", (long long)i); }
        int io = kind == B_OUTPUT;
        if (i >= nio[io]) {
            Buf **grown = ARENA_ARRAY(P->a, Buf *, i + 1);
            if (nio[io]) memcpy(grown, ios[io], sizeof(Buf *) * (size_t)nio[io]);
            ios[io] = grown;
            nio[io] = (int)i + 1;
        }
        if (ios[io][i]) { P->s = at; perr(P, "two %ss at position %lld", kir_bufkind_name[kind], (long long)i); }
        ios[io][i] = b;
        b->io_index = (int)i;
        if (accept(P, "string")) {
            if (t != DT_UINT8 || rank < 1) { P->s = at; perr(P, "a string buffer must be uint8 with a last dim of bytes"); }
            b->string = true;
        } else if (accept(P, "nibbles")) {
            if (t != DT_INT8 && t != DT_UINT8 && t != DT_FLOAT4E2M1) { P->s = at; perr(P, "a nibbles buffer must be int8, uint8 or float4e2m1"); }
            b->nibbles = true;
        } else if (accept(P, "crumbs")) {
            if (t != DT_INT8 && t != DT_UINT8) { P->s = at; perr(P, "a crumbs buffer must be int8 or uint8"); }
            b->nibbles = b->crumbs = true;
        }
        if (io && accept(P, "dims")) {
            expect(P, "of");
            expect(P, "%");
            const char *of_at = P->s;
            char *ofname = token(P, "", "a buffer name");
            Buf *of = find_buf(p, ofname);
            if (!of || of->kind != B_OUTPUT) { P->s = of_at; perr(P, "dims of %%%s, which is not an earlier output", ofname); }
            if (t != DT_INT64 || rank != 1 || d[0] != of->rank - of->string) { P->s = at; perr(P, "the dims of %%%s must be int64[%d]", ofname, of->rank - of->string); }
            b->dims_of = of;
        }
    } else if (kind == B_TEMP) temp_place(P, b);
    else if (kind == B_CONST && accept(P, "nibbles")) {
        if (t != DT_INT8 && t != DT_UINT8 && t != DT_FLOAT4E2M1) perr(P, "a nibbles constant must be int8, uint8 or float4e2m1");
        b->nibbles = true;
    } else if (kind == B_CONST && accept(P, "crumbs")) {
        if (t != DT_INT8 && t != DT_UINT8) perr(P, "a crumbs constant must be int8 or uint8");
        b->nibbles = b->crumbs = true;
    }
    expect_end(P);
}

/* ---- expressions ---- */
static Expr *expr(Parser *P, int min_prec);
static void use_var(Parser *P, int v);

static Buf *param_buf(Parser *P, const char *name, int nidx, int mode, const char *what) {
    Kernel *k = P->k;
    for (int i = 0; i < k->nparams; i++) {
        Buf *b = k->params[i];
        if (strcmp(b->name, name) != 0) continue;
        if (b->rank != nidx) perr(P, "%s of %%%s with %d indices (rank %d)", what, name, nidx, b->rank);
        if (!(k->modes[i] & mode))
            perr(P, "%s of %%%s, which is not an %s parameter", what, name,
                 mode == KP_IN ? "in/inout" : "out/inout");
        return b;
    }
    if (find_buf(P->p, name)) perr(P, "%%%s is not a parameter of kernel %s", name, k->name);
    perr(P, "unknown buffer %%%s", name);
}

/* Index expressions up to `close`; each of type index. */
static int index_list(Parser *P, Expr **idx, const char *close) {
    int n = 0;
    if (accept(P, close)) return 0;
    do {
        if (n == MAX_RANK) perr(P, "more than %d indices", MAX_RANK);
        const char *at = (skip_sp(P), P->s);
        idx[n] = expr(P, 0);
        if (idx[n]->type != DT_INDEX) {
            P->s = at;
            perr(P, "an index must have type index, not %s", dtype_name(idx[n]->type));
        }
        n++;
    } while (accept(P, ","));
    expect(P, close);
    return n;
}

/* `NAME[i, j, ...]` after a '%' at `at`: the buffer (a param of mode `mode` with as many
 * indices, or an error at `at`) and its indices. */
static Buf *buf_ref(Parser *P, const char *at, ParamMode mode, const char *what, Expr **idx) {
    char *name = token(P, ",()[]", "a buffer name");
    expect(P, "[");
    int n = index_list(P, idx, "]");
    const char *end = P->s;
    P->s = at;
    Buf *b = param_buf(P, name, n, mode, what);
    P->s = end;
    return b;
}

static Expr *load(Parser *P) {
    Expr *idx[MAX_RANK];
    Buf *b = buf_ref(P, P->s - 1, KP_IN, "load", idx);  /* P->s - 1: the '%' */
    return kx_load(P->p, b, idx);
}

/* A literal: digits with an optional fraction and exponent, or inf/nan, then an optional
 * ":TYPE". Integers without a type are index constants, reals without one are float32. */
static Expr *number(Parser *P, bool neg) {
    const char *b = P->s;
    bool real = false;
    if (accept(P, "inf")) real = true;
    else if (accept(P, "nan")) real = true;
    else {
        while (isdigit((unsigned char)*P->s)) P->s++;
        if (*P->s == '.' && isdigit((unsigned char)P->s[1])) {
            real = true;
            for (P->s++; isdigit((unsigned char)*P->s); P->s++) {}
        }
        if ((*P->s == 'e' || *P->s == 'E') &&
            (isdigit((unsigned char)P->s[1]) || ((P->s[1] == '-' || P->s[1] == '+') && isdigit((unsigned char)P->s[2])))) {
            real = true;
            for (P->s += 2; isdigit((unsigned char)*P->s); P->s++) {}
        }
    }
    char *text = arena_printf(P->a, "%s%.*s", neg ? "-" : "", (int)(P->s - b), b);
    DType t = real ? DT_FLOAT : DT_INDEX;
    if (*P->s == ':' && isalpha((unsigned char)P->s[1])) {     /* not the ':' ending a for */
        P->s++;
        t = expect_dtype(P);
    }
    if (real != dtype_is_float(t) || t == DT_BOOL) {
        P->s = b;
        perr(P, "'%s' is not a constant of type %s", text, dtype_name(t));
    }
    if (real) {
        double v = strcmp(text + neg, "nan") == 0 ? NAN
                   : strcmp(text + neg, "inf") == 0 ? (neg ? -INFINITY : INFINITY) : strtod(text, NULL);
        return kx_const(P->p, t, v);
    }
    errno = 0;
    int64_t v = t == DT_UINT64 && !neg ? (int64_t)strtoull(text, NULL, 10) : strtoll(text, NULL, 10);
    if (errno) { P->s = b; perr(P, "'%s' out of range", text); }
    return kx_int(P->p, t, v);
}

/* `what` is the operator as written: "+", "max", ... */
static Expr *binary(Parser *P, KOp op, const char *what, Expr *a, Expr *b, const char *at) {
    if (a->type != b->type) {
        P->s = at;
        perr(P, "operands of '%s' of types %s and %s", what, dtype_name(a->type), dtype_name(b->type));
    }
    if ((kop_flags[op] & KF_BITWISE) && dtype_is_float(a->type)) {
        P->s = at;
        perr(P, "'%s' of %s", what, dtype_name(a->type));
    }
    return kx_bin(P->p, op, a, b);
}

/* name(args) for an operator of the table, cast<T>(x) or select(c, a, b). */
static Expr *call(Parser *P, const char *name, const char *at) {
    Program *p = P->p;
    Expr *args[3];
    if (strcmp(name, "cast") == 0 || strcmp(name, "bitcast") == 0) {
        bool bits = name[0] == 'b';
        expect(P, "<");
        DType t = expect_dtype(P);
        expect(P, ">");
        expect(P, "(");
        Expr *x = expr(P, 0);
        expect(P, ")");
        /* Built by hand: kx_cast drops a cast to the operand's own type, the text keeps it. */
        Expr *e = kx_un(p, bits ? K_BITCAST : K_CAST, x);
        e->type = t;
        return e;
    }
    bool sel = strcmp(name, "select") == 0;
    int op = -1;
    for (int i = 0; i < K_COUNT && !sel; i++)
        if (strcasecmp(kop_name[i], name) == 0) op = i;
    if (!sel && (op < 0 || op == K_CAST || op == K_BITCAST)) { P->s = at; perr(P, "unknown operator '%s'", name); }
    int want = sel ? 3 : kop_arity[op], n = 0;
    expect(P, "(");
    do {
        if (n == want) perr(P, "%s takes %d operand%s", name, want, want > 1 ? "s" : "");
        args[n++] = expr(P, 0);
    } while (accept(P, ","));
    expect(P, ")");
    if (n != want) { P->s = at; perr(P, "%s takes %d operand%s", name, want, want > 1 ? "s" : ""); }
    if (sel) {
        if (args[0]->type != DT_BOOL) { P->s = at; perr(P, "select on %s, not bool", dtype_name(args[0]->type)); }
        if (args[1]->type != args[2]->type)
            { P->s = at; perr(P, "select of %s and %s", dtype_name(args[1]->type), dtype_name(args[2]->type)); }
        return kx_select(p, args[0], args[1], args[2]);
    }
    if (want == 1) return kx_un(p, (KOp)op, args[0]);
    return binary(P, (KOp)op, name, args[0], args[1], at);
}

static int register_number(const char *w, char prefix) {
    if (w[0] != prefix || !w[1]) return -1;
    for (const char *c = w + 1; *c; c++)
        if (!isdigit((unsigned char)*c)) return -1;
    if (strlen(w) > 8) return -1;
    return atoi(w + 1);
}

static Expr *primary(Parser *P) {
    Program *p = P->p;
    skip_sp(P);
    const char *at = P->s;
    if (accept(P, "(")) {
        Expr *e = expr(P, 0);
        expect(P, ")");
        return e;
    }
    if (*P->s == '-') {
        P->s++;
        if (isdigit((unsigned char)*P->s) || strncmp(P->s, "inf", 3) == 0) return number(P, true);
        Expr *x = primary(P);
        return kx_un(p, K_NEG, x);
    }
    if (isdigit((unsigned char)*P->s)) return number(P, false);
    if (accept(P, "%")) return load(P);
    char *w = word(P);
    if (!w) perr(P, "expected an expression");
    if (!strcmp(w, "inf") || !strcmp(w, "nan")) { P->s = at; return number(P, false); }
    if (!strcmp(w, "true") || !strcmp(w, "false")) return kx_int(p, DT_BOOL, w[0] == 't');
    int n;
    if ((n = register_number(w, 'i')) >= 0) {
        if (P->free_vars) use_var(P, n);
        else if (n >= P->capvars || !P->in_scope[n]) { P->s = at; perr(P, "i%d used outside a loop over it", n); }
        return kx_var(p, n);
    }
    if ((n = register_number(w, 'r')) >= 0) {
        if (n >= P->k->nscalars) { P->s = at; perr(P, "r%d is not among the kernel's scalars", n); }
        return kx_scalar(p, P->k, n);
    }
    return call(P, w, at);
}

/* The infix operators and their binding strength (C's order, as kprint.c prints them). */
static const struct { const char *tok; KOp op; int prec; } infix[] = {
    {"*", K_MUL, 6}, {"/", K_DIV, 6}, {"%", K_REM, 6}, {"+", K_ADD, 5}, {"-", K_SUB, 5},
    {"<=", K_LE, 4}, {">=", K_GE, 4}, {"<", K_LT, 4}, {">", K_GT, 4}, {"==", K_EQ, 3},
    {"!=", K_NE, 3},
};

/* Precedence climbing; all infix operators are left-associative. */
static Expr *expr(Parser *P, int min_prec) {
    Expr *lhs = primary(P);
    for (;;) {
        skip_sp(P);
        const char *at = P->s;
        int i = 0;
        while (i < COUNTOF(infix) && strncmp(P->s, infix[i].tok, strlen(infix[i].tok)) != 0) i++;
        if (i == COUNTOF(infix) || infix[i].prec < min_prec) return lhs;
        P->s += strlen(infix[i].tok);
        Expr *rhs = expr(P, infix[i].prec + 1);
        lhs = binary(P, infix[i].op, infix[i].tok, lhs, rhs, at);
    }
}

/* ---- statements ---- */
static Stmt *block(Parser *P, int depth);

static void use_var(Parser *P, int v) {
    if (v >= P->capvars) {
        int cap = MAX(v + 1, 2 * P->capvars);
        bool *grown = ARENA_ARRAY(P->a, bool, cap);
        if (P->capvars) memcpy(grown, P->in_scope, (size_t)P->capvars);
        P->in_scope = grown;
        P->capvars = cap;
    }
    P->k->nvars = MAX(P->k->nvars, v + 1);
}

/* One hint word (kir_hint_name[bit]) with its number: `redo N` and `parallel N` have one, the
 * others none. */
static void set_hint(Parser *P, Stmt *s, int bit, bool has_n, int64_t n, const char *at) {
    bool wants = 1u << bit == LH_REDO || 1u << bit == LH_PARALLEL;
    if (has_n != wants) {
        P->s = at;
        perr(P, wants ? "loop hint '%s' needs a number" : "loop hint '%s' takes no number", kir_hint_name[bit]);
    }
    if (1u << bit == LH_REDO) s->redo = n;
    if (1u << bit == LH_PARALLEL) s->tasks = n;
    s->hints |= 1u << bit;
}

/* [WORD, WORD N, ...] after the '[' */
static void hints(Parser *P, Stmt *s) {
    do {
        const char *at = (skip_sp(P), P->s);
        char *w = expect_word(P, "a loop hint");
        int i = 0;
        while (kir_hint_name[i] && strcmp(kir_hint_name[i], w) != 0) i++;
        if (!kir_hint_name[i]) { P->s = at; perr(P, "unknown loop hint '%s'", w); }
        skip_sp(P);
        bool has_n = isdigit((unsigned char)*P->s);
        int64_t n = has_n ? integer(P, "a number") : 0;
        set_hint(P, s, i, has_n, n, at);
    } while (accept(P, ","));
    expect(P, "]");
}

static Expr *index_expr(Parser *P, const char *what) {
    const char *at = (skip_sp(P), P->s);
    Expr *e = expr(P, 0);
    if (e->type != DT_INDEX) { P->s = at; perr(P, "%s must have type index, not %s", what, dtype_name(e->type)); }
    return e;
}

static Stmt *loop(Parser *P, int depth) {
    const char *at = (skip_sp(P), P->s);
    char *w = expect_word(P, "a loop variable");
    int v = register_number(w, 'i');
    if (v < 0) { P->s = at; perr(P, "expected a loop variable i<N>, not '%s'", w); }
    use_var(P, v);
    if (P->in_scope[v]) { P->s = at; perr(P, "loop over i%d inside a loop over i%d", v, v); }
    expect(P, "in");
    Stmt *s = ks_loop(P->p, v, 0, 0, 1, NULL);
    s->lo = index_expr(P, "a loop bound");
    expect(P, "..");
    s->hi = index_expr(P, "a loop bound");
    if (accept(P, "step")) {
        s->step = integer(P, "a step");
        if (s->step <= 0) perr(P, "the step must be positive");
    }
    if (accept(P, "[")) hints(P, s);
    expect(P, ":");
    expect_end(P);
    P->ln++;
    P->in_scope[v] = true;
    s->body = block(P, depth + 1);
    P->in_scope[v] = false;
    return s;
}

static Stmt *statement(Parser *P, int depth) {
    Program *p = P->p;
    if (accept(P, "for")) return loop(P, depth);
    if (accept(P, "if")) {
        const char *at = (skip_sp(P), P->s);
        Expr *c = expr(P, 0);
        if (c->type != DT_BOOL) { P->s = at; perr(P, "if on %s, not bool", dtype_name(c->type)); }
        expect(P, ":");
        expect_end(P);
        P->ln++;
        Stmt *s = ks_if(p, c, block(P, depth + 1), NULL);
        if (next_line(P) && indent_of(P) == 2 * depth) {
            P->s = P->lines[P->ln] + 2 * depth;
            if (accept(P, "else")) {
                expect(P, ":");
                expect_end(P);
                P->ln++;
                s->els = block(P, depth + 1);
            }
        }
        return s;
    }
    Stmt *s;
    const char *at = (skip_sp(P), P->s);
    if (accept(P, "%")) {
        Expr *idx[MAX_RANK];
        Buf *b = buf_ref(P, at, KP_OUT, "store", idx);
        expect(P, "=");
        const char *vat = (skip_sp(P), P->s);
        Expr *v = expr(P, 0);
        if (v->type != b->dtype) { P->s = vat; perr(P, "store of %s into %%%s of %s", dtype_name(v->type), b->name, dtype_name(b->dtype)); }
        s = ks_store(p, b, idx, v);
    } else {
        char *w = word(P);
        int r = w ? register_number(w, 'r') : -1;
        if (r < 0) { P->s = at; perr(P, "expected a statement (for, if, %%BUF[...] = or rN =)"); }
        if (r >= P->k->nscalars) { P->s = at; perr(P, "r%d is not among the kernel's scalars", r); }
        expect(P, "=");
        const char *vat = (skip_sp(P), P->s);
        Expr *v = expr(P, 0);
        if (v->type != P->k->scalars[r]) { P->s = vat; perr(P, "r%d is %s, the value %s", r, dtype_name(P->k->scalars[r]), dtype_name(v->type)); }
        s = ks_set(p, r, v);
    }
    expect_end(P);
    P->ln++;
    return s;
}

/* The statements indented by exactly `depth` levels from the current line on. */
static Stmt *block(Parser *P, int depth) {
    Stmt *head = NULL, *tail = NULL;
    while (next_line(P)) {
        int in = indent_of(P);
        if (in < 2 * depth) break;
        P->s = P->lines[P->ln] + in;
        if (in > 2 * depth) perr(P, "unexpected indentation");
        if (strncmp(P->s, "else", 4) == 0 && !is_word_char(P->s[4])) perr(P, "'else' without 'if'");
        Stmt *s = statement(P, depth);
        if (tail) tail->next = s;
        else head = s;
        tail = s;
    }
    return head;
}

/* ---- kernels and the program ---- */
static void params(Parser *P) {
    Program *p = P->p;
    Kernel *k = P->k;
    expect(P, "(");
    if (accept(P, ")")) return;
    do {
        int mode = lookup(P, kir_mode_name, 4, "parameter mode (in, out, inout)");
        if (!mode) perr(P, "bad parameter mode");
        expect(P, "%");
        const char *at = P->s;
        char *name = token(P, ",()", "a buffer name");
        Buf *b = find_buf(p, name);
        if (!b) { P->s = at; perr(P, "unknown buffer %%%s", name); }
        for (int i = 0; i < k->nparams; i++)
            if (k->params[i] == b) { P->s = at; perr(P, "%%%s given twice", name); }
        kir_param(p, k, b, (ParamMode)mode);
    } while (accept(P, ","));
    expect(P, ")");
}

static void scalars(Parser *P) {
    while (skip_sp(P), *P->s) {
        const char *at = P->s;
        char *w = expect_word(P, "a register r<N>");
        if (register_number(w, 'r') != P->k->nscalars) { P->s = at; perr(P, "expected r%d", P->k->nscalars); }
        expect(P, ":");
        kir_scalar(P->p, P->k, expect_dtype(P));
    }
    P->ln++;
}

/* The schedule of kernel `name` from the line before the current one, or NULL. */
static char *schedule_line(Parser *P, const char *name) {
    if (P->ln == 0) return NULL;
    const char *l = P->lines[P->ln - 1];
    size_t n = strlen(name);
    if (strncmp(l, "; schedule ", 11) || strncmp(l + 11, name, n) || strncmp(l + 11 + n, ": ", 2) || !l[13 + n])
        return NULL;
    return arena_strdup(P->a, l + 13 + n);
}

static void kernel(Parser *P) {
    expect(P, "kernel");
    char *name = token(P, "(", "a kernel name");
    for (int i = 0; i < P->p->nkernels; i++)
        if (strcmp(P->p->kernels[i]->name, name) == 0) perr(P, "a second kernel named %s", name);
    expect(P, "(");
    char *ops = token(P, ",", "the kernel's ops");
    expect(P, ",");
    KernelClass c = (KernelClass)lookup(P, kir_kclass_name, 4, "kernel class");
    expect(P, ")");
    Kernel *k = P->k = kir_kernel_new(P->p, name, ops, c);
    k->sched = schedule_line(P, name);
    k->dead = accept(P, "dead");
    params(P);
    if (accept(P, "prefetch")) {
        expect(P, "%");
        const char *at = P->s;
        char *pname = token(P, " :", "a buffer name");
        for (int i = 0; i < k->nparams; i++)
            if (strcmp(k->params[i]->name, pname) == 0 && (k->modes[i] & KP_IN)) k->prefetch = k->params[i];
        if (!k->prefetch) { P->s = at; perr(P, "prefetch of %%%s, which is not an in/inout parameter", pname); }
        k->prefetch_ahead = integer(P, "the bytes to prefetch ahead");
        if (k->prefetch_ahead <= 0) perr(P, "the bytes to prefetch ahead must be positive");
        if (accept(P, "next")) {
            P->free_vars = true;
            k->prefetch_row = index_expr(P, "the row of the prefetched blocks");
            P->free_vars = false;
            expect(P, "of");
            k->prefetch_rows = integer(P, "the rows of a block");
            if (k->prefetch_rows < 2) perr(P, "a block must be read by at least 2 rows");
        }
    }
    k->joined = accept(P, "joined");
    expect(P, ":");
    expect_end(P);
    P->ln++;
    if (next_line(P) && indent_of(P) == 2) {
        P->s = P->lines[P->ln] + 2;
        if (accept(P, "scalars")) scalars(P);
    }
    k->body = block(P, 1);
    if (next_line(P)) {
        P->s = P->lines[P->ln] + indent_of(P);
        if (strncmp(P->s, "kernel ", 7) && strncmp(P->s, "loop ", 5) && strncmp(P->s, "if ", 3) &&
            strncmp(P->s, "else ", 5) && strncmp(P->s, "end ", 4))
            perr(P, "expected a statement or 'kernel'");
    }
}

static Buf *ctl_buf(Parser *P) {
    expect(P, "%");
    const char *at = P->s;
    char *name = token(P, ",()", "a buffer name");
    Buf *b = find_buf(P->p, name);
    if (!b) { P->s = at; perr(P, "unknown buffer %%%s", name); }
    return b;
}

/* A control kernel's line (kprint.c's print_ctl); the verifier checks the nesting. */
static void control(Parser *P, KernelCtl c) {
    char *name = token(P, " (:", "a name");
    for (int i = 0; i < P->p->nkernels; i++)
        if (strcmp(P->p->kernels[i]->name, name) == 0) perr(P, "a second kernel named %s", name);
    Buf *counter = NULL, *trip = NULL, *cond = NULL;
    int64_t ntrip = -1, max = -1;
    if (c == KCTL_LOOP) {
        expect(P, "(");
        expect(P, "counter");
        counter = ctl_buf(P);
        while (accept(P, ",")) {
            if (accept(P, "trip")) {
                skip_sp(P);
                if (*P->s == '%') trip = ctl_buf(P);
                else ntrip = integer(P, "a trip count");
            } else if (accept(P, "while")) {
                cond = ctl_buf(P);
            } else {
                expect(P, "max");
                max = integer(P, "a bound");
            }
        }
        expect(P, ")");
    } else if (c == KCTL_IF) {
        expect(P, "(");
        cond = ctl_buf(P);
        expect(P, ")");
    }
    expect(P, ":");
    expect_end(P);
    P->ln++;
    kir_ctl_new(P->p, name, c, counter, trip, ntrip, cond, max);
}

/* A header field "WORD N", N a byte count in 1..1024. */
static int byte_field(Parser *P, const char *word, const char *what, const char *bad) {
    expect(P, word);
    const char *at = (skip_sp(P), P->s);
    int64_t v = integer(P, what);
    if (v <= 0 || v > 1024) { P->s = at; perr(P, "%s", bad); }
    return (int)v;
}

static void header(Parser *P) {
    if (!next_line(P)) perr(P, "empty: expected 'program NAME (arena N bytes, align A)'");
    expect(P, "program");
    char *name = expect_word(P, "the program's name");
    Program *p = P->p = kir_program_new(P->a, name);
    expect(P, "(");
    expect(P, "arena");
    p->arena_size = integer(P, "the arena size");
    expect(P, "bytes");
    expect(P, ",");
    expect(P, "align");
    const char *at = (skip_sp(P), P->s);
    int64_t al = integer(P, "the arena alignment");
    if (al <= 0 || al > 4096 || (al & (al - 1))) { P->s = at; perr(P, "the alignment must be a power of two"); }
    p->arena_align = (int)al;
    /* the optional fields, in kir_print's order */
    bool vec = false;
    while (accept(P, ",")) {
        skip_sp(P);
        if (!vec && !p->ram_first && strncmp(P->s, "vector", 6) == 0) {
            p->vector_bytes = byte_field(P, "vector", "the vector width in bytes", "bad vector width");
            vec = true;
        } else {
            expect(P, "ram-first");
            p->ram_first = true;
            break;
        }
    }
    expect(P, ")");
    expect_end(P);
    P->ln++;
}

static Program *parse(Arena *a, const char *path, const char *text, bool internal) {
    Parser P = {.a = a, .path = path, .internal = internal};
    char *t = arena_strdup(a, text);
    int cap = 1;
    for (char *c = t; *c; c++) cap += *c == '\n';
    P.lines = ARENA_ARRAY(a, char *, cap);
    for (char *c = t;;) {
        char *nl = strchr(c, '\n');
        P.lines[P.nlines++] = c;
        if (!nl) break;
        *nl = 0;
        c = nl + 1;
    }
    header(&P);
    Program *p = P.p;
    Buf **ios[2] = {NULL, NULL};
    int nio[2] = {0, 0};
    while (next_line(&P) && indent_of(&P) == 2) {
        P.s += 2;
        parse_buf(&P, ios, nio);
        P.ln++;
    }
    for (int io = 0; io < 2; io++)
        for (int i = 0; i < nio[io]; i++)
            if (!ios[io][i]) perr(&P, "no %s at position %d", io ? "output" : "input", i);
    p->inputs = ios[0];
    p->ninputs = nio[0];
    p->outputs = ios[1];
    p->noutputs = nio[1];
    while (next_line(&P)) {
        if (indent_of(&P) != 0) perr(&P, "expected 'kernel' (buffers come before the kernels)");
        if (accept(&P, "loop")) control(&P, KCTL_LOOP);
        else if (accept(&P, "if")) control(&P, KCTL_IF);
        else if (accept(&P, "else")) control(&P, KCTL_ELSE);
        else if (accept(&P, "end")) control(&P, KCTL_END);
        else kernel(&P);
    }
    return p;
}

Program *kir_parse(Arena *a, const char *path, const char *text) { return parse(a, path, text, false); }

static char *print_to_string(Program *p, size_t *n) {
    char *s = NULL;
    FILE *f = open_memstream(&s, n);
    if (!f) die("open_memstream");
    kir_print(f, p);
    fclose(f);
    return s;
}

void kir_roundtrip(Program *p, const char *after) {
    size_t n1, n2;
    char *t1 = print_to_string(p, &n1);
    Arena *a = arena_new();
    Program *q = parse(a, arena_printf(a, "the program after %s", after), t1, true);
    char *t2 = print_to_string(q, &n2);
    if (n1 != n2 || memcmp(t1, t2, n1) != 0) {
        int line = 1;
        size_t i = 0;
        for (; i < n1 && i < n2 && t1[i] == t2[i]; i++) line += t1[i] == '\n';
        size_t b = i;
        while (b > 0 && t1[b - 1] != '\n') b--;
        die("the kernel IR after %s does not read back as it was printed: line %d\n"
            "  printed: %.*s\n  re-read: %.*s", after, line, (int)strcspn(t1 + b, "\n"), t1 + b,
            (int)strcspn(t2 + b, "\n"), t2 + b);
    }
    free(t1);
    free(t2);
    arena_free(a);
}
