"""Export a PyTorch training model (forward + loss) for the Varuna compiler.

``export(model, example_inputs, path)`` writes either

* an ONNX model (``.onnx``), produced by PyTorch's *legacy* TorchScript-based
  exporter in training mode without constant folding, so parameters keep their
  module names as initializers (``wte.weight``, ``h.0.attn.c_attn.bias``...),
  tied parameters appear once, and the batch axis of every input is dynamic;
  Varuna metadata is stored in ``metadata_props``; or
* a TorchScript module (``.pt``) traced with ``torch.jit.trace``, with a
  ``varuna.json`` extra file describing the inputs, loss and parameters.

The model's ``forward(*example_inputs)`` must return the scalar loss (or a
tuple whose first element is the loss).

The model is exported in training mode; a submodule the user put in eval
mode inside a model in training mode (``model.train(); model.bn.eval()``: a
frozen batch norm, a dropout turned off) is exported in eval mode, as PyTorch
trains it.

Exporting runs the model (tracing); any buffer it mutates in place (e.g.
BatchNorm running statistics) is restored afterwards, and the exported file
holds the buffer values from *before* the call. The global RNG state is not
advanced by ``export``.
"""

from __future__ import annotations

import contextlib
import inspect
import json
from numbers import Integral
import os
import re
import tempfile
import warnings
from collections.abc import Mapping
from typing import Dict, List, Optional, Sequence, Tuple

import torch

__all__ = ["export", "EXTERNAL_DATA_THRESHOLD", "PROTOBUF_LIMIT", "ONNX_OPSETS"]

#: ``external_data=None`` switches to external data above this many bytes of
#: parameters and buffers.
EXTERNAL_DATA_THRESHOLD = 1 << 30
#: Hard protobuf limit for a single serialized ModelProto.
PROTOBUF_LIMIT = (1 << 31) - 1
#: Byte alignment of each tensor inside ``<model>.onnx.data``.
EXTERNAL_ALIGNMENT = 64

_FORMATS = ("onnx", "torchscript")

#: The ONNX opsets varuna-compile imports, first and last (inclusive): it
#: refuses a file of any other (lib/Import/ONNX/ONNXModelFile.cpp).
ONNX_OPSETS = (13, 21)

#: The suffixes varuna-compile reads as each format, compared as they are
#: (case-sensitively: "m.PT" is "unknown model format '.PT'"); the first is
#: the one to suggest. TorchScript's are those every varuna tool reads
#: (varuna-compile also takes .zip, varuna-eval and varuna-opt do not).
_SUFFIXES = {"onnx": (".onnx",), "torchscript": (".pt", ".pth")}

#: The element types varuna-run reads model inputs in (the .npy dtypes of
#: lib/Target/ATen/ReferenceTrainer.cpp's dtypeOf); it refuses any other.
_RUN_INPUT_DTYPES = (torch.float32, torch.float64, torch.float16, torch.int64, torch.int32,
                     torch.int8, torch.uint8, torch.bool)


def _exporter_id() -> str:
    return f"varuna.export torch {torch.__version__}"


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


# ---------------------------------------------------------------------------
# argument validation
# ---------------------------------------------------------------------------

def _check_path(path) -> str:
    """`path` as a str, refused (ValueError) where no file can be written:
    checked before the model runs, so that a typo costs no export and
    leaves nothing behind."""
    if isinstance(path, (bytes, bytearray)) or (
            isinstance(path, os.PathLike) and not isinstance(os.fspath(path), str)):
        raise ValueError(f"path must be a str or a pathlib.Path, got bytes ({path!r}); "
                         "decode it first")
    if not isinstance(path, (str, os.PathLike)):
        raise ValueError(f"path must be a str or a pathlib.Path, got {type(path).__name__}")
    path = os.fspath(path)
    if not path:
        raise ValueError("path is empty: give the file to write (model.onnx or model.pt)")
    if path.endswith(os.sep) or (os.altsep and path.endswith(os.altsep)) or os.path.isdir(path):
        raise ValueError(f"path {path!r} is a directory: give the file to write inside it "
                         f"(e.g. {os.path.join(path, 'model.onnx')!r})")
    # The nearest existing ancestor must be a directory: os.makedirs creates
    # the missing ones below it, but cannot where a regular file is in the way.
    parent = os.path.dirname(os.path.abspath(path))
    while not os.path.exists(parent):
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent):
        raise ValueError(f"cannot write {path!r}: {parent!r} is a file, not a directory")
    return path


def _suffix(path: str) -> str:
    """The suffix as varuna-compile takes it (llvm::sys::path::extension:
    from the last dot of the file name, ".pt" for a file named ".pt")."""
    name = os.path.basename(path)
    dot = name.rfind(".")
    return name[dot:] if dot >= 0 and name not in (".", "..") else ""


def _resolve_format(path: str, format: Optional[str]) -> str:
    """The format to write, which varuna-compile must read `path`'s suffix
    as: it picks the importer by the suffix alone, so a TorchScript file
    named .onnx (or a file without a suffix) would be refused or misread."""
    suffix = _suffix(path)
    if format is None:
        for fmt, suffixes in _SUFFIXES.items():
            if suffix in suffixes:
                return fmt
        fmt = None
    else:
        fmt = str(format).lower()
        if fmt == "ts":
            fmt = "torchscript"
        if fmt not in _FORMATS:
            raise ValueError(f"unknown export format {format!r}; expected one of "
                             f"{list(_FORMATS)} (or None to infer it from the path suffix: "
                             ".onnx or .pt)")
        if suffix in _SUFFIXES[fmt]:
            return fmt
    said = (f"format={format!r} writes {'ONNX' if fmt == 'onnx' else 'TorchScript'}, "
            if fmt else "")
    # "m.PT": the suffix varuna-compile would take, but for its case.
    case = [f for f, sfx in _SUFFIXES.items() if suffix.lower() in sfx and suffix not in sfx]
    wanted = fmt or (case[0] if case else None)
    need = (f"name it {' or '.join(_SUFFIXES[wanted])}" if wanted
            else "name it .onnx (ONNX) or .pt (TorchScript)")
    read_as = [f for f, sfx in _SUFFIXES.items() if suffix in sfx]
    if case:
        why = f"varuna-compile reads suffixes case-sensitively and does not know {suffix!r}"
    elif read_as:
        why = (f"varuna-compile would read its suffix {suffix!r} as "
               f"{'ONNX' if read_as[0] == 'onnx' else 'TorchScript'}")
    elif suffix:
        why = f"varuna-compile does not read the suffix {suffix!r}"
    else:
        why = "it has no suffix, by which varuna-compile picks the importer"
    raise ValueError(f"path {path!r}: {said + 'but ' if said else ''}{why}; {need}")


def _normalize_inputs(example_inputs) -> Tuple[torch.Tensor, ...]:
    if isinstance(example_inputs, torch.Tensor):
        example_inputs = (example_inputs,)
    if not isinstance(example_inputs, (tuple, list)):
        raise ValueError("example_inputs must be a tuple of tensors, got "
                         f"{type(example_inputs).__name__}")
    if len(example_inputs) == 0:
        raise ValueError("example_inputs is empty: forward needs at least one input tensor")
    for i, t in enumerate(example_inputs):
        if not isinstance(t, torch.Tensor):
            raise ValueError(f"example_inputs[{i}] is a {type(t).__name__}, not a torch.Tensor; "
                             "every example input must be a tensor")
    return tuple(example_inputs)


class _Adapted(torch.nn.Module):
    """`model` called as the file's graph is: with its inputs positional,
    returning the loss tensor. A dict of example inputs becomes keyword
    arguments (`names`, in the dict's order: a Hugging Face model called
    as model(**batch)); a dict-like output (a Hugging Face ModelOutput)
    gives its "loss". Shares the model's parameters, buffers and
    submodules (not the model itself as a submodule), so every name stays
    as it is in the model."""

    def __init__(self, model: torch.nn.Module, names: Optional[Sequence[str]]):
        super().__init__()
        self._model = [model]  # a list: not registered as a submodule
        self._parameters = model._parameters
        self._buffers = model._buffers
        self._modules = model._modules
        self._names = list(names) if names is not None else None
        self.training = model.training  # its modules' modes are the model's

    def train(self, mode: bool = True):
        super().train(mode)
        self._model[0].training = mode  # the shared submodules are set above
        return self

    def forward(self, *args):
        model = self._model[0]
        out = model(**dict(zip(self._names, args))) if self._names is not None else model(*args)
        return _loss_output(out)


class _ExportError(ValueError):
    """varuna.export's own error raised while the model runs (told apart
    from the model's own exceptions, which say the example inputs do not
    fit the forward)."""


def _loss_output(out):
    """A dict-like output's "loss" (a ModelOutput's, which is also a
    Mapping), else the output as it is."""
    if isinstance(out, Mapping):
        if not isinstance(out.get("loss"), torch.Tensor):
            raise _ExportError("model.forward returned a mapping without a 'loss' tensor (keys: "
                             f"{list(out.keys())}); pass the labels so that it computes the "
                             "loss, or return the loss")
        return out["loss"]
    return out


