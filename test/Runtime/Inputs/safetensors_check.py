"""Helpers for the checkpoint lit tests (test/Runtime/checkpoint-*.test).

    safetensors_check.py make-npy DIR        seeded arrays DIR/<name>.npy
    safetensors_check.py compare FILE DIR    load FILE with safetensors.numpy
                                             and compare with DIR/*.npy
    safetensors_check.py manifest STEPDIR    check manifest sizes + zlib.crc32
    safetensors_check.py save FILE           write FILE with safetensors.numpy
    safetensors_check.py truncate FILE N     drop the last N bytes
    safetensors_check.py flip FILE OFFSET    flip one bit (negative: from end)
    safetensors_check.py header FILE KIND    write a corrupt file (see below)
"""

import json
import os
import sys
import zlib

import numpy as np


def arrays():
    rng = np.random.default_rng(1234)
    return {
        "encoder.layers.0.weight": rng.standard_normal((3, 4)).astype(np.float32),
        "encoder.layers.0.bias": rng.standard_normal(4).astype(np.float16),
        "optimizer/exp_avg/encoder.layers.0.weight": rng.standard_normal((3, 4)),
        "position_ids": np.arange(7, dtype=np.int64).reshape(1, 7),
        "mask": rng.integers(0, 2, size=(2, 3)).astype(np.bool_),
        "counts": rng.integers(-100, 100, size=5).astype(np.int32),
        "scalar": np.array(2.5, dtype=np.float64),
    }


def npy_name(name):
    return name.replace("/", "__") + ".npy"


def main(argv):
    cmd = argv[1]
    if cmd == "make-npy":
        os.makedirs(argv[2], exist_ok=True)
        for name, a in arrays().items():
            np.save(os.path.join(argv[2], npy_name(name)), a)
            print("--tensor %s=%s" % (name, os.path.join(argv[2], npy_name(name))))
    elif cmd == "compare":
        from safetensors.numpy import load_file
        from safetensors import safe_open
        got = load_file(argv[2])
        want = {n: np.load(os.path.join(argv[3], npy_name(n))) for n in arrays()}
        assert sorted(got) == sorted(want), (sorted(got), sorted(want))
        for name in sorted(want):
            g, w = got[name], want[name]
            assert g.dtype == w.dtype, (name, g.dtype, w.dtype)
            assert g.shape == w.shape, (name, g.shape, w.shape)
            assert np.array_equal(g, w), name
            print("same %s %s %s" % (name, g.dtype, list(g.shape)))
        with safe_open(argv[2], framework="np") as f:
            meta = f.metadata()
        print("metadata " + " ".join("%s=%s" % kv for kv in sorted(meta.items())))
    elif cmd == "manifest":
        with open(os.path.join(argv[2], "manifest.json")) as f:
            manifest = json.load(f)
        for entry in manifest["files"]:
            with open(os.path.join(argv[2], entry["name"]), "rb") as f:
                data = f.read()
            assert len(data) == entry["bytes"], entry
            assert zlib.crc32(data) == entry["crc32"], entry
            print("verified %s" % entry["name"])
        print("state %s" % json.dumps(manifest["state"], sort_keys=True))
    elif cmd == "save":
        from safetensors.numpy import save_file
        save_file(arrays(), argv[2], metadata={"origin": "python"})
    elif cmd == "truncate":
        size = os.path.getsize(argv[2])
        os.truncate(argv[2], size - int(argv[3]))
    elif cmd == "flip":
        with open(argv[2], "r+b") as f:
            data = bytearray(f.read())
            data[int(argv[3])] ^= 0x01
            f.seek(0)
            f.write(data)
    elif cmd == "header":
        kind = argv[3]
        body = {
            "json": b'{"t": {"dtype": "F32",',
            "dtype": b'{"t":{"dtype":"F31","shape":[1],"data_offsets":[0,4]}}',
            "size": b'{"t":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}}',
            "range": b'{"t":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}',
            "overlap": b'{"t":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},'
                       b'"u":{"dtype":"F32","shape":[1],"data_offsets":[2,6]}}',
        }
        if kind == "length":
            data = (1 << 40).to_bytes(8, "little") + b"{}"
        else:
            pad = 8 if kind == "overlap" else 4
            data = len(body[kind]).to_bytes(8, "little") + body[kind] + bytes(pad)
        with open(argv[2], "wb") as f:
            f.write(data)
    else:
        sys.exit("unknown command " + cmd)


if __name__ == "__main__":
    main(sys.argv)
