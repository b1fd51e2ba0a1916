/* tensor.h - private to the frontend: what model.c needs from tensor.c. It is kept out of
 * frontend.h so that only the frontend sees the protobuf-c types. */
#ifndef ONNXCC_FE_TENSOR_H
#define ONNXCC_FE_TENSOR_H
#include "frontend.h"
#include "onnx.pb-c.h"

/* protobuf-c allocating from the arena (nothing to free afterwards). */
ProtobufCAllocator fe_pb_allocator(Arena *a);
/* TensorProto -> Tensor; `what` names it in messages ("initializer 'w'"). false after error().
 * model_path: the model whose directory holds external data files (NULL: none allowed). */
bool fe_tensor_from_proto(Arena *a, const Onnx__TensorProto *tp, const char *model_path,
                          const char *where, const char *what, Tensor *t);
/* The bytes of an externally stored tensor whose shape t already has (external.c). */
bool fe_external_data(Arena *a, const Onnx__TensorProto *tp, const char *model_path,
                      const char *where, const char *what, Tensor *t);
/* "float16", "complex64", ... for any ONNX data type number. */
const char *fe_type_name(int dt);

#endif
