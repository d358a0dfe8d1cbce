"""Runs an importer on corrupted copies of a model file; fails on any crash,
abort or hang. Each copy is truncated at a random point, has random bytes
flipped, or has random bytes inserted; the importer must either import it
(exit 0) or report an error (exit 1 with "error:" on stderr).

    corrupt_files.py TOOL FLAG MODEL WORKDIR COUNT [SEED] [TIMEOUT]

FLAG is the tool's import flag (--import-onnx, --import-torchscript).
Prints the counts of both outcomes."""
import os
import random
import subprocess
import sys

tool, flag, model, workdir = sys.argv[1:5]
count = int(sys.argv[5])
seed = int(sys.argv[6]) if len(sys.argv) > 6 else 1234
timeout = float(sys.argv[7]) if len(sys.argv) > 7 else 20
os.makedirs(workdir, exist_ok=True)
data = open(model, "rb").read()
suffix = os.path.splitext(model)[1]
rng = random.Random(seed)
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
    path = os.path.join(workdir, "bad%03d%s" % (i, suffix))
    open(path, "wb").write(buf)
    try:
        p = subprocess.run([tool, flag, path, "-o", os.devnull],
                           capture_output=True, timeout=timeout)
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
