/* check.c - `onnxcc check`: compile a model for the host, run it in-process on ONNX test data
 * (test_data_set_N/{input,output}_K.pb) and compare the results.
 *
 * The model goes through exactly the compile path of `onnxcc -o` (cli_build, be_emit_levels) into
 * an object file in a temporary directory, which the backend then loads (be_load_object). So a
 * passing check says something about the code a user would link, not about an interpreter.
 * Model-zoo archives (.tar.gz holding DIR/model.onnx and DIR/test_data_set_*) are read in
 * memory. Inputs are matched with the graph inputs by position.
 *
 * Many ONNX tests feed shape-like operands (Reshape's shape, Slice's starts, ...) as graph
 * inputs, which onnxcc cannot compile: shapes are static. When the model does not compile as it
 * is and has integer inputs that reach such operands, check binds them (as --bind would) from
 * each data set's files; data sets that bind different values get compilations of their own. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"

typedef struct DataSet {
    const char *name;               /* "test_data_set_0" */
    const char *path;               /* for messages */
    Tensor *in, *out;               /* sequences and optionals: the tensors they hold */
    int nin, nout;
    int64_t *in_lens;               /* per graph input that is a sequence or optional: --seq */
    bool out_containers;            /* some output is one: the tensor counts must agree */
} DataSet;

typedef struct Source {             /* where the model and its data sets come from */
    const char *path;
    TarEntry *tar;                  /* NULL: plain files */
    int ntar;
    const char *tar_root;           /* "resnet50/" in the archive, "" if at the top */
} Source;


static bool ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

static bool is_tar(const char *path) { return ends_with(path, ".tar.gz") || ends_with(path, ".tgz") || ends_with(path, ".tar"); }

static const TarEntry *tar_find(const Source *s, const char *name) {
    for (int i = 0; i < s->ntar; i++)
        if (strcmp(s->tar[i].name, name) == 0) return &s->tar[i];
    return NULL;
}

/* Each compilation consumes its graph, so this runs once per compilation (the archive is read
 * only the first time). */
static Graph *load_model(Arena *a, Source *s) {
    if (!is_tar(s->path)) return fe_load_model(a, s->path);
    if (!s->tar) s->ntar = fe_read_tar(a, s->path, &s->tar);
    for (int i = 0; i < s->ntar; i++) {
        const char *n = s->tar[i].name;
        if (strcmp(n, "model.onnx") != 0 && !ends_with(n, "/model.onnx")) continue;
        s->tar_root = arena_printf(a, "%.*s", (int)(strlen(n) - strlen("model.onnx")), n);
        const char *where = arena_printf(a, "%s:%s", s->path, n);
        return fe_parse_model(a, s->tar[i].data, s->tar[i].size, where);
    }
    fatal(s->path, "no model.onnx in the archive");
}

/* Load PREFIX0.pb, PREFIX1.pb, ... until one is missing (from the archive or the disk). The
 * file of a sequence or optional (vals[k]'s kind, the graph's values as loaded) gives the
 * tensors it holds, one after the other, and its length in lens[k] (fe_parse_container). */
static int load_tensors(Arena *a, const Source *s, const char *dir, const char *prefix, Tensor **out,
                        Value *const *vals, int nvals, int64_t *lens) {
    int n = 0, cap = 0;
    *out = NULL;
    for (int k = 0;; k++) {
        const char *path = arena_printf(a, "%s/%s_%d.pb", dir, prefix, k);
        Tensor t;
        if (k < nvals && vals[k]->kind != VK_TENSOR) {
            const TarEntry *e = s->tar ? tar_find(s, path) : NULL;
            size_t size = e ? e->size : 0;
            if (s->tar ? !e : access(path, R_OK) != 0) break;
            const uint8_t *buf = e ? e->data : fe_read_file(a, path, &size);
            Tensor *ts;
            int m = fe_parse_container(a, buf, size, path, vals[k]->kind == VK_OPT, &ts, &lens[k]);
            if (m < 0) exit_if_errors();
            *out = arena_grow(a, *out, n, &cap, n + m + 1, sizeof(Tensor));
            if (m) memcpy(*out + n, ts, sizeof(Tensor) * (size_t)m);
            n += m;
            continue;
        }
        if (s->tar) {
            const TarEntry *e = tar_find(s, path);
            if (!e) break;
            if (!fe_parse_tensor(a, e->data, e->size, path, &t)) exit_if_errors();
        } else {
            if (access(path, R_OK) != 0) break;
            if (!fe_load_tensor(a, path, &t)) exit_if_errors();
        }
        *out = arena_grow(a, *out, n, &cap, n + 1, sizeof(Tensor));
        (*out)[n++] = t;
    }
    return n;
}

