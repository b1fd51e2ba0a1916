# gen_bn.py OUTDIR - BatchNormalization in inference mode whose scale/bias and mean/var are
# run-time inputs of other float types than x (opset 15's T1 and T2, opset 14's U), so that
# the per-element formula of passes/ops/normalize.c (bn_full) runs with casts; the ONNX test
# data has these types only in training mode. Reference: numpy in float64, rounded to x's type.
import sys, os
import numpy as np
from onnx import helper, numpy_helper, TensorProto, save
os.chdir(sys.argv[1])
rng = np.random.default_rng(3)
NP = {TensorProto.FLOAT: np.float32, TensorProto.FLOAT16: np.float16, TensorProto.DOUBLE: np.float64}
for opset, tx, t1, t2 in ((15, TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.DOUBLE),
                          (15, TensorProto.FLOAT16, TensorProto.FLOAT, TensorProto.FLOAT),
                          (14, TensorProto.FLOAT, TensorProto.FLOAT, TensorProto.DOUBLE)):
    name = "bn%d_%s_%s_%s" % (opset, *(TensorProto.DataType.Name(t).lower() for t in (tx, t1, t2)))
    os.makedirs(name + "/test_data_set_0", exist_ok=True)
    shape, c = (2, 3, 4, 5), 3
    vals = [rng.standard_normal(shape).astype(NP[tx]),
            rng.standard_normal(c).astype(NP[t1]), rng.standard_normal(c).astype(NP[t1]),
            rng.standard_normal(c).astype(NP[t2]), rng.uniform(0.5, 2.0, c).astype(NP[t2])]
    names, types = ["x", "scale", "bias", "mean", "var"], [tx, t1, t1, t2, t2]
    ins = [helper.make_tensor_value_info(n, t, list(v.shape)) for n, t, v in zip(names, types, vals)]
    node = helper.make_node("BatchNormalization", names, ["y"], epsilon=1e-3)
    g = helper.make_graph([node], name, ins, [helper.make_tensor_value_info("y", tx, list(shape))])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    save(m, name + "/model.onnx")
    x, s, b, mu, var = (v.astype(np.float64) for v in vals)
    ch = lambda a: a.reshape(1, c, 1, 1)
    y = (x - ch(mu)) / np.sqrt(ch(var) + 1e-3) * ch(s) + ch(b)
    for i, (n, v) in enumerate(zip(names, vals)):
        open("%s/test_data_set_0/input_%d.pb" % (name, i), "wb").write(numpy_helper.from_array(v, n).SerializeToString())
    open(name + "/test_data_set_0/output_0.pb", "wb").write(
        numpy_helper.from_array(y.astype(NP[tx]), "y").SerializeToString())
