"""Reading Varuna checkpoints back into PyTorch (docs/checkpoints.md).

A checkpoint directory holds `step-<N>/` directories, each complete one with
per-section safetensors files, a manifest (sizes and CRC-32s) and a COMPLETE
marker naming the manifest's CRC-32. These functions take the trained weights
out of one, checked the way `varuna-run --resume` checks it:

    import varuna.checkpoint as vc
    state = vc.load("ckpt")                  # newest complete step: {name: tensor}
    vc.load_into(model, "ckpt/step-200")     # into the nn.Module trained
    vc.latest("ckpt")                        # "ckpt/step-200"
    vc.load_optimizer_into(opt, model, "ckpt")  # torch.optim.AdamW / SGD state

Every tensor keeps the name the model gave it (the framework's parameter and
buffer names: a `state_dict` takes them as they are). The optimizer's state
(`optimizer/<state>/<parameter>`) and the frozen parameters kept so that a
resume needs nothing from the model file (`frozen/<parameter>`: attention
masks and other constants of the exported graph) are left out unless asked
for. A parameter
held by several sections (a tie) must be identical in each: it is taken once.

Errors are ValueError naming the directory or file and what is wrong: no
complete checkpoint (with why each newer one was skipped), a missing or
unreadable COMPLETE marker or manifest, a manifest that is not the JSON
object varuna-run writes (even with a matching CRC-32), a file whose size
or CRC-32 differs from the manifest, tie copies that differ. A newer step
skipped on the way to an older one is a warning (UserWarning) saying why.
"""
import json
import os
import re
import sys
import warnings
import zlib

__all__ = ["latest", "load", "load_into", "load_optimizer_into"]

_STEP = re.compile(r"step-(0|[1-9][0-9]*)$")


def _check(step_dir):
    """The manifest of step_dir if it is complete and intact, else raises
    ValueError saying why, naming the file at fault (a damaged file is the
    checkpoint's problem, never a UnicodeDecodeError or KeyError of ours)."""
    if not os.path.isdir(step_dir):
        raise ValueError(f"{step_dir}: " + ("not a directory" if os.path.exists(step_dir)
                                            else "no such directory"))
    marker = os.path.join(step_dir, "COMPLETE")
    if not os.path.lexists(marker):
        raise ValueError(f"{step_dir}: torn: no COMPLETE marker")
    try:
        with open(marker, "rb") as fh:
            raw_marker = fh.read(4096)
    except OSError as e:  # a directory, no permission
        raise ValueError(f"{marker}: cannot read the marker: {e.strerror or e}") from None
    try:
        line = raw_marker.decode("ascii").strip()
    except UnicodeDecodeError:
        raise ValueError(f"{marker}: malformed marker: not text "
                         f"({raw_marker[:40]!r})") from None
    m = re.fullmatch(r"varuna-checkpoint step=(\d+) manifest-crc32=0x([0-9a-fA-F]{8})", line)
    if not m:
        raise ValueError(f"{marker}: malformed marker {line[:200]!r}")
    # As varuna-run --resume and varuna-ckpt check it: a step directory
    # renamed or copied to another step's name is not that step.
    named = _STEP.match(os.path.basename(os.path.normpath(step_dir)))
    if named and int(m.group(1)) != int(named.group(1)):
        raise ValueError(f"{step_dir}: COMPLETE marker is for step {m.group(1)}, the "
                         f"directory for step {named.group(1)} (renamed or copied?)")
    manifest_path = os.path.join(step_dir, "manifest.json")
    try:
        with open(manifest_path, "rb") as fh:
            raw = fh.read()
    except OSError as e:
        raise ValueError(f"{manifest_path}: cannot read the manifest: "
                         f"{e.strerror or e}") from None
    if zlib.crc32(raw) != int(m.group(2), 16):
        raise ValueError(f"{manifest_path}: checksum mismatch with COMPLETE")
    manifest = _parse_manifest(manifest_path, raw)
    if manifest.get("format") != "varuna-checkpoint":
        raise ValueError(f"{manifest_path}: not a varuna checkpoint manifest")
    if manifest.get("version") != 1:
        raise ValueError(f"{manifest_path}: unsupported manifest version "
                         f"{manifest.get('version')!r} (this module reads version 1)")
    if manifest.get("step") != int(m.group(1)):
        raise ValueError(f"{manifest_path}: manifest is for step {manifest.get('step')!r}")
    _check_manifest_fields(manifest_path, manifest)
    for f in manifest["files"]:
        path = os.path.join(step_dir, f["name"])
        try:
            with open(path, "rb") as fh:
                data = fh.read()
        except OSError as e:
            raise ValueError(f"{path}: {e.strerror or e}") from None
        if len(data) != f["bytes"]:
            raise ValueError(f"{path}: {len(data)} bytes, the manifest says {f['bytes']}")
        if zlib.crc32(data) != f["crc32"]:
            raise ValueError(f"{path}: checksum mismatch with the manifest")
    return manifest


