/* parallelize.c - which kernels run on several cores, and how they are cut into tasks.
 *
 * A kernel pass after schedule. The generated NAME_run_par takes a parallel-for from the caller
 * (runtime/model.h.in); a kernel marked here is run through it as `tasks` independent pieces,
 * each a contiguous range of whole steps of one loop (LH_PARALLEL, `[parallel N]`), while
 * NAME_run (and NAME_run_par without a parallel-for) calls the kernel whole. The pieces are
 * fixed at compile time, not by the thread count, and a piece computes each output element
 * with the same code as the whole kernel does, so the outputs are bitwise the same for every
 * number of threads.
 *
 * What is split is a group of loops, the outermost with more than one value: down from the
 * kernel's body, through loops that are the only statement of their parent, the first
 * statement list whose statements are all loops (a row loop and its peeled border rows; the
 * interior and the border columns of a padded conv, each a loop over the rows; a register
 * tile's loop and its rest). Task t runs, of every loop of the group, the values of its
 * variable from cut t to cut t + 1 (kir_parallel_cuts: cuts on every loop's step grid, so that
 * a register tile is never cut): each iteration of each loop runs once, in one task. A vector
 * loop of the group (a rest of whole vectors) is one step, run whole by one task; no
 * reduction or redo loop is split. The loops must be parallel (no two iterations
 * write one element, none reads what another writes), which the kernel's class says of its
 * output loops (elementwise, contraction and copy kernels store each output element once, at
 * an index that includes every loop outside the reductions; a generic kernel qualifies where
 * each store under a loop of the group indexes a dimension by that loop's variable times f >= 1
 * plus a constant, one f for all and the constants within a window narrower than f times its
 * step: its own rows, own_rows), provided that:
 *   - no buffer the kernel stores is also loaded by it (in-place elementwise pairs are two
 *     buffers at one offset, read and written at the same index: still independent);
 *   - every scalar register read in an iteration was set before in the same iteration (none
 *     carries a value from one iteration to the next).
 * Small programs are not split at all (MIN_PROGRAM_MACS). --split-all (tests) ignores both
 * thresholds, so that small test models exercise the tasks. Only kernels with enough work are
 * split (a parallel-for, a worker woken and the cache lines moved cost tens of microseconds), into
 * about one task per TASK_MACS multiply-accumulates (or TASK_BYTES bytes moved: twice those
 * written and twice the constants read, work_bytes), at most MAX_TASKS and at most one per
 * step; that count, the group and whether to split at all are then adjusted by how evenly two
 * threads would share the tasks (plan, two_thread_share). Targets without float vectors (microcontrollers) have no threads: nothing is marked
 * there. */
#include <string.h>

#include "loops.h"
#include "pipeline.h"

enum {
    /* ~2.5 us on one core: below this, one task. Waking a worker, and the output's and input's
     * cache lines moving between the cores, cost more than half of a smaller kernel. 8M (40 us)
     * made hifigan's two-thread run 1.09 -> 0.70 ms but mobilenetv2's 2.9 -> 3.4 ms (its
     * kernels average 6M); 2M gave 0.84 and 3.0 ms, squeezenet 4.5 -> 3.6 ms (same run, on
     * the first host). 2M -> 256K (Zen 4, two threads, interleaved): the 36 products of a
     * Winograd F(4x4) conv (0.8M multiply-adds each on ResNet-18's 56x56 maps, passes/winograd.c)
     * are split too, ResNet-18 12.2 -> 10.5 ms, SqueezeNet 1.10x, DenseNet-121 1.07x, the bench
     * U-Net and HiFi-GAN 1.14x, MobileNetV3 1.06x, the others 0.99-1.03x; 128K gave the same
     * within noise but SqueezeNet 0.93x. */
    MIN_MACS = 1 << 18,
    /* The same for kernels that only move data. Lower than the work alone would say: a pool,
     * a Concat or a pad left on one thread reads the half of its input the other core wrote
     * (GoogLeNet's 0.8 MB Concats 15 -> 36 us at two threads). 1M -> 256K: two-thread runs of
     * mobilenetv2 3.13 -> 2.96 ms, squeezenet 2.94 -> 2.82, densenet121 23.3 -> 22.8, googlenet
     * 12.34 -> 12.14; regnety400 +1%, hifigan 1.13 -> 1.17 ms (its 0.5 MB LeakyRelus). */
    MIN_BYTES = 1 << 18,
    TASK_MACS = 1 << 18,
    TASK_BYTES = 1 << 18,
    MAX_TASKS = 64,
    RUN_TASK_MACS = 1 << 23,        /* join_runs: a run's work per task (or bytes) at most */
    MAX_DEEPER = 8,                 /* groups further in that pick_group offers */
    MAX_FAMILY = 64,                /* families: kernels side by side looked at, at most */
};
/* A program with less work than this runs serially (a run of ~100 us or less, or 8 MB moved: waking the
 * workers and the cache lines that move between cores cost more than they save; make bench's
 * LSTM, 4.9M multiply-accumulates, ran 115 -> 130 us on two threads with one kernel split). */
#define MIN_PROGRAM_MACS ((int64_t)1 << 24)
#define MIN_PROGRAM_BYTES ((int64_t)1 << 23)

/* ---- which buffers are stored, which loaded ---- */
static void stored_roots(const Stmt *s, bool *st) {
    for (; s; s = s->next) {
        if (s->kind == S_STORE) st[kir_root(s->buf)->id] = true;
        stored_roots(s->body, st);
        stored_roots(s->then, st);
        stored_roots(s->els, st);
    }
}

static bool expr_loads(const Expr *e, const bool *st) {
    if (!e) return false;
    if (e->kind == E_LOAD && st[kir_root(e->buf)->id]) return true;
    for (int i = 0; i < e->nargs; i++)
        if (expr_loads(e->args[i], st)) return true;
    return false;
}

static bool stmt_loads(const Stmt *s, const bool *st) {
    for (; s; s = s->next) {
        if (expr_loads(s->lo, st) || expr_loads(s->hi, st) || expr_loads(s->val, st) || expr_loads(s->cond, st))
            return true;
        for (int i = 0; s->kind == S_STORE && i < s->buf->rank; i++)
            if (expr_loads(s->idx[i], st)) return true;
        if (stmt_loads(s->body, st) || stmt_loads(s->then, st) || stmt_loads(s->els, st)) return true;
    }
    return false;
}

/* ---- a generic kernel's stores: each iteration its own rows ----
 * An index f * v + c (f >= 1, 0 <= c < f * step: a Winograd output transform's tile of 4 rows,
 * y[.., 4 * v + c, ..]) puts the rows of iterations v .. v + step - 1 of the loop over v in
 * [f * v, f * (v + step)), apart from every other iteration's. */
