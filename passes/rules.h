/* rules.h - prototypes of the per-op rules named in ir/ops.def: shape inference (infer_*) and
 * lowering (lower_*). Several ops may share one rule (all unary elementwise ops share
 * infer_unary and lower_unary); a shared rule dispatches on n->op. */
#ifndef ONNXCC_RULES_H
#define ONNXCC_RULES_H
#include "../ir/ir.h"
struct Lower;
#define OP(name, since, mi, ma, mo, mx, flags, shape_in, infer, lower) \
    void infer(Graph *g, Node *n);                             \
    void lower(struct Lower *L, Node *n);
#include "../ir/ops.def"
#undef OP

#endif
