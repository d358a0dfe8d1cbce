"""Writes ONNX models around one Resize (linear or cubic, each coordinate
mode, up and down, by scales and by sizes) for resize.test, with inputs:
OUT/<name>.onnx and OUT/<name>.inputs/x.npy. Each model's output is the sum
of the resized tensor times a fixed random weight of its shape, so every
element counts in the scalar that ort_check.py compares.

    python3 make_resize_models.py OUT"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
rng = np.random.default_rng(0)


def model(name, in_shape, out_shape, scales=None, sizes=None, **attrs):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch"] + in_shape[1:])
    loss = helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])
    inits = [numpy_helper.from_array(rng.standard_normal([1] + out_shape[1:]).astype(np.float32), "w")]
    ins = ["x", "", ""]
    if scales is not None:
        inits.append(numpy_helper.from_array(np.array(scales, np.float32), "scales"))
        ins[2] = "scales"
    nodes = []
    if sizes is not None:
        # [N, C] from the input's shape (N is the batch), then the new sizes.
        inits += [numpy_helper.from_array(np.array(v, np.int64), n) for n, v in
                  (("zero", [0]), ("two", [2]), ("spatial", sizes[2:]))]
        nodes += [helper.make_node("Shape", ["x"], ["shape"]),
                  helper.make_node("Slice", ["shape", "zero", "two"], ["nc"]),
                  helper.make_node("Concat", ["nc", "spatial"], ["sizes"], axis=0)]
        ins = ["x", "", "", "sizes"]
    nodes += [helper.make_node("Resize", ins, ["r"], name="resize", **attrs),
             helper.make_node("Mul", ["r", "w"], ["p"]),
             helper.make_node("ReduceSum", ["p"], ["loss"], keepdims=0)]
    g = helper.make_graph(nodes, name, [x], [loss], initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8  # what the installed onnxruntime reads
    onnx.checker.check_model(m)
    onnx.save(m, os.path.join(out, name + ".onnx"))
    os.makedirs(os.path.join(out, name + ".inputs"), exist_ok=True)
    np.save(os.path.join(out, name + ".inputs", "x.npy"),
            rng.standard_normal([3] + in_shape[1:]).astype(np.float32))


# linear: half_pixel up by a fractional scale, align_corners and
# pytorch_half_pixel (an axis of 1) by sizes, asymmetric down; 1-D.
model("linear_half", [2, 3, 4, 6], [2, 3, 8, 9], scales=[1, 1, 2, 1.5], mode="linear",
      coordinate_transformation_mode="half_pixel")
model("linear_corners", [2, 3, 4, 6], [2, 3, 7, 5], sizes=[2, 3, 7, 5], mode="linear",
      coordinate_transformation_mode="align_corners")
model("linear_pytorch", [2, 3, 4, 6], [2, 3, 1, 10], sizes=[2, 3, 1, 10], mode="linear",
      coordinate_transformation_mode="pytorch_half_pixel")
model("linear_asym_down", [2, 3, 8, 6], [2, 3, 4, 3], scales=[1, 1, 0.5, 0.5], mode="linear",
      coordinate_transformation_mode="asymmetric")
model("linear_1d", [2, 3, 5], [2, 3, 12], sizes=[2, 3, 12], mode="linear",
      coordinate_transformation_mode="half_pixel")
# cubic: torch's coefficient up by 2, -0.5 with align_corners, asymmetric
# down, half_pixel by a fractional scale.
model("cubic_half", [2, 3, 4, 6], [2, 3, 8, 12], scales=[1, 1, 2, 2], mode="cubic",
      coordinate_transformation_mode="half_pixel", cubic_coeff_a=-0.75)
model("cubic_corners", [2, 3, 4, 6], [2, 3, 9, 5], sizes=[2, 3, 9, 5], mode="cubic",
      coordinate_transformation_mode="align_corners", cubic_coeff_a=-0.5)
model("cubic_asym_down", [2, 3, 8, 6], [2, 3, 4, 3], scales=[1, 1, 0.5, 0.5], mode="cubic",
      coordinate_transformation_mode="asymmetric")
model("cubic_fraction", [2, 3, 4, 6], [2, 3, 10, 7], scales=[1, 1, 2.5, 1.25], mode="cubic",
      coordinate_transformation_mode="half_pixel")
