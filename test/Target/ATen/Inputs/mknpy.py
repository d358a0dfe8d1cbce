"""Write test .npy files for varuna-eval's error tests.

    python3 mknpy.py KIND OUT.npy

KIND: ids_short (int64 [2, 15]), ids_b3 (int64 [3, 16]), ids_i32 (int32
[2, 16]), fortran (int64 [2, 16] in Fortran order), garbage (not .npy),
truncated (a valid header, half the data), as_u16 / as_i32 / as_f32 (OUT.npy
rewritten as uint16 / int32 / float32).
"""

import sys

import numpy as np


def main() -> int:
    kind, out = sys.argv[1], sys.argv[2]
    ids = np.arange(32, dtype=np.int64).reshape(2, 16) % 64
    if kind == "ids_short":
        np.save(out, ids[:, :15])
    elif kind == "ids_b3":
        np.save(out, np.zeros((3, 16), dtype=np.int64))
    elif kind == "ids_i32":
        np.save(out, ids.astype(np.int32))
    elif kind in ("as_u16", "as_i32", "as_f32"):
        np.save(out, np.load(out).astype({"as_u16": np.uint16, "as_i32": np.int32,
                                          "as_f32": np.float32}[kind]))
    elif kind == "fortran":
        np.save(out, np.asfortranarray(ids))
    elif kind == "garbage":
        with open(out, "wb") as fh:
            fh.write(b"this is not a numpy file\n")
    elif kind == "truncated":
        np.save(out, ids)
        with open(out, "r+b") as fh:
            fh.truncate(128 + 100)
    else:
        raise SystemExit(f"unknown kind {kind}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
