/* tune.c - tuning files: what `onnxcc --autotune` measured, read back by --tune-file so that
 * a build takes the measured candidate of each kernel's schedule space (passes/schedule.c,
 * passes/sched_tile.c) without measuring again, deterministically.
 *
 * The format is text, one entry a line, '#' to the end of a line a comment:
 *     onnxcc-tune 1
 *     x86_64-unknown-linux-gnu:znver5 Conv+Relu f32[1,64,56,56] 3f0c9a1be2d47c55 tile 6 2
 *     x86_64-unknown-linux-gnu:znver5 Conv f32[1,128,28,28] 91aa07c4d3e2b610 pixels 7
 *     x86_64-unknown-linux-gnu:znver5 MatMul f32[1,1000] 0b1d2e3f40516273 default
 * The first line names the format and its version. An entry is the target (triple and ISA of
 * the compilation, as the header's NAME_info names it), the kernel's ops and first output
 * (shown for people, and checked), its signature (tune_signature: 16 hex digits, the key),
 * then the candidate: `default` (the cost model's choice), `tile R V` (R rows by V vectors
 * of the register tile of every blocked loop of the kernel, each clamped to the loop), or
 * `pixels N` (rows of N pixels of a conv blocked by output channels). A kernel without an
 * entry takes the cost model's choice. Entries of other targets are ignored, so one file can
 * serve several.
 * The file is untrusted input: every malformed line is an error with its file and line
 * (all of them, then exit 1), and a candidate's numbers only ever choose among legal
 * schedules (the schedule clamps them), so no file can make a wrong program. tune_parse
 * takes the text and its length, so that a fuzz target can call it. */
#include <ctype.h>
#include <string.h>

#include "tune.h"

/* MAX_ENTRIES keeps the duplicate check (quadratic) and memory small for any file */
enum { MAX_TILE_ROWS = 64, MAX_TILE_VECS = 15, MAX_PIXELS = 64, MAX_TOKENS = 8, MAX_ENTRIES = 1 << 14 };

/* ---- signatures ---- */

typedef struct Hash { uint64_t h; } Hash;

static void mix(Hash *h, uint64_t x) {   /* FNV-1a over the 8 bytes of x */
    for (int i = 0; i < 8; i++) {
        h->h ^= (x >> (8 * i)) & 0xff;
        h->h *= 0x100000001b3ull;
    }
}

/* A buffer as its position among k's params (-1 if not one: a view's root, say). Not
 * kir_param_index: the tune fuzz target links this file without ir/kir.c (tests/fuzz/run.sh). */
static int param_index(const Kernel *k, const Buf *b) {
    for (int i = 0; i < k->nparams; i++)
        if (k->params[i] == b) return i;
    return -1;
}

static void hash_expr(Hash *h, const Kernel *k, const Expr *e) {
    if (!e) { mix(h, 0xe0); return; }
    uint64_t fbits;
    memcpy(&fbits, &e->f, sizeof fbits);
    mix(h, (uint64_t)e->kind), mix(h, (uint64_t)e->op), mix(h, (uint64_t)e->type);
    mix(h, fbits), mix(h, (uint64_t)e->i), mix(h, (uint64_t)e->var);
    if (e->kind == E_LOAD) mix(h, (uint64_t)param_index(k, e->buf));
    mix(h, (uint64_t)e->nargs);
    for (int i = 0; i < e->nargs; i++) hash_expr(h, k, e->args[i]);
}

static void hash_list(Hash *h, const Kernel *k, const Stmt *s) {
    for (; s; s = s->next) {
        mix(h, 0x5000 + (uint64_t)s->kind);
        switch (s->kind) {
        case S_LOOP:
            mix(h, (uint64_t)s->var), mix(h, (uint64_t)s->step), mix(h, s->hints);
            hash_expr(h, k, s->lo), hash_expr(h, k, s->hi);
            hash_list(h, k, s->body);
            break;
        case S_STORE:
            mix(h, (uint64_t)param_index(k, s->buf));
            for (int i = 0; s->buf && i < s->buf->rank; i++) hash_expr(h, k, s->idx[i]);
            hash_expr(h, k, s->val);
            break;
        case S_SET: mix(h, (uint64_t)s->var), hash_expr(h, k, s->val); break;
        case S_IF: hash_expr(h, k, s->cond), hash_list(h, k, s->then), mix(h, 0xe15e), hash_list(h, k, s->els); break;
        }
        mix(h, 0x5e4d);
    }
}

