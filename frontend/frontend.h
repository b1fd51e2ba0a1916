/* frontend.h - reading ONNX files: models (protobuf-c, optionally gzip-compressed), tensors
 * (test data) and model-zoo .tar.gz archives. All failures on bad input are user errors
 * (fatal()/error() with the file name); nothing here aborts on bad input. */
#ifndef ONNXCC_FRONTEND_H
#define ONNXCC_FRONTEND_H
#include "../ir/ir.h"

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
