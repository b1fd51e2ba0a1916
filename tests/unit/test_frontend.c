/* test_frontend.c - unit tests of the frontend (frontend/): models and tensors from the ONNX
 * backend test data, gzip and tar reading, and the user-error paths (which exit, so they run in
 * a forked child whose exit code and stderr are checked). The expected numbers were read with
 * numpy (onnx.numpy_helper.to_array) when this test was written.
 *
 * Build: link with the objects of build/frontend, build/ir and build/gen/onnx.pb-c.o, plus
 * -lprotobuf-c -lz -lm. ir/ops.o needs the rule functions of passes/; without them, leave
 * ops.o out and the weak op table below stands in. The last line is "frontend: N passed, N failed". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include "../../frontend/frontend.h"
#include "onnx.pb-c.h"

#define DATA "/usr/share/libonnx-testdata/data/"

/* ---- a stand-in op table, used only when ir/ops.o is not linked ---- */
__attribute__((weak)) const OpInfo op_info[OP_COUNT] = {
#define OP(name, since, mi, ma, mo, mx, flags, shape_in, infer, lower) \
    [OP_##name] = {#name, since, mi, ma, mo, mx, flags, shape_in, NULL, NULL},
#include "../../ir/ops.def"
#undef OP
};

__attribute__((weak)) Op op_lookup(const char *domain, const char *op_type) {
    if (domain && *domain && strcmp(domain, "ai.onnx") != 0) return OP_UNKNOWN;
    for (int i = 0; i < OP_COUNT; i++)
        if (strcmp(op_info[i].name, op_type) == 0) return (Op)i;
    return OP_UNKNOWN;
}

/* ---- tiny harness ---- */
static int passed, failed;

static void check(bool ok, const char *what, int line) {
    if (ok) { passed++; return; }
    failed++;
    fprintf(stderr, "test_frontend.c:%d: FAILED: %s\n", line, what);
}
#define CHECK(c) check((c), #c, __LINE__)

static Value *find_value(Graph *g, const char *name) {
    for (int i = 0; i < g->nvalues; i++)
        if (strcmp(g->values[i]->name, name) == 0) return g->values[i];
    return NULL;
}

static char *tmp_path(const char *suffix) {
    static int k;
    char *p = malloc(256);
    snprintf(p, 256, "/tmp/onnxcc_test_frontend_%d_%d%s", (int)getpid(), k++, suffix);
    return p;
}

static void write_file(const char *path, const void *data, size_t n, bool gz) {
    if (gz) {
        gzFile f = gzopen(path, "wb");
        gzwrite(f, data, (unsigned)n);
        gzclose(f);
    } else {
        FILE *f = fopen(path, "wb");
        fwrite(data, 1, n, f);
        fclose(f);
    }
}

/* Run fn(arg) in a child with stderr captured; returns its exit code, *msg its stderr. */
static int run_child(void (*fn)(const void *), const void *arg, char *msg, size_t msgcap) {
    char *errpath = tmp_path(".err");
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        if (!freopen(errpath, "w", stderr)) _exit(99);
        fn(arg);
        _exit(0);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    FILE *f = fopen(errpath, "r");
    size_t n = f ? fread(msg, 1, msgcap - 1, f) : 0;
    msg[n] = 0;
    if (f) fclose(f);
    remove(errpath);
    free(errpath);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* ---- models from the backend test data ---- */

static void test_conv(void) {
    Arena *a = arena_new();
    Graph *g = fe_load_model(a, DATA "node/test_conv_with_strides_padding/model.onnx");
    CHECK(g->opset == 11);
    CHECK(g->nnodes == 1 && g->nodes[0]->op == OP_Conv && g->nodes[0]->opset == 11);
    CHECK(strcmp(g->nodes[0]->name, "Conv_0") == 0);
    CHECK(g->ninputs == 2 && g->noutputs == 1);
    Value *x = g->inputs[0];
    CHECK(strcmp(x->name, "x") == 0 && x->dtype == DT_FLOAT && x->rank == 4);
    CHECK(x->dims[0] == 1 && x->dims[1] == 1 && x->dims[2] == 7 && x->dims[3] == 5);
    const int64_t *strides;
    CHECK(ir_attr_ints(g->nodes[0], "strides", &strides) == 2 && strides[0] == 2);
    CHECK(ir_attr(g->nodes[0], "pads")->n == 4);
    CHECK(g->outputs[0]->producer == g->nodes[0] && g->outputs[0]->is_output);

    Tensor t;
    CHECK(fe_load_tensor(a, DATA "node/test_conv_with_strides_padding/test_data_set_0/output_0.pb", &t));
    CHECK(t.dtype == DT_FLOAT && t.rank == 4 && t.dims[2] == 4 && t.dims[3] == 3);
    CHECK(t.nbytes == 12 * 4 && ((float *)t.data)[0] == 12.0f && ((float *)t.data)[11] == 124.0f);
    arena_free(a);
}

static void test_add_bcast(void) {
    Arena *a = arena_new();
    Graph *g = fe_load_model(a, DATA "node/test_add_bcast/model.onnx");
    CHECK(g->opset == 14 && g->nnodes == 1 && g->nodes[0]->op == OP_Add);
    Value *y = find_value(g, "y");
    CHECK(y && y->is_input && y->rank == 1 && y->dims[0] == 5 && !y->data);
    CHECK(g->nodes[0]->in[1] == y);

    Tensor t;
    CHECK(fe_load_tensor(a, DATA "node/test_add_bcast/test_data_set_0/input_0.pb", &t));
    CHECK(t.rank == 3 && t.dims[0] == 3 && t.dims[1] == 4 && t.dims[2] == 5);
    CHECK(((float *)t.data)[0] == 1.7640524f && ((float *)t.data)[59] == -0.36274117f);
    CHECK(strcmp(t.name, "x") == 0);
    arena_free(a);
}

static void test_constant(void) {
    Arena *a = arena_new();
    Graph *g = fe_load_model(a, DATA "node/test_constant/model.onnx");
    CHECK(g->nnodes == 1 && g->nodes[0]->op == OP_Constant && g->ninputs == 0);
    Attr *v = ir_attr(g->nodes[0], "value");
    CHECK(v && v->type == A_TENSOR && v->t && v->t->id == -1);
    CHECK(v->t->dtype == DT_FLOAT && v->t->rank == 2 && v->t->dims[0] == 5 && v->t->dims[1] == 5);
    CHECK(((float *)v->t->data)[0] == 1.7640524f);
    CHECK(g->nvalues == 1);     /* the attribute's tensor is not a graph value */
    arena_free(a);
}

/* An old exporter: initializers also listed as inputs, node without a name. */
static void test_initializers(void) {
    Arena *a = arena_new();
    Graph *g = fe_load_model(a, DATA "pytorch-converted/test_Conv2d/model.onnx");
    CHECK(g->opset == 6 && g->nnodes == 1 && strcmp(g->nodes[0]->name, "Conv_0") == 0);
    CHECK(g->ninputs == 1 && strcmp(g->inputs[0]->name, "0") == 0);
    Value *w = find_value(g, "1"), *b = find_value(g, "2");
    CHECK(w && w->data && !w->is_input && w->rank == 4 && w->dims[0] == 4 && w->dims[3] == 2);
    CHECK(((float *)w->data)[0] == -0.14294092f && ((float *)w->data)[71] == -0.10345209f);
    CHECK(b && b->data && b->rank == 1 && g->nodes[0]->in[2] == b);
    arena_free(a);
}

/* The same model gzip-compressed: recognised by the magic, not the name. */
static void test_gzip(void) {
    Arena *a = arena_new();
    size_t n;
    uint8_t *raw = fe_read_file(a, DATA "node/test_conv_with_strides_padding/model.onnx", &n);
    char *path = tmp_path(".onnx");
    write_file(path, raw, n, true);
    size_t m;
    uint8_t *back = fe_read_file(a, path, &m);
    CHECK(m == n && memcmp(back, raw, n) == 0);
    Graph *g = fe_load_model(a, path);
    CHECK(g->nnodes == 1 && g->nodes[0]->op == OP_Conv);
    remove(path);
    free(path);
    arena_free(a);
}

/* ---- tar ---- */

static void tar_header(uint8_t *h, const char *name, const char *prefix, char type, size_t size) {
    memset(h, 0, 512);
    snprintf((char *)h, 100, "%s", name);
    snprintf((char *)h + 100, 8, "%07o", 0644);
    snprintf((char *)h + 124, 12, "%011zo", size);
    h[156] = (uint8_t)type;
    memcpy(h + 257, "ustar", 6);
    memcpy(h + 263, "00", 2);
    if (prefix) snprintf((char *)h + 345, 155, "%s", prefix);
    memset(h + 148, ' ', 8);
    unsigned sum = 0;
    for (int i = 0; i < 512; i++) sum += h[i];
    snprintf((char *)h + 148, 8, "%06o", sum);
}

static size_t tar_add(uint8_t *buf, size_t off, const char *name, const char *prefix, char type,
                      const void *data, size_t size) {
    tar_header(buf + off, name, prefix, type, size);
    off += 512;
    if (size) memcpy(buf + off, data, size);
    return off + (size + 511) / 512 * 512;
}

static void test_tar(void) {
    Arena *a = arena_new();
    static uint8_t buf[64 * 512];
    char longname[200];
    memset(longname, 'n', sizeof longname - 1);
    longname[sizeof longname - 1] = 0;
    size_t off = 0;
    off = tar_add(buf, off, "./model/", NULL, '5', NULL, 0);
    off = tar_add(buf, off, "./model/model.onnx", NULL, '0', "hello", 5);
    off = tar_add(buf, off, "input_0.pb", "model/test_data_set_0", '0', "abc", 3);
    off = tar_add(buf, off, "././@LongLink", NULL, 'L', longname, strlen(longname) + 1);
    off = tar_add(buf, off, "truncated-name", NULL, '0', "x", 1);
    off = tar_add(buf, off, "link", NULL, '2', NULL, 0);
    off += 1024;                /* end-of-archive: two zero blocks */
    char *path = tmp_path(".tar.gz");
    write_file(path, buf, off, true);
    TarEntry *es;
    int n = fe_read_tar(a, path, &es);
    CHECK(n == 3);
    if (n == 3) {
        CHECK(strcmp(es[0].name, "model/model.onnx") == 0 && es[0].size == 5);
        CHECK(memcmp(es[0].data, "hello", 5) == 0);
        CHECK(strcmp(es[1].name, "model/test_data_set_0/input_0.pb") == 0 && es[1].size == 3);
        CHECK(strcmp(es[2].name, longname) == 0 && es[2].size == 1 && es[2].data[0] == 'x');
    }
    remove(path);
    free(path);
    arena_free(a);
}

/* ---- tensors built here: the typed-field rules ---- */

static bool parse_packed(Arena *a, Onnx__TensorProto *tp, Tensor *t) {
    size_t n = onnx__tensor_proto__get_packed_size(tp);
    uint8_t *buf = malloc(n + 1);
    onnx__tensor_proto__pack(tp, buf);
    bool ok = fe_parse_tensor(a, buf, n, "built.pb", t);
    free(buf);
    return ok;
}

static void test_typed_tensors(void) {
    Arena *a = arena_new();
    int64_t dims[] = {2, 2};
    int64_t i64[] = {1, -2, 3, 1LL << 40};
    int32_t i32[] = {-1, 127, 255, 0};
    Onnx__TensorProto tp = ONNX__TENSOR_PROTO__INIT;
    tp.n_dims = 2;
    tp.dims = dims;
    tp.has_data_type = 1;
    tp.data_type = DT_INT64;
    tp.n_int64_data = 4;
    tp.int64_data = i64;
    Tensor t;
    CHECK(parse_packed(a, &tp, &t) && t.dtype == DT_INT64 && t.nbytes == 32);
    CHECK(((int64_t *)t.data)[1] == -2 && ((int64_t *)t.data)[3] == 1LL << 40);

    tp.n_int64_data = 0;
    tp.data_type = DT_INT8;         /* int8 travels widened in int32_data */
    tp.n_int32_data = 4;
    tp.int32_data = i32;
    CHECK(parse_packed(a, &tp, &t) && t.dtype == DT_INT8 && t.nbytes == 4);
    CHECK(((int8_t *)t.data)[0] == -1 && ((int8_t *)t.data)[1] == 127);

    tp.data_type = DT_BOOL;
    CHECK(parse_packed(a, &tp, &t) && ((uint8_t *)t.data)[2] == 1 && ((uint8_t *)t.data)[3] == 0);

    arena_free(a);
}

/* ---- user errors: exit code 1 and one clear line each ---- */

/* Bad tensors are errors the caller may survive: false, one line each, no exit. */
static void child_bad_tensors(const void *unused) {
    (void)unused;
    Arena *a = arena_new();
    int64_t dims[] = {2, 2};
    int32_t i32[] = {1, 2, 3};
    Onnx__TensorProto tp = ONNX__TENSOR_PROTO__INIT;
    tp.n_dims = 2, tp.dims = dims, tp.has_data_type = 1, tp.data_type = DT_INT32;
    tp.n_int32_data = 3, tp.int32_data = i32;
    Tensor t;
    bool any = parse_packed(a, &tp, &t);
    tp.n_int32_data = 0, tp.data_type = DT_FLOAT;
    tp.has_raw_data = 1, tp.raw_data.len = 7, tp.raw_data.data = (uint8_t *)"1234567";
    any |= parse_packed(a, &tp, &t);
    any |= fe_parse_tensor(a, (const uint8_t *)"\xff\xff\xff", 3, "junk.pb", &t);
    any |= fe_load_tensor(a, "/nonexistent/input_0.pb", &t);
    exit(any || error_count != 4 ? 2 : 0);
}

static void child_load(const void *path) {
    Arena *a = arena_new();
    fe_load_model(a, path);
}

static void child_parse_buf(const void *arg) {
    const ProtobufCBinaryData *b = arg;
    Arena *a = arena_new();
    fe_parse_model(a, b->data, b->len, "built.onnx");
}

static void expect_error(int rc, const char *msg, const char *want, int line) {
    check(rc == 1, "exit code 1", line);
    check(strstr(msg, want) != NULL, want, line);
    if (rc != 1 || !strstr(msg, want)) fprintf(stderr, "  got rc %d: %s\n", rc, msg);
}

/* A model with two unknown ops, a dangling input and an op with too many inputs. */
static ProtobufCBinaryData bad_model(void) {
    static char *in0[] = {"x"}, *out0[] = {"a"}, *in1[] = {"a", "ghost"}, *out1[] = {"b"};
    static char *in2[] = {"b", "b", "b"}, *out2[] = {"c"};
    static Onnx__NodeProto n0 = ONNX__NODE_PROTO__INIT, n1 = ONNX__NODE_PROTO__INIT,
                           n2 = ONNX__NODE_PROTO__INIT;
    n0.n_input = 1, n0.input = in0, n0.n_output = 1, n0.output = out0, n0.op_type = "Frobnicate";
    n1.n_input = 2, n1.input = in1, n1.n_output = 1, n1.output = out1, n1.op_type = "Fancy";
    n1.domain = "com.example", n1.name = "fancy1";
    n2.n_input = 3, n2.input = in2, n2.n_output = 1, n2.output = out2, n2.op_type = "Add";
    static Onnx__NodeProto *nodes[] = {&n0, &n1, &n2};
    static Onnx__TypeProto__Tensor tt = ONNX__TYPE_PROTO__TENSOR__INIT;
    tt.has_elem_type = 1, tt.elem_type = DT_FLOAT;
    static Onnx__TypeProto ty = ONNX__TYPE_PROTO__INIT;
    ty.value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE, ty.tensor_type = &tt;
    static Onnx__ValueInfoProto vin = ONNX__VALUE_INFO_PROTO__INIT, vout = ONNX__VALUE_INFO_PROTO__INIT;
    vin.name = "x", vin.type = &ty, vout.name = "c", vout.type = &ty;
    static Onnx__ValueInfoProto *ins[] = {&vin}, *outs[] = {&vout};
    static Onnx__GraphProto gp = ONNX__GRAPH_PROTO__INIT;
    gp.n_node = 3, gp.node = nodes, gp.n_input = 1, gp.input = ins, gp.n_output = 1, gp.output = outs;
    static Onnx__OperatorSetIdProto os = ONNX__OPERATOR_SET_ID_PROTO__INIT;
    os.domain = "", os.has_version = 1, os.version = 13;
    static Onnx__OperatorSetIdProto *oss[] = {&os};
    Onnx__ModelProto m = ONNX__MODEL_PROTO__INIT;
    m.graph = &gp, m.n_opset_import = 1, m.opset_import = oss;
    ProtobufCBinaryData b;
    b.len = onnx__model_proto__get_packed_size(&m);
    b.data = malloc(b.len);
    onnx__model_proto__pack(&m, b.data);
    return b;
}

static void test_errors(void) {
    static char msg[8192];
    int rc0 = run_child(child_bad_tensors, NULL, msg, sizeof msg);
    CHECK(rc0 == 0);
    CHECK(strstr(msg, "built.pb: tensor holds 3 values, its shape needs 4") != NULL);
    CHECK(strstr(msg, "built.pb: tensor: raw_data holds 7 bytes, its shape needs 16") != NULL);
    CHECK(strstr(msg, "junk.pb: not a valid ONNX tensor (protobuf parse failed)") != NULL);
    CHECK(strstr(msg, "/nonexistent/input_0.pb: No such file or directory") != NULL);

    int rc = run_child(child_load, "/nonexistent/model.onnx", msg, sizeof msg);
    expect_error(rc, msg, "/nonexistent/model.onnx: No such file or directory", __LINE__);

    /* an op onnxcc does not have (yet) */
    rc = run_child(child_load, DATA "simple/test_gradient_of_add/model.onnx", msg, sizeof msg);
    expect_error(rc, msg, "node 'my_gradient' (Gradient, opset 1): unsupported operator Gradient "
                 "(domain 'ai.onnx.preview.training')", __LINE__);

    /* cut inside the weights: the protobuf cannot parse */
    Arena *a = arena_new();
    ProtobufCBinaryData b;
    b.data = fe_read_file(a, DATA "pytorch-converted/test_Conv2d/model.onnx", &b.len);
    b.len = b.len / 2;
    rc = run_child(child_parse_buf, &b, msg, sizeof msg);
    expect_error(rc, msg, "built.onnx: not a valid ONNX model (protobuf parse failed)", __LINE__);
    arena_free(a);

    b = bad_model();
    rc = run_child(child_parse_buf, &b, msg, sizeof msg);
    expect_error(rc, msg, "node 'Frobnicate_0' (Frobnicate, opset 13): unsupported operator "
                 "Frobnicate (domain '')", __LINE__);
    expect_error(rc, msg, "node 'fancy1' (Fancy, opset 0): unsupported operator Fancy (domain "
                 "'com.example')", __LINE__);
    expect_error(rc, msg, "node 'Add_2' (Add, opset 13): unsupported operator Add", __LINE__);
    expect_error(rc, msg, "uses value 'ghost'", __LINE__);
    free(b.data);
}

int main(void) {
    test_conv();
    test_add_bcast();
    test_constant();
    test_initializers();
    test_gzip();
    test_tar();
    test_typed_tensors();
    test_errors();
    printf("frontend: %d passed, %d failed\n", passed, failed);
    return failed != 0;
}
