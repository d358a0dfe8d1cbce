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
complete checkpoint (with why each newer one was skipped), a file whose size
or CRC-32 differs from the manifest, tie copies that differ. A newer step
skipped on the way to an older one is a warning (UserWarning) saying why.
"""
import json
import os
import re
import sys
import warnings
import zlib

__all__ = ["latest", "load", "load_into"]

_STEP = re.compile(r"step-(0|[1-9][0-9]*)$")


def _check(step_dir):
    """The manifest of step_dir if it is complete and intact, else raises
    ValueError saying why."""
    marker = os.path.join(step_dir, "COMPLETE")
    if not os.path.exists(marker):
        raise ValueError(f"{step_dir}: torn: no COMPLETE marker")
    with open(marker) as fh:
        line = fh.read().strip()
    m = re.fullmatch(r"varuna-checkpoint step=(\d+) manifest-crc32=0x([0-9a-fA-F]{8})", line)
    if not m:
        raise ValueError(f"{marker}: malformed marker {line!r}")
    # As varuna-run --resume and varuna-ckpt check it: a step directory
    # renamed or copied to another step's name is not that step.
    named = _STEP.match(os.path.basename(os.path.normpath(step_dir)))
    if named and int(m.group(1)) != int(named.group(1)):
        raise ValueError(f"{step_dir}: COMPLETE marker is for step {m.group(1)}, the "
                         f"directory for step {named.group(1)} (renamed or copied?)")
    with open(os.path.join(step_dir, "manifest.json"), "rb") as fh:
        raw = fh.read()
    if zlib.crc32(raw) != int(m.group(2), 16):
        raise ValueError(f"{step_dir}/manifest.json: checksum mismatch with COMPLETE")
    manifest = json.loads(raw)
    if manifest.get("format") != "varuna-checkpoint":
        raise ValueError(f"{step_dir}/manifest.json: not a varuna checkpoint manifest")
    if manifest.get("version") != 1:
        raise ValueError(f"{step_dir}/manifest.json: unsupported manifest version "
                         f"{manifest.get('version')!r} (this module reads version 1)")
    if manifest.get("step") != int(m.group(1)):
        raise ValueError(f"{step_dir}/manifest.json: manifest is for step "
                         f"{manifest.get('step')!r}")
    for f in manifest["files"]:
        path = os.path.join(step_dir, f["name"])
        try:
            with open(path, "rb") as fh:
                data = fh.read()
        except OSError as e:
            raise ValueError(f"{path}: {e.strerror}") from None
        if len(data) != f["bytes"]:
            raise ValueError(f"{path}: {len(data)} bytes, the manifest says {f['bytes']}")
        if zlib.crc32(data) != f["crc32"]:
            raise ValueError(f"{path}: checksum mismatch with the manifest")
    return manifest


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


def latest(ckpt_dir):
    """The newest complete, intact `step-<N>` directory under ckpt_dir."""
    return _newest(ckpt_dir)[0]


def load(path, optimizer_state=False, frozen=False):
    """The tensors of a checkpoint as {name: torch.Tensor}: `path` is a
    `step-<N>` directory or a checkpoint directory (its newest complete
    step). With optimizer_state, the `optimizer/...` tensors too; with
    frozen, the `frozen/...` ones (constants training never changes)."""
    from safetensors.torch import load_file

    if os.path.exists(os.path.join(path, "manifest.json")):
        manifest = _check(path)
    else:  # checked while choosing it
        path, manifest = _newest(path)
    out = {}
    for f in sorted(manifest["files"], key=lambda f: f["section"]):
        file = os.path.join(path, f["name"])
        for name, t in load_file(file).items():
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
    differs. Nothing is loaded then."""
    import torch

    if type(model).__name__ == "OptimizedModule" and hasattr(model, "_orig_mod"):
        model = model._orig_mod
    if os.path.exists(os.path.join(path, "manifest.json")):
        manifest = _check(path)
    else:
        path, manifest = _newest(path)
    state = manifest.get("state", {})
    kind = state.get("optimizer")
    classes = {"adamw": torch.optim.AdamW, "sgd": torch.optim.SGD}
    if kind not in classes:
        raise ValueError(f"{path}: trained with optimizer {kind!r}, which has no torch.optim "
                         "counterpart here (adamw: torch.optim.AdamW, sgd: torch.optim.SGD)")
    if type(optimizer) is not classes[kind]:
        raise ValueError(f"{path}: trained with {kind} ({classes[kind].__name__}); the "
                         f"optimizer given is a {type(optimizer).__name__}")
    steps = int(state.get("optimizer_step", manifest["step"]))
    tensors = {n: t for n, t in load(path, optimizer_state=True).items()
               if n.startswith("optimizer/")}
    names = {}
    for n, p in model.named_parameters(remove_duplicate=False):
        names.setdefault(id(p), []).append(n)
    wanted = ("exp_avg", "exp_avg_sq") if kind == "adamw" else ("momentum_buffer",)
    new = {}
    for group in optimizer.param_groups:
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
                found["step"] = torch.tensor(float(steps))
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
        if not os.path.exists(os.path.join(path, "manifest.json")):
            path = latest(path)
        tensors = load(path, optimizer_state=True, frozen=True)
    except ValueError as e:
        print(f"varuna.checkpoint: error: {e}", file=sys.stderr)
        return 1
    print(path)
    for name, t in tensors.items():
        print(f"  {name} {list(t.shape)} {str(t.dtype).replace('torch.', '')}")
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
