"""Write the zoo's exported test models for the C++ importer tests.

    python3 -m varuna.testmodels OUTDIR [--only NAME ...] [--seed N] [--list]

For every zoo model NAME (see ``varuna.models.names()``) this writes

* ``NAME.onnx``          legacy-exporter training graph (opset 17, dynamic batch)
* ``NAME.inputs.npz``    the example inputs (batch 2), keyed by input name
* ``NAME.expected.json`` the PyTorch loss on those inputs (+ input names/shapes)

* ``NAME.inputs/``        the same inputs, one ``<input name>.npy`` each (what
                         varuna-eval and the runtime's data loader read)
* ``NAME.inputs_b3/``     inputs of batch size 3, one ``.npy`` each, and
  ``NAME.expected_b3.json`` the PyTorch loss on them (a graph must work for
                         any batch size, not just the exported one)

and ``NAME.pt`` (TorchScript) for gpt and resnet. Variants of gpt for the
importer's error/edge tests (each with its own ``.expected.json`` pointing at
``gpt.inputs.npz``):

* ``gpt_static.onnx``    no dynamic_axes: batch size 2 baked into the shapes
* ``gpt_eval.onnx``      EVAL mode + constant folding (torch defaults):
                         equal-valued initializers de-duplicated, Identity nodes
* ``gpt_external.onnx``  forced external data: ``gpt_external.onnx.data``
* ``gpt_opset13.onnx``, ``gpt_opset21.onnx``  opset range

Output is deterministic for a given seed; files whose bytes did not change are
left untouched (stable mtimes), so re-running is cheap and idempotent.
"""

from __future__ import annotations

import argparse
import copy
import io
import json
import os
import sys
import tempfile
import time
import warnings
import zipfile
from typing import Callable, Dict, List

import numpy as np
import torch

from .export import _export_onnx, export
from . import models

TORCHSCRIPT_MODELS = ("gpt", "resnet")

# variant name -> (base model, extra keyword arguments for _export_onnx, description)
VARIANTS: Dict[str, tuple] = {
    "gpt_static": ("gpt", dict(dynamic=False), "no dynamic_axes: batch size baked in"),
    "gpt_eval": ("gpt", dict(training=False, do_constant_folding=True,
                              extra_metadata={"varuna.training": "0"}),
                 "EVAL mode with constant folding (torch.onnx defaults)"),
    "gpt_external": ("gpt", dict(external_data=True), "forced external data"),
    "gpt_opset13": ("gpt", dict(opset=13), "opset 13"),
    "gpt_opset21": ("gpt", dict(opset=21), "opset 21"),
}


def all_names() -> List[str]:
    return models.names() + list(VARIANTS)


