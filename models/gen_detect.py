#!/usr/bin/python3
"""gen_detect.py - writes models/detect: a detector's post-processing, whose outputs have
data-dependent shapes (runtime/model.h.in, "Data-dependent shapes").

  detect  scores -> Sigmoid -> NonMaxSuppression (constant max boxes per class, IoU and score
          thresholds) -> selected_indices [K,3]; and NonZero(Sigmoid(scores) > 0.8) -> [3,M]

Two data sets with different K and M, so that the reported dims differ between runs of the
same compiled code. The expected outputs come from the numpy reference below, written from
the ONNX definitions (greedy selection by descending score, ties to the lower index).

Run: /usr/bin/python3 models/gen_detect.py   (needs python3-onnx, python3-numpy)
"""
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
B, C, N = 2, 3, 12
MAX_OUT, IOU, SCORE = 4, 0.4, 0.35


def iou(a, b):
    ay1, ay2 = min(a[0], a[2]), max(a[0], a[2])
    ax1, ax2 = min(a[1], a[3]), max(a[1], a[3])
    by1, by2 = min(b[0], b[2]), max(b[0], b[2])
    bx1, bx2 = min(b[1], b[3]), max(b[1], b[3])
    ih = max(0.0, min(ay2, by2) - max(ay1, by1))
    iw = max(0.0, min(ax2, bx2) - max(ax1, bx1))
    inter = ih * iw
    union = (ay2 - ay1) * (ax2 - ax1) + (by2 - by1) * (bx2 - bx1) - inter
    return inter / union if union > 0 else 0.0


def ref_nms(boxes, scores):
    rows = []
    for b in range(boxes.shape[0]):
        for c in range(scores.shape[1]):
            s = scores[b, c].astype(np.float64)
            order = sorted((i for i in range(len(s)) if s[i] > SCORE), key=lambda i: (-s[i], i))
            kept = []
            for i in order:
                if len(kept) == MAX_OUT:
                    break
                if all(iou(boxes[b, i], boxes[b, j]) <= IOU for j in kept):
                    kept.append(i)
            rows += [[b, c, i] for i in kept]
    return np.array(rows, dtype=np.int64).reshape(-1, 3)


def sigmoid(x):
    return (1 / (1 + np.exp(-x.astype(np.float64)))).astype(np.float32)


def main():
    rng = np.random.default_rng(20240917)
    nodes = [
        helper.make_node("Sigmoid", ["scores"], ["prob"]),
        helper.make_node("NonMaxSuppression", ["boxes", "prob", "max_out", "iou", "score"], ["selected"]),
        helper.make_node("Greater", ["prob", "high"], ["mask"]),
        helper.make_node("NonZero", ["mask"], ["where"]),
    ]
    inits = [
        numpy_helper.from_array(np.array([MAX_OUT], np.int64), "max_out"),
        numpy_helper.from_array(np.array([IOU], np.float32), "iou"),
        numpy_helper.from_array(np.array([SCORE], np.float32), "score"),
        numpy_helper.from_array(np.array(0.8, np.float32), "high"),
    ]
    g = helper.make_graph(
        nodes, "detect",
        [helper.make_tensor_value_info("boxes", TensorProto.FLOAT, [B, N, 4]),
         helper.make_tensor_value_info("scores", TensorProto.FLOAT, [B, C, N])],
        [helper.make_tensor_value_info("selected", TensorProto.INT64, ["K", 3]),
         helper.make_tensor_value_info("where", TensorProto.INT64, [3, "M"])],
        inits)
    model = helper.make_model(g, producer_name="onnxcc-gen_detect",
                              opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(model)
    d = os.path.join(HERE, "detect")
    os.makedirs(d, exist_ok=True)
    onnx.save(model, os.path.join(d, "model.onnx"))
    for k, spread in enumerate((1.0, 2.5)):
        corner = rng.uniform(0, 8, (B, N, 2)).astype(np.float32)
        size = rng.uniform(1, 4, (B, N, 2)).astype(np.float32)
        boxes = np.concatenate([corner, corner + size], axis=2)
        scores = (rng.standard_normal((B, C, N)) * spread).astype(np.float32)
        prob = sigmoid(scores)
        outs = [ref_nms(boxes, prob), np.array(np.nonzero(prob > np.float32(0.8)), dtype=np.int64)]
        sd = os.path.join(d, "test_data_set_%d" % k)
        os.makedirs(sd, exist_ok=True)
        for kind, vals in (("input", [boxes, scores]), ("output", outs)):
            for i, v in enumerate(vals):
                with open(os.path.join(sd, "%s_%d.pb" % (kind, i)), "wb") as f:
                    f.write(numpy_helper.from_array(np.ascontiguousarray(v)).SerializeToString())
        print("gen_detect: data set %d: selected %s, where %s" % (k, outs[0].shape, outs[1].shape))


if __name__ == "__main__":
    main()