def _parse_manifest(manifest_path, raw):
    """The manifest's JSON object; ValueError naming the file otherwise. (A
    CRC that matches says the file is what was written, not that the
    writer -- or whoever rewrote both -- wrote a manifest.)"""
    try:
        manifest = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise ValueError(f"{manifest_path}: not UTF-8 text") from None
    except json.JSONDecodeError as e:
        raise ValueError(f"{manifest_path}: not valid JSON ({e})") from None
    if not isinstance(manifest, dict):
        raise ValueError(f"{manifest_path}: the manifest is a JSON "
                         f"{type(manifest).__name__}, not an object")
    return manifest


def _check_manifest_fields(manifest_path, manifest):
    """Every field the readers below use, of the type they use it as."""
    files = manifest.get("files")
    if not isinstance(files, list):
        raise ValueError(f"{manifest_path}: \"files\" must be a list of the step's files, "
                         f"not {json.dumps(files)[:100]}")
    types = {"name": str, "section": int, "bytes": int, "crc32": int}
    for i, f in enumerate(files):
        if not isinstance(f, dict):
            raise ValueError(f"{manifest_path}: files[{i}] must be an object, not "
                             f"{json.dumps(f)[:100]}")
        for key, kind in types.items():
            # "section" may be left out, as varuna-run's reader allows
            # (runtime/lib/Checkpoint.cpp: -1, a file of no section).
            if key not in f and key != "section":
                raise ValueError(f"{manifest_path}: files[{i}] has no {key!r}")
            v = f.get(key, -1)
            if not isinstance(v, kind) or isinstance(v, bool) or (kind is int and v < -1):
                raise ValueError(f"{manifest_path}: files[{i}] {key!r} is "
                                 f"{json.dumps(v)[:100]}, not "
                                 f"{'a non-negative integer' if kind is int else 'a string'}")
        # A name is a file of the step directory, nothing outside it.
        if not f["name"] or os.path.basename(f["name"]) != f["name"] or f["name"] in (".", ".."):
            raise ValueError(f"{manifest_path}: files[{i}] names {f['name']!r}, not a file "
                             "of the step directory")
    if not isinstance(manifest.get("state", {}), dict):
        raise ValueError(f"{manifest_path}: \"state\" must be an object, not "
                         f"{json.dumps(manifest['state'])[:100]}")


def _newest(ckpt_dir):
    """(step_dir, manifest) of the newest complete, intact `step-<N>`
    directory under ckpt_dir."""
    try:
        names = os.listdir(ckpt_dir)
    except OSError as e:
        raise ValueError(f"{ckpt_dir}: {e.strerror}") from None
    steps = sorted((int(m.group(1)), n) for n in names if (m := _STEP.match(n)))
    skipped = []
    for _, name in reversed(steps):
        step_dir = os.path.join(ckpt_dir, name)
        try:
            found = step_dir, _check(step_dir)
        except (ValueError, OSError) as e:
            skipped.append(str(e))
            continue
        # Said, as varuna-run --resume and varuna-ckpt latest say it: an
        # older step taken silently left stale weights in the model.
        for s in skipped:
            warnings.warn(f"skipped {s}", stacklevel=3)
        return found
    why = "".join(f"\n  skipped {s}" for s in skipped)
    raise ValueError(f"{ckpt_dir}: no complete checkpoint{why}")


def _is_step_dir(path):
    """Whether `path` is meant as one step's directory (load("ckpt/step-200"))
    rather than a checkpoint directory: it has a manifest or a marker, or is
    named step-<N> without steps of its own. A step whose manifest was
    deleted is then said to be damaged, not searched for steps it lacks."""
    if any(os.path.lexists(os.path.join(path, f)) for f in ("manifest.json", "COMPLETE")):
        return True
    if not _STEP.match(os.path.basename(os.path.normpath(path))):
        return False
    try:
        return not any(_STEP.match(n) for n in os.listdir(path))
    except OSError:
        return True  # _check says what is wrong with it


def _resolve(path):
    """(step_dir, manifest) for a step directory or a checkpoint directory
    (its newest complete step)."""
    if _is_step_dir(path):
        return path, _check(path)
    return _newest(path)


def latest(ckpt_dir):
    """The newest complete, intact `step-<N>` directory under ckpt_dir."""
    return _newest(ckpt_dir)[0]


