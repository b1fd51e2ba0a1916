"""gen.py OUT - small torch exports whose data-dependent values (NonZero's, NonMaxSuppression's)
feed further ops, for tests/dyn.sh. For each model it writes OUT/NAME/model.onnx, its inputs
as test_data_set_K/input_J.pb and as raw .bin files with OUT/NAME/meta.json (tests/dyn/ort.js
reads them, runs onnxruntime and writes its outputs as .bin), and torch's own outputs as
torch_K_J.npy, which `gen.py --pb OUT` compares with onnxruntime's before writing them as the
test data's output_J.pb: the references are onnxruntime's, checked against torch's."""
import json, os, sys, warnings
import numpy as np

warnings.filterwarnings("ignore")


def models():
    import torch, torchvision

    class NonzeroIndex(torch.nn.Module):
        # torch.nonzero (NonZero -> Transpose) and x[x > 0] (NonZero -> Transpose -> GatherND),
        # then elementwise ops on both
        def forward(self, x):
            i = torch.nonzero(x)
            return i, x[x > 0] * 2.0 + 1.0, i.float() * 0.5

    class RowMask(torch.nn.Module):
        # rows of a [N, 4] tensor kept by a score test, then column ops on the kept rows
        def forward(self, boxes, scores):
            keep = scores > 0.3
            b, s = boxes[keep], scores[keep]
            wh = b[:, 2:] - b[:, :2]
            area = wh[:, 0] * wh[:, 1]
            return torch.cat([b, s.unsqueeze(1)], 1), area, b.max(dim=1).values, b.argmax(dim=1), \
                b.t(), b.reshape(-1), torch.topk(b, 2, dim=1).values

    class NmsGather(torch.nn.Module):
        # the boxes and scores torchvision.ops.nms keeps
        def forward(self, boxes, scores):
            keep = torchvision.ops.nms(boxes, scores, 0.5)
            return keep, boxes[keep], scores[keep] * 10.0

    class NmsFiltered(torch.nn.Module):
        # score filtering, then NMS over the survivors, then the gathers (detection post-processing)
        def forward(self, boxes, scores):
            idx = torch.nonzero(scores > 0.2).squeeze(1)
            b, s = boxes[idx], scores[idx]
            keep = torchvision.ops.nms(b, s, 0.4)
            return b[keep], s[keep], idx[keep]

    class KeptReduce(torch.nn.Module):
        # reductions along the data-dependent dim (the capacity past it is filled with the
        # reduction's identity): sum, max, min, argmax, argmin, topk, logsumexp, prod, and
        # mean (a sum rescaled by the actual count); mean(1) reduces an exact dim
        def forward(self, x):
            k = x[x[:, 0] > 0]
            return k.sum(0), k.amax(0), k.amin(0), k.argmax(0), k.argmin(0), \
                torch.topk(k, 2, dim=0).values, torch.logsumexp(k, 0), (k * 0.5 + 1).prod(0), \
                k.abs().sum(1, keepdim=True), k.mean(0), k.mean(), k.mean(1)

    class KeptStats(torch.nn.Module):
        # torch.where(m)[0] (NonZero -> Transpose -> Split -> Squeeze), a Split of the kept
        # rows into columns, and the kept count as a run-time value (Shape -> Gather -> Div)
        def forward(self, boxes, scores):
            keep = torch.where(scores > 0.3)[0]
            b = boxes[keep]
            x1, y1, x2, y2 = b.split(1, dim=1)
            return keep, b.sum(0) / b.shape[0], (x2 - x1) * (y2 - y1)

    class Postprocess(torch.nn.Module):
        # torchvision's detection post-process without batched_nms' If: a score filter, a
        # size filter on the survivors (NonZero of a data-dependent value), NMS, the first 5
        # kept (Slice), gathers of boxes, scores and labels
        def forward(self, boxes, scores, labels):
            keep = torch.where(scores > 0.05)[0]
            boxes, scores, labels = boxes[keep], scores[keep], labels[keep]
            ws, hs = boxes[:, 2] - boxes[:, 0], boxes[:, 3] - boxes[:, 1]
            keep = torch.where((ws >= 2.0) & (hs >= 2.0))[0]
            boxes, scores, labels = boxes[keep], scores[keep], labels[keep]
            keep = torchvision.ops.nms(boxes, scores, 0.5)[:5]
            return boxes[keep], scores[keep], labels[keep]

    class BatchedPostprocess(torch.nn.Module):
        # the same with torchvision.ops.batched_nms (per-label NMS by the coordinate trick: a
        # max over the kept boxes, offsets by label), whose export tests boxes.numel() == 0 in
        # an If whose branches differ in shape ([0] or the data-dependent keep)
        def forward(self, boxes, scores, labels):
            keep = torch.where(scores > 0.05)[0]
            boxes, scores, labels = boxes[keep], scores[keep], labels[keep]
            ws, hs = boxes[:, 2] - boxes[:, 0], boxes[:, 3] - boxes[:, 1]
            keep = torch.where((ws >= 2.0) & (hs >= 2.0))[0]
            boxes, scores, labels = boxes[keep], scores[keep], labels[keep]
            keep = torchvision.ops.batched_nms(boxes, scores, labels, 0.5)[:10]
            return boxes[keep], scores[keep], labels[keep]

    class TopkRuntimeK(torch.nn.Module):
        # torchvision's SSD/RetinaNet post-process per level: a score filter, then topk with
        # k = min(K, the survivors' count) (det_utils._topk_min: a run-time k), gathers by its
        # indices, NMS, gathers, labels by full_like
        def forward(self, boxes, scores):
            from torchvision.models.detection import _utils as det_utils
            keep = scores > 0.3
            s, b = scores[keep], boxes[keep]
            s, i = s.topk(det_utils._topk_min(s, 6, 0))
            b = b[i]
            keep = torchvision.ops.nms(b, s, 0.5)
            # the labels as torchvision writes them: full_like (ConstantOfShape of a run-time Shape)
            return s, i, b[keep], s[keep] * 2.0, torch.full_like(keep, 2) + 1

    class ConcatKept(torch.nn.Module):
        # Concat along the data-dependent dim (torchvision's SSD joins its per-class results
        # so): kept rows of two masks and exact rows between them, the kept scores and a
        # constant, then ops on the joined values (a reduction, a gather by topk, a Slice)
        def forward(self, boxes, scores, extra):
            b = torch.cat([boxes[scores > 0.3], extra, boxes[scores > 0.6] * 2.0], 0)
            s = torch.cat([scores[scores > 0.3], torch.tensor([1.5, 1.25]), scores[scores < 0.2]], 0)
            t, i = s.topk(3)
            return b, s, b.sum(0), b[i], b[1:4], b.max(0).values

    class SsdPostprocess(torch.nn.Module):
        # torchvision's SSD post-process: per class a score filter and topk with k = min(K,
        # the survivors' count), the classes' results joined (Concat along the data-dependent
        # dim: its capacity is every class's capacity), batched_nms over them, the first 10;
        # NonMaxSuppression and TopK loop to the run-time counts, not the capacities
        def forward(self, boxes, scores):
            from torchvision.models.detection import _utils as det_utils
            bs, ss, ls = [], [], []
            for c in range(1, scores.shape[1]):
                s = scores[:, c]
                keep = s > 0.3
                s, b = s[keep], boxes[keep]
                s, i = s.topk(det_utils._topk_min(s, 8, 0))
                bs.append(b[i])
                ss.append(s)
                ls.append(torch.full_like(s, c, dtype=torch.int64))
            b, s, lab = torch.cat(bs, 0), torch.cat(ss, 0), torch.cat(ls, 0)
            keep = torchvision.ops.batched_nms(b, s, lab, 0.45)[:10]
            return b[keep], s[keep], lab[keep]

    rng = np.random.default_rng(17)

    def boxes(n):
        xy = rng.uniform(0, 10, (n, 2)).astype(np.float32)
        wh = rng.uniform(1, 5, (n, 2)).astype(np.float32)
        return np.concatenate([xy, xy + wh], 1)

    yield "nonzero_index", NonzeroIndex(), [
        [rng.standard_normal((3, 4)).astype(np.float32)],
        [-np.abs(rng.standard_normal((3, 4))).astype(np.float32)],          # nothing kept
        [np.abs(rng.standard_normal((3, 4))).astype(np.float32) + 0.1]]     # everything kept
    yield "row_mask", RowMask(), [
        [boxes(12), rng.uniform(0, 1, 12).astype(np.float32)],
        [boxes(12), rng.uniform(0, 0.4, 12).astype(np.float32)]]  # few kept (none: onnxruntime 1.30 dies of SIGFPE)
    yield "nms_gather", NmsGather(), [
        [boxes(16), rng.uniform(0, 1, 16).astype(np.float32)],
        [boxes(16) / 3, rng.uniform(0, 1, 16).astype(np.float32)]]
    yield "nms_filtered", NmsFiltered(), [
        [boxes(20), rng.uniform(0, 1, 20).astype(np.float32)],
        [boxes(20) / 4, rng.uniform(0, 1, 20).astype(np.float32)]]

    x = rng.standard_normal((10, 3)).astype(np.float32)
    x[:3, 0] = np.abs(x[:3, 0]) + 0.1         # at least 2 rows kept (topk's k)
    y = rng.standard_normal((10, 3)).astype(np.float32)
    y[:, 0] = -np.abs(y[:, 0]) - 0.1
    y[7, 0], y[4, 0] = 1.0, 2.0                # exactly 2
    yield "kept_reduce", KeptReduce(), [[x], [y]]
    yield "postprocess", Postprocess(), [
        [boxes(30), rng.uniform(0, 1, 30).astype(np.float32), rng.integers(0, 3, 30)],
        [boxes(30) / 2, rng.uniform(0, 1, 30).astype(np.float32), rng.integers(0, 3, 30)]]
    yield "batched_postprocess", BatchedPostprocess(), [
        [boxes(30), rng.uniform(0, 1, 30).astype(np.float32), rng.integers(0, 3, 30)],
        [boxes(30) / 2, rng.uniform(0, 1, 30).astype(np.float32), rng.integers(0, 3, 30)],
        [boxes(30) / 8, rng.uniform(0, 1, 30).astype(np.float32), rng.integers(0, 3, 30)]]
    yield "kept_stats", KeptStats(), [
        [boxes(12), rng.uniform(0, 1, 12).astype(np.float32)],
        [boxes(12), rng.uniform(0, 0.35, 12).astype(np.float32)]]
    yield "topk_runtime_k", TopkRuntimeK(), [
        [boxes(16), rng.uniform(0, 1, 16).astype(np.float32)],          # more than 6 survive
        [boxes(16), rng.uniform(0, 0.4, 16).astype(np.float32)],        # fewer
        [boxes(16) / 3, rng.uniform(0.5, 1, 16).astype(np.float32)]]    # all, NMS removes some
    yield "concat_kept", ConcatKept(), [
        [boxes(10), rng.uniform(0, 1, 10).astype(np.float32), boxes(2)],
        [boxes(10), rng.uniform(0.25, 0.5, 10).astype(np.float32), boxes(2)],   # none of the second
        [boxes(10), rng.uniform(0.65, 1, 10).astype(np.float32), boxes(2)]]     # all of both
    yield "ssd_postprocess", SsdPostprocess(), [
        [boxes(40), rng.uniform(0, 1, (40, 5)).astype(np.float32)],
        [boxes(40) / 4, rng.uniform(0, 0.31, (40, 5)).astype(np.float32)],    # few per class
        [boxes(40) / 2, rng.uniform(0.35, 1, (40, 5)).astype(np.float32)]]    # all kept, k = 8


def onnx_models():
    """Models written with onnx helpers, for the producers torch does not export: Compress
    along axis 1 and Unique with an axis (data-dependent dims that are not the first, re-laid
    for their readers and packed back), Unique's counts gathered."""
    from onnx import helper, TensorProto as T
    f32 = lambda n, s: helper.make_tensor_value_info(n, T.FLOAT, s)
    rng = np.random.default_rng(7)
    g = helper.make_graph([
        helper.make_node("Greater", ["c", "zero"], ["m"]),
        helper.make_node("Compress", ["x", "m"], ["k"], axis=1),
        helper.make_node("Neg", ["k"], ["y"]),
        helper.make_node("Transpose", ["k"], ["t"], perm=[1, 0]),
        helper.make_node("ReduceSum", ["k", "one"], ["s"], keepdims=0),
        helper.make_node("Unique", ["u"], ["uy", "ui", "uinv", "uc"], axis=1, sorted=1),
        helper.make_node("Cast", ["uy"], ["uf"], to=T.FLOAT),
        helper.make_node("Gather", ["uc", "uinv"], ["ucount"])],
        "compress_unique",
        [f32("x", [3, 6]), f32("c", [6]), helper.make_tensor_value_info("u", T.INT64, [2, 5])],
        [f32("y", None), f32("t", None), f32("s", None), f32("uf", None),
         helper.make_tensor_value_info("ucount", T.INT64, None)],
        [helper.make_tensor("zero", T.FLOAT, [], [0.0]), helper.make_tensor("one", T.INT64, [1], [1])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    u0 = np.array([[1, 2, 1, 3, 2], [4, 5, 4, 6, 5]], np.int64)
    c0 = np.array([0.5, -1, 0.2, 0.3, -0.1, 1.0], np.float32)     # columns 0, 2, 3, 5 kept
    sets = [[rng.standard_normal((3, 6)).astype(np.float32), c0, u0],
            [rng.standard_normal((3, 6)).astype(np.float32), -np.ones(6, np.float32), u0[:, ::-1].copy()]]
    yield "compress_unique", m, sets
    # an If whose branches differ in dims: [2, 3] or [3, 2], then Neg after it
    then_g = helper.make_graph([helper.make_node("Relu", ["x"], ["a"])], "then", [], [f32("a", [2, 3])])
    else_g = helper.make_graph([helper.make_node("Transpose", ["x"], ["b"])], "else", [], [f32("b", [3, 2])])
    g = helper.make_graph([helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g),
                           helper.make_node("Neg", ["y"], ["z"])], "if_dims",
                          [helper.make_tensor_value_info("c", T.BOOL, []), f32("x", [2, 3])], [f32("z", None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    x = rng.standard_normal((2, 3)).astype(np.float32)
    yield "if_dims", m, [[np.array(True), x], [np.array(False), x]]
    # TopK along axis 1 with k a graph input (data-dependent along a dim that is not the
    # first), its values negated and its indices summed along the data-dependent dim
    g = helper.make_graph([helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=1, largest=0),
                           helper.make_node("Neg", ["v"], ["nv"]),
                           helper.make_node("ReduceSum", ["i", "one"], ["si"], keepdims=1)],
                          "topk_input_k",
                          [f32("x", [3, 7]), helper.make_tensor_value_info("k", T.INT64, [1])],
                          [f32("nv", None), helper.make_tensor_value_info("i", T.INT64, None),
                           helper.make_tensor_value_info("si", T.INT64, None)],
                          [helper.make_tensor("one", T.INT64, [1], [1])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    x = rng.standard_normal((3, 7)).astype(np.float32)
    yield "topk_input_k", m, [[x, np.array([3], np.int64)], [x, np.array([7], np.int64)],
                              [x, np.array([0], np.int64)]]

    # NonMaxSuppression on graph inputs with many candidates, tied scores (0.1 steps) and
    # boxes in clusters, so that a class keeps few of its 400 boxes (its candidates are sorted
    # once, then each taken box drops the overlapping ones after it); the same boxes read as
    # centers too; max_output_boxes_per_class an input (large, small, 0). Checked against the
    # greedy reference below as well as onnxruntime.
    nb, nc, nn = 2, 3, 400
    g = helper.make_graph([
        helper.make_node("NonMaxSuppression", ["boxes", "scores", "maxout", "iou", "sthr"], ["sel"]),
        helper.make_node("NonMaxSuppression", ["boxes", "scores", "maxout", "iou", "sthr"], ["selc"],
                         center_point_box=1)],
        "nms_sorted",
        [f32("boxes", [nb, nn, 4]), f32("scores", [nb, nc, nn]),
         helper.make_tensor_value_info("maxout", T.INT64, [1]), f32("iou", [1]), f32("sthr", [1])],
        [helper.make_tensor_value_info("sel", T.INT64, None), helper.make_tensor_value_info("selc", T.INT64, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    centers = rng.integers(0, 200, (nb, 12, 2))
    pick = rng.integers(0, 12, (nb, nn))
    xy = np.take_along_axis(centers, pick[..., None], 1) + rng.uniform(-4, 4, (nb, nn, 2))
    wh = rng.uniform(10, 30, (nb, nn, 2))     # no IoU exactly at a threshold
    bx = np.concatenate([xy, xy + wh], -1).astype(np.float32)
    sc = (rng.integers(0, 10, (nb, nc, nn)) / 10).astype(np.float32)
    f1 = lambda v: np.array([v], np.float32)
    yield "nms_sorted", m, [[bx, sc, np.array([100], np.int64), f1(0.45), f1(0.25)],
                            [bx, sc, np.array([3], np.int64), f1(0.3), f1(0.0)],
                            [bx, sc, np.array([0], np.int64), f1(0.45), f1(0.25)]]
    # TopK taking many of each row (rows sorted once, not k selections): tied values, the
    # largest along the last axis, the smallest along the first, int64 values, and a run-time
    # k; checked against numpy's stable sort as well as onnxruntime
    g = helper.make_graph([
        helper.make_node("TopK", ["x", "k50"], ["v1", "i1"], axis=1),
        helper.make_node("TopK", ["xt", "k60"], ["v2", "i2"], axis=0, largest=0),
        helper.make_node("TopK", ["u", "k100"], ["v3", "i3"], axis=1),
        helper.make_node("TopK", ["x", "k"], ["v4", "i4"], axis=-1)],
        "topk_sorted",
        [f32("x", [3, 200]), f32("xt", [200, 3]), helper.make_tensor_value_info("u", T.INT64, [2, 300]),
         helper.make_tensor_value_info("k", T.INT64, [1])],
        [f32("v1", None), helper.make_tensor_value_info("i1", T.INT64, None),
         f32("v2", None), helper.make_tensor_value_info("i2", T.INT64, None),
         helper.make_tensor_value_info("v3", T.INT64, None), helper.make_tensor_value_info("i3", T.INT64, None),
         f32("v4", None), helper.make_tensor_value_info("i4", T.INT64, None)],
        [helper.make_tensor("k50", T.INT64, [1], [50]), helper.make_tensor("k60", T.INT64, [1], [60]),
         helper.make_tensor("k100", T.INT64, [1], [100])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    tied = lambda *s: (np.round(rng.standard_normal(s) * 2) / 2).astype(np.float32)
    sets = []
    for kv in (120, 5, 200):
        sets.append([tied(3, 200), tied(200, 3), rng.integers(0, 20, (2, 300)), np.array([kv], np.int64)])
    yield "topk_sorted", m, sets

    # TopK with k = Min([6], the count of positives): its capacity is 6 (dyn_int_upper proves
    # k <= 6), not the axis' 50; 30, 3 and no positives
    g = helper.make_graph([
        helper.make_node("Greater", ["x", "zero"], ["pos"]),
        helper.make_node("NonZero", ["pos"], ["nz"]),
        helper.make_node("Shape", ["nz"], ["sh"]),
        helper.make_node("Gather", ["sh", "one"], ["cnt"]),
        helper.make_node("Min", ["six", "cnt"], ["k"]),
        helper.make_node("TopK", ["x", "k"], ["v", "i"])],
        "topk_bounded_k",
        [f32("x", [50])], [f32("v", None), helper.make_tensor_value_info("i", T.INT64, None)],
        [helper.make_tensor("zero", T.FLOAT, [], [0.0]), helper.make_tensor("one", T.INT64, [1], [1]),
         helper.make_tensor("six", T.INT64, [1], [6])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    x = rng.standard_normal(50).astype(np.float32)
    x3 = -np.abs(x)
    x3[[4, 17, 40]] = [0.5, 2.0, 0.5]
    yield "topk_bounded_k", m, [[np.sort(np.abs(x))[::-1].copy() * np.where(np.arange(50) < 30, 1, -1).astype(np.float32)],
                                [x3], [-np.abs(x)]]


def nms_ref(boxes, scores, maxout, iou, sthr, center):
    """ONNX NonMaxSuppression, greedily: per batch and class, the candidates over the score
    threshold by descending score (the lower index first on ties), each taken unless its IoU
    with one taken before exceeds the threshold, at most maxout a class."""
    b = boxes.astype(np.float64)
    if center:
        b = np.concatenate([b[..., :2] - b[..., 2:] / 2, b[..., :2] + b[..., 2:] / 2], -1)
    lo, hi = np.minimum(b[..., :2], b[..., 2:]), np.maximum(b[..., :2], b[..., 2:])
    out = []
    for n in range(scores.shape[0]):
        area = np.prod(hi[n] - lo[n], -1)
        for c in range(scores.shape[1]):
            s = scores[n, c]
            kept = []
            for i in sorted((i for i in range(len(s)) if s[i] > sthr), key=lambda i: (-s[i], i)):
                if len(kept) >= maxout:
                    break
                ok = True
                for j in kept:
                    inter = np.prod(np.maximum(0, np.minimum(hi[n, i], hi[n, j]) - np.maximum(lo[n, i], lo[n, j])))
                    uni = area[i] + area[j] - inter
                    if uni > 0 and inter / uni > iou:
                        ok = False
                        break
                if ok:
                    kept.append(i)
            out += [[n, c, i] for i in kept]
    return np.array(out, np.int64).reshape(-1, 3)


def topk_ref(x, k, axis, largest):
    o = np.argsort(-x if largest else x, axis=axis, kind="stable")
    o = np.take(o, np.arange(k), axis=axis)
    return np.take_along_axis(x, o, axis), o.astype(np.int64)


def reference(name, inputs):
    """numpy's outputs for the onnx helper models that have a reference (to_pb compares
    onnxruntime's with them), else None"""
    if name == "nms_sorted":
        bx, sc, mo, iou, st = inputs
        return [nms_ref(bx, sc, mo[0], iou[0], st[0], c) for c in (0, 1)]
    if name == "topk_sorted":
        x, xt, u, k = inputs
        return [*topk_ref(x, 50, 1, True), *topk_ref(xt, 60, 0, False), *topk_ref(u, 100, 1, True),
                *topk_ref(x, k[0], 1, True)]
    if name == "topk_bounded_k":
        x, = inputs
        return [*topk_ref(x, min(6, int((x > 0).sum())), 0, True)]
    return None


def export(out):
    import torch
    from onnx import numpy_helper
    only = os.environ.get("DYN_ONLY")       # a comma-separated subset (to add a new test's)
    for name, m, sets in models():
        if only and name not in only.split(","):
            continue
        d = os.path.join(out, name)
        os.makedirs(d)
        args = tuple(torch.from_numpy(a) for a in sets[0])
        torch.onnx.export(m, args, os.path.join(d, "model.onnx"), opset_version=17)
        meta = {"sets": []}
        for k, inputs in enumerate(sets):
            sd = os.path.join(d, "test_data_set_%d" % k)
            os.makedirs(sd)
            with torch.no_grad():
                got = m(*(torch.from_numpy(a) for a in inputs))
            for j, t in enumerate(got):
                np.save(os.path.join(d, "torch_%d_%d.npy" % (k, j)), t.numpy())
            for j, a in enumerate(inputs):
                with open(os.path.join(sd, "input_%d.pb" % j), "wb") as f:
                    f.write(numpy_helper.from_array(a).SerializeToString())
                a.tofile(os.path.join(sd, "input_%d.bin" % j))
            meta["sets"].append([{"type": str(a.dtype), "shape": list(a.shape)} for a in inputs])
        json.dump(meta, open(os.path.join(d, "meta.json"), "w"))
    import onnx
    for name, m, sets in onnx_models():     # no torch reference: onnxruntime's, some numpy's
        if only and name not in only.split(","):
            continue
        d = os.path.join(out, name)
        os.makedirs(d)
        onnx.save(m, os.path.join(d, "model.onnx"))
        meta = {"sets": []}
        for k, inputs in enumerate(sets):
            sd = os.path.join(d, "test_data_set_%d" % k)
            os.makedirs(sd)
            for j, t in enumerate(reference(name, inputs) or []):
                np.save(os.path.join(d, "torch_%d_%d.npy" % (k, j)), t)
            for j, a in enumerate(inputs):
                with open(os.path.join(sd, "input_%d.pb" % j), "wb") as f:
                    f.write(numpy_helper.from_array(a).SerializeToString())
                a.tofile(os.path.join(sd, "input_%d.bin" % j))
            meta["sets"].append([{"type": str(a.dtype), "shape": list(a.shape)} for a in inputs])
        json.dump(meta, open(os.path.join(d, "meta.json"), "w"))


NP = {"float32": np.float32, "int64": np.int64, "bool": np.bool_}


def to_pb(out):
    """onnxruntime's outputs (.bin and out_meta.json from ort.js) become output_J.pb, after they
    are compared with torch's."""
    from onnx import numpy_helper
    bad = 0
    for name in sorted(os.listdir(out)):
        d = os.path.join(out, name)
        if not os.path.exists(os.path.join(d, "out_meta.json")):
            continue
        om = json.load(open(os.path.join(d, "out_meta.json")))
        for k, outs in enumerate(om):
            sd = os.path.join(d, "test_data_set_%d" % k)
            for j, o in enumerate(outs):
                a = np.fromfile(os.path.join(sd, "output_%d.bin" % j), NP[o["type"]]).reshape(o["shape"])
                tf = os.path.join(d, "torch_%d_%d.npy" % (k, j))
                t = np.load(tf) if os.path.exists(tf) else a
                if a.shape != t.shape or not np.allclose(a, t, atol=1e-5, equal_nan=True):
                    print("onnxruntime and torch (or numpy) differ: %s set %d output %d" % (name, k, j))
                    bad += 1
                with open(os.path.join(sd, "output_%d.pb" % j), "wb") as f:
                    f.write(numpy_helper.from_array(a).SerializeToString())
    return bad


if __name__ == "__main__":
    if sys.argv[1] == "--pb":
        sys.exit(1 if to_pb(sys.argv[2]) else 0)
    export(sys.argv[1])