def _default_input_names(model: torch.nn.Module, n: int) -> List[str]:
    try:
        sig = inspect.signature(model.forward)
    except (TypeError, ValueError) as e:
        raise ValueError("cannot read the forward signature to name the inputs; "
                         "pass input_names=[...]") from e
    names = []
    for p in sig.parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            break
        if p.kind == p.KEYWORD_ONLY:
            break
        names.append(p.name)
    if len(names) < n:
        raise ValueError(f"forward{sig} names {len(names)} positional parameter(s) but "
                         f"{n} example input(s) were given; pass input_names=[...] explicitly")
    return names[:n]


def _check_names(input_names: Sequence[str], inputs, loss_name: str) -> List[str]:
    if isinstance(input_names, str):
        raise ValueError("input_names must be a list of strings, not a single string")
    names = list(input_names)
    if len(names) != len(inputs):
        raise ValueError(f"input_names has {len(names)} name(s) {names} but there are "
                         f"{len(inputs)} example input(s)")
    for nm in names:
        if not isinstance(nm, str) or not nm:
            raise ValueError(f"input names must be non-empty strings, got {nm!r}")
    dup = sorted({nm for nm in names if names.count(nm) > 1})
    if dup:
        raise ValueError(f"duplicate input name(s) {dup}")
    if not isinstance(loss_name, str) or not loss_name:
        raise ValueError(f"loss_name must be a non-empty string, got {loss_name!r}")
    if loss_name in names:
        raise ValueError(f"loss_name {loss_name!r} collides with an input name")
    return names


def _check_batch(inputs, names, batch_dim) -> int:
    if not isinstance(batch_dim, int) or isinstance(batch_dim, bool) or batch_dim < 0:
        raise ValueError(f"batch_dim must be a non-negative int, got {batch_dim!r}")
    sizes = {}
    for nm, t in zip(names, inputs):
        if t.dim() <= batch_dim:
            raise ValueError(f"example input {nm!r} has shape {list(t.shape)} ({t.dim()} dims), "
                             f"fewer than batch_dim={batch_dim} needs ({batch_dim + 1} dims): "
                             "every input must have a batch axis")
        sizes[nm] = int(t.shape[batch_dim])
    if len(set(sizes.values())) != 1:
        raise ValueError(f"example inputs disagree on the batch size along dim {batch_dim}: "
                         f"{sizes}")
    b = next(iter(sizes.values()))
    if b == 0:
        raise ValueError(f"the example batch is empty (size 0 along batch_dim={batch_dim}): "
                         "the forward must run on real examples to be traced; export with a "
                         "batch of 2 or more")
    if b == 1:
        warnings.warn("example batch size is 1: the tracer may specialise size-1 batch axes; "
                      "export with a batch of 2 or more", UserWarning, stacklevel=3)
    return b


def _check_state_names(model: torch.nn.Module, names: Sequence[str], loss_name: str,
                       from_dict: bool) -> None:
    """Refuses an input or loss name that is also a parameter's or buffer's:
    torch's ONNX exporter keeps graph inputs, outputs and initializers in one
    namespace and renames the initializer ("l1.weight" becomes
    "l1.weight.1"), so the trained weights no longer carry the model's name
    and its checkpoints do not load into it. TorchScript would not clash,
    but a file that exports in one format only is a trap: refused in both."""
    state = {n: "parameter" for n, _ in model.named_parameters(remove_duplicate=False)}
    for n, _ in model.named_buffers(remove_duplicate=False):
        state.setdefault(n, "buffer")
    for nm in names:
        if nm in state:
            how = ("rename forward's argument (a dict of example inputs names the inputs by "
                   "its keys)" if from_dict else "pass other input_names")
            raise ValueError(f"input name {nm!r} is also the name of a {state[nm]} of the "
                             f"model: the exported file would rename the {state[nm]} (to "
                             f"'{nm}.1'), and checkpoints would not load into the model; "
                             f"{how}")
    if loss_name in state:
        raise ValueError(f"loss_name {loss_name!r} is also the name of a {state[loss_name]} "
                         f"of the model: the exported file would rename the "
                         f"{state[loss_name]} (to '{loss_name}.1'), and checkpoints would "
                         "not load into the model; pass another loss_name")


def _check_input_dtypes(inputs, names) -> None:
    """Refuses an input whose element type varuna-run cannot read (its data
    are .npy files, which have no bfloat16): the file would export and
    compile, then never train."""
    accepted = ", ".join(_dtype_name(d) for d in _RUN_INPUT_DTYPES)
    for nm, t in zip(names, inputs):
        if t.dtype in _RUN_INPUT_DTYPES:
            continue
        x = nm if nm.isidentifier() else "x"
        if t.dtype.is_floating_point:
            hint = (f"pass it as float32 and cast it inside forward ({x}.to(torch."
                    f"{_dtype_name(t.dtype)}))")
        elif t.dtype.is_complex:
            hint = ("pass its real and imaginary parts as float32 inputs and build it "
                    "inside forward (torch.complex(re, im))")
        else:
            hint = (f"pass it as int64 (or int32) and cast it inside forward "
                    f"({x}.to(torch.{_dtype_name(t.dtype)}))")
        raise ValueError(f"example input {nm!r} is {_dtype_name(t.dtype)}, which varuna-run "
                         f"does not read inputs in (it reads {accepted}); {hint}")


def _autocast_on(device: str) -> bool:
    """Whether torch.autocast is on for `device` ("cpu" or "cuda") now."""
    try:
        return torch.is_autocast_enabled(device)
    except (TypeError, RuntimeError):  # an older torch: CUDA only, no argument
        return device == "cuda" and torch.is_autocast_enabled()


def _autocast_enabled() -> bool:
    """Whether torch.autocast is on for the CPU or CUDA now."""
    return any(_autocast_on(d) for d in ("cpu", "cuda"))


class _GradientWatch(torch.overrides.TorchFunctionMode):
    """Records where the forward cuts gradients in a way an exported graph
    does not keep: ``detach()`` of a value that needs gradients (torch's ONNX
    exporter drops it; TorchScript keeps it), computing under
    ``torch.no_grad()`` from such values, and reading their ``.data`` (the
    tracer keeps neither: the first is recorded as ordinary ops, the second
    as a constant). Also where the forward turns ``torch.autocast`` on: the
    tracer records the ops, not autocast's casts."""

    def __init__(self):
        super().__init__()
        self.detach, self.no_grad, self.data, self.hooks = [], [], [], []
        self.autocast, self.autograd = [], []
        self._autocast_before = _autocast_enabled()

    @staticmethod
    def _site():
        import traceback
        frames = [f for f in traceback.extract_stack()[:-2]
                  if os.sep + "torch" + os.sep not in f.filename
                  and os.path.abspath(f.filename) != os.path.abspath(__file__)]
        return f"{frames[-1].filename}:{frames[-1].lineno}" if frames else "?"

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        tensors = [a for a in list(args) + list(kwargs.values())
                   if isinstance(a, torch.Tensor)]
        needs_grad = any(t.requires_grad for t in tensors)
        if func is torch.Tensor.register_hook:
            self.hooks.append(self._site())
        if func in (torch.autograd.grad, torch.autograd.backward, torch.Tensor.backward):
            self.autograd.append(self._site())
        if not self.autocast and not self._autocast_before and _autocast_enabled():
            self.autocast.append(self._site())
        if needs_grad:
            if func in (torch.Tensor.detach, torch.detach, torch.Tensor.detach_):
                self.detach.append(self._site())
            elif func == torch.Tensor.data.__get__:
                self.data.append(self._site())
            elif (not torch.is_grad_enabled() and func is not torch.Tensor.view_as
                  and not self._in_function_forward()):
                # (view_as: autograd.Function.apply's C++ part views the
                # inputs a Function returns as they are, without gradients.)
                self.no_grad.append(self._site())
        return func(*args, **kwargs)

    @staticmethod
    def _in_function_forward():
        """Whether a custom autograd.Function's forward (which runs without
        gradients; _check_custom_functions judges it) is on the stack."""
        frame = inspect.currentframe()
        while frame is not None:
            if frame.f_code.co_name == "forward" and isinstance(
                    frame.f_locals.get("ctx"), torch.autograd.function.FunctionCtx):
                return True
            frame = frame.f_back
        return False