def load(path, optimizer_state=False, frozen=False):
    """The tensors of a checkpoint as {name: torch.Tensor}: `path` is a
    `step-<N>` directory or a checkpoint directory (its newest complete
    step). With optimizer_state, the `optimizer/...` tensors too; with
    frozen, the `frozen/...` ones (constants training never changes)."""
    from safetensors.torch import load_file

    path, manifest = _resolve(path)
    out = {}
    for f in sorted(manifest["files"], key=lambda f: f.get("section", -1)):
        file = os.path.join(path, f["name"])
        try:
            tensors = load_file(file)
        except Exception as e:  # noqa: BLE001 - safetensors' own error types
            # Its size and CRC-32 are the manifest's, so it is the file
            # written -- by a writer that wrote no safetensors file.
            raise ValueError(f"{file}: not a safetensors file ({type(e).__name__}: "
                             f"{str(e).strip()[:200]})") from None
        for name, t in tensors.items():
            if name.startswith("optimizer/") and not optimizer_state:
                continue
            if name.startswith("frozen/") and not frozen:
                continue
            if name in out:
                if out[name].shape != t.shape or not bool((out[name] == t).all()):
                    raise ValueError(f"{file}: '{name}' differs from its copy in another "
                                     "section (a tie's copies must be identical)")
                continue
            out[name] = t
    return out


def load_into(model, path, strict=True):
    """Loads load(path) into `model` (an nn.Module of the model that was
    trained) and returns (missing, unexpected): the model's parameters the
    checkpoint lacks and the checkpoint's tensors the model lacks. Not
    missing: a parameter that is another's alias (a tie such as GPT-2's
    `lm_head.weight` is `wte.weight`: loaded with it) and buffers training
    never changes (attention masks; running statistics are in the
    checkpoint), which keep their values -- batch norms'
    `num_batches_tracked` too: the checkpoint has no count (it matters only
    with momentum=None, which varuna.export refuses). With strict, either list being
    non-empty is a ValueError naming them (nothing is loaded); so is, with
    or without strict, a tensor whose shape differs from the model's (a
    model built with another configuration). Frozen
    parameters (requires_grad=False: a distillation teacher) come from the
    checkpoint's `frozen/` tensors; its other constants (an exported
    graph's masks) are not expected to be the model's."""
    # A torch.compile wrapper, as varuna.export takes it: the module it
    # wraps (its names lack the wrapper's "_orig_mod." prefix).
    if type(model).__name__ == "OptimizedModule" and hasattr(model, "_orig_mod"):
        model = model._orig_mod
    everything = load(path, frozen=True)
    known = set(model.state_dict(keep_vars=True))
    state = {n: t for n, t in everything.items() if not n.startswith("frozen/")}
    for n, t in everything.items():
        if n.startswith("frozen/") and n[len("frozen/"):] in known:
            state.setdefault(n[len("frozen/"):], t)
    params = dict(model.named_parameters(remove_duplicate=False))
    loaded = {id(params[n]) for n in state if n in params}
    missing = sorted(n for n, p in params.items() if n not in state and id(p) not in loaded)
    unexpected = sorted(n for n in state if n not in known)
    if strict and (missing or unexpected):
        raise ValueError(
            f"{path}: does not match the model: "
            + (f"parameters not in the checkpoint: {', '.join(missing)}" if missing else "")
            + ("; " if missing and unexpected else "")
            + (f"not in the model: {', '.join(unexpected)}" if unexpected else ""))
    # Checked before anything is copied, so that a mismatch leaves the model
    # as it was (load_state_dict copies tensor by tensor and raises midway).
    current = model.state_dict(keep_vars=True)
    wrong = [f"{n} is {tuple(t.shape)} in the checkpoint, {tuple(current[n].shape)} in the model"
             for n, t in state.items() if n in known and tuple(t.shape) != tuple(current[n].shape)]
    if wrong:
        raise ValueError(f"{path}: does not match the model (nothing was loaded): "
                         + "; ".join(wrong[:5])
                         + (f"; and {len(wrong) - 5} more" if len(wrong) > 5 else ""))
    model.load_state_dict({n: t for n, t in state.items() if n in known}, strict=False)
    return missing, unexpected