def _write_npz(path: str, arrays: Dict[str, np.ndarray]) -> None:
    """np.savez-compatible archive with fixed timestamps (byte-deterministic)."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED) as zf:
        for key, arr in arrays.items():
            buf = io.BytesIO()
            np.lib.format.write_array(buf, np.ascontiguousarray(arr), allow_pickle=False)
            info = zipfile.ZipInfo(key + ".npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = 0o644 << 16
            zf.writestr(info, buf.getvalue())


def _write_npy_dir(tmp: str, dirname: str, arrays: Dict[str, np.ndarray]) -> List[str]:
    """One ``<key>.npy`` per array in ``tmp/dirname``; returns the relative paths."""
    os.makedirs(os.path.join(tmp, dirname), exist_ok=True)
    files = []
    for key, arr in arrays.items():
        rel = os.path.join(dirname, key + ".npy")
        with open(os.path.join(tmp, rel), "wb") as fh:
            np.lib.format.write_array(fh, np.ascontiguousarray(arr), allow_pickle=False)
        files.append(rel)
    return files


def _write_json(path: str, obj) -> None:
    with open(path, "w") as fh:
        json.dump(obj, fh, indent=1, sort_keys=True)
        fh.write("\n")


def _expected(name: str, base: str, seed: int, loss: float, inputs, input_names,
              files: List[str], description: str = "") -> dict:
    cfg = models.config(base)
    return {
        "model": base,
        "variant": name,
        "description": description,
        "seed": seed,
        "config": {k: (list(v) if isinstance(v, tuple) else v) for k, v in vars(cfg).items()},
        "loss": loss,
        "loss_hex": float(loss).hex(),
        "inputs_file": f"{base}.inputs.npz",
        "inputs": [{"name": n, "shape": list(t.shape), "dtype": str(t.dtype).replace("torch.", "")}
                   for n, t in zip(input_names, inputs)],
        "files": files,
        "torch": torch.__version__,
    }


def _generate(name: str, seed: int, tmp: str) -> List[str]:
    """Write the files for ``name`` into ``tmp``; return their basenames."""
    if name in VARIANTS:
        base, kwargs, description = VARIANTS[name]
    else:
        base, kwargs, description = name, None, f"zoo model {name}"
    model, inputs, input_names = models.make(base, seed=seed)
    # Batch 3 runs on a copy: the batch-2 forward must see (and the export
    # must write) exactly the state it always did (batch-norm running stats).
    model_b3 = copy.deepcopy(model)
    with torch.random.fork_rng(devices=[]), torch.no_grad():
        loss = float(model(*inputs))
    inputs_b3 = models.example_inputs(base, batch=3, seed=seed)
    with torch.random.fork_rng(devices=[]), torch.no_grad():
        loss_b3 = float(model_b3(*inputs_b3))
    files = []
    onnx_path = os.path.join(tmp, f"{name}.onnx")
    if kwargs is None:
        export(model, inputs, onnx_path, input_names=input_names)
    else:
        kw = dict(input_names=input_names, loss_name="loss", opset=17, batch_dim=0,
                  external_data=False)
        kw.update(kwargs)
        with warnings.catch_warnings():
            # opset 21 > the legacy exporter's documented maximum (20); it works.
            warnings.filterwarnings("ignore", message=r"Exporting to ONNX opset version")
            _export_onnx(model, inputs, onnx_path, **kw)
    files.append(f"{name}.onnx")
    if os.path.exists(onnx_path + ".data"):
        files.append(f"{name}.onnx.data")
    if kwargs is None:
        if name in TORCHSCRIPT_MODELS:
            export(model, inputs, os.path.join(tmp, f"{name}.pt"),
                               input_names=input_names)
            files.append(f"{name}.pt")
        _write_npz(os.path.join(tmp, f"{name}.inputs.npz"),
                   {n: t.numpy() for n, t in zip(input_names, inputs)})
        files.append(f"{name}.inputs.npz")
    _write_json(os.path.join(tmp, f"{name}.expected.json"),
                _expected(name, base, seed, loss, inputs, input_names,
                          files + [f"{name}.expected.json"], description))
    files.append(f"{name}.expected.json")
    # Per-input .npy directories (batch 2 and batch 3) for varuna-eval.
    files += _write_npy_dir(tmp, f"{name}.inputs",
                            {n: t.numpy() for n, t in zip(input_names, inputs)})
    b3_files = _write_npy_dir(tmp, f"{name}.inputs_b3",
                              {n: t.numpy() for n, t in zip(input_names, inputs_b3)})
    expected_b3 = _expected(name, base, seed, loss_b3, inputs_b3, input_names,
                            b3_files + [f"{name}.expected_b3.json"],
                            description + " (batch size 3)")
    expected_b3["inputs_file"] = f"{name}.inputs_b3"
    _write_json(os.path.join(tmp, f"{name}.expected_b3.json"), expected_b3)
    files += b3_files + [f"{name}.expected_b3.json"]
    return files


def _same(a: str, b: str) -> bool:
    if not os.path.exists(b) or os.path.getsize(a) != os.path.getsize(b):
        return False
    with open(a, "rb") as fa, open(b, "rb") as fb:
        while True:
            x, y = fa.read(1 << 20), fb.read(1 << 20)
            if x != y:
                return False
            if not x:
                return True


def generate(outdir: str, only: List[str] | None = None, seed: int = 0,
             log: Callable[[str], None] | None = None) -> List[str]:
    """Generate the test models into ``outdir``; return the paths written or kept."""
    names = list(only) if only else all_names()
    unknown = [n for n in names if n not in all_names()]
    if unknown:
        raise ValueError(f"unknown test model(s) {unknown}; known: {all_names()}")
    os.makedirs(outdir, exist_ok=True)
    out = []
    with tempfile.TemporaryDirectory(prefix=".testmodels-", dir=outdir) as tmp:
        for name in names:
            t0 = time.perf_counter()
            files = _generate(name, seed, tmp)
            changed = 0
            for f in files:
                src, dst = os.path.join(tmp, f), os.path.join(outdir, f)
                os.makedirs(os.path.dirname(dst), exist_ok=True)
                if not _same(src, dst):
                    os.replace(src, dst)
                    changed += 1
                out.append(dst)
            if log:
                log(f"{name:14s} {len(files)} files ({changed} changed) "
                    f"{time.perf_counter() - t0:.2f}s")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m varuna.testmodels",
                                 description="Export the Varuna test model zoo.")
    ap.add_argument("outdir", nargs="?", help="output directory")
    ap.add_argument("--only", nargs="+", metavar="NAME",
                    help="only these models/variants (default: all)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--list", action="store_true", help="list the model names and exit")
    ap.add_argument("-q", "--quiet", action="store_true")
    args = ap.parse_args(argv)
    if args.list:
        print("\n".join(all_names()))
        return 0
    if not args.outdir:
        ap.error("OUTDIR is required")
    try:
        generate(args.outdir, args.only, args.seed,
                 log=None if args.quiet else (lambda s: print(s, flush=True)))
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