def _gradient_cut_warnings(watch, fmt, model=None):
    """What an export in `fmt` would lose (see _GradientWatch), and the
    gradient hooks of `model`'s parameters and modules."""
    out = []
    hooked = []
    if model is not None:
        hooked = [f"parameter '{n}'" for n, p in model.named_parameters()
                  if getattr(p, "_backward_hooks", None)]
        hooked += [f"module '{n or type(m).__name__}'" for n, m in model.named_modules()
                   if getattr(m, "_backward_hooks", None)
                   or getattr(m, "_backward_pre_hooks", None)]
    if watch.hooks:
        hooked.append(f"a tensor of the forward (first at {watch.hooks[0]})")
    if hooked:
        out.append(
            f"gradient hooks are registered on {', '.join(hooked[:4])}"
            f"{', ...' if len(hooked) > 4 else ''}: the exported graph does not keep them, so "
            "where a hook changes the gradient (clipping, scaling) varuna trains with the "
            "unchanged one; use the training config's clip_grad_norm, or write the change "
            "into the forward")
    if watch.autocast:
        out.append(
            f"the forward runs ops under torch.autocast (first at {watch.autocast[0]}): "
            "the exported graph does not keep autocast's casts, so varuna computes them in "
            "float32 (results differ from PyTorch's by the low precision's rounding); for "
            "mixed precision set the training config's \"precision\": \"bf16\" or \"fp16\"")
    if watch.no_grad:
        out.append(
            f"the forward computes under torch.no_grad() from values that need gradients "
            f"(first at {watch.no_grad[0]}): the exported graph does not keep no_grad, so "
            "training it would send gradients (and parameter updates) where PyTorch does "
            "not; apply .detach() to the result instead")
    if watch.data:
        out.append(
            f"the forward reads .data of a value that needs gradients (first at "
            f"{watch.data[0]}): the tracer records it as a constant (of the exported "
            "weights, or of the example batch), which training never updates; "
            "use .detach() instead")
    if watch.detach and fmt == "onnx":
        out.append(
            f"the model detaches a value that needs gradients ({len(watch.detach)} "
            f"time(s), first at {watch.detach[0]}): torch's ONNX exporter drops detach, so "
            "training the ONNX file would send gradients where PyTorch stops them; export "
            "to TorchScript (a .pt path or format='torchscript'), which keeps it")
    return out


def _backward_hook_function():
    try:
        from torch.nn.modules._functions import BackwardHookFunction
        return BackwardHookFunction
    except ImportError:
        return None


def _custom_functions(loss: torch.Tensor) -> List[str]:
    """The custom autograd.Functions on the loss's autograd graph (each
    once, by qualified name); torch's BackwardHookFunction, which runs module
    backward hooks (warned about as hooks), excepted."""
    from torch.autograd.function import BackwardCFunction
    names, seen, stack = [], set(), [loss.grad_fn]
    while stack:
        fn = stack.pop()
        if fn is None or id(fn) in seen:
            continue
        seen.add(id(fn))
        if isinstance(fn, BackwardCFunction):
            cls = getattr(fn, "_forward_cls", None)
            if cls is not None and cls is not _backward_hook_function():
                name = f"{cls.__module__}.{cls.__qualname__}"
                if name not in names:
                    names.append(name)
        stack.extend(f for f, _ in fn.next_functions)
    return names


class _ForwardCtx:
    """A ctx for calling a Function's forward directly, outside apply."""
    needs_input_grad = ()

    def save_for_backward(self, *tensors):
        self.saved_tensors = tensors

    def mark_dirty(self, *args):
        pass

    def mark_non_differentiable(self, *args):
        pass

    def set_materialize_grads(self, value):
        pass


@contextlib.contextmanager
def _inlined_functions():
    """Every custom autograd.Function runs its forward's ops under autograd
    instead of its own backward: what torch's ONNX exporter keeps."""
    base = torch.autograd.Function.__dict__["apply"]
    plain_setup = inspect.getattr_static(torch.autograd.Function, "setup_context")

    def apply(cls, *args, **kwargs):
        if inspect.getattr_static(cls, "setup_context") is not plain_setup:
            return cls.forward(*args, **kwargs)  # forward without ctx
        return cls.forward(_ForwardCtx(), *args, **kwargs)

    torch.autograd.Function.apply = classmethod(apply)
    try:
        yield
    finally:
        torch.autograd.Function.apply = base


def _loss_of(out):
    """The loss of a forward's result: itself, or the first of a tuple."""
    return out[0] if isinstance(out, (tuple, list)) and len(out) > 0 else out


def _custom_gradient_mismatch(model, inputs) -> Optional[str]:
    """None when the parameters' gradients through the custom Functions'
    forward ops equal those through their own backwards (e.g. a GeLU written
    as a Function for speed); else what differs, or why it cannot be told."""
    params = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    if not params:
        return None
    with _preserved_state(model, True), torch.enable_grad():
        rng = torch.get_rng_state()
        want = torch.autograd.grad(_loss_of(model(*inputs)), [p for _, p in params],
                                   allow_unused=True)
        torch.set_rng_state(rng)
        try:
            with _inlined_functions():
                got = torch.autograd.grad(_loss_of(model(*inputs)), [p for _, p in params],
                                          allow_unused=True)
        except Exception as e:  # noqa: BLE001 - any failure means "cannot export"
            return f"its forward does not run outside apply ({type(e).__name__}: {e})"
    for (name, _), a, b in zip(params, got, want):
        a = torch.zeros(()) if a is None else a.detach().double()
        b = torch.zeros(()) if b is None else b.detach().double()
        diff, scale = float((a - b).norm()), float(b.norm())
        if diff > 1e-3 * scale + 1e-12:
            return (f"the gradient of '{name}' through its forward ops differs from its "
                    f"backward's by {diff / max(scale, 1e-30):.2g} (relative)")
    return None


def _check_custom_functions(model, inputs, out, fmt) -> None:
    custom = _custom_functions(_loss_of(out))
    if not custom:
        return
    what = f"the model calls the custom autograd.Function {', '.join(custom)}"
    hint = ("Write the custom gradient with ops, e.g. a gradient reversal as x * -alpha + "
            "(x * (1 + alpha)).detach() (value x, gradient -alpha; TorchScript keeps detach)")
    if fmt == "torchscript":
        raise ValueError(f"{what}: its backward is Python code, which a TorchScript file "
                         f"cannot hold. {hint}, or export to ONNX, whose exporter keeps the "
                         "forward's ops (correct when the backward is their derivative)")
    mismatch = _custom_gradient_mismatch(model, inputs)
    if mismatch:
        raise ValueError(f"{what}: its backward is Python code, which an ONNX file cannot "
                         "hold; torch's exporter keeps the forward's ops, whose gradient is "
                         f"not the backward's here: {mismatch}. {hint}")


def _check_loss(out) -> None:
    loss = _loss_of(out)
    if not isinstance(loss, torch.Tensor):
        raise ValueError("model.forward must return the scalar loss tensor (or a tuple whose "
                         f"first element is the loss); got {type(loss).__name__}")
    if loss.dim() != 0 or not loss.is_floating_point():
        raise ValueError("model.forward must return a scalar floating-point loss (or a tuple "
                         "whose first element is the loss); got a tensor of shape "
                         f"{list(loss.shape)} and dtype {_dtype_name(loss.dtype)}"
                         + (" - reduce it (e.g. .mean()) inside forward" if loss.dim() else ""))


# ---------------------------------------------------------------------------
# model state handling
# ---------------------------------------------------------------------------

@contextlib.contextmanager
def _preserved_state(model: torch.nn.Module, training: bool):
    """Run with the model in train/eval mode, RNG forked, and buffers restored."""
    snapshot = {n: b.detach().clone() for n, b in model.named_buffers()}
    modes = [(m, m.training) for m in model.modules()]  # per module: modes may be mixed
    # Submodules the user put in eval mode inside a model in training mode (a
    # frozen batch norm, dropout turned off: fine-tuning) stay so in the
    # training graph, as PyTorch trains them.
    held = [m for m, mode in modes if not mode] if training and model.training else []
    with torch.random.fork_rng(devices=[]):
        model.train(training)
        for m in held:
            m.training = False
        try:
            yield snapshot
        finally:
            for m, mode in modes:
                m.training = mode
            with torch.no_grad():
                for n, b in model.named_buffers():
                    if n in snapshot and b.shape == snapshot[n].shape:
                        b.copy_(snapshot[n])


def _training_only_ops(model: torch.nn.Module, inputs) -> list:
    """What forward computes in training mode but not in model.eval() (or
    the other way round): both exporters record the training-mode graph,
    and Varuna's validation runs that graph with dropout off and batch
    norms on their running statistics -- a branch on self.training of the
    model's own (an auxiliary loss, noise) stays in it. Returns lines such
    as "aten::pow (x2 in training only)"; [] when none differ, or when no
    module of the model's own reads self.training in its forward (torch.nn's
    do, and their two modes are the ones Varuna runs). The check traces
    forward once in each mode."""
    def reads_training(m):
        code = getattr(type(m).forward, "__code__", None)
        return (code is not None and "training" in code.co_names
                and not type(m).__module__.startswith("torch."))
    if not any(reads_training(m) for m in model.modules()):
        return []
    from collections import Counter

    def kinds(training):
        with _preserved_state(model, training), torch.no_grad(), \
                warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                traced = torch.jit.trace(model, inputs, check_trace=False, strict=False)
            except Exception:  # the export itself will say what is wrong
                return None
        # (aten::add_: a batch norm's num_batches_tracked += 1, training's
        # only, which the runtime keeps as PyTorch does.)
        return Counter(n.kind() for n in traced.inlined_graph.nodes()
                       if not n.kind().startswith("prim::") and n.kind() != "aten::add_")
    train, evaluate = kinds(True), kinds(False)
    if train is None or evaluate is None or train == evaluate:
        return []
    out = []
    for kind in sorted(set(train) | set(evaluate)):
        d = train[kind] - evaluate[kind]
        if d:
            out.append(f"{kind} (x{abs(d)} in {'training' if d > 0 else 'eval'} only)")
    return out


