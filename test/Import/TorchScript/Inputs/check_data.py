"""Checks every `#varuna.data` reference of an imported TorchScript module.

    python3 check_data.py MODULE.mlir

For each `varuna.param @name ... init #varuna.data<file, offset, size>`, reads
`size` bytes at `offset` of the file (relative to the directory of the
module's `varuna.source`) and compares them with the tensor `name` of
torch.jit.load(source).state_dict(). Prints one summary line.
"""
import os
import re
import sys
import warnings

import torch

warnings.filterwarnings("ignore")
text = open(sys.argv[1]).read()
source = re.search(r'varuna.source = "([^"]+)"', text).group(1)
state = torch.jit.load(source).state_dict()
base = os.path.dirname(source)
pattern = re.compile(r'varuna\.param @([\w.]+) : [^\n]*? init '
                     r'#varuna\.data<file = "([^"]+)", offset = (\d+), size = (\d+)>')
checked = 0
for name, file, offset, size in pattern.findall(text):
    t = state[name].contiguous()
    want = t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""
    with open(os.path.join(base, file), "rb") as fh:
        fh.seek(int(offset))
        got = fh.read(int(size))
    if got != want:
        sys.exit(f"parameter {name}: bytes at offset {offset} differ from the tensor")
    checked += 1
if checked == 0:
    sys.exit("no parameters with #varuna.data found")
print(f"checked {checked} parameters")