uint64_t tune_signature(const Kernel *k) {
    Hash h = {0xcbf29ce484222325ull};
    mix(&h, (uint64_t)k->kclass), mix(&h, (uint64_t)k->nparams), mix(&h, (uint64_t)k->nscalars);
    for (int i = 0; i < k->nscalars; i++) mix(&h, (uint64_t)k->scalars[i]);
    for (int i = 0; i < k->nparams; i++) {
        const Buf *b = k->params[i];
        mix(&h, (uint64_t)k->modes[i]), mix(&h, (uint64_t)b->dtype), mix(&h, (uint64_t)b->kind);
        mix(&h, (uint64_t)b->rank);
        for (int d = 0; d < b->rank; d++) mix(&h, (uint64_t)b->dims[d]);
    }
    hash_list(&h, k, k->body);
    return h.h ? h.h : 1;           /* 0 means "no signature" (Kernel.tune_sig) */
}

const char *tune_target(Arena *a, const char *triple, const char *isa) {
    char *s = arena_printf(a, "%s:%s", triple ? triple : "?", isa && *isa ? isa : "?");
    for (char *c = s; *c; c++)
        if (isspace((unsigned char)*c) || *c == '#') *c = '_';
    return s;
}

static const char *short_type(DType t) {
    switch (t) {
    case DT_FLOAT: return "f32";
    case DT_DOUBLE: return "f64";
    case DT_FLOAT16: return "f16";
    case DT_BFLOAT16: return "bf16";
    case DT_INT8: return "i8";
    case DT_UINT8: return "u8";
    case DT_INT32: return "i32";
    case DT_INT64: return "i64";
    default: return dtype_name(t);
    }
}

const char *tune_out(Arena *a, const Kernel *k) {
    for (int i = 0; i < k->nparams; i++) {
        if (!(k->modes[i] & KP_OUT)) continue;
        const Buf *b = k->params[i];
        const char *s = arena_printf(a, "%s[", short_type(b->dtype));
        for (int d = 0; d < b->rank; d++) s = arena_printf(a, "%s%s%lld", s, d ? "," : "", (long long)b->dims[d]);
        return arena_printf(a, "%s]", s);
    }
    return "-";
}

const char *tune_choice_text(Arena *a, TuneKind kind, int x, int y) {
    switch (kind) {
    case TUNE_TILE: return arena_printf(a, "tile %d %d", x, y);
    case TUNE_PIXELS: return arena_printf(a, "pixels %d", x);
    default: return "default";
    }
}

const TuneEntry *tune_find(const Tuning *t, const char *target, const Kernel *k) {
    if (!t || !k->tune_sig) return NULL;
    for (int i = t->n - 1; i >= 0; i--) {
        const TuneEntry *e = &t->e[i];
        if (e->sig == k->tune_sig && strcmp(e->target, target) == 0 && strcmp(e->ops, k->ops ? k->ops : "-") == 0)
            return e;
    }
    return NULL;
}

/* ---- reading ---- */

/* A whole number from lo to hi, digits only; -1 otherwise. */
static int parse_int(const char *s, int lo, int hi) {
    long v = 0;
    if (!*s) return -1;
    for (; *s; s++) {
        if (!isdigit((unsigned char)*s) || v > hi) return -1;
        v = v * 10 + (*s - '0');
    }
    return v >= lo && v <= hi ? (int)v : -1;
}

static bool parse_sig(const char *s, uint64_t *sig) {
    if (strlen(s) != 16) return false;
    *sig = 0;
    for (; *s; s++) {
        int d = isdigit((unsigned char)*s) ? *s - '0' : *s >= 'a' && *s <= 'f' ? *s - 'a' + 10 : -1;
        if (d < 0) return false;
        *sig = *sig << 4 | (uint64_t)d;
    }
    return *sig != 0;
}

/* One entry's tokens (w[0..n)) into e; an error at `where` and false if malformed. */
static bool parse_entry(const char *where, char **w, int n, TuneEntry *e) {
    if (n < 5) {
        error(where, "expected 'TARGET OPS OUTPUT SIGNATURE CHOICE', got %d field%s", n, n == 1 ? "" : "s");
        return false;
    }
    if (!strchr(w[0], ':')) {
        error(where, "bad target '%s': expected TRIPLE:ISA", w[0]);
        return false;
    }
    if (!parse_sig(w[3], &e->sig)) {
        error(where, "bad signature '%s': expected 16 lowercase hex digits, not all 0", w[3]);
        return false;
    }
    e->target = w[0], e->ops = w[1], e->out = w[2];
    const char *c = w[4];
    if (strcmp(c, "default") == 0 && n == 5) {
        e->kind = TUNE_DEFAULT;
    } else if (strcmp(c, "tile") == 0 && n == 7) {
        e->kind = TUNE_TILE;
        e->a = parse_int(w[5], 1, MAX_TILE_ROWS), e->b = parse_int(w[6], 1, MAX_TILE_VECS);
        if (e->a < 0 || e->b < 0) {
            error(where, "bad tile '%s %s': expected rows 1 to %d and vectors 1 to %d", w[5], w[6], MAX_TILE_ROWS,
                  MAX_TILE_VECS);
            return false;
        }
    } else if (strcmp(c, "pixels") == 0 && n == 6) {
        e->kind = TUNE_PIXELS;
        if ((e->a = parse_int(w[5], 1, MAX_PIXELS)) < 0) {
            error(where, "bad pixels '%s': expected 1 to %d", w[5], MAX_PIXELS);
            return false;
        }
    } else {
        error(where, "bad choice '%s' with %d value%s: expected 'default', 'tile ROWS VECTORS' or 'pixels N'", c,
              n - 5, n == 6 ? "" : "s");
        return false;
    }
    return true;
}