static DataSet load_set(Arena *a, const Source *s, const char *dir, const Graph *g) {
    DataSet d = {0};
    const char *base = strrchr(dir, '/') ? strrchr(dir, '/') + 1 : dir;
    d.name = base;
    d.path = s->tar ? arena_printf(a, "%s:%s", s->path, dir) : dir;
    d.in_lens = ARENA_ARRAY(a, int64_t, g->ninputs + 1);
    int64_t *out_lens = ARENA_ARRAY(a, int64_t, g->noutputs + 1);
    d.nin = load_tensors(a, s, dir, "input", &d.in, g->inputs, g->ninputs, d.in_lens);
    d.nout = load_tensors(a, s, dir, "output", &d.out, g->outputs, g->noutputs, out_lens);
    for (int i = 0; i < g->noutputs; i++) d.out_containers |= g->outputs[i]->kind != VK_TENSOR;
    if (!d.nout && access(arena_printf(a, "%s/output_0.pb", dir), R_OK) != 0 && !(s->tar && tar_find(s, arena_printf(a, "%s/output_0.pb", dir))))
        fatal(dir, "no output_0.pb in this test data set");
    return d;
}

/* Numeric order: test_data_set_2 before test_data_set_10. */
static int by_name(const void *x, const void *y) {
    const char *a = *(const char *const *)x, *b = *(const char *const *)y;
    size_t la = strlen(a), lb = strlen(b);
    return la != lb ? (la < lb ? -1 : 1) : strcmp(a, b);
}

/* The test_data_set_* directories next to the model (or in its archive). */
static int find_sets(Arena *a, const Source *s, const char ***dirs) {
    int n = 0, cap = 0;
    *dirs = NULL;
    if (s->tar) {
        for (int i = 0; i < s->ntar; i++) {
            const char *name = s->tar[i].name, *rest = name + strlen(s->tar_root);
            if (strncmp(name, s->tar_root, strlen(s->tar_root)) != 0) continue;
            if (strncmp(rest, "test_data_set_", 14) != 0 || !strchr(rest, '/')) continue;
            const char *dir = arena_printf(a, "%.*s", (int)(strchr(rest, '/') - name), name);
            bool seen = false;
            for (int k = 0; k < n; k++) seen |= strcmp((*dirs)[k], dir) == 0;
            if (seen) continue;
            *dirs = arena_grow(a, *dirs, n, &cap, n + 1, sizeof(char *));
            (*dirs)[n++] = dir;
        }
    } else {
        const char *slash = strrchr(s->path, '/');
        const char *root = slash ? arena_printf(a, "%.*s", (int)(slash - s->path), s->path) : ".";
        DIR *dp = opendir(root);
        if (!dp) fatal(root, "cannot read the directory of the model");
        for (struct dirent *e; (e = readdir(dp));) {
            if (strncmp(e->d_name, "test_data_set_", 14) != 0) continue;
            *dirs = arena_grow(a, *dirs, n, &cap, n + 1, sizeof(char *));
            (*dirs)[n++] = arena_printf(a, "%s/%s", root, e->d_name);
        }
        closedir(dp);
    }
    qsort(*dirs, (size_t)n, sizeof(char *), by_name);
    return n;
}

/* Inputs with unresolved dims and no --shape take their shape from the first data set; those
 * marked in `skip` (bound ones, whose shape comes with their contents) do not. */
