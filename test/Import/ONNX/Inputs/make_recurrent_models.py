"""Writes ONNX models around one LSTM / GRU / RNN node in forms torch does
not export (reverse direction, no bias, a given initial state, Relu) for
recurrent.test, with inputs: OUT/<name>.onnx and
OUT/<name>.inputs/*.npy. Each output is the sum of Y (and Y_h, Y_c) times
fixed random weights, so every element counts in the scalar compared with
onnxruntime.

    python3 make_recurrent_models.py OUT"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
rng = np.random.default_rng(0)
T, B, I, H = 5, 3, 4, 6


def model(name, op, dirs, bias=True, h0=False, c0=False, **attrs):
    gates = {"LSTM": 4, "GRU": 3, "RNN": 1}[op]
    # Graph inputs are batch-major; the node (layout 0) reads x [T, B, I]
    # and states [D, B, H], transposed as torch exports them.
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", T, I])]
    feeds = {"x": rng.standard_normal([B, T, I])}
    nodes = [helper.make_node("Transpose", ["x"], ["xt"], perm=[1, 0, 2])]
    inits = [numpy_helper.from_array((rng.standard_normal([dirs, gates * H, n]) * 0.5).astype(np.float32), k)
             for k, n in (("W", I), ("R", H))]
    names = ["xt", "W", "R", "", "", "", ""]
    if bias:
        inits.append(numpy_helper.from_array(rng.standard_normal([dirs, 2 * gates * H]).astype(np.float32), "B"))
        names[3] = "B"
    for k, given, at in (("h0", h0, 5), ("c0", c0, 6)):
        if given:
            inputs.append(helper.make_tensor_value_info(k, TensorProto.FLOAT, ["batch", dirs, H]))
            feeds[k] = rng.standard_normal([B, dirs, H])
            nodes.append(helper.make_node("Transpose", [k], [k + "t"], perm=[1, 0, 2]))
            names[at] = k + "t"
    outs = ["Y", "Y_h"] + (["Y_c"] if op == "LSTM" else [])
    nodes += [helper.make_node(op, names[:7 if c0 else 6 if h0 else 4 if bias else 3], outs,
                              name="rnn", hidden_size=H, **attrs)]
    total = None
    for o in outs:
        wshape = [T, dirs, 1, H] if o == "Y" else [dirs, 1, H]
        inits.append(numpy_helper.from_array(rng.standard_normal(wshape).astype(np.float32), "w" + o))
        nodes += [helper.make_node("Mul", [o, "w" + o], ["p" + o]),
                  helper.make_node("ReduceSum", ["p" + o], ["s" + o], keepdims=0)]
        if total:
            nodes.append(helper.make_node("Add", [total, "s" + o], ["t" + o]))
            total = "t" + o
        else:
            total = "s" + o
    nodes.append(helper.make_node("Identity", [total], ["loss"]))
    loss = helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])
    g = helper.make_graph(nodes, name, inputs, [loss], initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8  # what the installed onnxruntime reads
    onnx.checker.check_model(m)
    onnx.save(m, os.path.join(out, name + ".onnx"))
    os.makedirs(os.path.join(out, name + ".inputs"), exist_ok=True)
    for k, v in feeds.items():
        np.save(os.path.join(out, name + ".inputs", k + ".npy"), v.astype(np.float32))


model("lstm_given_state", "LSTM", 2, h0=True, c0=True, direction="bidirectional")
model("lstm_reverse", "LSTM", 1, bias=False, direction="reverse")
model("gru_given_state", "GRU", 2, h0=True, direction="bidirectional", linear_before_reset=1)
model("gru_reverse", "GRU", 1, direction="reverse", linear_before_reset=1)
model("rnn_relu", "RNN", 1, h0=True, activations=["Relu"])
model("rnn_tanh_bidir", "RNN", 2, bias=False, direction="bidirectional")
