"""Fault handling of varuna-run's ranks (run by faults.test).

    faults.py JOBDIR SCENARIO

launcher-kill: varuna-run --stages 2 launches two ranks; one of them is
  killed (SIGKILL) after a few steps; the launcher must stop the other and
  exit 1 within 10 s, naming the rank and the signal.
peer-kill:     two ranks started by hand (RANK etc. set, as torchrun does);
  rank 1 is killed; rank 0 must exit 1 within the timeout with an error
  naming the failed communication.
no-peer:       only rank 0 of 2 starts; it must give up at the rendezvous
  after its --timeout, saying so.
port-in-use:   MASTER_PORT is taken by another socket; rank 0 must fail with
  a clear error instead of hanging.
random-kill:   seeded trials of a 2x2 run that checkpoints every step; a
  random rank is killed (SIGKILL) at a random moment -- during the
  rendezvous, a step, an all-reduce or a checkpoint write. Every time the
  launcher must stop within 10 s naming the rank, leave no rank behind, and
  the newest complete checkpoint (if any; "step-K" holds the state after K
  steps) must resume under 2x1 with step K.
Prints what happened; exits 1 if the behaviour is not the expected one."""
import os
import random
import signal
import socket
import subprocess
import sys
import time

job, scenario = sys.argv[1], sys.argv[2]
run = ["varuna-run", job, "--stages", "2", "--batch", "8", "--micro-batch", "2",
       "--synthetic"]


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def children(pid):
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True)
    return [int(p) for p in out.stdout.split()]


def wait_for_steps(proc, n):
    for _ in range(n):
        line = proc.stdout.readline()
        if not line:
            fail("varuna-run stopped before training: " + proc.stderr.read())


if scenario == "launcher-kill":
    p = subprocess.Popen(run + ["--steps", "100000", "--timeout", "30"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_for_steps(p, random.Random(1).randint(3, 20))
    ranks = children(p.pid)
    if len(ranks) != 2:
        fail(f"expected 2 rank processes, found {ranks}")
    victim = ranks[1]
    t = time.time()
    os.kill(victim, signal.SIGKILL)
    try:
        p.wait(timeout=10)
    except subprocess.TimeoutExpired:
        p.kill()
        fail("the launcher did not stop within 10 s of a rank's death")
    err = p.stderr.read()
    print(f"launcher exited {p.returncode} after {time.time() - t:.2f} s")
    print(err.strip().splitlines()[-1])
    if p.returncode != 1 or "was killed by signal" not in err:
        fail("expected exit 1 and 'rank N was killed by signal'")
elif scenario == "peer-kill":
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()),
               WORLD_SIZE="2")
    ps = [subprocess.Popen(run + ["--steps", "100000", "--timeout", "20"],
                           env=dict(env, RANK=str(r)), stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True) for r in (0, 1)]
    wait_for_steps(ps[0], 5)
    t = time.time()
    ps[1].kill()
    try:
        ps[0].wait(timeout=25)
    except subprocess.TimeoutExpired:
        ps[0].kill()
        fail("rank 0 hung after its peer died")
    err = ps[0].stderr.read()
    print(f"rank 0 exited {ps[0].returncode} after {time.time() - t:.2f} s")
    print(err.strip().splitlines()[0][:300])
    if ps[0].returncode != 1 or "Gloo call" not in err:
        fail("expected exit 1 and a failed Gloo call")
elif scenario == "no-peer":
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()),
               WORLD_SIZE="2", RANK="0")
    t = time.time()
    r = subprocess.run(run + ["--steps", "1", "--timeout", "2"], env=env,
                       capture_output=True, text=True, timeout=60)
    print(f"rank 0 exited {r.returncode} after {time.time() - t:.2f} s")
    print(r.stderr.strip()[:300])
    if r.returncode != 1 or "rendezvous" not in r.stderr or "timeout 2 s" not in r.stderr:
        fail("expected exit 1 and a rendezvous error naming the timeout")
elif scenario == "port-in-use":
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(1)
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(s.getsockname()[1]),
               WORLD_SIZE="2", RANK="0")
    r = subprocess.run(run + ["--steps", "1", "--timeout", "2"], env=env,
                       capture_output=True, text=True, timeout=60)
    print(f"rank 0 exited {r.returncode}")
    print(r.stderr.strip()[:300])
    if r.returncode != 1 or "rendezvous at 127.0.0.1:" not in r.stderr:
        fail("expected exit 1 and a rendezvous error naming the address")
elif scenario == "random-kill":
    import shutil
    rng = random.Random(int(os.environ.get("VARUNA_FAULT_SEED", "7")))
    ckpt = job + ".ckpt"
    for trial in range(4):
        shutil.rmtree(ckpt, ignore_errors=True)
        p = subprocess.Popen(["varuna-run", job, "--stages", "2", "--replicas", "2",
                              "--batch", "8", "--micro-batch", "2", "--synthetic",
                              "--steps", "100000", "--timeout", "30",
                              "--checkpoint-dir", ckpt, "--checkpoint-every", "1"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        delay = rng.uniform(0.2, 4.0)
        time.sleep(delay)
        ranks = children(p.pid)
        for _ in range(100):  # a loaded machine may still be starting them
            if len(ranks) == 4 or p.poll() is not None:
                break
            time.sleep(0.1)
            ranks = children(p.pid)
        if p.poll() is not None or len(ranks) != 4:
            for pid in children(p.pid) + [p.pid]:  # (reading its stderr
                os.kill(pid, signal.SIGKILL)         # waits for its end)
            fail(f"trial {trial}: expected 4 running ranks, found {ranks} "
                 f"(exit {p.wait()}): {p.stderr.read()[-300:]}")
        victim = rng.randrange(4)
        t = time.time()
        os.kill(ranks[victim], signal.SIGKILL)
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            fail(f"trial {trial}: the launcher did not stop within 10 s")
        err = p.stderr.read()
        def alive(pid):
            try:  # a zombie waits for its parent only; a vanished pid is gone
                return open(f"/proc/{pid}/stat").read().split()[2] != "Z"
            except OSError:
                return False
        left = [r for r in ranks if alive(r)]
        if p.returncode != 1 or "was killed by signal" not in err or left:
            fail(f"trial {trial}: exit {p.returncode}, ranks left {left}: {err[-300:]}")
        latest = subprocess.run(["varuna-ckpt", "latest", ckpt], capture_output=True,
                                text=True)
        step = None
        if latest.returncode == 0:
            step = int(latest.stdout.split()[1])
            r = subprocess.run(["varuna-run", job, "--stages", "2", "--batch", "8",
                                "--micro-batch", "2", "--synthetic", "--steps",
                                str(step + 2), "--timeout", "30", "--checkpoint-dir",
                                ckpt, "--resume"], capture_output=True, text=True,
                               timeout=120)
            first = next((line for line in r.stdout.splitlines()
                          if line.startswith("step ")), "")
            if r.returncode != 0 or not first.startswith(f"step {step} "):
                fail(f"trial {trial}: resuming from step {step} failed: "
                     f"{first!r} {r.stderr[-300:]}")
        print(f"trial {trial}: rank {victim} killed after {delay:.1f} s, launcher "
              f"stopped in {time.time() - t:.2f} s, newest checkpoint "
              f"{'none' if step is None else step}" +
              ("" if step is None else ", resumed under 2x1"))
    shutil.rmtree(ckpt, ignore_errors=True)
else:
    fail("unknown scenario " + scenario)
print("ok:", scenario)
