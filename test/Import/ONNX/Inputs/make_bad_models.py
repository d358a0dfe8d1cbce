"""Writes small malformed or unsupported ONNX models for errors.test."""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

out = sys.argv[1]
os.makedirs(out, exist_ok=True)


def save(name, nodes, inputs, outputs, inits=(), opset=17):
    g = helper.make_graph(nodes, name, inputs, outputs, initializer=list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    onnx.save(m, os.path.join(out, name + ".onnx"))


x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 8])
y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
w = numpy_helper.from_array(np.ones((8, 3), np.float32), "w")

save("unsupported", [helper.make_node("Hardmax", ["x"], ["y"], name="my_hardmax",
                                      axis=1)], [x], [y], [w])
save("opset11", [helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")], [x], [y], [w],
     opset=11)
xs = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq"])
save("seqdim", [helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")], [xs], [y], [w])
w4 = numpy_helper.from_array(np.ones((4, 3), np.float32), "w")
save("mismatch", [helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")], [x], [y], [w4])
shape = numpy_helper.from_array(np.array([16], np.int64), "shape")
save("baked", [helper.make_node("Reshape", ["x", "shape"], ["y"], name="flat")], [x], [y],
     [shape])
ext = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[8, 3])
ext.data_location = TensorProto.EXTERNAL
for k, v in (("location", "nowhere.bin"), ("offset", "0"), ("length", "96")):
    e = ext.external_data.add()
    e.key, e.value = k, v
save("missing_ext", [helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")], [x], [y], [ext])
ximg = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 2, 4, 4])
scales = numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales")
save("resize_crop", [helper.make_node("Resize", ["x", "", "scales"], ["y"], name="up",
                                      mode="linear",
                                      coordinate_transformation_mode="tf_crop_and_resize")],
     [ximg], [y], [scales])
half = numpy_helper.from_array(np.array([1, 1, 1.5, 1.5], np.float32), "scales")
save("resize_fraction", [helper.make_node("Resize", ["x", "", "scales"], ["y"], name="up",
                                          mode="nearest", coordinate_transformation_mode="asymmetric",
                                          nearest_mode="floor")], [ximg], [y], [half])
# x * float(x.shape[0]): the batch size used as data, not dividing a sum.
zero = numpy_helper.from_array(np.array([0], np.int64), "zero")
save("batch_as_data", [helper.make_node("Shape", ["x"], ["s"]),
                       helper.make_node("Gather", ["s", "zero"], ["b"], axis=0),
                       helper.make_node("Cast", ["b"], ["bf"], to=TensorProto.FLOAT),
                       helper.make_node("Mul", ["x", "bf"], ["y"], name="scale")],
     [x], [y], [zero])
# If on a condition computed from the data (control flow at run time).
zero_f = numpy_helper.from_array(np.array(0, np.float32), "zero_f")
then_g = helper.make_graph([helper.make_node("Neg", ["x"], ["t"])], "then", [],
                           [helper.make_tensor_value_info("t", TensorProto.FLOAT, None)])
else_g = helper.make_graph([helper.make_node("Abs", ["x"], ["e"])], "else", [],
                           [helper.make_tensor_value_info("e", TensorProto.FLOAT, None)])
save("data_if", [helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
                 helper.make_node("Greater", ["s", "zero_f"], ["c"]),
                 helper.make_node("If", ["c"], ["y"], name="branch", then_branch=then_g,
                                  else_branch=else_g)],
     [x], [y], [zero_f])

# An initializer through a chain of Identity nodes (valid ONNX; the second
# Identity was "identity of unknown initializer").
save("identity_chain", [helper.make_node("Identity", ["w"], ["w1"], name="id1"),
                        helper.make_node("Identity", ["w1"], ["w2"], name="id2"),
                        helper.make_node("MatMul", ["x", "w2"], ["y"], name="mm")],
     [x], [y], [w])
# A Scan (its refusal talked about Loop and nn.EmbeddingBag).
body = helper.make_graph([helper.make_node("Add", ["s_in", "e"], ["s_out"]),
                          helper.make_node("Identity", ["s_out"], ["o"])], "body",
                         [helper.make_tensor_value_info("s_in", TensorProto.FLOAT, [8]),
                          helper.make_tensor_value_info("e", TensorProto.FLOAT, [8])],
                         [helper.make_tensor_value_info("s_out", TensorProto.FLOAT, [8]),
                          helper.make_tensor_value_info("o", TensorProto.FLOAT, [8])])
init8 = numpy_helper.from_array(np.zeros(8, np.float32), "init8")
save("scan", [helper.make_node("Scan", ["init8", "x"], ["fin", "y"], name="myscan", body=body,
                               num_scan_inputs=1)], [x], [y], [init8])
# An IR version newer than any onnx writes (onnxruntime refuses it).
g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")], "ir99", [x],
                      [y], initializer=[w])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
m.ir_version = 99
onnx.save(m, os.path.join(out, "ir99.onnx"))
# Two scalar float outputs, neither named loss; an input no node reads.
lbl = helper.make_tensor_value_info("lbl", TensorProto.INT64, ["batch"])
z = helper.make_tensor_value_info("z", TensorProto.FLOAT, ["batch", 2])
two = [helper.make_node("MatMul", ["x", "w"], ["logits"], name="mm"),
       helper.make_node("SoftmaxCrossEntropyLoss", ["logits", "lbl"], ["ce"], name="ce",
                        reduction="mean"),
       helper.make_node("ReduceMean", ["logits"], ["aux"], name="aux", keepdims=0)]
save("two_scalars", two, [x, lbl], [helper.make_tensor_value_info("aux", TensorProto.FLOAT, []),
                                    helper.make_tensor_value_info("ce", TensorProto.FLOAT, [])],
     [w])
one = [two[0], helper.make_node("SoftmaxCrossEntropyLoss", ["logits", "lbl"], ["loss"],
                                name="ce", reduction="mean")]
save("unread_input", one, [x, lbl, z], [helper.make_tensor_value_info("loss", TensorProto.FLOAT,
                                                                      [])], [w])