def _check_norm_state(model: torch.nn.Module) -> None:
    """Refuses norms whose running statistics the exported graph would get
    wrong, naming the module: a batch norm with momentum=None (a cumulative
    average over its forward calls: both exporters record this call's
    factor, 1 / num_batches_tracked, as a constant -- the statistics became
    the last micro-batch's) and an instance norm that tracks running
    statistics (varuna keeps batch norms' only: they were dropped). Training
    itself would be right; eval and checkpoints would not."""
    from torch.nn.modules.batchnorm import _BatchNorm
    from torch.nn.modules.instancenorm import _InstanceNorm
    for name, m in model.named_modules():
        what = f"{name or 'the model'} ({type(m).__name__})"
        if model.training and not m.training:
            continue  # held in eval mode (_preserved_state): its statistics never move
        if isinstance(m, _BatchNorm) and m.track_running_stats and m.momentum is None:
            raise ValueError(
                f"{what} has momentum=None: a cumulative average of the batch statistics "
                "over its forward calls, whose factor (1 / num_batches_tracked) the export "
                "records as this call's constant, so its running statistics (eval, "
                "checkpoints) would be the last micro-batch's; training itself is "
                "unaffected. Give it a momentum (PyTorch's default is 0.1), or "
                "track_running_stats=False")
        if isinstance(m, _InstanceNorm) and m.track_running_stats:
            raise ValueError(
                f"{what} tracks running statistics (track_running_stats=True): varuna "
                "keeps batch norms' running statistics only, so these would be dropped "
                "and eval would use each example's own statistics; training itself is "
                "unaffected. Use track_running_stats=False (PyTorch's default for "
                "instance norms)")


def _param_sums(model: torch.nn.Module) -> Dict[str, Tuple[float, float]]:
    """Each parameter's sum and sum of magnitudes: what tells, cheaply (no
    copy of the weights), that forward changed one in place."""
    with torch.no_grad():
        return {n: (float(p.sum()), float(p.abs().sum()))
                for n, p in model.named_parameters() if p.is_floating_point()}


def _written_in_forward(model: torch.nn.Module, snapshot: Dict[str, torch.Tensor],
                        ids: Dict[str, int], sums) -> List[str]:
    """The buffers and parameters one forward changed in place, besides the
    running statistics of batch norms (which varuna keeps and updates as
    PyTorch does): `name (buffer)` / `name (parameter)`. An exported graph
    cannot carry such state from one step to the next (ONNX drops the
    write silently; the TorchScript importer refuses it), so training would
    differ from PyTorch after the first step. A buffer the forward replaced by
    another tensor (a cache grown on demand) is not counted."""
    kept = set()
    for prefix, m in model.named_modules():
        if isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
            for b in ("running_mean", "running_var", "num_batches_tracked"):
                kept.add(f"{prefix}.{b}" if prefix else b)
    out = []
    with torch.no_grad():
        for n, b in model.named_buffers():
            if n in kept or n not in snapshot or ids.get(n) != id(b):
                continue
            s = snapshot[n]
            same = b.shape == s.shape and bool(
                ((b == s) | (b.isnan() & s.isnan()) if b.is_floating_point()
                 else (b == s)).all())
            if not same:
                out.append(f"{n} (buffer)")
        after = _param_sums(model)
        for n, before in sums.items():
            a = after.get(n)
            if a is not None and a != before and not (
                    any(x != x for x in a) and any(x != x for x in before)):
                out.append(f"{n} (parameter)")
    return out


def _names(model: torch.nn.Module):
    """(trainable, frozen state): the parameters that require grad; the
    buffers and the parameters that do not (frozen: the importers keep them
    fixed, as the user's optimizer would never see a gradient for them)."""
    params = [n for n, p in model.named_parameters() if p.requires_grad]
    frozen = [n for n, p in model.named_parameters() if not p.requires_grad]
    buffers = frozen + [n for n, _ in model.named_buffers()]
    return params, buffers


def _embedding_padding(model: torch.nn.Module) -> Dict[str, int]:
    """{weight name: padding_idx} of every nn.Embedding with a padding_idx,
    under each name the weight has (a tied table is one tensor with several
    names): the ONNX graph keeps only the lookup (a Gather), so the importer
    learns from this that the padding row gets no gradient from it."""
    pads = {}
    for m in model.modules():
        if isinstance(m, torch.nn.Embedding) and m.padding_idx is not None:
            pads[id(m.weight)] = int(m.padding_idx) % m.num_embeddings
    out = {}
    for name, p in model.named_parameters(remove_duplicate=False):
        if id(p) in pads:
            out[name] = pads[id(p)]
    return out


def _state_bytes(model: torch.nn.Module) -> int:
    total = sum(p.numel() * p.element_size() for p in model.parameters())
    total += sum(b.numel() * b.element_size() for b in model.buffers())
    return total


# ---------------------------------------------------------------------------
# ONNX
# ---------------------------------------------------------------------------

def _quiet_torch_internals():
    """Silence tracer warnings raised inside torch's own library code (e.g. the
    shape checks of F.multi_head_attention_forward / F.batch_norm); warnings
    from the user's model code stay visible."""
    warnings.filterwarnings("ignore", category=torch.jit.TracerWarning, module=r"torch\.")


def _torch_onnx_export(model, inputs, f, *, input_names, output_names, opset, dynamic_axes,
                       training, do_constant_folding):
    with warnings.catch_warnings():
        _quiet_torch_internals()
        warnings.filterwarnings("ignore", category=DeprecationWarning)
        warnings.filterwarnings("ignore", category=FutureWarning, module=r"torch\.onnx")
        # BatchNorm's num_batches_tracked += 1 cannot be expressed in ONNX;
        # expected for training exports (the runtime owns buffer updates).
        warnings.filterwarnings("ignore", message=r"ONNX Preprocess - Removing mutation")
        # Embedding padding_idx: the graph loses it, the metadata keeps it
        # (varuna.embedding_padding) and the importer restores it.
        warnings.filterwarnings("ignore", message=r".*embedding with padding_idx")
        try:
            torch.onnx.export(model, inputs, f, dynamo=False, training=training,
                              do_constant_folding=do_constant_folding, opset_version=opset,
                              input_names=list(input_names), output_names=list(output_names),
                              dynamic_axes=dynamic_axes)
        except torch.onnx.errors.UnsupportedOperatorError as e:
            # quantile, kron, cummax, nanmean, rot90, linalg functions, ...:
            # varuna's TorchScript importer takes many that torch's ONNX
            # exporter does not.
            raise ValueError(f"{e}. Export to TorchScript instead (a .pt path or "
                             "format='torchscript'): varuna's TorchScript importer takes "
                             "many operators torch's ONNX exporter does not (quantile, kron, "
                             "cummax, nanmean, rot90, linear algebra, ...)") from e
        except OSError:
            raise  # writing the file failed, not the exporter: export() says so
        except Exception as e:  # noqa: BLE001 - the model ran; the exporter failed
            # (DistilBERT's question answering: ignore_index = a size read in
            # forward makes torch's exporter raise a TypeError.)
            first = str(e).strip().splitlines()[0] if str(e).strip() else ""
            raise ValueError(f"torch's ONNX exporter failed on this model "
                             f"({type(e).__name__}: {first}); the model itself ran. Export to "
                             "TorchScript instead (a .pt path or format='torchscript')") from e


def _set_tensor_bytes(t, raw: bytes) -> None:
    """Replace the payload of TensorProto ``t`` with little-endian ``raw`` bytes."""
    for field in ("float_data", "int32_data", "int64_data", "double_data", "uint64_data",
                  "string_data"):
        t.ClearField(field)
    t.ClearField("external_data")
    t.data_location = t.DEFAULT
    t.raw_data = raw


def _tensor_raw_bytes(t, base_dir: str) -> bytes:
    """The payload of an (inline or external) TensorProto as raw little-endian bytes."""
    import onnx.numpy_helper as nh
    if t.data_location == t.EXTERNAL:
        info = {e.key: e.value for e in t.external_data}
        with open(os.path.join(base_dir, info["location"]), "rb") as fh:
            fh.seek(int(info.get("offset", 0)))
            n = info.get("length")
            return fh.read(int(n)) if n is not None else fh.read()
    if t.HasField("raw_data"):
        return t.raw_data
    return nh.to_array(t).tobytes()


