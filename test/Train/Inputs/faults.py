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
else:
    fail("unknown scenario " + scenario)
print("ok:", scenario)