static bool times_var(const Expr *x, int var, int64_t *f) {
    if (x->kind == E_VAR) return *f = 1, x->var == var;
    if (x->kind != E_BIN || x->op != K_MUL) return false;
    const Expr *a = x->args[0], *b = x->args[1];
    if (a->kind == E_CONST) a = x->args[1], b = x->args[0];
    *f = b->kind == E_CONST ? b->i : 0;
    return a->kind == E_VAR && a->var == var && *f >= 1;
}

/* x = f * var + c, c a sum of constants (`i2 * 4 + 1 + 1`: a Winograd output transform writing
 * into the next conv's pad): *f, *c. */
static bool scaled_var(const Expr *x, int var, int64_t *f, int64_t *c) {
    *c = 0;
    while (x->kind == E_BIN && x->op == K_ADD) {
        const Expr *a = x->args[0], *b = x->args[1];
        if (a->kind == E_CONST) a = x->args[1], b = x->args[0];
        if (b->kind != E_CONST) return false;
        *c += b->i;
        x = a;
    }
    return times_var(x, var, f);
}

/* The stores under s index one dimension (*d) by f * var + c, with one f for all and their c in
 * a window narrower than f times the step (*f, *lo, *hi: the window so far), so that the rows
 * of two tasks, whose values of var differ by at least the step, never meet. */
static bool own_rows(const Stmt *s, int var, int64_t step, int *d, int64_t *f, int64_t *lo, int64_t *hi) {
    for (; s; s = s->next) {
        if (s->kind == S_STORE) {
            bool own = false;
            for (int j = 0; j < s->buf->rank && !own; j++) {
                int64_t g, c;
                if ((*f && j != *d) || !scaled_var(s->idx[j], var, &g, &c) || (*f && g != *f)) continue;
                int64_t l = *f && *lo < c ? *lo : c, h = *f && *hi > c ? *hi : c;
                if (h - l >= sat_mul(g, step)) continue;
                *d = j, *f = g, *lo = l, *hi = h, own = true;
            }
            if (!own) return false;
        }
        if (!own_rows(s->body, var, step, d, f, lo, hi) || !own_rows(s->then, var, step, d, f, lo, hi) ||
            !own_rows(s->els, var, step, d, f, lo, hi))
            return false;
    }
    return true;
}

static bool stores_own_rows(const Stmt *s, int var, int64_t step) {
    int d = 0;
    int64_t f = 0, lo = 0, hi = 0;
    return own_rows(s, var, step, &d, &f, &lo, &hi);
}

/* ---- a Concat's parts: each loop over its own range of the output ----
 * A fused Concat (DenseNet's Concat+BatchNormalization+Relu) is a loop per input side by side,
 * each from 0, storing at its variable plus the input's offset in the output's channels
 * (`out[n, c + 64, ...]`): not its own rows, and the cuts, on the loops' common range, would
 * give the first tasks a part of every input and the last ones nothing. Such a loop is moved
 * by the offset instead (its variable runs over the output channels it writes, the input's
 * index becoming the variable minus the offset), so that its stores are its own rows and the
 * parts lie end to end: the cuts then split the output's channels evenly. */
static bool var_plus(const Expr *x, int var, int64_t *c) {
    if (x->kind == E_VAR && x->var == var) return *c = 0, true;
    if (x->kind != E_BIN || x->op != K_ADD) return false;
    const Expr *a = x->args[0], *b = x->args[1];
    if (a->kind == E_CONST) a = x->args[1], b = x->args[0];
    if (a->kind != E_VAR || a->var != var || b->kind != E_CONST) return false;
    *c = b->i;
    return true;
}

/* The offset of the first store under s whose index is var + c (c >= step), or 0. */
static int64_t store_offset(const Stmt *s, int var, int64_t step) {
    for (; s; s = s->next) {
        if (s->kind == S_STORE) {
            for (int d = 0; d < s->buf->rank; d++) {
                int64_t c;
                if (var_plus(s->idx[d], var, &c) && c >= step) return c;
            }
            return 0;
        }
        int64_t c = store_offset(s->body, var, step);
        if (!c) c = store_offset(s->then, var, step);
        if (!c) c = store_offset(s->els, var, step);
        if (c) return c;
    }
    return 0;
}

/* Every store under s indexes a dimension by var + off + c, 0 <= c < step. */
static bool stores_rows_at(const Stmt *s, int var, int64_t step, int64_t off) {
    for (; s; s = s->next) {
        if (s->kind == S_STORE) {
            bool own = false;
            for (int d = 0; d < s->buf->rank && !own; d++) {
                int64_t c;
                own = var_plus(s->idx[d], var, &c) && c - off >= 0 && c - off < step;
            }
            if (!own) return false;
        }
        if (!stores_rows_at(s->body, var, step, off) || !stores_rows_at(s->then, var, step, off) ||
            !stores_rows_at(s->els, var, step, off))
            return false;
    }
    return true;
}

/* e with var replaced by var - off (var + c becoming var + (c - off)). */
static Expr *shift_expr(Program *p, Expr *e, int var, int64_t off) {
    if (!e) return e;
    int64_t c;
    if (var_plus(e, var, &c)) return kx_addc(p, kx_var(p, var), c - off);
    for (int i = 0; i < e->nargs; i++) e->args[i] = shift_expr(p, e->args[i], var, off);
    return e;
}

static void shift_stmts(Program *p, Stmt *s, int var, int64_t off) {
    for (; s; s = s->next) {
        s->lo = shift_expr(p, s->lo, var, off);
        s->hi = shift_expr(p, s->hi, var, off);
        s->val = shift_expr(p, s->val, var, off);
        s->cond = shift_expr(p, s->cond, var, off);
        for (int i = 0; s->kind == S_STORE && i < s->buf->rank; i++) s->idx[i] = shift_expr(p, s->idx[i], var, off);
        shift_stmts(p, s->body, var, off);
        shift_stmts(p, s->then, var, off);
        shift_stmts(p, s->els, var, off);
    }
}

/* Moves the loops of the group l whose stores are their rows at an offset (above). */
static void align_parts(Program *p, Stmt *l) {
    for (Stmt *s = l; s; s = s->next) {
        if (s->hints & LH_VECTOR) continue;
        int64_t off = store_offset(s->body, s->var, s->step);
        if (!off || !stores_rows_at(s->body, s->var, s->step, off)) continue;
        shift_stmts(p, s->body, s->var, off);
        s->lo = kx_index(p, s->lo->i + off);
        s->hi = kx_index(p, s->hi->i + off);
    }
}

/* ---- registers set before read in every iteration ---- */
static bool expr_reads_unset(const Expr *e, const bool *set) {
    if (!e) return false;
    if (e->kind == E_SCALAR && !set[e->var]) return true;
    for (int i = 0; i < e->nargs; i++)
        if (expr_reads_unset(e->args[i], set)) return true;
    return false;
}

/* Walks s in order with set[r] = register r surely set by now; false if some read comes
 * first. A loop body is walked once (a value carried around it is read before it is set on
 * the first trip); what a loop of at least one trip or both arms of an if set counts after. */
static bool set_before_read(const Stmt *s, bool *set, int n) {
    for (; s; s = s->next) {
        if (expr_reads_unset(s->lo, set) || expr_reads_unset(s->hi, set) || expr_reads_unset(s->val, set) ||
            expr_reads_unset(s->cond, set))
            return false;
        for (int i = 0; s->kind == S_STORE && i < s->buf->rank; i++)
            if (expr_reads_unset(s->idx[i], set)) return false;
        if (s->kind == S_SET) set[s->var] = true;
        if (s->kind == S_LOOP) {
            bool inner[n > 0 ? n : 1];
            memcpy(inner, set, sizeof(bool) * (size_t)n);
            if (!set_before_read(s->body, inner, n)) return false;
            bool runs = s->lo->kind == E_CONST && s->hi->kind == E_CONST && s->hi->i > s->lo->i;
            if (runs) memcpy(set, inner, sizeof(bool) * (size_t)n);
        }
        if (s->kind == S_IF) {
            bool a[n > 0 ? n : 1], b[n > 0 ? n : 1];
            memcpy(a, set, sizeof(bool) * (size_t)n);
            memcpy(b, set, sizeof(bool) * (size_t)n);
            if (!set_before_read(s->then, a, n) || !set_before_read(s->els, b, n)) return false;
            for (int r = 0; r < n; r++) set[r] = a[r] && b[r];
        }
    }
    return true;
}

/* A group: a statement list of loops only (a loop and its peeled borders, the interior and
 * border columns of a conv, a register tile's loop and its rest). Its number of loops; 0 if
 * the list is not one. */
static int group_size(const Stmt *s) {
    int n = 0;
    for (const Stmt *t = s; t; t = t->next, n++)
        if (t->kind != S_LOOP || t->lo->kind != E_CONST || t->hi->kind != E_CONST ||
            t->step <= 0 || (t->hints & (LH_REDUCTION | LH_REDO | LH_PARALLEL)))
            return 0;
    return n;
}

/* Values of the group's variables over their ranges' union, in steps of the finest loop. */
static int64_t group_units(const Stmt *s) {
    int64_t lo = s->lo->i, hi = s->hi->i, step = kir_parallel_step(s);
    for (; s; s = s->next) {
        lo = MIN(lo, s->lo->i), hi = MAX(hi, s->hi->i);
        step = MIN(step, kir_parallel_step(s));
    }
    return (hi - lo + step - 1) / step;
}

/* e with every read of variable var a copy of `by`. */
static Expr *replace_expr(Program *p, Expr *e, int var, const Expr *by) {
    if (!e) return e;
    if (e->kind == E_VAR && e->var == var) return kx_clone(p, by);
    for (int i = 0; i < e->nargs; i++) e->args[i] = replace_expr(p, e->args[i], var, by);
    return e;
}

/* The same in list s: loop bounds, values, conditions and store indices. */
static void replace_var(Program *p, Stmt *s, int var, const Expr *by) {
    for (; s; s = s->next) {
        s->lo = replace_expr(p, s->lo, var, by);
        s->hi = replace_expr(p, s->hi, var, by);
        s->val = replace_expr(p, s->val, var, by);
        s->cond = replace_expr(p, s->cond, var, by);
        for (int i = 0; s->kind == S_STORE && i < s->buf->rank; i++) s->idx[i] = replace_expr(p, s->idx[i], var, by);
        replace_var(p, s->body, var, by);
        replace_var(p, s->then, var, by);
        replace_var(p, s->els, var, by);
    }
}

/* ---- one-trip tiles beside other loops: their bodies in their place ----
 * A conv whose output channels are one tile of 128 and a rest of 80 is a list of the tile's
 * loop (one step: one value) and the rest's loop over rows; one of 192 and 64 in a 1x1 conv,
 * the tile's loop and the rest's loops over pixels. As a group, its cuts on the tile's step
 * grid leave the tile whole to one task (or nothing to split: GoogLeNet's inception4a 3x3 and
 * inception4e 1x1 convs ran on one thread). The tile's loop is replaced by its body with the
 * variable its one value, so the list becomes the parts' loops over the same rows or pixels,
 * side by side, which are cut together. Only a tile (a step above 1) whose range overlaps
 * another loop's (so over another dimension: a loop's rest and peeled border rows lie end to
 * end) and whose body is loops only. */
static bool one_tile(const Stmt *s) {
    return s->kind == S_LOOP && s->lo->kind == E_CONST && s->hi->kind == E_CONST && s->step > 1 &&
           !(s->hints & ~LH_TILE) && s->hi->i - s->lo->i <= s->step && s->hi->i > s->lo->i && s->body;
}

/* Some other loop of the list overlaps s's range: they run over different dimensions (a
 * loop and its rest, or peeled borders, lie end to end). */
static bool overlaps_other(const Stmt *list, const Stmt *s) {
    for (const Stmt *t = list; t; t = t->next)
        if (t != s && t->lo->i < s->hi->i && s->lo->i < t->hi->i) return true;
    return false;
}

static void inline_one_tiles(Program *p, Stmt **list) {
    if (!*list || !(*list)->next || !group_size(*list)) return;
    for (Stmt **at = list; *at;) {
        Stmt *s = *at;
        if (!one_tile(s) || !group_size(s->body) || !overlaps_other(*list, s)) {
            at = &s->next;
            continue;
        }
        replace_var(p, s->body, s->var, kx_index(p, s->lo->i));
        Stmt *end = s->body;
        while (end->next) end = end->next;
        end->next = s->next;
        *at = s->body;
        at = &end->next;
    }
}

/* The group to split: down the chain of lists holding one loop each, the first group of at
 * least 4 units, else the one with the most (NULL: none has two). The outermost such loop:
 * tasks then write large contiguous parts of the output. Cut finer (a 1x1 conv's rows of 27
 * pixels, 108 bytes, under its 4 tiles of 32 channels) two tasks write the two halves of a
 * cache line in every channel, and the line moves between the cores: make bench's squeezenet
 * 1x1 convs ran 63 -> 139 us on two threads. One-trip tiles beside other loops are inlined
 * on the way (inline_one_tiles). The groups of at least 4 units further down the chain go to
 * deeper[] (parallelize_kernel takes one where the first shares the work badly). */
