"""Checks every `#varuna.data` reference of an imported TorchScript module.

    python3 check_data.py MODULE.mlir

For each `varuna.param @name ... init #varuna.data<file, offset, size,
digest>`, reads `size` bytes at `offset` of the file (relative to the
directory of the module's `varuna.source`), compares them with the tensor
`name` of torch.jit.load(source).state_dict(), and checks the digest: zlib's
CRC-32 of the first 4 KiB followed by the last 4 KiB (all when 8 KiB or
less). Prints one summary line.
"""
import os
import re
import sys
import warnings
import zlib

import torch

warnings.filterwarnings("ignore")
text = open(sys.argv[1]).read()
source = re.search(r'varuna.source = "([^"]+)"', text).group(1)
state = torch.jit.load(source).state_dict()
base = os.path.dirname(source)
pattern = re.compile(r'varuna\.param @([\w.]+) : [^\n]*? init '
                     r'#varuna\.data<file = "([^"]+)", offset = (\d+), size = (\d+), '
                     r'digest = (\d+)>')
checked = 0
for name, file, offset, size, digest in pattern.findall(text):
    t = state[name].contiguous()
    want = t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""
    with open(os.path.join(base, file), "rb") as fh:
        fh.seek(int(offset))
        got = fh.read(int(size))
    if got != want:
        sys.exit(f"parameter {name}: bytes at offset {offset} differ from the tensor")
    sample = got if len(got) <= 8192 else got[:4096] + got[-4096:]
    if zlib.crc32(sample) != int(digest):
        sys.exit(f"parameter {name}: digest {digest}, expected {zlib.crc32(sample)}")
    checked += 1
if checked == 0:
    sys.exit("no parameters with #varuna.data found")
print(f"checked {checked} parameters")