def _copy_tensor_to(t, base_dir: str, out, chunk: int = 64 << 20) -> int:
    """Stream tensor ``t`` (inline or external in ``base_dir``) into file ``out``."""
    if t.data_location == t.EXTERNAL:
        info = {e.key: e.value for e in t.external_data}
        remaining = int(info["length"]) if "length" in info else None
        with open(os.path.join(base_dir, info["location"]), "rb") as fh:
            fh.seek(int(info.get("offset", 0)))
            written = 0
            while remaining is None or remaining > 0:
                buf = fh.read(chunk if remaining is None else min(chunk, remaining))
                if not buf:
                    break
                out.write(buf)
                written += len(buf)
                if remaining is not None:
                    remaining -= len(buf)
            return written
    raw = _tensor_raw_bytes(t, base_dir)
    out.write(raw)
    return len(raw)


def _patch_buffers(proto, snapshot: Dict[str, torch.Tensor]) -> None:
    """Store the pre-export buffer values (tracing may have updated them)."""
    for t in proto.graph.initializer:
        b = snapshot.get(t.name)
        if b is None:
            continue
        b = b.detach().cpu().contiguous()
        if list(t.dims) != list(b.shape):
            continue
        raw = b.reshape(-1).view(torch.uint8).numpy().tobytes() if b.numel() else b""
        if t.data_location != t.EXTERNAL and t.HasField("raw_data") and t.raw_data == raw:
            continue
        _set_tensor_bytes(t, raw)


# torch dtypes of parameters -> onnx.TensorProto data types.
_ONNX_TYPES = {torch.float32: 1, torch.float16: 10, torch.float64: 11, torch.bfloat16: 16}


def _keep_unused_parameters(proto, model: torch.nn.Module, params) -> None:
    """Adds each trainable parameter that no node reads (the exporter drops
    it: a WaveNet's last residual projection, whose output the loss never
    uses) back as an initializer, so the job holds every parameter: varuna
    keeps it unchanged, as torch's optimizers skip a parameter without a
    gradient, and checkpoints and dumps have it, as with TorchScript."""
    have = {t.name for t in proto.graph.initializer}
    have.update(o for node in proto.graph.node for o in node.output)
    have.update(i.name for i in proto.graph.input)
    named = dict(model.named_parameters())
    for name in params:
        if name in have or name not in named:
            continue
        p = named[name].detach().cpu().contiguous()
        if p.dtype not in _ONNX_TYPES:
            continue
        t = proto.graph.initializer.add()
        t.name = name
        t.dims.extend(p.shape)
        t.data_type = _ONNX_TYPES[p.dtype]
        _set_tensor_bytes(t, p.reshape(-1).view(torch.uint8).numpy().tobytes() if p.numel()
                          else b"")


def _set_metadata(proto, entries: Dict[str, str]) -> None:
    keep = [p for p in proto.metadata_props if p.key not in entries]
    del proto.metadata_props[:]
    for p in keep:
        proto.metadata_props.add(key=p.key, value=p.value)
    for k, v in entries.items():
        proto.metadata_props.add(key=k, value=v)


def _write_onnx(proto, src_dir: str, path: str, external: bool) -> None:
    """Write ``proto`` (whose external tensors, if any, live in ``src_dir``) to ``path``.

    With ``external`` every initializer goes to ``<path>.data`` (one file,
    64-byte aligned offsets). Files are written under temporary names and
    renamed into place, data first."""
    import onnx
    data_path = path + ".data"
    location = os.path.basename(data_path)
    out_dir = os.path.dirname(os.path.abspath(path))
    tmp_model = os.path.join(out_dir, f".{os.path.basename(path)}.tmp{os.getpid()}")
    try:
        _write_onnx_files(proto, src_dir, path, external, tmp_model)
    except BaseException:
        # Nothing half-written left beside the user's files (a full disk, a
        # path that became a directory meanwhile).
        for tmp in (tmp_model, tmp_model + ".data"):
            with contextlib.suppress(OSError):
                os.remove(tmp)
        raise


def _write_onnx_files(proto, src_dir: str, path: str, external: bool, tmp_model: str) -> None:
    """_write_onnx's writes, through `tmp_model` (and `tmp_model`.data)."""
    data_path = path + ".data"
    location = os.path.basename(data_path)
    if external:
        tmp_data = tmp_model + ".data"
        with open(tmp_data, "wb") as out:
            offset = 0
            for t in proto.graph.initializer:
                pad = (-offset) % EXTERNAL_ALIGNMENT
                if pad:
                    out.write(b"\0" * pad)
                    offset += pad
                n = _copy_tensor_to(t, src_dir, out)
                for field in ("float_data", "int32_data", "int64_data", "double_data",
                              "uint64_data", "string_data", "raw_data", "external_data"):
                    t.ClearField(field)
                t.data_location = t.EXTERNAL
                t.external_data.add(key="location", value=location)
                t.external_data.add(key="offset", value=str(offset))
                t.external_data.add(key="length", value=str(n))
                offset += n
            out.flush()
            os.fsync(out.fileno())
        with open(tmp_model, "wb") as fh:
            fh.write(proto.SerializeToString())
        os.replace(tmp_data, data_path)
        os.replace(tmp_model, path)
        return
    too_big = ValueError("the model is over the 2 GiB protobuf limit of a single .onnx file; "
                         "use external_data=True (or None)")
    external_bytes = 0
    for t in proto.graph.initializer:
        if t.data_location == t.EXTERNAL:
            info = {e.key: e.value for e in t.external_data}
            external_bytes += int(info.get("length", 0))
    if proto.ByteSize() + external_bytes > PROTOBUF_LIMIT:
        raise too_big
    for t in proto.graph.initializer:
        if t.data_location == t.EXTERNAL:
            _set_tensor_bytes(t, _tensor_raw_bytes(t, src_dir))
    with open(tmp_model, "wb") as fh:
        fh.write(proto.SerializeToString())
    os.replace(tmp_model, path)
    if os.path.exists(data_path):
        os.remove(data_path)  # stale external data from an earlier export of this path


def _export_onnx(model, inputs, path, *, input_names, loss_name, opset, batch_dim,
                 external_data, dynamic=True, training=True, do_constant_folding=False,
                 extra_metadata=None, torch_loss=None):
    import onnx
    params, buffers = _names(model)
    state_bytes = _state_bytes(model)
    if external_data is None:
        external = state_bytes > EXTERNAL_DATA_THRESHOLD
    else:
        external = bool(external_data)
    if not external and state_bytes > PROTOBUF_LIMIT:
        raise ValueError(f"parameters and buffers take {state_bytes / 2**30:.2f} GiB, over the "
                         "2 GiB protobuf limit of a single .onnx file; use external_data=True "
                         "(or None)")
    mode = torch.onnx.TrainingMode.TRAINING if training else torch.onnx.TrainingMode.EVAL
    dynamic_axes = {n: {batch_dim: "batch"} for n in input_names} if dynamic else None
    out_dir = os.path.dirname(os.path.abspath(path))
    os.makedirs(out_dir, exist_ok=True)
    # Export into a private temp dir: for >2 GB models the legacy exporter
    # writes one external file per tensor next to the model file.
    with tempfile.TemporaryDirectory(prefix=".varuna-export-", dir=out_dir) as tmp:
        tmp_path = os.path.join(tmp, "model.onnx")
        with _preserved_state(model, training) as snapshot:
            if training and not all(m.training for m in model.modules()):
                # TRAINING would set every module training: modules held in
                # eval mode (_preserved_state) are exported as they run.
                mode = torch.onnx.TrainingMode.PRESERVE
            _torch_onnx_export(model, inputs, tmp_path, input_names=input_names,
                               output_names=[loss_name], opset=opset,
                               dynamic_axes=dynamic_axes, training=mode,
                               do_constant_folding=do_constant_folding)
        proto = onnx.load(tmp_path, load_external_data=False)
        _patch_buffers(proto, snapshot)
        if training and not do_constant_folding:  # else folded into constants
            _keep_unused_parameters(proto, model, params)
        meta = {
            "varuna.parameters": json.dumps(params),
            "varuna.buffers": json.dumps(buffers),
            "varuna.batch_dim": str(batch_dim),
            "varuna.exporter": _exporter_id(),
            "varuna.training": "1" if training else "0",
        }
        padding = _embedding_padding(model)
        if padding:
            meta["varuna.embedding_padding"] = json.dumps(padding)
        meta.update(extra_metadata or {})
        _set_metadata(proto, meta)
        _write_onnx(proto, tmp, path, external)
    onnx.checker.check_model(path)
    _check_onnx_loops(proto)
    if not _check_onnx_shapes(path) and torch_loss is not None:
        _check_onnx_runs(path, proto, inputs, input_names, torch_loss, state_bytes)