static Stmt *pick_group(Program *p, Kernel *k, Stmt **deeper, int *ndeeper) {
    Stmt *best = NULL;
    *ndeeper = 0;
    for (Stmt **at = &k->body; *at && (inline_one_tiles(p, at), group_size(*at)); at = &(*at)->body) {
        Stmt *s = *at;
        int64_t u = group_units(s);
        if (best && group_units(best) >= 4) {
            if (u >= 4 && *ndeeper < MAX_DEEPER) deeper[(*ndeeper)++] = s;
        } else if (u >= 2 && (!best || u > group_units(best))) best = s;
        if (s->next) break;         /* a list of several loops: nothing inside is one chain */
    }
    return best;
}

/* ---- one-trip loops side by side: one loop ----
 * A kernel of several parts (a Concat's inputs, a conv's output channels and their rest) is
 * a list of loops over the batch, one value each: no group to split there. Such loops over
 * one and the same value become one loop running the parts in order (their variables renamed
 * to its own), so that the group below it, the parts' loops side by side, can be split. */
static bool one_trip(const Stmt *s, const Stmt *first) {
    return s->kind == S_LOOP && s->lo->kind == E_CONST && s->hi->kind == E_CONST && !s->hints &&
           s->hi->i - s->lo->i == 1 && s->lo->i == first->lo->i;
}

static void merge_one_trip_loops(Program *p, Kernel *k) {
    Stmt *first = k->body;
    if (!first || !first->next) return;
    for (Stmt *s = first; s; s = s->next)
        if (!one_trip(s, first)) return;
    Stmt **end = &first->body;
    while (*end) end = &(*end)->next;
    for (Stmt *s = first->next; s; s = s->next) {
        replace_var(p, s->body, s->var, kx_var(p, first->var));
        *end = s->body;
        while (*end) end = &(*end)->next;
    }
    first->next = NULL;
}

/* The bytes a kernel moves: those it writes and about as many read, and its constants twice
 * (a dense layer streams its weights once, from memory rather than from the cache its
 * producer left them in: DeepLabV3's 1x1 convs of one tap over 2x2 pixels, passes/dead_taps.c,
 * read 0.98 MB of weights in ~110 us for 1M multiply-adds). Not its other inputs' sizes: a
 * Slice of a large input reads little of it. */
static int64_t work_bytes(const Kernel *k) {
    int64_t bytes = 0;
    for (int i = 0; i < k->nparams; i++) {
        const Buf *b = k->params[i];
        if (k->modes[i] & KP_OUT) bytes = sat_add(bytes, sat_mul(2, (int64_t)kir_nbytes(b)));
        else if (kir_root((Buf *)b)->kind == B_CONST) bytes = sat_add(bytes, sat_mul(2, (int64_t)kir_nbytes(b)));
    }
    return bytes;
}

/* ---- how evenly the cuts share the work ----
 * A group can hold loops over different dimensions: HiFi-GAN's 1-D convs are their border
 * columns' loop over 16 channels, their tiles of 6 channels (the work) and a last column's
 * loop at 4093..4096. The cuts, on the union of the ranges, gave the first task every channel
 * tile and the other eleven a column or nothing: the kernel ran on one thread, paying for the
 * parallel-for. Each task's work is estimated (each loop's statements run, spread evenly over
 * its values) and the two-thread run of the pool (runtime/onnxcc_pool.c: each thread its half
 * of the tasks from the front, then the other's from the back) simulated: a split whose two
 * threads would not run in 80% of one thread's time is left whole. */
static int64_t stmts_run(const Stmt *s) {
    int64_t n = 0;
    for (; s; s = s->next) {
        if (s->kind == S_STORE || s->kind == S_SET) n = sat_add(n, 1);
        if (s->kind == S_IF) n = sat_add(n, MAX(stmts_run(s->then), stmts_run(s->els)));
        if (s->kind == S_LOOP) {
            int64_t trips = 1;
            if (s->lo->kind == E_CONST && s->hi->kind == E_CONST && s->hi->i > s->lo->i && s->step > 0)
                trips = (s->hi->i - s->lo->i + s->step - 1) / s->step;
            n = sat_add(n, sat_mul(trips, stmts_run(s->body)));
        }
    }
    return n;
}

static double two_thread_share(const Stmt *l, const int64_t *cuts, int64_t tasks) {
    double w[MAX_TASKS] = {0}, total = 0;
    for (const Stmt *s = l; s; s = s->next) {
        int64_t step = kir_parallel_step(s), trips = (s->hi->i - s->lo->i + step - 1) / step;
        double per = (double)stmts_run(s->body);
        for (int64_t t = 0; t < tasks; t++) {
            int64_t a = MAX(cuts[t], s->lo->i), b = MIN(cuts[t + 1], s->hi->i), n = 0;
            if (b > a) n = (b - s->lo->i + step - 1) / step - (a - s->lo->i + step - 1) / step;
            w[t] += per * (double)n;
        }
        total += per * (double)trips;
    }
    /* the pool at two threads: blocks 0 .. h - 1 and h .. tasks - 1 */
    int64_t h = tasks / 2, f0 = 0, b0 = h, f1 = h, b1 = tasks;
    double t0 = 0, t1 = 0;
    while (f0 < b0 || f1 < b1) {
        if (t0 <= t1) t0 += f0 < b0 ? w[f0++] : w[--b1];
        else t1 += f1 < b1 ? w[f1++] : w[--b0];
    }
    return total > 0 ? MAX(t0, t1) / total : 0.5;
}

/* Group l cut into at most `tasks` (kir_parallel_cuts); the tasks it is cut into. A group of
 * unlike loops (a conv's tiles of output channels beside their rest's tiles of pixels) has
 * fewer places to cut than group_units counts: no more tasks than nonempty ranges between
 * its cuts. */
static int64_t cut(Stmt *l, int64_t tasks, int64_t *cuts) {
    if (tasks > group_units(l)) tasks = group_units(l);
    for (int64_t used = 0; tasks >= 2; tasks = used) {
        l->tasks = tasks;
        kir_parallel_cuts(l, cuts);
        used = 0;
        for (int64_t t = 0; t < tasks; t++) used += cuts[t + 1] > cuts[t];
        if (used == tasks) break;
    }
    l->tasks = 0;
    return tasks;
}

/* The tasks group l would be cut into (0: it cannot be split), its cuts, and the share of the
 * work the slower of two threads would run (two_thread_share). */
