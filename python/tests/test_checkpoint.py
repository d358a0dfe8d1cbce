"""Tests for varuna.checkpoint on checkpoints written here by hand, as
varuna-run writes them (docs/checkpoints.md): per-section safetensors
files, manifest.json (their sizes and CRC-32s) and a COMPLETE marker
naming the manifest's CRC-32.

Run: python3 -m pytest -q python/tests
"""

import json
import os
import subprocess
import sys
import zlib

import pytest
import torch
import torch.nn as nn

import varuna.checkpoint as vc

safetensors_torch = pytest.importorskip("safetensors.torch")

PYTHON_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 3)


def write_manifest(step_dir, step, manifest):
    """manifest.json (a dict, or raw bytes as they are) and a COMPLETE
    marker whose CRC-32 matches it: a manifest damaged before it was
    checksummed."""
    raw = manifest if isinstance(manifest, bytes) else json.dumps(manifest).encode()
    (step_dir / "manifest.json").write_bytes(raw)
    (step_dir / "COMPLETE").write_text(
        f"varuna-checkpoint step={step} manifest-crc32=0x{zlib.crc32(raw):08x}\n")


def write_step(ckpt, step, tensors, state=None):
    """ckpt/step-<step>, complete and intact; returns (dir, its manifest)."""
    d = ckpt / f"step-{step}"
    d.mkdir(parents=True)
    safetensors_torch.save_file({n: t.contiguous() for n, t in tensors.items()},
                                str(d / "section-0.safetensors"))
    data = (d / "section-0.safetensors").read_bytes()
    manifest = {"format": "varuna-checkpoint", "version": 1, "step": step,
                "files": [{"name": "section-0.safetensors", "section": 0,
                           "bytes": len(data), "crc32": zlib.crc32(data)}],
                "state": state or {}}
    write_manifest(d, step, manifest)
    return d, manifest


def weights(value):
    return {"lin.weight": torch.full((3, 4), float(value)),
            "lin.bias": torch.full((3,), float(value))}


def damage(step_dir, manifest, how):
    """Damages step_dir as the tester did; returns the text the error must
    name (the file, and what is wrong with it)."""
    bad = json.loads(json.dumps(manifest))
    n = manifest["step"]
    if how == "marker_not_utf8":
        (step_dir / "COMPLETE").write_bytes(b"\xff\xfe varuna-checkpoint \x80\n")
        return rf"step-{n}.COMPLETE: malformed marker"
    if how == "marker_is_a_directory":
        (step_dir / "COMPLETE").unlink()
        (step_dir / "COMPLETE").mkdir()
        return rf"step-{n}.COMPLETE: cannot read the marker"
    if how == "manifest_deleted":
        (step_dir / "manifest.json").unlink()
        return rf"step-{n}.manifest\.json: cannot read the manifest"
    if how == "no_files":
        del bad["files"]
        write_manifest(step_dir, n, bad)
        return rf"step-{n}.manifest\.json: \"files\" must be a list"
    if how == "files_a_dict":
        bad["files"] = {"section-0.safetensors": bad["files"][0]}
        write_manifest(step_dir, n, bad)
        return rf"step-{n}.manifest\.json: \"files\" must be a list"
    if how == "json_a_list":
        write_manifest(step_dir, n, b"[1, 2]")
        return rf"step-{n}.manifest\.json: the manifest is a JSON list, not an object"
    if how == "invalid_json":
        write_manifest(step_dir, n, b'{"format": "varuna-checkpoint", ')
        return rf"step-{n}.manifest\.json: not valid JSON"
    if how == "entry_without_crc32":
        del bad["files"][0]["crc32"]
        write_manifest(step_dir, n, bad)
        return rf"step-{n}.manifest\.json: files\[0\] has no 'crc32'"
    if how == "section_not_an_integer":
        bad["files"][0]["section"] = "0"
        write_manifest(step_dir, n, bad)
        return rf"step-{n}.manifest\.json: files\[0\] 'section' is \"0\", not a"
    if how == "entry_name_outside":
        bad["files"][0]["name"] = "../step-1/section-0.safetensors"
        write_manifest(step_dir, n, bad)
        return rf"step-{n}.manifest\.json: files\[0\] names '\.\./step-1/.*not a file of the step"
    if how == "not_safetensors":
        junk = b"not a safetensors file at all"
        (step_dir / "section-0.safetensors").write_bytes(junk)
        bad["files"][0].update(bytes=len(junk), crc32=zlib.crc32(junk))
        write_manifest(step_dir, n, bad)
        return rf"step-{n}.section-0\.safetensors: not a safetensors file"
    raise AssertionError(how)