def _check_onnx_loops(proto) -> None:
    """Warns when torch's exporter wrote a Loop or Scan (nn.EmbeddingBag
    becomes a loop over its bags), which varuna-compile does not import."""
    loops = [n.name or n.op_type for n in proto.graph.node if n.op_type in ("Loop", "Scan")]
    if loops:
        warnings.warn(
            f"torch's ONNX exporter wrote {len(loops)} loop(s) ({', '.join(loops[:3])}"
            f"{', ...' if len(loops) > 3 else ''}; it writes nn.EmbeddingBag as a loop over "
            "its bags), which varuna-compile does not import. Export to TorchScript instead "
            "(a .pt path or format='torchscript'), which keeps embedding_bag as one op",
            stacklevel=5)


def _check_onnx_shapes(path: str) -> bool:
    """Warns when onnx's own shape inference rejects what torch's exporter
    wrote (its unfold over a negative dim, for one, concatenates along the
    wrong axis): the model ran in PyTorch, the file is wrong, and
    varuna-compile will refuse the node."""
    import onnx
    import onnx.shape_inference
    with tempfile.TemporaryDirectory(prefix=".varuna-shapes-") as tmp:
        try:
            onnx.shape_inference.infer_shapes_path(path, os.path.join(tmp, "m.onnx"),
                                                   strict_mode=True)
        except (onnx.shape_inference.InferenceError, onnx.checker.ValidationError) as e:
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            warnings.warn(
                f"torch's ONNX exporter wrote a graph that onnx's shape inference rejects "
                f"({first}): the model ran in PyTorch, so the export is at fault, and "
                "varuna-compile will refuse that node. Export to TorchScript instead (a .pt "
                "path or format='torchscript')", stacklevel=5)
            return True
    return False


#: Above this many bytes of parameters and buffers the exported file is not
#: run with onnxruntime (a second copy of the weights, for a check).
ORT_CHECK_LIMIT = 1 << 30
#: Nor above this many graph nodes: onnxruntime's session set-up grows
#: faster than the graph (1.6, 6.4 and 34 s for 6k, 12k and 24k nodes: a
#: 200-layer export took 65 s, 37 of them setting up the check).
ORT_CHECK_NODE_LIMIT = 8000

_RANDOM_ONNX_OPS = {"RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike",
                    "Bernoulli", "Multinomial"}


def _loss_not_comparable(proto) -> bool:
    """Whether onnxruntime's loss cannot be held against PyTorch's: the graph
    draws random numbers (a Dropout counts unless its ratio is a constant 0
    or it runs in inference mode), or it normalizes batches with their own
    statistics (training-mode BatchNormalization, which onnxruntime's
    inference build runs with the running statistics)."""
    import onnx.numpy_helper
    consts = {t.name: t for t in proto.graph.initializer}
    for n in proto.graph.node:
        if n.op_type == "Constant":
            for a in n.attribute:
                if a.name == "value":
                    consts[n.output[0]] = a.t
    for n in proto.graph.node:
        if n.op_type in _RANDOM_ONNX_OPS:
            return True
        if n.op_type == "BatchNormalization" and any(
                a.name == "training_mode" and a.i for a in n.attribute):
            return True
        if n.op_type == "Dropout":
            ratio = n.input[1] if len(n.input) > 1 and n.input[1] else None
            mode = n.input[2] if len(n.input) > 2 and n.input[2] else None
            value = lambda name: (onnx.numpy_helper.to_array(consts[name])
                                  if name in consts else None)
            if mode is None or (value(mode) is not None and not value(mode).any()):
                continue  # inference mode: the identity
            r = value(ratio) if ratio is not None else 0.5
            if r is None or float(r) != 0.0:
                return True
    return False


def _check_onnx_runs(path: str, proto, inputs, names, torch_loss: float,
                     state_bytes: int) -> None:
    """Runs the written file with onnxruntime (when installed, for models up
    to ORT_CHECK_LIMIT) on the example inputs: warns when it cannot run it
    (torch's exporter wrote, e.g., Cohere's interleaved rotary with the
    stack over the wrong axis: no shape inference sees it through the
    Shape -> Reshape chain) or, for a graph whose loss it can compute
    (_loss_not_comparable), computes another loss than PyTorch's forward
    did."""
    try:
        import onnxruntime
    except ImportError:
        return
    if state_bytes > ORT_CHECK_LIMIT:
        return
    if len(proto.graph.node) > ORT_CHECK_NODE_LIMIT:
        warnings.warn(
            f"the exported graph has {len(proto.graph.node)} nodes: not run with "
            f"onnxruntime to check it (above ORT_CHECK_NODE_LIMIT = "
            f"{ORT_CHECK_NODE_LIMIT}, its set-up takes longer than the export); "
            "varuna-compile still checks the graph it imports", stacklevel=5)
        return
    advice = ("the model ran in PyTorch, so the export is at fault, and varuna-compile "
              "will refuse or mistrain it. Export to TorchScript instead (a .pt path or "
              "format='torchscript')")
    try:
        options = onnxruntime.SessionOptions()
        options.log_severity_level = 4  # its own errors come back as the exception
        session = onnxruntime.InferenceSession(path, options,
                                               providers=["CPUExecutionProvider"])
        wanted = {i.name for i in session.get_inputs()}  # an unused input is dropped
        feed = {n: t.detach().cpu().numpy() for n, t in zip(names, inputs) if n in wanted}
        got = session.run(None, feed)[0]
    except Exception as e:  # onnxruntime's own exception types vary by version
        text = str(e).strip()
        first = next((line for line in text.splitlines() if line.strip()), type(e).__name__)
        if "NOT_IMPLEMENTED" in text:
            # A kernel onnxruntime lacks (float64 Erf), not a faulty graph:
            # the file compiled and trained exactly where this said the
            # export was at fault.
            warnings.warn(f"onnxruntime has no kernel for an op of the exported graph "
                          f"({first[:300]}), so the export was not checked against it; "
                          "varuna-compile does not need onnxruntime and checks the graph "
                          "it imports", stacklevel=5)
            return
        warnings.warn(f"torch's ONNX exporter wrote a graph onnxruntime cannot run "
                      f"({first[:300]}): {advice}", stacklevel=5)
        return
    loss = float(got.reshape(-1)[0]) if got.size else float("nan")
    if _loss_not_comparable(proto):  # the graph just written (`path`)
        return
    if not (abs(loss - torch_loss) <= 1e-3 * max(abs(torch_loss), 1e-3)):
        warnings.warn(f"torch's ONNX exporter wrote a graph that computes a loss of {loss!r} "
                      f"on the example inputs (onnxruntime), where the model's forward "
                      f"computed {torch_loss!r}: {advice}", stacklevel=5)


# ---------------------------------------------------------------------------
# TorchScript
# ---------------------------------------------------------------------------

@contextlib.contextmanager
def _contiguous_state(model: torch.nn.Module):
    """Parameters and buffers laid out contiguously while exporting (the
    importer reads each tensor's bytes in place: a Q from torch.linalg.qr,
    Glow's initial 1x1 convolution weight, is column-major), then put back
    as they were."""
    moved = []
    for t in list(model.parameters()) + list(model.buffers()):
        if not t.is_contiguous():
            moved.append((t, t.data))
            t.data = t.data.contiguous()
    try:
        yield
    finally:
        for t, data in moved:
            t.data = data


def _export_torchscript(model, inputs, path, *, input_names, loss_name, batch_dim):
    params, buffers = _names(model)
    info = {
        "inputs": [{"name": n, "shape": list(t.shape), "dtype": _dtype_name(t.dtype),
                    "batch_dim": batch_dim} for n, t in zip(input_names, inputs)],
        "loss": loss_name,
        "parameters": params,
        "buffers": buffers,
        "exporter": _exporter_id(),
    }
    with _contiguous_state(model):
        with _preserved_state(model, True):
            with warnings.catch_warnings():
                _quiet_torch_internals()
                warnings.filterwarnings("ignore", category=DeprecationWarning)
                warnings.filterwarnings("ignore", category=FutureWarning,
                                        module=r"torch\.jit")
                traced = torch.jit.trace(model, inputs, check_trace=False)
        # _preserved_state restored the buffers in place; the traced module
        # shares their storage, so it is saved with the pre-export values.
        out_dir = os.path.dirname(os.path.abspath(path))
        os.makedirs(out_dir, exist_ok=True)
        # Save under the final basename (torch names the archive's top folder
        # after it) in a private temp dir, then rename into place.
        with tempfile.TemporaryDirectory(prefix=".varuna-export-", dir=out_dir) as tmp_dir:
            tmp = os.path.join(tmp_dir, os.path.basename(path))
            traced.save(tmp, _extra_files={"varuna.json": json.dumps(info, indent=1)})
            os.replace(tmp, path)


# ---------------------------------------------------------------------------
# public entry point
# ---------------------------------------------------------------------------

def export(model: torch.nn.Module, example_inputs, path, *, input_names=None, format=None,
           opset: int = 17, batch_dim: int = 0, external_data=None, loss_name: str = "loss"):
    """Export ``model`` (whose forward returns the loss) for Varuna.

    Args:
      model: a ``torch.nn.Module``; ``model(*example_inputs)`` returns the
        scalar loss, a tuple whose first element is the loss, or a dict-like
        result with a ``"loss"`` (a Hugging Face ``ModelOutput``: the model
        itself, given its labels, needs no wrapper).
      example_inputs: tuple of tensors (a single tensor is accepted), all with
        the same size along ``batch_dim``; or a dict of them, passed as
        keyword arguments (a Hugging Face model called as ``model(**batch)``:
        the keys name the inputs, in the dict's order).
      path: output file (a str or pathlib.Path; its directory is created if
        missing). varuna-compile picks the importer by the suffix, so it must
        be ``.onnx`` for ONNX and ``.pt`` (or ``.pth``) for TorchScript,
        lower case; another is refused.
      input_names: names of the inputs; default: forward's parameter names.
        Neither they nor ``loss_name`` may be a parameter's or buffer's name.
      format: ``"onnx"`` or ``"torchscript"``; None infers it from ``path``.
      opset: ONNX opset version (ONNX only), one varuna-compile imports:
        ``ONNX_OPSETS`` (13 to 21).
      batch_dim: the batch axis of every input; exported as dynamic (``"batch"``).
        varuna-compile trains models whose inputs have the batch first (0,
        the default) only: another value gives a valid file for other tools
        (onnxruntime), which varuna-compile refuses, saying so.
      external_data: ONNX only. None: store initializers in ``<path>.data``
        when parameters+buffers exceed 1 GiB, else embed; True/False force it.
      loss_name: name of the loss output.

    Returns the path written. Raises ``ValueError`` for invalid arguments
    (among them example inputs the forward fails on: the model's exception
    chained; an empty batch; an input dtype varuna-run does not read, such as
    bfloat16), a forward that does not return a scalar floating-point loss, or one that
    calls a custom ``torch.autograd.Function`` whose Python backward the file
    cannot hold: always in TorchScript; in ONNX, whose exporter keeps the
    forward's ops, when their gradient is not the backward's (a gradient
    reversal, a straight-through estimator; a GeLU written as a Function for
    speed exports). Parameters no node reads, which torch's ONNX exporter
    drops, are added back as initializers. Warns when the
    forward cuts gradients in a way the file cannot keep: ``torch.no_grad()``
    or ``.data`` on values that need gradients (either format), ``detach()``
    of such values (ONNX only: TorchScript keeps it as a stop-gradient),
    and when it turns ``torch.autocast`` on (the file computes in float32;
    Varuna's mixed precision is the training config's ``precision``).
    Activation checkpointing (``torch.utils.checkpoint``, Hugging Face's
    ``gradient_checkpointing_enable()``) is exported as the plain forward it
    computes; a ``torch.compile`` wrapper as the module it wraps; an
    autocast the caller is in is turned off for the export. An operator
    torch's ONNX exporter cannot export raises ``ValueError`` suggesting
    TorchScript. A failure to write the file (a full disk, no permission)
    is an ``OSError`` naming ``path``; no temporary file is left behind.
    """
    if not isinstance(model, torch.nn.Module):
        raise ValueError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    # torch.compile(model): its forward(*args, **kwargs) wraps the module's.
    if type(model).__name__ == "OptimizedModule" and isinstance(
            getattr(model, "_orig_mod", None), torch.nn.Module):
        model = model._orig_mod
    training = model.training  # an _Adapted wrapper sets the model's own flag
    try:
        with _checkpoint_inlined() as cut, _outer_autocast_off(), \
                _python_draws_off(model) as draws:
            out = _export(model, example_inputs, path, input_names=input_names,
                          format=format, opset=opset, batch_dim=batch_dim,
                          external_data=external_data, loss_name=loss_name)
    finally:
        model.training = training
    what = {"LayerDrop": "skips whole layers at random in training",
            "SpecAugment": "masks time steps and features at random in training, drawn with "
                           "numpy"}
    done = {"LayerDrop": "every layer running", "SpecAugment": "no masking"}
    for kind, found in draws.items() if training else ():
        warnings.warn(
            f"{kind} ({', '.join(found)}) {what[kind]}, which a traced graph cannot express "
            f"(the tracer would keep one draw for every step); exported with {done[kind]}, as "
            f"with {kind} 0. Set it to 0 in PyTorch as well to compare the two", stacklevel=2)
    if cut:
        warnings.warn(
            f"torch.utils.checkpoint(use_reentrant=True) of {', '.join(sorted(cut))} gets no "
            "input that requires gradients, so PyTorch gives the parameters inside it no "
            "gradient (torch warns \"None of the inputs have requires_grad=True\"); the "
            "exported graph does, and varuna trains them. Use use_reentrant=False to train "
            "them in PyTorch as well", stacklevel=2)
    return out


# Training-time randomness drawn in Python or numpy, held in attributes of
# the modules or their Hugging Face configs: a trace keeps one draw for good.
_PYTHON_DRAWS = (
    # LayerDrop (Fan et al.): `if self.training and torch.rand([]) <
    # self.layerdrop: skip the layer` -- layerdrop, encoder_layerdrop, ...
    (re.compile(r"layerdrop", re.IGNORECASE), "LayerDrop"),
    # SpecAugment (wav2vec2, HuBERT, WavLM, ...): time and feature masks
    # drawn with numpy (_compute_mask_indices).
    (re.compile(r"^mask_(time|feature)_prob$"), "SpecAugment"),
)


@contextlib.contextmanager
def _python_draws_off(model: torch.nn.Module):
    """Every _PYTHON_DRAWS probability above 0 on a module or its `config`
    set to 0 while exporting and restored after. Yields {kind: ["owner.attr =
    value", ...]} for those that were above 0."""
    changed, seen = [], set()

    def scan(obj, owner):
        if id(obj) in seen:
            return
        seen.add(id(obj))
        for key, value in list(vars(obj).items()):
            if not isinstance(value, (int, float)) or isinstance(value, bool) or value <= 0:
                continue
            for pattern, kind in _PYTHON_DRAWS:
                if pattern.search(key):
                    changed.append((obj, key, value, kind, f"{owner}.{key} = {value:g}"))
                    break

    for name, m in model.named_modules():
        scan(m, name or type(model).__name__)
        config = getattr(m, "config", None)
        if config is not None and not isinstance(config, torch.nn.Module) \
                and hasattr(config, "__dict__"):
            scan(config, "config")
    for obj, key, *_ in changed:
        setattr(obj, key, 0.0)
    found = {}
    for *_, kind, text in changed:
        found.setdefault(kind, []).append(text)
    try:
        yield found
    finally:
        for obj, key, value, *_ in changed:
            setattr(obj, key, value)


@contextlib.contextmanager
def _outer_autocast_off():
    """Exports outside any torch.autocast the caller is in (the tracer cannot
    record autocast's casts of parameters, and the caller's precision is not
    the model's); autocast the forward turns on itself is warned about."""
    with contextlib.ExitStack() as stack:
        for device in ("cpu", "cuda"):
            if _autocast_on(device):
                stack.enter_context(torch.autocast(device, enabled=False))
        yield


@contextlib.contextmanager
def _checkpoint_inlined():
    """torch.utils.checkpoint runs its function directly while exporting:
    activation checkpointing changes when activations are kept, not the
    values or gradients (varuna recomputes by its own schedule), and the
    tracer cannot record its autograd.Function (use_reentrant=True fails
    inside torch; use_reentrant=False would be judged a custom backward).
    Patched where checkpoint() looks it up at each call, so it applies however
    the model imported checkpoint (Hugging Face keeps a partial of it).
    Yields the set of functions a reentrant checkpoint ran without an input
    that requires gradients (PyTorch gives their parameters none)."""
    import torch.utils.checkpoint as ckpt
    original = getattr(ckpt, "_checkpoint_impl", None)
    cut = set()  # reentrant checkpoints that cut their parameters' gradients
    if original is None:  # another torch: leave it
        yield cut
        return

    def direct(function, args, kwargs, use_reentrant=None, **_options):
        if use_reentrant is not False and torch.is_grad_enabled() and not any(
                isinstance(a, torch.Tensor) and a.requires_grad for a in args):
            cut.add(getattr(function, "__qualname__", type(function).__name__))
        return function(*args, **kwargs)

    ckpt._checkpoint_impl = direct
    try:
        yield cut
    finally:
        ckpt._checkpoint_impl = original