static int64_t plan(Program *p, Kernel *k, Stmt *l, int64_t macs, int64_t bytes, int64_t *cuts, double *share) {
    bool generic = k->kclass == KC_GENERIC;
    int n = k->nscalars;
    bool *set = ARENA_ARRAY(p->arena, bool, n + 1);
    for (Stmt *s = l; s; s = s->next) {
        memset(set, 0, sizeof(bool) * (size_t)(n + 1));
        if (!set_before_read(s->body, set, n)) return 0;
        if (generic && !stores_own_rows(s->body, s->var, s->step)) return 0;
    }
    int64_t want = macs >= MIN_MACS ? macs / TASK_MACS : bytes / TASK_BYTES;
    int64_t tasks = want < 2 ? 2 : want > MAX_TASKS ? MAX_TASKS : want;
    if (tasks > group_units(l)) tasks = group_units(l);
    tasks = cut(l, tasks, cuts);
    if (tasks < 2) return 0;
    *share = two_thread_share(l, cuts, tasks);
    /* a few tasks of an odd number (3 of a 0.8 MB Mul: 2 and 1 at two threads), one more or
     * one fewer if that shares better */
    for (int64_t d = -1, t0 = tasks; d <= 1 && t0 < 16 && *share > 0.52; d += 2) {
        int64_t m = cut(l, t0 + d, cuts);
        double sh = m >= 2 ? two_thread_share(l, cuts, m) : 1;
        if (m >= 2 && sh < *share - 0.02) tasks = m, *share = sh;
    }
    cut(l, tasks, cuts);
    return tasks;
}

/* ---- tiles of channels turned inside the columns they run over ----
 * HiFi-GAN's 1-D convs over 16 channels and 4096 columns are a list of a border column, a
 * loop over 2 tiles of 6 channels and one of 4, each holding the loop over the column tiles
 * and its rest, and a last border column. Cut on the union of those ranges, the first task
 * got every channel tile (two_thread_share: one thread ran all), so the kernel stayed whole:
 * half of hifigan's one-thread time was in such kernels, and its two-thread run was no
 * faster than one thread. Here, when the group would stay whole, each loop T of it over a
 * few tiles whose body is loops only becomes loops over the columns: T { C; R } becomes
 * C { T { C's body } } (the two are perfectly nested after distribution, C's bounds constant,
 * so the interchange is legal for output loops) and, for a rest R that redoes values C
 * already stored (LH_REDO, a rest grown back into a whole tile), a one-trip loop at R's first
 * value holding T { R }: the cuts, on the step grid of C, then never part R from C's last
 * tile, so the two stores of one element stay in one task. The weights of such a conv are
 * a few KB, which every column tile reads from L1 either way. */
static bool tile_over_loops(const Stmt *t) {
    if (t->kind != S_LOOP || t->lo->kind != E_CONST || t->hi->kind != E_CONST || t->step <= 0 ||
        t->hints != LH_TILE || !t->body || t->body->kind != S_LOOP || (t->body->hints & ~LH_TILE))
        return false;
    for (const Stmt *c = t->body; c; c = c->next)
        if (c->kind != S_LOOP || c->lo->kind != E_CONST || c->hi->kind != E_CONST || c->step <= 0 ||
            (c->hints & ~(LH_TILE | LH_REDO)))
            return false;
    return true;
}

/* Whether the multiply-adds (the values set inside reduction loops) load a non-constant buffer
 * (the activations, not the weights) at an index that uses variable var. */
static bool loads_by(const Expr *e, int var) {
    if (!e) return false;
    if (e->kind == E_LOAD && kir_root(e->buf)->kind != B_CONST)
        for (int i = 0; i < e->nargs; i++)
            if (expr_reads_var(e->args[i], var)) return true;
    for (int i = 0; i < e->nargs; i++)
        if (loads_by(e->args[i], var)) return true;
    return false;
}

/* An activation load at an index of var plus the variable of a reduction loop around it
 * (red[v], v < n): a conv's tap along var. */
static bool loads_tap(const Expr *e, int var, const bool *red, int n) {
    if (!e) return false;
    if (e->kind == E_LOAD && kir_root(e->buf)->kind != B_CONST)
        for (int i = 0; i < e->nargs; i++)
            for (int v = 0; v < n && expr_reads_var(e->args[i], var); v++)
                if (red[v] && expr_reads_var(e->args[i], v)) return true;
    for (int i = 0; i < e->nargs; i++)
        if (loads_tap(e->args[i], var, red, n)) return true;
    return false;
}

static bool reduction_loads_by(const Stmt *s, int var, bool in_red) {
    for (; s; s = s->next) {
        if (in_red && loads_by(s->val, var)) return true;
        bool red = in_red || (s->kind == S_LOOP && (s->hints & LH_REDUCTION));
        if (reduction_loads_by(s->body, var, red) || reduction_loads_by(s->then, var, red) ||
            reduction_loads_by(s->els, var, red))
            return true;
    }
    return false;
}

static bool tap_along(const Stmt *s, int var, bool *red, int n) {
    for (; s; s = s->next) {
        if (s->kind == S_SET && loads_tap(s->val, var, red, n)) return true;
        bool r = s->kind == S_LOOP && (s->hints & LH_REDUCTION) && s->var < n;
        if (r) red[s->var] = true;
        bool f = tap_along(s->body, var, red, n) || tap_along(s->then, var, red, n) || tap_along(s->els, var, red, n);
        if (r) red[s->var] = false;
        if (f) return true;
    }
    return false;
}

/* Turning pays even where the tiles share well when each of the group's tiles runs over
 * output channels (its variable indexes no activation the multiply-adds read: every task of
 * such a split reads the whole input, which the other core wrote half of) and the loops it
 * holds run over the activation's columns (a task then reads its own columns and a halo,
 * those it wrote in the kernel before): a 1-D conv, its column tiles holding the vector loop
 * (a 2-D conv's tiles hold rows, each holding the column tiles: not changed here, that is
 * every CNN's split and was not measured), with taps along the columns. Not 1x1 convs over
 * flattened pixels or ConvTranspose phases of one tap: turned, FPN's 64-channel lateral 1x1
 * conv over 4096 pixels ran 124 -> 135-142 us at one thread and its head's ConvTranspose
 * phase 54 -> 60 us (the loop order is NAME_run's too). A 1x1 conv over channel-last pixels is the other way
 * round (its tiles run over pixels) and is left alone. hifigan at two threads, its 64- and
 * 32-channel 1-D convs split by columns too: 1086 -> 861 us, ups_5's convs 79-88 -> 52-55 us
 * each. */
static bool turn_pays(Program *p, const Kernel *k, const Stmt *l) {
    bool any = false, *red = ARENA_ARRAY(p->arena, bool, k->nvars + 1);
    for (const Stmt *t = l; t; t = t->next) {
        if (!tile_over_loops(t)) continue;
        if (reduction_loads_by(t->body, t->var, false) || !reduction_loads_by(t->body, t->body->var, false) ||
            !t->body->body || !(t->body->body->hints & LH_VECTOR) || !tap_along(t->body, t->body->var, red, k->nvars))
            return false;
        any = true;
    }
    return any;
}

/* The group's list with its tiles turned (NULL: none can be). Builds new statements; the old
 * list stays as it was. */
static Stmt *turn_tiles(Program *p, Kernel *k, const Stmt *l) {
    Stmt *head = NULL, **end = &head;
    bool any = false;
    for (const Stmt *t = l; t; t = t->next) {
        if (!tile_over_loops(t)) {
            Stmt *c = ks_clone(p, t);
            c->next = NULL;
            *end = c, end = &c->next;
            continue;
        }
        any = true;
        for (const Stmt *c = t->body; c; c = c->next) {
            Stmt *inner = ks_clone(p, c);
            inner->next = NULL;
            Stmt *tt = ks_loop(p, t->var, t->lo->i, t->hi->i, t->step, NULL);
            tt->hints = t->hints;
            Stmt *outer;
            if (!(c->hints & LH_REDO)) {
                tt->body = inner->body;         /* T { C's body } inside C */
                inner->body = tt;
                outer = inner;
            } else {
                tt->body = inner;               /* one trip at R's first value, T { R } */
                outer = ks_loop(p, k->nvars++, c->lo->i, c->lo->i + 1, 1, tt);
            }
            *end = outer, end = &outer->next;
        }
    }
    return any ? head : NULL;
}

/* ---- a contraction split along the rows its input's writer split ----
 * ResNet-18's layer2 Winograd products (7x7 tiles, 128 -> 128 channels) took their outermost
 * group, tiles of 32 output channels, while the input transform that writes their input is
 * split over tile rows: each task read the other core's half of its input, and the output
 * transform after it, split over tile rows too, read half of each product's output back. A
 * contraction whose group indexes another dim of an input than the one the input's writer
 * split takes, of the groups further in that pick_group offers, the one indexing that same dim,
 * if it shares about as well and each of its tasks, which then reads all the weights, does at
 * least 3 multiply-adds per byte of them (as for the deeper groups in parallelize_kernel).
 * ResNet-18 at two threads 1.02-1.04x (9 rounds, interleaved, Zen 5), at one thread 0.99x (the
 * weights read once a task); ResNet-50, GoogLeNet, DenseNet-121, InceptionV3 1.00-1.01x. */
static bool split(const Kernel *k);
static int neighbour(const Program *p, int i, int a);

/* The dim of root buffer r (accessed at its own rank) that the first store (store) or load
 * under s indexing it by variable v indexes by v; -1 if none. */
static int expr_dim(const Expr *e, const Buf *r, int v) {
    if (!e) return -1;
    if (e->kind == E_LOAD && kir_root(e->buf) == r && e->buf->rank == r->rank)
        for (int i = 0; i < e->nargs; i++)
            if (expr_reads_var(e->args[i], v)) return i;
    for (int i = 0; i < e->nargs; i++) {
        int d = expr_dim(e->args[i], r, v);
        if (d >= 0) return d;
    }
    return -1;
}

static int stmt_dim(const Stmt *s, const Buf *r, int v, bool store) {
    for (; s; s = s->next) {
        int d = -1;
        if (store && s->kind == S_STORE && kir_root(s->buf) == r && s->buf->rank == r->rank)
            for (int i = 0; i < s->buf->rank && d < 0; i++)
                if (expr_reads_var(s->idx[i], v)) d = i;
        if (!store && d < 0) d = expr_dim(s->val, r, v);
        if (d < 0) d = stmt_dim(s->body, r, v, store);
        if (d < 0) d = stmt_dim(s->then, r, v, store);
        if (d < 0) d = stmt_dim(s->els, r, v, store);
        if (d >= 0) return d;
    }
    return -1;
}

/* Of l and the deeper groups, the one indexing the dim of an input that its writer (the
 * kernel before ki that wrote it) split; NULL if none does, or no writer is split. */
static Stmt *follow_writer(const Program *p, int ki, Stmt *l, Stmt **deeper, int ndeeper) {
    const Kernel *k = p->kernels[ki];
    for (int a = 0; a < k->nparams; a++) {
        if ((k->modes[a] & KP_OUT) || kir_root(k->params[a])->kind == B_CONST) continue;
        int j = neighbour(p, ki, a);
        if (j < 0 || !split(p->kernels[j])) continue;
        const Kernel *w = p->kernels[j];
        const Buf *r = kir_root(k->params[a]);
        int d = -1;
        for (const Stmt *g = kir_parallel_loop(w); g && d < 0; g = g->next) d = stmt_dim(w->body, r, g->var, true);
        if (d < 0) continue;
        if (stmt_dim(k->body, r, l->var, false) == d) return l;
        for (int c = 0; c < ndeeper; c++)
            if (stmt_dim(k->body, r, deeper[c]->var, false) == d) return deeper[c];
    }
    return NULL;
}

