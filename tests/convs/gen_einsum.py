# gen_einsum.py OUTDIR - Einsums of two float inputs: the batched matrix products that
# passes/ops/matmul.c (ein_matmul) lowers as MatMul, with either input permuted first (MaxViT's
# attention equations, rows and columns swapped in the output, no batch, a fused Add after it),
# and equations it leaves to the general sum-of-products nest (a diagonal, a broadcast size-1
# batch, two contracted labels, a label summed in one input only, an ellipsis). Reference:
# numpy.einsum in float64.
import sys, os
import numpy as np
from onnx import helper as h, numpy_helper as nh, TensorProto as T, save
os.chdir(sys.argv[1])
rng = np.random.default_rng(21)

# name, equation, shapes of the two inputs, a fused Add of a constant after it
cases = [("ein_attn_qk", "BGHID,BGHJD->BGHIJ", [1, 3, 2, 49, 32], [1, 3, 2, 49, 32], False),
         ("ein_attn_av", "BGHIJ,BGHJD->BGHID", [1, 3, 2, 49, 49], [1, 3, 2, 49, 32], True),
         ("ein_mm", "ik,kj->ij", [37, 70], [70, 45], False),
         ("ein_mm_swapped", "ik,kj->ji", [37, 70], [70, 45], False),
         ("ein_kt_first", "bki,bjk->bij", [2, 33, 20], [2, 18, 33], True),
         ("ein_batch_inner", "ibk,bkj->bij", [17, 4, 24], [4, 24, 19], False),
         ("ein_batch_last", "ikb,kjb->ijb", [9, 16, 3], [16, 21, 3], False),
         ("ein_diag", "bii,bij->bj", [2, 7, 7], [2, 7, 5], False),
         ("ein_bcast", "bik,bkj->bij", [1, 6, 8], [3, 8, 5], False),
         ("ein_two_k", "ikl,klj->ij", [6, 4, 5], [4, 5, 7], False),
         ("ein_sum_one", "ikz,kj->ij", [6, 8, 3], [8, 5], False),
         ("ein_ellipsis", "...ik,...kj->...ij", [2, 3, 6, 8], [2, 3, 8, 5], False)]
for name, eq, sa, sb, add in cases:
    os.makedirs(name + "/test_data_set_0", exist_ok=True)
    a = rng.standard_normal(sa).astype(np.float32)
    b = rng.standard_normal(sb).astype(np.float32)
    y = np.einsum(eq.replace(" ", ""), a.astype(np.float64), b.astype(np.float64))
    nodes = [h.make_node("Einsum", ["a", "b"], ["t" if add else "y"], equation=eq)]
    inits = []
    if add:
        c = rng.standard_normal(y.shape[-1:]).astype(np.float32)
        nodes.append(h.make_node("Add", ["t", "c"], ["y"]))
        inits.append(nh.from_array(c, "c"))
        y = y + c
    g = h.make_graph(nodes, name, [h.make_tensor_value_info("a", T.FLOAT, sa), h.make_tensor_value_info("b", T.FLOAT, sb)],
                     [h.make_tensor_value_info("y", T.FLOAT, list(y.shape))], inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 13)])
    m.ir_version = 8
    save(m, name + "/model.onnx")
    for i, (v, nm) in enumerate(((a, "a"), (b, "b"))):
        with open(name + "/test_data_set_0/input_%d.pb" % i, "wb") as f:
            f.write(nh.from_array(v, nm).SerializeToString())
    with open(name + "/test_data_set_0/output_0.pb", "wb") as f:
        f.write(nh.from_array(y.astype(np.float32), "y").SerializeToString())