static void shapes_from_data(Arena *a, Options *o, Graph *g, const DataSet *d, const bool *skip) {
    int n = o->nshapes, cap = n + g->ninputs;
    const char **names = ARENA_ARRAY(a, const char *, cap);
    int64_t(*dims)[MAX_RANK] = arena_alloc(a, sizeof(int64_t[MAX_RANK]) * (size_t)cap);
    int *ranks = ARENA_ARRAY(a, int, cap);
    for (int k = 0; k < n; k++) {
        names[k] = o->shape_names[k];
        ranks[k] = o->shape_ranks[k];
        memcpy(dims[k], o->shape_dims[k], sizeof dims[k]);
    }
    for (int i = 0; i < g->ninputs && i < d->nin; i++) {
        Value *v = g->inputs[i];
        bool given = false, unknown = v->rank < 0;
        for (int k = 0; k < o->nshapes; k++) given |= strcmp(o->shape_names[k], v->name) == 0;
        for (int j = 0; j < v->rank; j++) unknown |= v->dims[j] < 0;
        if (given || !unknown || (skip && skip[i])) continue;
        names[n] = v->name;
        ranks[n] = d->in[i].rank;
        memcpy(dims[n], d->in[i].dims, sizeof dims[n]);
        n++;
    }
    o->shape_names = names;
    o->shape_dims = dims;
    o->shape_ranks = ranks;
    o->nshapes = n;
}

static void *aligned_copy(const void *src, size_t n, size_t align) {
    size_t sz = (n + align - 1) / align * align;
    void *p = aligned_alloc(align, sz ? sz : align);
    if (!p) die("out of memory");
    memset(p, 0, sz ? sz : align);
    if (src && n) memcpy(p, src, n);
    return p;
}

/* The dtype of test data as the model sees it: the ONNX 1.12 test generator wrote bfloat16
 * tensors as uint16 ones holding the same bits. */
static DType data_dtype(const Tensor *t, DType model) {
    return t->dtype == DT_UINT16 && model == DT_BFLOAT16 ? DT_BFLOAT16 : t->dtype;
}

/* A string tensor (char[ir_strlen] per element, ir.h) as the model's buffer holds it: bytes
 * with one more dim, compared exactly like any uint8 tensor. */
static Tensor as_bytes(const Tensor *t) {
    Tensor r = *t;
    if (t->dtype == DT_STRING && t->rank < MAX_RANK) {
        r.dtype = DT_UINT8;
        r.dims[r.rank++] = (int64_t)ir_strlen;
    }
    return r;
}

static bool same_dims(int rank, const int64_t *dims, const Tensor *t) {
    if (rank != t->rank) return false;
    for (int d = 0; d < rank; d++)
        if (dims[d] != t->dims[d]) return false;
    return true;
}

/* The dims run() reported for a data-dependent output (`dims`, int64[rank]) into shape[];
 * false, after a message, if they do not fit the capacity or the rest of the buffer is not
 * zero as the header promises. */
static bool reported_dims(const Buf *b, const int64_t *dims, int64_t *shape, const void *got) {
    int64_t n = 1;
    if (b->string) n = shape[b->rank - 1];      /* the bytes of each string, not a reported dim */
    for (int d = 0; d < kir_io_rank(b); d++) {
        shape[d] = dims[d];
        if (dims[d] < 0 || dims[d] > b->dims[d]) {
            printf("MISMATCH: reported dim %d is %lld, the capacity %lld\n", d, (long long)dims[d], (long long)b->dims[d]);
            return false;
        }
        n *= dims[d];
    }
    size_t es = dtype_size(b->dtype), used = (size_t)n * es;
    for (size_t i = used; i < kir_nbytes(b); i++)
        if (((const unsigned char *)got)[i]) {
            printf("MISMATCH: byte %zu after the %lld valid elements is not zero\n", i, (long long)n);
            return false;
        }
    return true;
}

static const char *dims_str(Arena *a, int rank, const int64_t *dims) {
    char *s = "[";
    for (int d = 0; d < rank; d++) s = arena_printf(a, "%s%s%lld", s, d ? "," : "", (long long)dims[d]);
    return arena_printf(a, "%s]", s);
}

/* Compare one output; prints its line; returns whether it matches. A data-dependent output
 * (dims: the int64 dims run() reported, else NULL) is compared in its valid part. */
