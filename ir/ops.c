/* ops.c - the op table (from ops.def) and its lookups. */
#include <string.h>

#include "../passes/rules.h"
#include "ir.h"

const OpInfo op_info[OP_COUNT] = {
#define OP(name, since, mi, ma, mo, mx, flags, infer, lower) \
    [OP_##name] = {#name, since, mi, ma, mo, mx, flags, infer, lower},
#include "ops.def"
#undef OP
};

Op op_lookup(const char *domain, const char *op_type) {
    if (domain && *domain && strcmp(domain, "ai.onnx") != 0) return OP_UNKNOWN;
    for (int i = 0; i < OP_COUNT; i++)
        if (strcmp(op_info[i].name, op_type) == 0) return (Op)i;
    return OP_UNKNOWN;
}
