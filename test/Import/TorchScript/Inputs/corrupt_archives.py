"""Runs the importer on corrupted copies of a .pt archive; fails on a crash.

    python3 corrupt_archives.py TOOL MODEL.pt WORKDIR COUNT
"""
import os
import random
import subprocess
import sys

tool, model, workdir, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
os.makedirs(workdir, exist_ok=True)
data = open(model, "rb").read()
rng = random.Random(4321)
outcomes = {"imported": 0, "error": 0}
for i in range(count):
    buf = bytearray(data)
    kind = i % 3
    if kind == 0:
        buf = buf[: rng.randrange(len(buf))]
    elif kind == 1:
        for _ in range(rng.randint(1, 8)):
            buf[rng.randrange(len(buf))] = rng.randrange(256)
    else:
        at = rng.randrange(len(buf))
        buf[at:at] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 16)))
    path = os.path.join(workdir, "bad%03d.pt" % i)
    open(path, "wb").write(buf)
    try:
        p = subprocess.run([tool, "--import-torchscript", path, "-o", os.devnull],
                           capture_output=True, timeout=60)
    except subprocess.TimeoutExpired:
        sys.exit("hang on %s" % path)
    if p.returncode == 0:
        outcomes["imported"] += 1
    elif p.returncode == 1 and b"error:" in p.stderr:
        outcomes["error"] += 1
    else:
        sys.exit("%s: exit %d (crash?)\n%s" % (path, p.returncode, p.stderr.decode()[-2000:]))
    os.remove(path)
print(outcomes)
