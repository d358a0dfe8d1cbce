"""checkpoint-load.test: varuna.checkpoint into the GPT nn.Module, against
the run's --dump-params; then a model that does not match, a corrupted
section file, no intact checkpoint left.

    load_checkpoint.py CKPT_DIR DUMPED_PARAMS_DIR"""
import os
import sys
import warnings

import numpy as np
import torch

warnings.filterwarnings("ignore")
import varuna.checkpoint as vc  # noqa: E402
from varuna import models  # noqa: E402

ck, dumped = sys.argv[1], sys.argv[2]
print("latest:", os.path.basename(vc.latest(ck)))
model, _, _ = models.make("gpt", batch=2)
missing, unexpected = vc.load_into(model, ck)
print(f"loaded: {len(vc.load(ck))} tensors, missing {missing}, unexpected {unexpected}")
print("lm_head.weight is wte.weight:", model.lm_head.weight is model.wte.weight)
n = 0
for name, p in model.named_parameters():  # the tie once
    want = torch.from_numpy(np.load(os.path.join(dumped, name + ".npy")))
    assert torch.equal(p.detach(), want), name
    n += 1
print(f"equal to the run's final parameters: {n}")
print("with optimizer state:", len(vc.load(ck, optimizer_state=True)), "tensors")

# A torch.compile wrapper, as varuna.export takes it: loaded into the module
# it wraps (its names have the wrapper's "_orig_mod." prefix: refused).
wrapped = torch.compile(models.make("gpt", batch=2)[0])
print("compiled wrapper:", vc.load_into(wrapped, ck),
      torch.equal(wrapped._orig_mod.wte.weight.detach(), model.wte.weight.detach()))

bigger = models.make("gpt", batch=2)[0]
bigger.extra = torch.nn.Linear(2, 2, bias=False)
try:
    vc.load_into(bigger, ck)
except ValueError as e:
    print("mismatch: ValueError:", e)

# Another configuration (a smaller vocabulary): an error before anything is
# copied (load_state_dict alone had overwritten ln_f.weight, then raised).
smaller = models.make("gpt", batch=2, vocab=models.config("gpt").vocab - 1)[0]
before = {n: t.clone() for n, t in smaller.state_dict().items()}
try:
    vc.load_into(smaller, ck)
except ValueError as e:
    print("shape: ValueError:", e)
print("untouched:", all(torch.equal(before[n], t) for n, t in smaller.state_dict().items()))

# A step directory copied under another step's name is not that step (as
# varuna-run --resume and varuna-ckpt see it; before, load took it).
import shutil
copied = ck + ".copied"
shutil.copytree(vc.latest(ck), os.path.join(copied, "step-200"))
try:
    vc.load(os.path.join(copied, "step-200"))
except ValueError as e:
    print("copied: ValueError:", e)
shutil.rmtree(copied)

step = vc.latest(ck)
path = os.path.join(step, "section-1.safetensors")
data = bytearray(open(path, "rb").read())
data[-3] ^= 0xFF
open(path, "wb").write(bytes(data))
try:
    vc.load(step)
except ValueError as e:
    print("corrupt: ValueError:", e)
try:
    vc.load(ck)  # step-4 is the only one: nothing intact left
except ValueError as e:
    print("fallback:", str(e).splitlines()[0].split(": ", 1)[1])

# A newer step skipped for an older one is a warning naming it and why
# (the older one was taken silently: stale weights in the model).
import subprocess
two = ck + ".two"
shutil.rmtree(two, ignore_errors=True)
for n in (2, 4):
    subprocess.run(["varuna-ckpt", "write", two, "--step", str(n), "--demo", "1"],
                   check=True, stdout=subprocess.DEVNULL)
newest = os.path.join(two, "step-4", "section-0.safetensors")
data = bytearray(open(newest, "rb").read())
data[-3] ^= 0xFF
open(newest, "wb").write(bytes(data))
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    took = os.path.basename(vc.latest(two))
print("older taken:", took, "warned:", [str(w.message) for w in caught])
shutil.rmtree(two)