static bool compare(Arena *a, const Cli *c, const char *set, const Buf *b, const void *got,
                    const int64_t *dims, const Tensor *want_data) {
    printf("  %s: output '%s': ", set, b->name);
    Tensor bytes = as_bytes(want_data);
    const Tensor *want = b->string ? &bytes : want_data;
    if (b->string != (want_data->dtype == DT_STRING)) {
        printf("MISMATCH: dtype %s, expected %s\n", b->string ? "string" : dtype_name(b->dtype),
               dtype_name(want_data->dtype));
        return false;
    }
    if (data_dtype(want, b->dtype) != b->dtype) {
        printf("MISMATCH: dtype %s, expected %s\n", dtype_name(b->dtype), dtype_name(want->dtype));
        return false;
    }
    int64_t shape[MAX_RANK];
    memcpy(shape, b->dims, sizeof shape);
    if (dims && !reported_dims(b, dims, shape, got)) return false;
    if (!same_dims(b->rank, shape, want)) {
        printf("MISMATCH: %sshape %s, expected %s\n", dims ? "reported " : "", dims_str(a, kir_io_rank(b), shape),
               dims_str(a, want->rank, want->dims));
        return false;
    }
    if (dims) printf("reported shape %s, ", dims_str(a, kir_io_rank(b), shape));
    Value vg = {.dtype = b->dtype, .data = (void *)got}, vw = {.dtype = b->dtype, .data = want->data};
    bool fl = dtype_is_float(b->dtype);
    double max_abs = 0, max_rel = 0;
    int64_t bad = -1, n = 1;
    for (int d = 0; d < b->rank; d++) n *= shape[d];
    for (int64_t i = 0; i < n; i++) {
        double x = ir_const_float(&vg, i), y = ir_const_float(&vw, i);
        bool ok;
        if (fl && (isnan(x) || isnan(y))) ok = isnan(x) && isnan(y);
        else if (fl && (isinf(x) || isinf(y))) ok = x == y;
        else if (fl) ok = fabs(x - y) <= c->atol + c->rtol * fabs(y);
        else ok = ir_const_int(&vg, i) == ir_const_int(&vw, i);
        if (!ok && bad < 0) bad = i;
        if (isfinite(x) && isfinite(y)) {
            max_abs = fmax(max_abs, fabs(x - y));
            if (y != 0) max_rel = fmax(max_rel, fabs(x - y) / fabs(y));
        }
    }
    if (!b->string) printf("max abs err %.1e, max rel err %.1e: ", max_abs, max_rel);
    if (bad < 0) {
        puts("ok");
        return true;
    }
    if (b->string) {
        int64_t sl = b->dims[b->rank - 1], e = bad / sl;
        const char *x = (const char *)got + e * sl, *y = (const char *)want->data + e * sl;
        printf("MISMATCH at string %lld (got \"%.*s\", want \"%.*s\")\n", (long long)e,
               (int)strnlen(x, (size_t)sl), x, (int)strnlen(y, (size_t)sl), y);
        return false;
    }
    printf("MISMATCH at index %lld (got %.9g, want %.9g)\n", (long long)bad,
           ir_const_float(&vg, bad), ir_const_float(&vw, bad));
    return false;
}

/* A 4-bit output's values, one a byte, for compare (*got, replaced); false after a message
 * if the unused high nibble of an odd count's last byte is not zero. */
static bool nibbles_out(Arena *a, const char *set, const Buf *b, const void **got) {
    size_t n = (size_t)kir_numel(b), bits = (size_t)kir_pack_bits(b), per = 8 / bits;
    const uint8_t *packed = *got;
    if (n % per && packed[n / per] >> (bits * (n % per))) {
        printf("  %s: output '%s': MISMATCH: the unused high bits of the last byte are %d, not 0\n",
               set, b->name, packed[n / per] >> (bits * (n % per)));
        return false;
    }
    uint8_t *v = arena_alloc(a, n + 1);
    kir_nibbles_unpack(v, packed, n, b->dtype == DT_INT8, (int)bits);
    *got = v;
    return true;
}

/* Whether some kernel reads input b (or a view of it). */
static bool input_read(const Program *p, const Buf *b) {
    for (int k = 0; k < p->nkernels; k++)
        for (int j = 0; j < p->kernels[k]->nparams; j++)
            if (kir_root(p->kernels[k]->params[j]) == b) return true;
    return false;
}

/* Whether the data set's inputs fit the model. An input the compiled code never reads (CastLike's
 * `like`, of which ONNX uses only the dtype) needs only the right dtype: it gets zeros of the
 * model's shape. The ONNX 1.12 generator wrote a one-element `like` for the [3,4] one that
 * the castlike_BFLOAT16/FLOAT_to_BFLOAT16 models declare; the values cannot change an
 * output, so the data is accepted, with a note. Sets unread[i]. */
static bool inputs_fit(const Program *p, const DataSet *d, bool *unread) {
    if (d->nin < p->ninputs) {
        error(d->path, "%d inputs in the data set, the model has %d", d->nin, p->ninputs);
        return false;
    }
    for (int i = 0; i < p->ninputs; i++) {
        const Buf *b = p->inputs[i];
        unread[i] = false;
        if (b->string != (d->in[i].dtype == DT_STRING)) {
            error(d->path, "input %d ('%s'): the data is %s, the model wants %s", i, b->name,
                  dtype_name(d->in[i].dtype), b->string ? "string" : dtype_name(b->dtype));
            return false;
        }
        int dbits = d->in[i].nibbles ? d->in[i].crumbs ? 2 : 4 : 0;
        if (dbits != kir_pack_bits(b)) {
            error(d->path, "input %d ('%s'): the data is %s, the model wants %s", i, b->name,
                  dtype_name((DType)dtype_onnx(d->in[i].dtype, dbits)), dtype_name((DType)kir_io_dtype(b)));
            return false;
        }
        Tensor t = as_bytes(&d->in[i]);
        if (data_dtype(&t, b->dtype) == b->dtype && d->in[i].nbytes != kir_nbytes(b) && !input_read(p, b)) {
            printf("  %s: input '%s' is not read by the compiled code: zeros instead of its data "
                   "(%zu bytes, the model declares %zu)\n", d->name, b->name, d->in[i].nbytes, kir_nbytes(b));
            unread[i] = true;
            continue;
        }
        if (data_dtype(&t, b->dtype) != b->dtype || d->in[i].nbytes != kir_nbytes(b)) {
            error(d->path, "input %d ('%s'): the data is %s with %zu bytes, the model wants %s with %zu",
                  i, b->name, dtype_name(d->in[i].dtype), d->in[i].nbytes, dtype_name(b->dtype),
                  kir_nbytes(b));
            return false;
        }
    }
    return true;
}

/* Run one data set; returns the number of failed outputs (added to *passed the others). */
static int run_set(Arena *a, const Cli *c, Program *p, RunFn run, const DataSet *d, int *passed) {
    bool *unread = ARENA_ARRAY(a, bool, p->ninputs + 1);
    if (!inputs_fit(p, d, unread)) return MAX(p->noutputs, 1);
    size_t align = (size_t)MAX(p->arena_align, 64);
    const void **ins = ARENA_ARRAY(a, const void *, p->ninputs + 1);
    void **outs = ARENA_ARRAY(a, void *, p->noutputs + 1);
    for (int i = 0; i < p->ninputs; i++) {
        const Buf *b = p->inputs[i];
        ins[i] = unread[i] ? aligned_copy(NULL, kir_nbytes(b), align)
                           : aligned_copy(d->in[i].data, d->in[i].nbytes, align);
        if (b->nibbles && !unread[i]) {     /* the data set's values, one a byte, packed */
            uint8_t *v = aligned_copy(d->in[i].data, d->in[i].nbytes, align);
            kir_nibbles_pack((uint8_t *)ins[i], v, (size_t)kir_numel(b), kir_pack_bits(b));
            free(v);
        }
    }
    for (int i = 0; i < p->noutputs; i++) {
        outs[i] = aligned_copy(NULL, kir_nbytes(p->outputs[i]), align);
        /* ones, so that a nibble run() leaves unwritten shows (the header promises every one
         * written, the unused half of an odd count's last byte zeroed) */
        if (p->outputs[i]->nibbles) memset(outs[i], 0xff, kir_io_nbytes(p->outputs[i]));
    }
    void *arena = aligned_copy(NULL, (size_t)p->arena_size, align);
    int rc = run(ins, outs, arena), failed = 0, ntensors = 0;
    for (int i = 0; i < p->noutputs; i++) ntensors += !p->outputs[i]->dims_of;
    if (d->out_containers && ntensors != d->nout) {
        printf("  %s: MISMATCH: the model's sequence and optional outputs hold %d tensors, the data %d\n",
               d->name, ntensors, d->nout);
        failed++;
    }
    if (rc != 0) {
        printf("  %s: run returned %d: MISMATCH\n", d->name, rc);
        failed = MAX(p->noutputs, 1);
    }
    for (int i = 0; i < p->noutputs && !rc; i++) {
        if (p->outputs[i]->dims_of) continue;       /* compared with its tensor */
        int dj = kir_dims_output(p, p->outputs[i]);
        if (i >= d->nout) {
            printf("  %s: output '%s': no expected data: skipped\n", d->name, p->outputs[i]->name);
            continue;
        }
        const void *got = outs[i];
        if (p->outputs[i]->nibbles && !nibbles_out(a, d->name, p->outputs[i], &got)) {
            failed++;
            continue;
        }
        if (compare(a, c, d->name, p->outputs[i], got, dj >= 0 ? outs[dj] : NULL, &d->out[i])) ++*passed;
        else failed++;
    }
    for (int i = 0; i < p->ninputs; i++) free((void *)ins[i]);
    for (int i = 0; i < p->noutputs; i++) free(outs[i]);
    free(arena);
    return failed;
}

/* Compile for the host into a temporary object and load it. */
static RunFn build_and_load(Arena *a, Cli *c, Graph *g, Program **pp) {
    Target t;
    be_target(&t, NULL, c->cpu, c->features, c->abi);
    Build b;
    cli_build(&b, g, c, &t);
    *pp = b.p[0];
    RunFn run = cli_load(&b, c->o.opt_level, false);
    if (c->report) report_program(c->report, *pp, &b.t[0], c->o.opt_level);
    cli_build_free(&b);
    be_target_free(&t);
    return run;
}

/* ---- binding shape-like inputs at compile time ---- */

/* Operands that shape rules need as constants (Reshape's shape, Slice's starts, Pad's pads,
 * Tile's repeats, ...): the shape_in column of ir/ops.def. */
static bool shape_operand(const Node *n, int j) {
    return n->op < OP_COUNT && j < 32 && (op_info[n->op].shape_in & OPIN(j));
}

static bool user_bound(const Options *o, const char *name) {
    for (int k = 0; k < o->nbinds; k++)
        if (strcmp(o->binds[k].name, name) == 0) return true;
    return false;
}

/* Marks (by position) the integer (or small float) graph inputs whose values reach a shape operand, directly or
 * through other nodes (Concat, Cast, ...); returns how many. */
static int bind_candidates(Arena *a, const Options *o, Graph *g, bool *cand) {
    bool *reach = ARENA_ARRAY(a, bool, g->nvalues + 1);
    int count = 0;
    for (int i = 0; i < g->ninputs; i++) {
        const Value *x = g->inputs[i];
        cand[i] = false;
        /* Integers, and small float vectors (Resize's scales and roi, Range's bounds). */
        bool small = x->rank >= 0 && x->rank <= 1 && (x->rank == 0 || (x->dims[0] >= 0 && x->dims[0] <= 16));
        bool kind = x->dtype == DT_INT64 || x->dtype == DT_INT32 || (x->dtype == DT_FLOAT && small);
        if (!kind || user_bound(o, x->name)) continue;
        memset(reach, 0, sizeof(bool) * (size_t)g->nvalues);
        reach[x->id] = true;
        for (int k = 0; k < g->nnodes && !cand[i]; k++) {     /* topological order */
            const Node *n = g->nodes[k];
            bool from_x = false;
            for (int j = 0; j < n->nin; j++) {
                if (!n->in[j] || !reach[n->in[j]->id]) continue;
                from_x = true;
                cand[i] |= shape_operand(n, j);
            }
            for (int j = 0; j < n->nout && from_x; j++)
                if (n->out[j]) reach[n->out[j]->id] = true;
        }
        count += cand[i];
    }
    return count;
}

/* Whether the graph compiles as it is, tried in a child process: a failed compilation exits,
 * and the child's copy of the graph goes with it. The child's messages are dropped; if binding
 * does not help, the real compilation repeats them. Stops before the backend. */
static bool compiles_as_is(const Cli *c, Graph *g) {
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) return true;       /* cannot try: compile as it is, errors and all */
    if (pid == 0) {
        int fd = open("/dev/null", O_WRONLY);
        if (fd >= 0) {
            dup2(fd, STDOUT_FILENO);
            dup2(fd, STDERR_FILENO);
        }
        Options o = c->o;
        o.print_after = NULL;
        o.print_after_all = false;
        run_pipeline(g, &o);
        _exit(0);
    }
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) return true;
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

static bool same_tensor(const Tensor *x, const Tensor *y) {
    if (x->dtype != y->dtype || x->rank != y->rank || x->nbytes != y->nbytes) return false;
    for (int d = 0; d < x->rank; d++)
        if (x->dims[d] != y->dims[d]) return false;
    return !x->nbytes || memcmp(x->data, y->data, x->nbytes) == 0;
}

/* Two data sets can share a compilation if they bind the same values. */
static bool same_bound(const DataSet *x, const DataSet *y, const bool *cand, int n) {
    for (int i = 0; i < n; i++)
        if (cand[i] && !same_tensor(&x->in[i], &y->in[i])) return false;
    return true;
}

/* The user's --bind flags plus the candidates (`names`: the graph's inputs as loaded), bound
 * from data set d. */
static Options bound_options(Arena *a, const Options *o, const DataSet *d, const bool *cand,
                             char **names, int n) {
    Options b = *o;
    b.binds = ARENA_ARRAY(a, Binding, o->nbinds + n);
    memcpy(b.binds, o->binds, sizeof(Binding) * (size_t)o->nbinds);
    for (int i = 0; i < n; i++) {
        if (!cand[i]) continue;
        const Tensor *t = &d->in[i];
        Binding *x = &b.binds[b.nbinds++];
        *x = (Binding){.name = names[i], .dtype = t->dtype, .rank = t->rank, .data = t->data,
                       .from = arena_printf(a, "%s/input_%d.pb", d->path, i)};
        memcpy(x->dims, t->dims, sizeof x->dims);
    }
    return b;
}

/* The data set's inputs in the order of the compiled model's, which lacks the bound ones:
 * matched by name with the graph's inputs as loaded (`names`), whose order the data follows. */
static DataSet program_inputs(Arena *a, const DataSet *d, const Program *p, char **names, int n) {
    DataSet v = *d;
    v.in = ARENA_ARRAY(a, Tensor, p->ninputs + 1);
    v.nin = 0;
    for (int i = 0; i < p->ninputs; i++) {
        int j = 0;
        while (j < n && strcmp(names[j], p->inputs[i]->name) != 0) j++;
        if (j == n || j >= d->nin) break;   /* missing: inputs_fit reports the count */
        v.in[v.nin++] = d->in[j];
    }
    return v;
}

/* Sequence and optional inputs take their length from the first data set (--seq), unless
 * given; the graph's inputs are then the tensors they hold, as the data's are. */
static void seqs_from_data(Arena *a, Options *o, Graph *g, const DataSet *d) {
    int n = o->nseqs;
    const char **names = ARENA_ARRAY(a, const char *, n + g->ninputs + 1);
    int64_t *lens = ARENA_ARRAY(a, int64_t, n + g->ninputs + 1);
    if (n) memcpy(names, o->seq_names, sizeof(char *) * (size_t)n);
    if (n) memcpy(lens, o->seq_lens, sizeof(int64_t) * (size_t)n);
    for (int i = 0; i < g->ninputs; i++) {
        bool given = false;
        for (int k = 0; k < o->nseqs; k++) given |= strcmp(o->seq_names[k], g->inputs[i]->name) == 0;
        if (given || g->inputs[i]->kind == VK_TENSOR) continue;
        names[n] = g->inputs[i]->name;
        lens[n++] = d->in_lens[i];
        printf("input '%s': %s from the data\n", g->inputs[i]->name,
               d->in_lens[i] < 0 ? "none" : arena_printf(a, "%lld elements", (long long)d->in_lens[i]));
    }
    o->seq_names = names;
    o->seq_lens = lens;
    o->nseqs = n;
    fix_containers(g, o);
    exit_if_errors();
}