bool tune_parse(Arena *a, const char *text, size_t len, Tuning *t) {
    const char *path = t->path ? t->path : "tuning file";
    bool ok = true, header = false;
    int line = 0;
    for (size_t at = 0; at < len;) {
        size_t end = at;
        while (end < len && text[end] != '\n') end++;
        line++;
        const char *where = arena_printf(a, "%s:%d", path, line);
        size_t n = end - at;
        char *s = arena_alloc(a, n + 1);
        memcpy(s, text + at, n);
        s[n] = 0;
        at = end + 1;
        if (strlen(s) != n) {
            error(where, "a NUL byte: not a text file");
            ok = false;
            continue;
        }
        char *hash = strchr(s, '#');
        if (hash) *hash = 0;
        bool bad_char = false;
        for (char *c = s; *c; c++)
            if ((unsigned char)*c < 0x20 ? !(*c == '\t' || *c == '\r') : (unsigned char)*c >= 0x7f) bad_char = true;
        if (bad_char) {
            error(where, "a control or non-ASCII character outside a comment");
            ok = false;
            continue;
        }
        /* fields: runs of characters other than blanks */
        char *w[MAX_TOKENS];
        int nw = 0;
        for (char *c = s; *c;) {
            while (*c == ' ' || *c == '\t' || *c == '\r') *c++ = 0;
            if (!*c) break;
            if (nw < MAX_TOKENS) w[nw] = c;
            nw++;
            while (*c && *c != ' ' && *c != '\t' && *c != '\r') c++;
        }
        if (nw == 0) continue;
        if (nw > MAX_TOKENS) {
            error(where, "too many fields (at most %d)", MAX_TOKENS);
            ok = false;
            continue;
        }
        if (!header) {
            header = true;
            if (strcmp(w[0], "onnxcc-tune") != 0) {
                error(where, "not a tuning file: expected 'onnxcc-tune %d' first", TUNE_VERSION);
                return false;
            }
            if (nw != 2 || parse_int(w[1], TUNE_VERSION, TUNE_VERSION) < 0) {
                error(where, "tuning file version '%s': this onnxcc reads version %d", nw > 1 ? w[1] : "", TUNE_VERSION);
                return false;
            }
            continue;
        }
        TuneEntry e = {.line = line};
        if (!parse_entry(where, w, nw, &e)) { ok = false; continue; }
        bool dup = false;
        for (int i = 0; i < t->n && !dup; i++) {
            const TuneEntry *o = &t->e[i];
            if (o->sig != e.sig || strcmp(o->target, e.target) != 0 || strcmp(o->ops, e.ops) != 0) continue;
            dup = true;
            if (o->kind != e.kind || o->a != e.a || o->b != e.b || strcmp(o->out, e.out) != 0) {
                error(where, "kernel %s %s on %s: another choice than line %d's", e.ops, w[3], e.target, o->line);
                ok = false;
            }
        }
        if (dup) continue;
        if (t->n == MAX_ENTRIES) {
            error(where, "more than %d entries", MAX_ENTRIES);
            return false;
        }
        if (t->n == t->cap) {
            int cap = t->cap ? 2 * t->cap : 64;
            TuneEntry *ne = ARENA_ARRAY(a, TuneEntry, cap);
            if (t->n) memcpy(ne, t->e, (size_t)t->n * sizeof *ne);
            t->e = ne, t->cap = cap;
        }
        t->e[t->n++] = e;
    }
    if (!header) {
        error(arena_printf(a, "%s:%d", path, line ? line : 1), "not a tuning file: no 'onnxcc-tune %d' line", TUNE_VERSION);
        return false;
    }
    return ok;
}

/* ---- writing ---- */

void tune_write_header(FILE *f) { fprintf(f, "onnxcc-tune %d\n", TUNE_VERSION); }

void tune_write_entry(FILE *f, Arena *a, const TuneEntry *e, const char *comment) {
    fprintf(f, "%s %s %s %016llx %s%s%s\n", e->target, e->ops, e->out, (unsigned long long)e->sig,
            tune_choice_text(a, e->kind, e->a, e->b), comment ? "  # " : "", comment ? comment : "");
}