def _export(model, example_inputs, path, *, input_names, format, opset, batch_dim,
            external_data, loss_name):
    path = _check_path(path)
    fmt = _resolve_format(path, format)
    from_dict = isinstance(example_inputs, Mapping)
    if from_dict:  # model(**batch)
        keys = list(example_inputs.keys())
        bad = [k for k in keys if not isinstance(k, str) or not k.isidentifier()]
        if bad:
            raise ValueError(f"example_inputs keys must be forward's parameter names; got {bad}")
        for k, v in example_inputs.items():
            # Named by its key: "example_inputs[2]" would point into a dict
            # that has no index. Every input of the file is a batch tensor;
            # an option (return_dict=False) belongs in the model's config.
            if not isinstance(v, torch.Tensor):
                raise ValueError(
                    f"example_inputs[{k!r}] is {'None' if v is None else 'a ' + type(v).__name__}"
                    f", not a torch.Tensor: every example input becomes an input of the "
                    f"file, a tensor with a batch axis; leave {k!r} out of the dict (set an "
                    "option such as return_dict in the model or its config instead)")
        if input_names is not None and list(input_names) != keys:
            raise ValueError(f"input_names {list(input_names)} differ from the keys of "
                             f"example_inputs {keys}; leave input_names out")
        input_names = keys
        model = _Adapted(model, keys)
        example_inputs = tuple(example_inputs.values())
    inputs = _normalize_inputs(example_inputs)
    if external_data not in (None, True, False):
        raise ValueError(f"external_data must be None, True or False, got {external_data!r}")
    if fmt == "torchscript" and external_data:
        raise ValueError("external_data applies to ONNX export only")
    if fmt == "onnx" and external_data is False and _state_bytes(model) > PROTOBUF_LIMIT:
        raise ValueError(f"parameters and buffers take {_state_bytes(model) / 2**30:.2f} GiB, "
                         "over the 2 GiB protobuf limit of a single .onnx file; use "
                         "external_data=True (or None)")
    if input_names is None:
        input_names = _default_input_names(model, len(inputs))
    names = _check_names(input_names, inputs, loss_name)
    _check_state_names(model, names, loss_name, from_dict)
    batch = _check_batch(inputs, names, batch_dim)
    _check_input_dtypes(inputs, names)
    _check_norm_state(model)
    if fmt == "onnx" and (not isinstance(opset, Integral) or isinstance(opset, bool)):
        raise ValueError(f"opset must be an int, got {opset!r}")
    if fmt == "onnx":
        opset = int(opset)  # numpy's integers too (torch's exporter takes int only)
    if fmt == "onnx" and not ONNX_OPSETS[0] <= opset <= ONNX_OPSETS[1]:
        raise ValueError(f"opset {opset} is not one varuna-compile imports: supported opsets "
                         f"are {ONNX_OPSETS[0]} to {ONNX_OPSETS[1]} (the default is 17)")

    # One forward, with gradients (to see where it cuts them), to check the
    # loss and what the export would lose.
    watch = _GradientWatch()
    ids = {n: id(b) for n, b in model.named_buffers()}
    sums = _param_sums(model)
    with _preserved_state(model, True) as snapshot:
        try:
            with torch.enable_grad(), watch:
                out = model(*inputs)
        except _ExportError:
            raise
        except Exception as e:  # noqa: BLE001 - whatever the model raises
            # The first run of the model: its exception (a missing argument,
            # a shape mismatch in a matmul) says the example inputs do not
            # fit the forward -- the caller's to fix, not a failed export.
            given = ", ".join(f"{n} {list(t.shape)} {_dtype_name(t.dtype)}"
                              for n, t in zip(names, inputs))
            raise ValueError(
                f"the model's forward failed on the example inputs ({type(e).__name__}: "
                f"{str(e).strip()}); check that they are what forward takes: their number"
                f"{', names (the keys)' if from_dict else ''}, shapes and dtypes (given: "
                f"{given})") from e
        # Outside the watch: its own no_grad sums are no gradient cut.
        written = _written_in_forward(model, snapshot, ids, sums)
    # TorchScript: the importer refuses such writes itself, naming the op
    # (and, for an embedding's max_norm or spectral_norm, what to do).
    if written and fmt == "onnx":
        raise ValueError(
            f"forward changes {', '.join(written[:4])}{', ...' if len(written) > 4 else ''} "
            "in place (a step counter, a running average, a clamp of a weight): an "
            "exported graph cannot carry state from one step to the next, so the change "
            "would be lost and training would differ from PyTorch after the first step. "
            "Keep such state outside the model -- pass it in as an input, or apply a "
            "weight constraint after the optimizer step -- or make it a constant "
            "(batch norms' running statistics are kept as PyTorch keeps them)")
    if watch.autograd:
        raise ValueError(
            f"forward computes gradients itself (torch.autograd.grad or backward, at "
            f"{watch.autograd[0]}): a gradient penalty or a double backward; an exported "
            "graph holds the forward's operations only, so neither exporter can record it. "
            "Varuna trains a loss made of forward operations: leave the penalty out, or "
            "write it in closed form (for a linear layer, the gradient of its output with "
            "respect to its input is its weight)")
    if not isinstance(model, _Adapted) and _loss_output(out) is not out:
        model, out = _Adapted(model, None), _loss_output(out)  # a ModelOutput
    _check_loss(out)
    _check_custom_functions(model, inputs, out, fmt)
    torch_loss = float(_loss_of(out).detach())
    del out
    for message in _gradient_cut_warnings(watch, fmt, model):
        warnings.warn(message, stacklevel=2)
    differ = _training_only_ops(model, inputs)
    if differ:
        warnings.warn(
            "forward takes other operations in training mode than in model.eval(): "
            + ", ".join(differ[:6]) + (", ..." if len(differ) > 6 else "")
            + ". The exported graph is the training one, and varuna-run's validation "
            "(--eval-data) runs it with dropout off and batch norms on their running "
            "statistics -- a branch on self.training of the model's own (an auxiliary "
            "loss, noise) is counted in validation too, which model.eval() would skip",
            stacklevel=2)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", torch.jit.TracerWarning)
        try:
            if fmt == "onnx":
                _export_onnx(model, inputs, path, input_names=names, loss_name=loss_name,
                             opset=opset, batch_dim=batch_dim, external_data=external_data,
                             torch_loss=torch_loss)
            else:
                _export_torchscript(model, inputs, path, input_names=names,
                                    loss_name=loss_name, batch_dim=batch_dim)
        except OSError as e:
            # A full disk, a read-only directory, a quota: the system's
            # refusal to write, said as such and for the file asked for (the
            # exception names a temporary file of the export, if any).
            raise OSError(e.errno, f"cannot write {path!r}: {e.strerror or e}") from e
    branches, numbers = [], []
    for w in caught:
        tracer = issubclass(w.category, torch.jit.TracerWarning)
        if tracer and "Python boolean" in str(w.message):
            branches.append(f"{w.filename}:{w.lineno}")
        elif tracer and re.search(r"to a Python (number|integer|index|float)|Using len to get "
                                  r"tensor shape", str(w.message)):
            numbers.append(f"{w.filename}:{w.lineno}")
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    if numbers:
        sites = sorted(set(numbers))
        # Not "harmless for a shape": the batch size is one that changes
        # (varuna runs micro-batches, smaller than the example batch), and a
        # loss summed and divided by int(x.size(0)) trains wrong. Which
        # constant of the trace was the batch size cannot be told reliably
        # (any other size may equal it), so every such warning says it.
        warnings.warn(
            f"the forward turns a tensor into a Python number ({len(sites)} place(s): "
            f"{', '.join(sites[:3])}{', ...' if len(sites) > 3 else ''}; .item(), int(), "
            "float(), len()): the file keeps the example batch's value as a constant, and "
            "varuna trains with that value every step -- a count or a statistic of the batch "
            "would silently differ from PyTorch (keep it a tensor: x.sum() instead of "
            "x.sum().item()). A size that cannot change (a hidden width) is harmless; the "
            f"batch size is not: a size along the batch axis (int(x.size({batch_dim}))"
            f"{', len(x)' if batch_dim == 0 else ''}) is frozen at the example's {batch}, "
            "while varuna runs micro-batches smaller than that -- divide by "
            f"x.shape[{batch_dim}] as it is (the tracer keeps "
            "it an op), without int() or len(), or use a mean reduction", stacklevel=3)
    if branches:
        sites = sorted(set(branches))
        warnings.warn(
            f"the forward branches in Python on a tensor's value ({len(sites)} place(s): "
            f"{', '.join(sites[:3])}{', ...' if len(sites) > 3 else ''}): the file keeps the "
            "branch the example batch took, and varuna trains that branch every step -- a "
            "random LayerDrop (set the config's layerdrop to 0) or a data-dependent path "
            "would silently differ from PyTorch; harmless where the branch cannot change "
            "(a check that always passes)", stacklevel=3)
    return path


if __name__ == "__main__":  # python -m varuna.export: there is no model to take
    import sys as _sys
    _sys.exit("varuna.export is called from Python, with the model object:\n"
              "    import varuna\n"
              "    varuna.export(model, example_inputs, 'model.onnx')  # or 'model.pt'\n"
              "(docs/import-onnx.md, docs/import-torchscript.md)")
