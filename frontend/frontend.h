/* frontend.h - reading ONNX files: models (protobuf-c, optionally gzip-compressed), tensors
 * (test data) and model-zoo .tar.gz archives. All failures on bad input are user errors
 * (fatal()/error() with the file name); nothing here aborts on bad input. */
#ifndef ONNXCC_FRONTEND_H
#define ONNXCC_FRONTEND_H
#include "../ir/ir.h"

/* The largest file the frontend reads, after decompression (--max-model-size; 0: the
 * default). By default a plain file may hold FE_MAX_MODEL_SIZE bytes (protobuf's own limit
 * for one message: larger models keep their weights in external data files) and a gzip file
 * may expand to FE_GZIP_RATIO times its size, but never beyond FE_MAX_MODEL_SIZE: the size
 * field of a gzip trailer is not trusted. */
extern uint64_t fe_max_model_size;
#define FE_MAX_MODEL_SIZE ((uint64_t)2 << 30)
#define FE_GZIP_RATIO 100

/* How deeply subgraphs (If, Loop, Scan bodies) and types (sequences of sequences...) may
 * nest in a model: checked on the wire format before unpacking (frontend/nesting.c). */
#define FE_MAX_NESTING 32
bool fe_check_nesting(const uint8_t *buf, size_t size, const char *path);

/* The whole file; gunzipped transparently when it starts with the gzip magic. */
uint8_t *fe_read_file(Arena *a, const char *path, size_t *size);
/* Parse a ModelProto into a graph. `path` is for messages. Reports every unsupported op (with
 * node names) before failing, and fails on unsupported dtypes, missing values, bad counts. */
Graph *fe_parse_model(Arena *a, const uint8_t *buf, size_t size, const char *path);
Graph *fe_load_model(Arena *a, const char *path);   /* fe_read_file + fe_parse_model */

typedef struct Tensor {
    char *name;
    DType dtype;
    int rank;
    int64_t dims[MAX_RANK];
    void *data;                     /* packed, native order */
    size_t nbytes;
    bool nibbles;                   /* an int4/uint4 tensor, widened to int8/uint8 (dtype), or
                                       float4e2m1 (a code a byte) */
    bool crumbs;                    /* with nibbles: int2/uint2, widened to int8/uint8 */
} Tensor;
/* Parse a TensorProto (test_data_set_N/input_K.pb). Returns false with an error() on failure. */
bool fe_parse_tensor(Arena *a, const uint8_t *buf, size_t size, const char *path, Tensor *t);
bool fe_load_tensor(Arena *a, const char *path, Tensor *t);
/* Parse a SequenceProto (opt false) or OptionalProto (opt true) into the tensors it holds, in
 * order (an optional of a sequence: the sequence's); *len is the element count, -1 for an
 * empty optional (the form of the --seq option). Returns the tensor count, -1 after error(). */
int fe_parse_container(Arena *a, const uint8_t *buf, size_t size, const char *path, bool opt,
                       Tensor **out, int64_t *len);

/* A tar archive (plain or gzip-compressed): regular files only. Returns the count. */
typedef struct TarEntry {
    char *name;
    uint8_t *data;
    size_t size;
} TarEntry;
int fe_read_tar(Arena *a, const char *path, TarEntry **entries);

#endif