static bool parallelize_kernel(Program *p, int ki, int64_t family) {
    Kernel *k = p->kernels[ki];
    bool was_turned = false;
    if (k->dead || k->ctl) return false;
    bool generic = k->kclass == KC_GENERIC;
    if (k->kclass != KC_ELEMENTWISE && k->kclass != KC_CONTRACTION && k->kclass != KC_COPY && !generic) return false;
    /* a 4-bit output is stored a nibble at a time, by reading and writing back its byte:
     * two threads at the two halves of one byte would lose one (kir.h, Buf.nibbles) */
    for (int i = 0; i < k->nparams; i++)
        if ((k->modes[i] & KP_OUT) && kir_root(k->params[i])->nibbles) return false;
    /* the work: multiply-accumulates, or bytes moved (work_bytes) */
    int64_t macs, bytes = work_bytes(k), all, weights = 0;
    bool consts = false;
    for (int i = 0; i < k->nparams; i++)
        if (!(k->modes[i] & KP_OUT) && kir_root(k->params[i])->kind == B_CONST)
            consts = true, weights = sat_add(weights, (int64_t)kir_nbytes(k->params[i]));
    kir_kernel_cost(k, &macs, &all);
    /* A contraction without constants is a reduction of its inputs (a GlobalAveragePool),
     * memory-bound: its work is the bytes of all its params, the input included. Counted by
     * what it writes (work_bytes), RegNetY-1.6GF's squeeze-excite pools (600 KB in, 192 bytes
     * out) stayed whole and read the half of their input that the other core's part of the
     * conv before wrote: 10.8 -> 27 us at two threads, 28 of them. Split over their channels,
     * the model is 1.11-1.12x faster at two threads (7 rounds, interleaved, Zen 5),
     * EfficientNet-B2 1.00-1.04x, the other bench models within noise. */
    if (k->kclass == KC_CONTRACTION && !consts) bytes = MAX(bytes, all);
    if (macs < MIN_MACS && family < MIN_MACS && bytes < MIN_BYTES && !p->split_all) return false;
    merge_one_trip_loops(p, k);
    Stmt *deeper[MAX_DEEPER];
    int ndeeper;
    Stmt *l = pick_group(p, k, deeper, &ndeeper);
    if (!l) return false;
    if (generic) align_parts(p, l);
    bool *st = ARENA_ARRAY(p->arena, bool, p->nbufs + 1);
    stored_roots(k->body, st);
    if (stmt_loads(k->body, st)) return false;
    int64_t *cuts = ARENA_ARRAY(p->arena, int64_t, MAX_TASKS + 1);
    double share = 1;
    int64_t tasks = plan(p, k, l, macs, bytes, cuts, &share);
    /* Cut unevenly (5 tiles of output channels: 3 and 2 at two threads), a group further in
     * (the rows inside those tiles) that shares the work better is taken instead, if each of
     * its tasks, which runs every tile and so reads all the weights, does at least 3
     * multiply-adds per byte of them: enough to hide the reads. InceptionV3's 7x7 convs of 5
     * tiles (4.2 a byte) ran 450 -> 412 us at two threads cut into 17 rows; its 1x1 convs over
     * 8x8 pixels and 2048 channels of 5 and 7 tiles (1.5 a byte) 284 -> 402 and 626 -> 1092 us
     * cut into 10 pixel tiles. */
    for (int i = 0; i < ndeeper && !generic && macs > 0 && share > 0.55; i++) {
        double sh;
        int64_t n = plan(p, k, deeper[i], macs, bytes, cuts, &sh);
        if (n >= 2 && n >= tasks && sh < share - 0.03 && macs / n >= 3 * weights) l = deeper[i], tasks = n, share = sh;
    }
    Stmt *f = k->kclass == KC_CONTRACTION && macs > 0 && ndeeper ? follow_writer(p, ki, l, deeper, ndeeper) : NULL;
    if (f && f != l) {
        double sh;
        int64_t n = plan(p, k, f, macs, bytes, cuts, &sh);
        if (n >= 2 && sh <= 0.6 && macs / n >= 3 * weights) l = f, tasks = n, share = sh;
    }
    if ((tasks < 2 || share > 0.8 || turn_pays(p, k, l)) && !generic && macs > 0) {
        Stmt **at = &k->body;
        while (*at && *at != l) at = &(*at)->body;
        Stmt *turned = *at ? turn_tiles(p, k, l) : NULL;
        double sh = 1;
        int64_t n = turned && group_size(turned) ? plan(p, k, turned, macs, bytes, cuts, &sh) : 0;
        if (n >= 2 && sh <= 0.6) *at = turned, l = turned, tasks = n, share = sh, was_turned = true;
    }
    if (tasks < 2 || share > 0.8) return false;
    l->tasks = tasks;
    kir_parallel_cuts(l, cuts);
    for (Stmt *s = l; s; s = s->next) {
        s->hints |= LH_PARALLEL;
        s->tasks = tasks;
    }
    return was_turned;
}

/* The work of the whole program, as parallelize_kernel counts a kernel's, times the runs of
 * each (kir_runs: a recurrence's steps, rnn.c's stepped form). */
static void program_work(const Program *p, int64_t *macs, int64_t *bytes) {
    *macs = *bytes = 0;
    for (int i = 0; i < p->nkernels; i++) {
        const Kernel *k = p->kernels[i];
        if (k->dead || k->ctl) continue;
        int64_t m, unused, n = kir_runs(p, i);
        kir_kernel_cost(k, &m, &unused);
        *macs = sat_add(*macs, sat_mul(m, n));
        *bytes = sat_add(*bytes, sat_mul(work_bytes(k), n));
    }
}

/* Whether kernel k reads (out false) or writes (out true) root buffer r. */
static bool touches(const Kernel *k, const Buf *r, bool out) {
    for (int i = 0; i < k->nparams; i++)
        if (kir_root(k->params[i]) == r && !(k->modes[i] & KP_OUT) != out) return true;
    return false;
}

static bool split(const Kernel *k) { return !k->dead && !k->ctl && kir_parallel_loop(k); }

/* The kernel next to kernel i through its parameter a: the last writer before it of an input,
 * the first reader after it of an output; -1 if none (a program input or output). */
static int neighbour(const Program *p, int i, int a) {
    const Kernel *k = p->kernels[i];
    const Buf *r = kir_root(k->params[a]);
    bool out = k->modes[a] & KP_OUT;
    for (int j = out ? i + 1 : i - 1; j >= 0 && j < p->nkernels; j += out ? 1 : -1)
        if (!p->kernels[j]->dead && touches(p->kernels[j], r, !out)) return j;
    return -1;
}

/* ---- a small data kernel between two serial ones stays serial ----
 * Split from MIN_BYTES, a 0.5 MB LeakyRelu between two kernels that run on one thread sends
 * half its input to the other core and half its output back: HiFi-GAN's ran 7 -> 15 us at two
 * threads and the convs after them 45 -> 54 us. Such a kernel under 1 MB (where splitting
 * paid on its own before) whose input's writer and output's next reader are both whole is
 * left whole too (a program input or output, which has none, does not count). */
static void unsplit_between_serial(Program *p) {
    for (int i = 0; i < p->nkernels; i++) {
        Kernel *k = p->kernels[i];
        if (!split(k)) continue;
        int64_t macs, unused;
        kir_kernel_cost(k, &macs, &unused);
        if (macs > 0 || work_bytes(k) >= 4 * MIN_BYTES) continue;
        bool near_split = false, near = false;
        for (int a = 0; a < k->nparams && !near_split; a++) {
            int j = neighbour(p, i, a);
            near |= j >= 0;
            near_split = j >= 0 && split(p->kernels[j]);
        }
        if (near_split || !near) continue;
        for (Stmt *s = (Stmt *)kir_parallel_loop(k); s; s = s->next) {
            s->hints &= ~LH_PARALLEL;
            s->tasks = 0;
        }
    }
}

/* ---- a data kernel between turned convs: split over columns too ----
 * HiFi-GAN's LeakyRelus between its 1-D convs, split over channels while the convs around them
 * are split over columns (turn_pays), read half their input from the other core and send half
 * their output back: at two threads 10-14 us each, against 7-9 at one. An elementwise or copy
 * kernel whose group is one loop over channels holding one tile loop over the columns (which
 * holds the vector loop) has the two swapped when the writer of its input or the next reader
 * of its output was turned, if the columns then share as well. hifigan at two threads
 * 710-770 -> 692-699 us (three interleaved rounds), the 1-D model wave 1652-1657 -> 1648-1661
 * (noise); no bench model else has a turned kernel. */