/* Sets the shapes from the data and decides whether to bind (cand[i]: bind input i). */
static bool decide_binding(Arena *a, Cli *c, Graph *g, const DataSet *sets, int ndirs, bool *cand) {
    Options user = c->o;
    shapes_from_data(a, &c->o, g, &sets[0], NULL);
    if (!bind_candidates(a, &c->o, g, cand) || compiles_as_is(c, g)) return false;
    c->o = user;                    /* bound inputs take their shapes from their contents */
    shapes_from_data(a, &c->o, g, &sets[0], cand);
    for (int i = 0; i < g->ninputs; i++) {
        if (!cand[i]) continue;
        for (int k = 0; k < ndirs; k++)
            if (sets[k].nin <= i) fatal(sets[k].path, "no input_%d.pb for input '%s'", i, g->inputs[i]->name);
        printf("bound input '%s' at compile time\n", g->inputs[i]->name);
    }
    return true;
}

int check_main(Arena *a, Cli *c) {
    Source s = {.path = c->model, .tar_root = ""};
    Graph *g = load_model(a, &s);
    g->name = (char *)(c->name ? c->name : cli_identifier(a, c->model));
    const char **dirs = c->dirs;
    int ndirs = c->ndirs;
    if (!ndirs) ndirs = find_sets(a, &s, &dirs);
    if (!ndirs) fatal(c->model, "no test data sets (test_data_set_*) found next to the model");
    DataSet *sets = ARENA_ARRAY(a, DataSet, ndirs);
    for (int i = 0; i < ndirs; i++) {
        Source plain = {.path = c->model, .tar_root = ""};
        sets[i] = load_set(a, c->ndirs ? &plain : &s, dirs[i], g);
    }
    seqs_from_data(a, &c->o, g, &sets[0]);
    int ninputs = g->ninputs;
    char **names = ARENA_ARRAY(a, char *, ninputs + 1);
    for (int i = 0; i < ninputs; i++) names[i] = g->inputs[i]->name;
    bool *cand = ARENA_ARRAY(a, bool, ninputs + 1);
    bool bind = decide_binding(a, c, g, sets, ndirs, cand);
    /* group[k]: the first data set binding the same values as set k; it owns the compilation. */
    int *group = ARENA_ARRAY(a, int, ndirs), ngroups = 0;
    for (int k = 0; k < ndirs; k++) {
        group[k] = k;
        for (int j = 0; bind && j < k && group[k] == k; j++)
            if (group[j] == j && same_bound(&sets[k], &sets[j], cand, ninputs)) group[k] = j;
        ngroups += group[k] == k;
    }
    if (ngroups > 1 && bind) printf("%d compilations: the data sets bind different values\n", ngroups);
    Program **progs = ARENA_ARRAY(a, Program *, ndirs);
    RunFn *runs = ARENA_ARRAY(a, RunFn, ndirs);
    int passed = 0, failed = 0;
    for (int k = 0; k < ndirs; k++) {
        int j = group[k];
        if (!progs[j]) {
            Cli cj = *c;
            if (bind) cj.o = bound_options(a, &c->o, &sets[j], cand, names, ninputs);
            Graph *gj = j == 0 ? g : load_model(a, &s);
            gj->name = g->name;
            runs[j] = build_and_load(a, &cj, gj, &progs[j]);
        }
        DataSet d = program_inputs(a, &sets[k], progs[j], names, ninputs);
        failed += run_set(a, c, progs[j], runs[j], &d, &passed);
    }
    if (c->report) report_write(c->report);     /* of the first compilation */
    printf("check: %d passed, %d failed\n", passed, failed);
    fflush(stdout);
    return failed || error_count ? 1 : 0;
}