DAMAGES = ["marker_not_utf8", "marker_is_a_directory", "manifest_deleted", "no_files",
           "files_a_dict", "json_a_list", "invalid_json", "entry_without_crc32",
           "section_not_an_integer",
           "entry_name_outside", "not_safetensors"]


@pytest.mark.parametrize("how", DAMAGES)
def test_damaged_step_is_a_value_error_naming_the_file(tmp_path, how):
    ckpt = tmp_path / "ckpt"
    write_step(ckpt, 1, weights(1))
    step2, manifest = write_step(ckpt, 2, weights(2))
    what = damage(step2, manifest, how)
    # Given the step itself: a ValueError naming the file and the fault.
    with pytest.raises(ValueError, match=what):
        vc.load(str(step2))
    model = Net()
    with pytest.raises(ValueError, match=what):
        vc.load_into(model, str(step2))
    if how != "not_safetensors":  # (the manifest is intact: the step is chosen)
        # Given the checkpoint directory: the damaged step is skipped, saying
        # why, and the older good one is taken.
        with pytest.warns(UserWarning, match=r"skipped .*" + what):
            state = vc.load(str(ckpt))
        assert torch.equal(state["lin.bias"], torch.full((3,), 1.0))
        with pytest.warns(UserWarning, match=what):
            assert vc.latest(str(ckpt)) == str(ckpt / "step-1")


def test_file_entry_without_section_loads(tmp_path):
    # varuna-run's reader takes an entry without "section" (a file of no
    # section, -1): so does this one (it raised KeyError 'section').
    step, manifest = write_step(tmp_path / "ckpt", 1, weights(1))
    del manifest["files"][0]["section"]
    write_manifest(step, 1, manifest)
    model = Net()
    assert vc.load_into(model, str(step)) == ([], [])
    assert torch.equal(model.lin.bias.detach(), torch.full((3,), 1.0))


def test_only_damaged_steps_say_why(tmp_path):
    ckpt = tmp_path / "ckpt"
    step, manifest = write_step(ckpt, 3, weights(3))
    damage(step, manifest, "json_a_list")
    with pytest.raises(ValueError, match=r"no complete checkpoint\n  skipped .*step-3"
                                         r".manifest\.json: the manifest is a JSON list"):
        vc.load(str(ckpt))


def adamw_step(tmp_path, steps=5):
    tensors = dict(weights(1))
    for key in ("exp_avg", "exp_avg_sq"):
        for n, t in weights(0.5).items():
            tensors[f"optimizer/{key}/{n}"] = t
    d, _ = write_step(tmp_path / "ckpt", steps, tensors,
                      state={"optimizer": "adamw", "optimizer_state": "exp_avg,exp_avg_sq",
                             "optimizer_step": str(steps)})
    return d


def test_load_optimizer_into_adamw(tmp_path):
    assert "load_optimizer_into" in vc.__all__
    d = adamw_step(tmp_path)
    model = Net()
    vc.load_into(model, str(d))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    assert vc.load_optimizer_into(opt, model, str(d)) == 2
    assert float(opt.state[model.lin.weight]["step"]) == 5.0
    model.lin.weight.grad = torch.ones(3, 4)
    model.lin.bias.grad = torch.ones(3)
    opt.step()


def test_load_optimizer_into_refuses_amsgrad(tmp_path):
    # AMSGrad's max_exp_avg_sq is no state varuna keeps: opt.step() raised
    # KeyError 'max_exp_avg_sq' after a load that said nothing.
    d = adamw_step(tmp_path)
    model = Net()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, amsgrad=True)
    with pytest.raises(ValueError, match=r"step-5: the optimizer has amsgrad=True \(param "
                                         r"group 0\), whose state \(max_exp_avg_sq\)"):
        vc.load_optimizer_into(opt, model, str(d))
    assert not opt.state  # nothing loaded


def test_cli_exits_quietly_when_the_reader_stops(tmp_path):
    # `python -m varuna.checkpoint CKPT | head -1` ended with a
    # BrokenPipeError traceback.
    write_step(tmp_path / "ckpt", 1, weights(1))
    proc = subprocess.Popen([sys.executable, "-m", "varuna.checkpoint", str(tmp_path / "ckpt")],
                            cwd=PYTHON_DIR, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()  # the reader is gone before anything is printed
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err.decode()
    assert b"BrokenPipe" not in err and b"Traceback" not in err, err.decode()


def test_cli_names_a_damaged_step(tmp_path):
    step, manifest = write_step(tmp_path / "ckpt", 1, weights(1))
    damage(step, manifest, "manifest_deleted")
    r = subprocess.run([sys.executable, "-m", "varuna.checkpoint", str(step)], cwd=PYTHON_DIR,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 1
    assert "step-1/manifest.json: cannot read the manifest" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr
