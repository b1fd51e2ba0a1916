/* ops.c - the op table (from ops.def) and its lookups. */
#include <string.h>

#include "../passes/rules.h"
#include "ir.h"

const OpInfo op_info[OP_COUNT] = {
#define OP(name, since, mi, ma, mo, mx, flags, shape_in, infer, lower) \
    [OP_##name] = {#name, since, mi, ma, mo, mx, flags, shape_in, infer, lower},
#include "ops.def"
#undef OP
};

/* The training optimizers are the only ops onnxcc accepts outside the default domain, and
 * only in theirs. */
static bool training_op(Op op) { return op == OP_Adagrad || op == OP_Adam || op == OP_Momentum; }

Op op_lookup(const char *domain, const char *op_type) {
    bool training = domain && strcmp(domain, "ai.onnx.preview.training") == 0;
    if (domain && *domain && strcmp(domain, "ai.onnx") != 0 && !training) return OP_UNKNOWN;
    for (int i = 0; i < OP_COUNT; i++)
        if (!(op_info[i].flags & OPF_INTERNAL) && strcmp(op_info[i].name, op_type) == 0)
            return training == training_op((Op)i) ? (Op)i : OP_UNKNOWN;
    return OP_UNKNOWN;
}
