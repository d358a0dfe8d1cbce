#!/usr/bin/env python3
"""Regenerate the generated part of python/OPS.md.

    PYTHONPATH=python python3 python/tools/ops_report.py [--out python/OPS.md] [--no-dynamo]

Exports every zoo model with the legacy exporter (training mode, opsets 13,
17, 21), plus gpt_eval (EVAL + constant folding) and a dynamo=True export of
gpt, and summarises what a C++ ONNX importer sees. The text between the
``<!-- BEGIN GENERATED -->`` / ``<!-- END GENERATED -->`` markers of the output
file is replaced; everything else (hand-written notes) is kept.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import io
import json
import os
import sys
import tempfile
import warnings

import numpy as np
import onnx
import onnx.numpy_helper as nh
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from varuna import models  # noqa: E402
from varuna.export import _export_onnx  # noqa: E402

BEGIN, END = "<!-- BEGIN GENERATED -->", "<!-- END GENERATED -->"
DTYPE = {v: k.lower() for k, v in onnx.TensorProto.DataType.items()}


# ---------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------

def _attr(a):
    v = onnx.helper.get_attribute_value(a)
    if isinstance(v, bytes):
        v = v.decode()
    if isinstance(v, onnx.TensorProto):
        arr = nh.to_array(v)
        return f"tensor<{DTYPE[v.data_type]}{list(arr.shape)}>" + (
            f"={arr.reshape(-1).tolist()}" if arr.size <= 4 else "")
    if isinstance(v, float):
        return f"{v:g}"
    return v


def _short(arr: np.ndarray) -> str:
    if arr.size <= 6:
        vals = arr.reshape(-1).tolist()
        vals = [round(x, 6) if isinstance(x, float) else x for x in vals]
        return (str(vals[0]) if arr.ndim == 0 else str(vals))
    return f"<{arr.dtype}{list(arr.shape)}>"


def runtime_shapes(model: onnx.ModelProto, names, feeds_by_batch):
    """Shapes of ``names`` observed by running ``model`` (ORT) at several batch
    sizes; a dim that scales with the batch is reported as ``batch`` (or
    ``batch*k``)."""
    import onnxruntime as ort
    m = onnx.ModelProto()
    m.CopyFrom(model)
    have = {o.name for o in m.graph.output}
    for n in names:
        if n not in have:
            m.graph.output.add().name = n
    obs = {}
    for b, feeds in feeds_by_batch.items():
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        sess = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
        outs = sess.run(list(names), feeds)
        obs[b] = {n: list(np.shape(v)) for n, v in zip(names, outs)}
    (b0, s0), (b1, s1) = list(obs.items())[:2]
    res = {}
    for n in names:
        dims = []
        for d0, d1 in zip(s0[n], s1[n]):
            if d0 == d1:
                dims.append(d0)
            elif d0 * b1 == d1 * b0 and d0 % b0 == 0:
                k = d0 // b0
                dims.append("batch" if k == 1 else f"batch*{k}")
            else:
                dims.append("?")
        res[n] = dims
    return res


def _scalar_op(op, a, b):
    sym = {"Div": "/", "Mul": "*", "Add": "+", "Sub": "-", "Mod": "%", "Equal": "=="}[op]
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        if op == "Div":
            return a // b if isinstance(a, int) and isinstance(b, int) else a / b
        if op == "Mod":
            return a % b
        if op == "Equal":
            return a == b
        return {"Mul": a * b, "Add": a + b, "Sub": a - b}[op]
    if op == "Equal" and isinstance(b, int) and b < 0 and isinstance(a, str):
        return False  # a symbolic dim is never negative
    if op == "Mul" and b == 1:
        return a
    return f"({a}{sym}{b})"


def _elementwise(op, a, b):
    if isinstance(a, list) or isinstance(b, list):
        n = len(a) if isinstance(a, list) else len(b)
        a = a if isinstance(a, list) else [a] * n
        b = b if isinstance(b, list) else [b] * n
        if len(a) != len(b):
            return f"{op}(...)"
        return [_scalar_op(op, x, y) for x, y in zip(a, b)]
    return _scalar_op(op, a, b)


class Graph:
    def __init__(self, model: onnx.ModelProto, feeds_by_batch=None):
        self.m = model
        g = model.graph
        self.inits = {t.name: t for t in g.initializer}
        self.inputs = {i.name for i in g.input}
        self.producer = {}
        self.consts = {}
        for n in g.node:
            for o in n.output:
                self.producer[o] = n
            if n.op_type == "Constant":
                for a in n.attribute:
                    if a.name == "value":
                        self.consts[n.output[0]] = nh.to_array(a.t)
        self.consumers = collections.defaultdict(list)
        for n in g.node:
            for i, x in enumerate(n.input):
                if x:
                    self.consumers[x].append((n, i))
        self.shapes = {}
        for name, t in self.inits.items():
            self.shapes[name] = list(t.dims)
        shape_srcs = sorted({n.input[0] for n in g.node if n.op_type == "Shape"} - set(self.inits))
        if feeds_by_batch and shape_srcs:
            self.shapes.update(runtime_shapes(model, shape_srcs, feeds_by_batch))
        self._sym = {}
        self._static = {}

    # -- input classification ------------------------------------------------
    def kind(self, name: str) -> str:
        if not name:
            return "-"
        if name in self.inits:
            t = self.inits[name]
            return f"init:{DTYPE[t.data_type]}"
        if name in self.inputs:
            return "input"
        if name in self.consts:
            return f"const={_short(self.consts[name])}"
        if self.is_shape_value(name):
            return "shape-expr"  # Shape/Constant-only subgraph
        return "x"

    def is_shape_value(self, name: str) -> bool:
        """Value computed only from Shape nodes and Constants (no tensor data)."""
        if name in self._static:
            return self._static[name]
        self._static[name] = False  # cycle guard
        n = self.producer.get(name)
        r = False
        if name in self.consts:
            r = True
        elif n is not None and n.op_type == "Shape":
            r = True
        elif n is not None:
            ins = [i for i in n.input if i]
            r = bool(ins) and all(self.is_shape_value(i) for i in ins)
        self._static[name] = r
        return r

    # -- symbolic evaluation of shape expressions ------------------------------
    def sym(self, name: str, depth: int = 0):
        """A list (1-D) or scalar symbolic value for a shape expression."""
        if name in self._sym:
            return self._sym[name]
        r = self._sym_uncached(name, depth)
        self._sym[name] = r
        return r

    def _sym_uncached(self, name, depth):
        if depth > 60:
            return "?"
        if name in self.consts:
            a = self.consts[name]
            return a.reshape(-1).tolist() if a.ndim else a.item()
        if name in self.inits:
            return name
        n = self.producer.get(name)
        if n is None:
            return name
        op = n.op_type
        at = {a.name: onnx.helper.get_attribute_value(a) for a in n.attribute}
        ins = [self.sym(i, depth + 1) if i else None for i in n.input]
        if op == "Shape":
            dims = self.shapes.get(n.input[0], ["?"])
            s, e = at.get("start", 0), at.get("end", None)
            return list(dims[s:e])
        if op == "Gather" and isinstance(ins[0], list) and isinstance(ins[1], int):
            return ins[0][ins[1]] if -len(ins[0]) <= ins[1] < len(ins[0]) else "?"
        if op == "Gather" and isinstance(ins[0], list) and isinstance(ins[1], list):
            return [ins[0][k] for k in ins[1]]
        if op in ("Unsqueeze",) and not isinstance(ins[0], list):
            return [ins[0]]
        if op in ("Squeeze",) and isinstance(ins[0], list) and len(ins[0]) == 1:
            return ins[0][0]
        if op == "Concat":
            out = []
            for x in ins:
                out += x if isinstance(x, list) else [x]
            return out
        if op in ("Cast", "Identity"):
            return ins[0]
        if op == "Slice" and isinstance(ins[0], list) and all(isinstance(x, list) for x in ins[1:3]):
            return ins[0][ins[1][0]:ins[2][0]] if abs(ins[2][0]) < 2**62 else ins[0][ins[1][0]:]
        if op in ("Div", "Mul", "Add", "Sub", "Mod", "Equal") and len(ins) == 2:
            return _elementwise(op, ins[0], ins[1])
        if op == "Where" and isinstance(ins[0], list) and all(isinstance(c, bool) for c in ins[0]):
            a, b = (x if isinstance(x, list) else [x] * len(ins[0]) for x in ins[1:3])
            if len(a) == len(b) == len(ins[0]):
                return [x if c else y for c, x, y in zip(ins[0], a, b)]
        if op == "Reshape" and n.input[1] in self.consts:
            v = ins[0] if isinstance(ins[0], list) else [ins[0]]
            tgt = self.consts[n.input[1]].reshape(-1).tolist()
            if tgt in ([1], [-1]):
                return v if len(v) == 1 or tgt == [-1] else f"{op}(...)"
        if op == "Sqrt":
            f = lambda v: v ** 0.5 if isinstance(v, (int, float)) else f"sqrt({v})"
            return [f(v) for v in ins[0]] if isinstance(ins[0], list) else f(ins[0])
        if op == "Range":
            return f"range({ins[0]},{ins[1]},{ins[2]})"
        if op == "ConstantOfShape":
            val = 0
            for a in n.attribute:
                if a.name == "value":
                    val = nh.to_array(a.t).reshape(-1).tolist()[0]
            if isinstance(ins[0], list) and len(ins[0]) == 1 and isinstance(ins[0][0], int):
                return [val] * ins[0][0]
            return f"ConstantOfShape({ins[0]})"
        return f"{op}(...)"

    def batch_dependent(self, name: str) -> bool:
        return "batch" in json.dumps(self.sym(name))


def signatures(g: Graph):
    """op -> Counter of 'attrs | inputs | outputs' signature strings."""
    sig = collections.defaultdict(collections.Counter)
    for n in g.m.graph.node:
        if n.op_type == "Constant":
            continue
        attrs = ",".join(f"{a.name}={_attr(a)}" for a in sorted(n.attribute, key=lambda a: a.name))
        kinds = []
        for i, x in enumerate(n.input):
            k = g.kind(x)
            if k == "shape-expr":
                k = "sym:" + json.dumps(g.sym(x)).replace('"', "").replace(" ", "")
            kinds.append(k)
        used = sum(1 for o in n.output if o and (g.consumers.get(o) or
                                                 o in {x.name for x in g.m.graph.output}))
        s = f"[{attrs}] ({', '.join(kinds)}) -> {len(n.output)} out" + (
            f" ({used} used)" if used != len(n.output) else "")
        sig[n.op_type][s] += 1
    return sig


def shape_sinks(g: Graph):
    """Nodes on tensor data whose shape/index operands come from a Shape
    subgraph: Counter of 'Op(input i = expr)' (batch-dependent ones marked)."""
    c = collections.Counter()
    for n in g.m.graph.node:
        if n.op_type == "Constant" or all(g.is_shape_value(o) for o in n.output if o):
            continue
        for i, x in enumerate(n.input):
            if x and x not in g.consts and g.is_shape_value(x):
                expr = json.dumps(g.sym(x)).replace('"', "").replace(" ", "")
                tag = " [batch]" if "batch" in expr else ""
                c[f"{n.op_type}.in{i}={expr}{tag}"] += 1
    return c


def identity_nodes(g: Graph):
    return [(n.input[0], n.output[0]) for n in g.m.graph.node if n.op_type == "Identity"]


def constant_ops(g: Graph):
    return collections.Counter(n.op_type for n in g.m.graph.node)


# ---------------------------------------------------------------------------
# export
# ---------------------------------------------------------------------------

def feeds(name: str):
    names = models.make(name)[2]
    return {b: {n: t.numpy() for n, t in zip(names, models.example_inputs(name, batch=b))}
            for b in (2, 3)}


def export_legacy(name: str, tmp: str, opset: int, **kw):
    model, inputs, names = models.make(name)
    path = os.path.join(tmp, f"{name}_{opset}_{len(kw)}.onnx")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _export_onnx(model, inputs, path, input_names=names, loss_name="loss", opset=opset,
                     batch_dim=0, external_data=False, **kw)
    return Graph(onnx.load(path), feeds(name))


def export_dynamo(tmp: str, optimize: bool):
    model, inputs, names = models.make("gpt")
    path = os.path.join(tmp, f"gpt_dynamo_{int(optimize)}.onnx")
    B = torch.export.Dim("batch")
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()), \
            contextlib.redirect_stderr(io.StringIO()):
        warnings.simplefilter("ignore")
        torch.onnx.export(model, inputs, path, dynamo=True, optimize=optimize,
                          input_names=names, output_names=["loss"],
                          dynamic_shapes={n: {0: B} for n in names})
    return Graph(onnx.load(path), feeds("gpt"))


# ---------------------------------------------------------------------------
# markdown
# ---------------------------------------------------------------------------

def fmt_counter(c) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(c.items(), key=lambda kv: (-kv[1], kv[0])))


def section_model(title: str, g: Graph, base_sigs=None) -> str:
    out = [f"#### {title}", ""]
    m = g.m
    out.append(f"opset_import {[(o.domain or 'ai.onnx', o.version) for o in m.opset_import]}, "
               f"ir_version {m.ir_version}, {len(m.graph.node)} nodes, "
               f"{len(m.graph.initializer)} initializers")
    out.append("")
    out.append(f"- ops: {fmt_counter(constant_ops(g))}")
    inits = [f"{t.name}{'' if t.data_type == 1 else ':' + DTYPE[t.data_type]}"
             for t in m.graph.initializer]
    if base_sigs is None:
        out.append(f"- initializers ({len(inits)}): {', '.join(inits)}")
    else:
        out.append(f"- initializers: {len(inits)} (same names as the opset 17 export)"
                   if base_sigs[1] == [t.name for t in m.graph.initializer]
                   else f"- initializers ({len(inits)}): {', '.join(inits)}")
    sinks = shape_sinks(g)
    if sinks:
        out.append("- data ops with computed shape/index operands (Shape/Constant-only subgraphs): " + "; ".join(
            f"{k} x{v}" for k, v in sorted(sinks.items())))
    else:
        out.append("- data ops with computed shape/index operands: none")
    ids = identity_nodes(g)
    out.append("- Identity nodes: " + (", ".join(f"{a} -> {b}" for a, b in ids) if ids else "none"))
    sigs = signatures(g)
    out.append("- node forms (attrs | inputs | outputs) x count"
               + (" that differ from opset 17:" if base_sigs is not None else ":"))
    out.append("")
    out.append("```")
    for op in sorted(sigs):
        for s, c in sorted(sigs[op].items()):
            if base_sigs is not None and s in base_sigs[0].get(op, {}):
                continue
            out.append(f"{op:24s} {s}  x{c}")
    out.append("```")
    out.append("")
    return "\n".join(out)


def generate(with_dynamo: bool = True) -> str:
    parts = []
    union = collections.Counter()
    with tempfile.TemporaryDirectory() as tmp:
        for name in models.names():
            parts.append(f"### {name}\n")
            g17 = (export_legacy(name, tmp, 17))
            union.update(constant_ops(g17))
            parts.append(section_model(f"{name} - opset 17 (varuna.export default)", g17))
            base = (signatures(g17), [t.name for t in g17.m.graph.initializer])
            if name == "gpt":
                gpt17_base = base
            for opset in (13, 21):
                try:
                    g = (export_legacy(name, tmp, opset))
                except Exception as e:  # noqa: BLE001 - report the failure
                    msg = str(e).split("\n")[0]
                    parts.append(f"#### {name} - opset {opset}\n\nEXPORT FAILS: `{msg}`\n")
                    continue
                union.update(constant_ops(g))
                parts.append(section_model(f"{name} - opset {opset}", g, base))
        g = export_legacy("gpt", tmp, 17, dynamic=False)
        parts.append("### gpt_static (no dynamic_axes)\n")
        parts.append(section_model("gpt_static - opset 17, differences from gpt opset 17", g,
                                   gpt17_base))
        g = (export_legacy("gpt", tmp, 17, training=False, do_constant_folding=True))
        union.update(constant_ops(g))
        parts.append("### gpt_eval (EVAL mode, do_constant_folding=True)\n")
        parts.append(section_model("gpt_eval - opset 17", g))
        if with_dynamo:
            parts.append("### gpt, dynamo=True exporter (not used by Varuna)\n")
            for optimize in (True, False):
                try:
                    g = export_dynamo(tmp, optimize)
                except Exception as e:  # noqa: BLE001
                    parts.append(f"dynamo export (optimize={optimize}) FAILS: `{e}`\n")
                    continue
                inits = [t.name for t in g.m.graph.initializer]
                parts.append(
                    f"#### dynamo=True, optimize={optimize}\n\n"
                    f"opset_import {[(o.domain or 'ai.onnx', o.version) for o in g.m.opset_import]}, "
                    f"ir_version {g.m.ir_version}, {len(g.m.graph.node)} nodes, "
                    f"{len(inits)} initializers, {len(g.m.functions)} functions\n\n"
                    f"- ops: {fmt_counter(constant_ops(g))}\n"
                    f"- initializers: {', '.join(inits)}\n")
    head = ["## Op-type union (legacy exporter: all zoo models x opsets 13/17/21 + gpt_eval)", "",
            ", ".join(sorted(union)), ""]
    return "\n".join(head + parts)


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.dirname(HERE), "OPS.md"))
    ap.add_argument("--no-dynamo", action="store_true")
    args = ap.parse_args(argv)
    body = generate(not args.no_dynamo)
    text = open(args.out).read() if os.path.exists(args.out) else f"{BEGIN}\n{END}\n"
    if BEGIN not in text or END not in text:
        text = text.rstrip() + f"\n\n{BEGIN}\n{END}\n"
    pre, rest = text.split(BEGIN, 1)
    _, post = rest.split(END, 1)
    header = (f"<!-- generated by python/tools/ops_report.py with torch {torch.__version__}, "
              f"onnx {onnx.__version__}; do not edit by hand -->\n\n")
    with open(args.out, "w") as fh:
        fh.write(pre + BEGIN + "\n" + header + body + "\n" + END + post)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