static void columns_beside_turned(Program *p, const bool *turned) {
    for (int i = 0; i < p->nkernels; i++) {
        Kernel *k = p->kernels[i];
        if (!split(k) || (k->kclass != KC_ELEMENTWISE && k->kclass != KC_COPY)) continue;
        Stmt **at = &k->body;
        while (*at && !((*at)->hints & LH_PARALLEL)) at = &(*at)->body;
        Stmt *g = *at, *c = g ? g->body : NULL;
        if (!g || g->next || g->hints != LH_PARALLEL || !c || c->next || c->kind != S_LOOP || c->hints != LH_TILE ||
            c->lo->kind != E_CONST || c->hi->kind != E_CONST || !c->body || !(c->body->hints & LH_VECTOR))
            continue;
        bool near = false;
        for (int a = 0; a < k->nparams && !near; a++) {
            int j = neighbour(p, i, a);
            near = j >= 0 && turned[j];
        }
        if (!near) continue;
        Stmt *inner = ks_loop(p, g->var, g->lo->i, g->hi->i, g->step, c->body);
        Stmt *outer = ks_loop(p, c->var, c->lo->i, c->hi->i, c->step, inner);
        outer->hints = LH_TILE;
        int64_t *cuts = ARENA_ARRAY(p->arena, int64_t, MAX_TASKS + 1);
        double sh = 1;
        int64_t n = plan(p, k, outer, 0, work_bytes(k), cuts, &sh);
        if (n < 2 || sh > 0.6) continue;
        outer->tasks = n;
        kir_parallel_cuts(outer, cuts);
        outer->hints |= LH_PARALLEL;
        *at = outer;
    }
}

/* ---- independent kernels in one parallel-for ----
 * A Winograd conv's 36 products are 36 kernels side by side, each split into a few tasks; a
 * parallel-for each cost more than their work at two threads where the cores are far apart
 * (a virtual machine whose two cores trade a cache line in ~220 ns one way: ResNet-18's
 * products of layer1, 7.4 us each at one thread, took 8.6-9.5 us at two, and 4.2 when the
 * cores were close). A kernel split into as many tasks as the kernel before it, and
 * independent of it and of the others of its run (none writes what another touches), joins
 * that kernel's parallel-for (Kernel.joined): task t runs task t of each, so that each thread
 * keeps its part of the rows through the run. A run stops at RUN_TASK_MACS of work per task
 * (~40 us), so that a late thread's tasks are still shared out at its end. 16M against 4M
 * (interleaved, Zen 5, two threads): ResNet-18 1.09x, ResNet-50 0.93x, DeepLabV3 0.94x; at 8M,
 * against a parallel-for per kernel: ResNet-18 1.16x, GoogLeNet 1.06x, DeepLabV3 1.02-1.03x,
 * ResNet-50 within noise. */
static void join_runs(Program *p) {
    int head = -1, prev = -1;
    int64_t run = 0;                /* the run's work per task so far */
    for (int i = 0; i < p->nkernels; i++) {
        Kernel *k = p->kernels[i];
        if (k->dead) continue;
        if (!split(k)) {
            head = prev = -1;
            continue;
        }
        int64_t macs, unused, tasks = kir_parallel_loop(k)->tasks;
        kir_kernel_cost(k, &macs, &unused);
        int64_t w = (macs > 0 ? macs : work_bytes(k)) / tasks;
        bool join = prev >= 0 && kir_parallel_loop(p->kernels[prev])->tasks == tasks && run + w <= RUN_TASK_MACS;
        for (int j = head; join && j <= prev; j++)
            join = p->kernels[j]->dead || kir_independent(p->kernels[j], k);
        k->joined = join;
        if (!join) head = i, run = 0;
        run += w;
        prev = i;
    }
}

/* ---- small kernels side by side: split together ----
 * The 36 products of a Winograd conv on a small map (DenseNet-121's 3x3 convs of 128 -> 32
 * channels on 28x28 and 14x14: 49 or 16 tiles, 200K and 65K multiply-adds each) are each
 * below MIN_MACS, so they ran whole on the calling thread, which read the half of their input
 * that the other thread's part of the input transform wrote (cut by tile rows), and the next
 * output transform read back the half the other core would have written: at two threads those
 * products ran 0.7-0.85x their one-thread time on a host whose cores are far apart. A kernel's
 * family is the run of contraction kernels around it that are independent of each other (as
 * join_runs asks); where the family's work reaches MIN_MACS, each member is split as if it
 * were that large (tasks by its own size), and join_runs then gives the family one
 * parallel-for, each thread keeping its tiles. family[i]: the work of kernel i's family. */
static void families(Program *p, int64_t *family) {
    for (int i = 0; i < p->nkernels;) {
        Kernel *k = p->kernels[i];
        int64_t macs, unused;
        if (k->dead || k->ctl || k->kclass != KC_CONTRACTION) {
            family[i++] = 0;
            continue;
        }
        kir_kernel_cost(k, &macs, &unused);
        int64_t sum = macs;
        int j = i + 1;
        for (; j < p->nkernels && j - i < MAX_FAMILY; j++) {
            Kernel *n = p->kernels[j];
            if (n->dead || n->ctl || n->kclass != KC_CONTRACTION) break;
            bool ind = true;
            for (int m = i; ind && m < j; m++) ind = kir_independent(p->kernels[m], n);
            if (!ind) break;
            int64_t nm;
            kir_kernel_cost(n, &nm, &unused);
            sum = sat_add(sum, nm);
        }
        for (int m = i; m < j; m++) family[m] = sum;
        i = j;
    }
}

void parallelize(Program *p) {
    kir_unjoin(p);
    if (p->vector_bytes < 16) return;       /* a microcontroller: no threads */
    int64_t macs, bytes;
    program_work(p, &macs, &bytes);
    if (macs < MIN_PROGRAM_MACS && bytes < MIN_PROGRAM_BYTES && !p->split_all) return;
    bool *turned = ARENA_ARRAY(p->arena, bool, p->nkernels + 1);
    int64_t *family = ARENA_ARRAY(p->arena, int64_t, p->nkernels + 1);
    families(p, family);
    for (int i = 0; i < p->nkernels; i++) turned[i] = parallelize_kernel(p, i, family[i]);
    columns_beside_turned(p, turned);
    if (!p->split_all) unsplit_between_serial(p);
    join_runs(p);
}