def load_optimizer_into(optimizer, model, path):
    """Loads the optimizer state of checkpoint `path` into `optimizer`, a
    torch.optim.AdamW (for a run trained with "adamw") or torch.optim.SGD
    ("sgd") over `model`'s parameters, so that training goes on in PyTorch
    where varuna-run left it: AdamW's step count and moments, SGD's momentum
    buffers. Load the weights first (load_into); the hyper-parameters (lr,
    betas, weight decay, param groups) stay the optimizer's own: give them
    as the training configuration had them. Returns the number of
    parameters whose state was loaded. ValueError naming the problem:
    another optimizer than the checkpoint's (LAMB has no torch.optim
    counterpart), an optimizer parameter that is not one of `model`'s, a
    trained parameter without state in the checkpoint, a shape that
    differs, an AdamW with amsgrad=True (its max_exp_avg_sq is state varuna's
    AdamW does not keep). Nothing is loaded then."""
    import torch

    if type(model).__name__ == "OptimizedModule" and hasattr(model, "_orig_mod"):
        model = model._orig_mod
    path, manifest = _resolve(path)
    state = manifest.get("state", {})
    kind = state.get("optimizer")
    classes = {"adamw": torch.optim.AdamW, "sgd": torch.optim.SGD}
    if kind not in classes:
        raise ValueError(f"{path}: trained with optimizer {kind!r}, which has no torch.optim "
                         "counterpart here (adamw: torch.optim.AdamW, sgd: torch.optim.SGD)")
    if type(optimizer) is not classes[kind]:
        raise ValueError(f"{path}: trained with {kind} ({classes[kind].__name__}); the "
                         f"optimizer given is a {type(optimizer).__name__}")
    for i, group in enumerate(optimizer.param_groups):
        # AMSGrad keeps a running maximum of exp_avg_sq (max_exp_avg_sq),
        # which varuna's AdamW neither computes nor checkpoints: its first
        # step would raise KeyError, or -- given zeros -- not be AMSGrad.
        if kind == "adamw" and group.get("amsgrad"):
            raise ValueError(f"{path}: the optimizer has amsgrad=True (param group {i}), "
                             "whose state (max_exp_avg_sq) varuna's AdamW does not keep; "
                             "varuna trains AdamW with amsgrad=False: create it so")
    try:
        steps = int(state.get("optimizer_step", manifest["step"]))
    except (TypeError, ValueError):
        raise ValueError(f"{path}/manifest.json: optimizer_step "
                         f"{state.get('optimizer_step')!r} is not a step count") from None
    tensors = {n: t for n, t in load(path, optimizer_state=True).items()
               if n.startswith("optimizer/")}
    names = {}
    for n, p in model.named_parameters(remove_duplicate=False):
        names.setdefault(id(p), []).append(n)
    wanted = ("exp_avg", "exp_avg_sq") if kind == "adamw" else ("momentum_buffer",)
    new = {}
    for group in optimizer.param_groups:
        # As torch's own load_state_dict places it: on the CPU, unless the
        # optimizer runs its step on the parameter's device (capturable or
        # fused), which then requires it there.
        on_device = bool(group.get("capturable") or group.get("fused"))
        for p in group["params"]:
            if id(p) not in names:
                raise ValueError(f"{path}: the optimizer holds a parameter of shape "
                                 f"{tuple(p.shape)} that is not one of the model's")
            found = {}
            for key in wanted:
                for n in names[id(p)]:  # a tie's state is under one of its names
                    t = tensors.get(f"optimizer/{key}/{n}")
                    if t is not None:
                        if tuple(t.shape) != tuple(p.shape):
                            raise ValueError(f"{path}: optimizer/{key}/{n} is {tuple(t.shape)}, "
                                             f"the parameter {tuple(p.shape)}")
                        found[key] = t.to(device=p.device, dtype=p.dtype).clone()
                        break
            if kind == "adamw":
                if not p.requires_grad:
                    continue
                if len(found) != 2:
                    raise ValueError(f"{path}: no AdamW state for {names[id(p)][0]} (a "
                                     "parameter varuna-run did not train?)")
                found["step"] = torch.tensor(float(steps), dtype=torch.float32,
                                             device=p.device if on_device else "cpu")
            elif not found:
                continue  # SGD without momentum keeps no state
            new[p] = found
    for p, st in new.items():
        optimizer.state[p] = st
    return len(new)


def _main(argv):
    """python -m varuna.checkpoint PATH: the step load(PATH) takes and its
    tensors (name, shape, dtype), the optimizer's and frozen ones too."""
    if len(argv) != 1 or argv[0].startswith("-"):
        print("usage: python -m varuna.checkpoint CKPT_DIR | CKPT_DIR/step-N\n"
              "  the checkpoint load() takes, and its tensors (docs/checkpoints.md)",
              file=sys.stderr)
        return 2
    path = argv[0]
    try:
        path = _resolve(path)[0]
        tensors = load(path, optimizer_state=True, frozen=True)
    except ValueError as e:
        print(f"varuna.checkpoint: error: {e}", file=sys.stderr)
        return 1
    try:
        print(path)
        for name, t in tensors.items():
            print(f"  {name} {list(t.shape)} {str(t.dtype).replace('torch.', '')}")
        sys.stdout.flush()
    except BrokenPipeError:
        # The reader stopped (| head -1): it has what it wanted. Point
        # stdout at /dev/null so that the interpreter's own flush at exit
        # does not fail again and print a traceback.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
