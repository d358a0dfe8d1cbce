"""The Python benchmarks' shared set-up: the repository's python/ on the
import path, the GPT shape options every benchmark takes, and a GPT-style
model exported and compiled into a fresh work directory.

    import benchlib
    ap = argparse.ArgumentParser()
    benchlib.gpt_options(ap, layers=4, hidden=256, seq=128, vocab=1024)
    args = ap.parse_args()
    work, job, names = benchlib.compiled_gpt(args, "varuna-x-", batch=2)
    subprocess.run([benchlib.tool(args, "varuna-run"), job, ...])"""
import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile
import warnings

warnings.filterwarnings("ignore")
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))

import varuna  # noqa: E402
from varuna import models  # noqa: E402


def gpt_options(ap, layers, hidden, seq, vocab, heads=4):
    """--build and the GPT's shape, with these defaults."""
    ap.add_argument("--build", default=os.path.join(HERE, "..", "build"))
    ap.add_argument("--layers", type=int, default=layers)
    ap.add_argument("--hidden", type=int, default=hidden)
    ap.add_argument("--heads", type=int, default=heads)
    ap.add_argument("--seq", type=int, default=seq)
    ap.add_argument("--vocab", type=int, default=vocab)


def gpt_config(args):
    """The keyword arguments of models.make("gpt", ...) for args' shape."""
    return dict(layers=args.layers, hidden=args.hidden, heads=args.heads, seq=args.seq,
                vocab=args.vocab)


def tool(args, name):
    """The path of a built tool (build/bin/NAME)."""
    return os.path.join(args.build, "bin", name)


def compiled_gpt(args, prefix, batch):
    """Exports the GPT of args' shape (example batch `batch`) to WORK/gpt.onnx
    in a new temporary directory and compiles it to WORK/job; returns (WORK,
    WORK/job, the graph's input names). WORK is removed when the bench
    exits."""
    work = tempfile.mkdtemp(prefix=prefix)
    atexit.register(shutil.rmtree, work, ignore_errors=True)
    model, example, names = models.make("gpt", batch=batch, **gpt_config(args))
    onnx = os.path.join(work, "gpt.onnx")
    varuna.export(model, example, onnx)
    job = os.path.join(work, "job")
    subprocess.run([tool(args, "varuna-compile"), onnx, "-o", job], check=True,
                   stdout=subprocess.DEVNULL)
    return work, job, names


def free_port():
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def adamw_gpt_job(args, prefix, batch, lr=1e-4):
    """compiled_gpt plus WORK/train.json: AdamW at `lr`, what the benchmarks
    that compare with torch.optim.AdamW train with."""
    work, job, names = compiled_gpt(args, prefix, batch)
    json.dump({"optimizer": {"type": "adamw", "lr": lr}},
              open(os.path.join(work, "train.json"), "w"))
    return work, job, names


def torch_worker_steps(rank, port, steps, make_step, out):
    """A torch.multiprocessing worker of two (mp.spawn(torch_worker_steps,
    args=(port, steps, make_step, out), nprocs=2)): joins the Gloo process
    group at 127.0.0.1:`port` with one compute thread, builds its training
    step with make_step(rank) (a picklable function returning a function of
    nothing), times `steps` calls of it between barriers and, on rank 0,
    writes the times to `out` (JSON)."""
    import time
    import torch
    import torch.distributed as dist
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=2)
    one_step = make_step(rank)
    times = []
    for _ in range(steps):
        dist.barrier()
        t = time.perf_counter()
        one_step()
        dist.barrier()
        times.append(time.perf_counter() - t)
    if rank == 0:
        json.dump(times, open(out, "w"))
    dist.destroy_process_group()
