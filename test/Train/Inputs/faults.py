"""Fault handling of varuna-run's ranks (run by faults.test).

    faults.py JOBDIR SCENARIO

launcher-kill: varuna-run --stages 2 launches two ranks; one of them is
  killed (SIGKILL) after a few steps; the launcher must stop the other and
  exit 1 within 10 s, naming the rank and the signal. With --trace over an
  earlier run's timeline: the surviving rank's spans up to the failure
  replace it, said so (before: no trace, the old one left as if this run's).
crash-signal:  a rank is sent SIGSEGV, then (another run) SIGABRT and SIGQUIT,
  from outside (kill(1)): it must die of it -- LLVM's stack dump alone
  returned and the rank trained on -- and the launcher exit 1 within 10 s
  naming the signal.
kill-two:      two ranks of a 2x2 run killed (SIGKILL) at once: both named,
  exit 1 within 10 s.
stall:         rank 0 (serving the rendezvous) frozen (SIGSTOP) as it starts,
  --timeout 3: every process ends with exit 1 within 30 s, the error a line
  without c10's 16-frame backtrace, and the launcher names rank 0 as
  stopped (before: only the peer that timed out waiting for it).
freeze-checkpoint: a 2x2 run checkpointing every step (--timeout 3,
  --checkpoint-timeout 300) whose last rank (replica 1, no writer) is frozen
  at a random moment, three times: the launcher must end the run within 15 s
  naming the rank (before, a freeze while the others waited in the
  checkpoint's commit kept them there for --checkpoint-timeout, an hour by
  default, the launcher silent).
stop-starting: a 2x2 run whose rank 0 (the rendezvous) is held back
  (SIGSTOP) while rank 1, waiting for it, alone is sent SIGTERM; then rank 0
  goes on: every rank must stop, the launcher exit 143 within 10 s (before,
  the others waited for rank 1 until their --timeout, then exit 1).
freeze-replica: two replicas started by hand; rank 1 frozen (SIGSTOP),
  --timeout 3: rank 0's all-reduce times out, exit 1, saying a rank of the
  group did not take part in time.
peer-kill:     two ranks started by hand (RANK etc. set, as torchrun does);
  rank 1 is killed; rank 0 must exit 1 within the timeout with an error
  naming the failed communication.
no-peer:       only rank 0 of 2 starts; it must give up at the rendezvous
  after its --timeout, saying so.
port-in-use:   MASTER_PORT is taken by another socket; rank 0 must fail with
  a clear error instead of hanging.
silent-store:  rank 1 meets a program on MASTER_PORT that accepts and never
  answers (--timeout 2): exit 1 within 15 s, naming the wait (before: it
  waited forever).
stall-serving: rank 0 frozen (SIGSTOP) once it listens as the store
  (--timeout 3): exit 1 within 30 s, the launcher naming rank 0 as stopped
  (before: the other rank waited forever).
mismatch:      two ranks started by hand with other learning rates, then
  other --steps: both exit 1 naming what differs (before: trained apart
  silently; failed later as a lost peer).
unshared:      two ranks started by hand with checkpoint directories of
  their own: both exit 1 before the first step, saying the directory must
  be shared.
dup-rank:      a third process started by hand with RANK=1 while ranks 0
  and 1 train: it says it was started twice and exits 1; the job finishes.
random-kill:   seeded trials of a 2x2 run that checkpoints every step; a
  random rank is killed (SIGKILL) at a random moment -- during the
  rendezvous, a step, an all-reduce or a checkpoint write. Every time the
  launcher must stop within 10 s naming the rank, leave no rank behind, and
  the newest complete checkpoint (if any; "step-K" holds the state after K
  steps) must resume under 2x1 with step K.
stop-launcher: a 2x2 run is sent SIGTERM (then, in other runs, SIGINT as a
  terminal's Ctrl-C sends it, and SIGUSR1 as Slurm's --signal=USR1@N warns
  of the time limit) at the launcher; every rank must stop after the
  same step K with a checkpoint step-(K+1), the launcher exit 128 + the
  signal, and resuming continue with exactly the losses of a run never
  stopped.
stop-orphan:   the launcher of a 2x2 run is killed (SIGKILL); its ranks must
  still stop (parent-death signal) within 30 s, with a checkpoint.
stop-rank:     two ranks started by hand; only rank 1 is sent SIGTERM (then,
  in another run, SIGINT); both must stop after the same step and write the
  checkpoint; rank 1 exits 128 + its signal, rank 0 143.
stop-twice:    SIGINT at the launcher twice, 0.3 s apart, during a 3 s
  step: the second kills the ranks at once (exit 130 within 5 s, no
  rank left).
stop-timeout:  SIGTERM twice at once from one sender (GNU timeout's expiry:
  its child, then its process group, the child again), at the launcher of
  a 2x1 run and at one process: one request -- stopped after a step with a
  checkpoint (the second was taken for "again: kill now" and lost it).
stop-one-dir:  a run (2 stages) writes a checkpoint directory; a second run
  given it, with --resume, one process or launching ranks, is refused
  naming the first's pid; after the first stops, it resumes.
stop-early:    SIGTERM at the launcher 0.1-1.5 s after it starts (parsing the
  job, ranks starting, at the rendezvous, loading): exit 143 (or killed by
  SIGTERM before it started any rank), no process left, no error.
stop-single:   P = D = 1 (one process) stops on SIGTERM, SIGINT, SIGHUP and
  SIGUSR1 after a step with a checkpoint, exit 128 + the signal.
stop-waiting:  one rank of two started by hand (its peer never comes), with
  --timeout 120; SIGTERM after 1.5 s: it must stop at once (exit 143 within
  5 s), saying where it waited -- rank 0 (serving the store) and rank 1
  (connecting to it) alike.
stop-finished: SIGTERM at the launcher of a 2x2 run as its last step's line
  appears (the ranks then write the final checkpoint and --dump-params):
  the run is complete, so exit 0 with checkpoint step-N -- not 143, which
  a scheduler would count as a failed run.
stop-validating: SIGTERM during a long validation pass (--eval-every 2, 8000
  batches: over 10 s here, a step takes milliseconds), 2 stages and one
  process: the pass is abandoned at the next batch -- exit 143 within 5 s,
  stopped after step K (the pass's) with checkpoint step-(K+1), K's metrics
  without a validation loss.
Prints what happened; exits 1 if the behaviour is not the expected one."""
import os
import random
import re
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


def by_hand(args_of_rank):
    """Ranks 0 and 1 of a world of 2 started by hand (as torchrun would),
    rank r running `args_of_rank(r)`; returns (their environment without
    RANK, the two processes)."""
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()),
               WORLD_SIZE="2")
    return env, [subprocess.Popen(args_of_rank(r), env=dict(env, RANK=str(r)),
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for r in (0, 1)]


def freeze_and_wait(p, rank0):
    """Freezes (SIGSTOP) the process rank0 of the launcher `p` and returns
    the launcher's stderr once it exits; fails if it runs on 30 s."""
    os.kill(rank0, signal.SIGSTOP)
    try:
        return p.communicate(timeout=30)[1]
    except subprocess.TimeoutExpired:
        p.kill()
        fail("still running 30 s after rank 0 froze")


def squatter(rank):
    """A socket listening on a free port that never answers, and the
    environment of rank `rank` of 2 whose MASTER_PORT it holds."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(8)
    return s, dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(s.getsockname()[1]),
                   WORLD_SIZE="2", RANK=str(rank))


def children(pid):
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True)
    return [int(p) for p in out.stdout.split()]


def stops_within(p, seconds, what):
    """Waits for the launcher `p` to exit; fails (killing it) after
    `seconds`."""
    try:
        p.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        p.kill()
        fail(f"{what}: the launcher did not stop within {seconds} s")


def wait_for_steps(proc, n):
    for _ in range(n):
        line = proc.stdout.readline()
        if not line:
            fail("varuna-run stopped before training: " + proc.stderr.read())


if scenario == "freeze-checkpoint":
    import shutil
    rng = random.Random(int(os.environ.get("VARUNA_FAULT_SEED", "11")))
    ckpt = job + ".freeze-ckpt"
    for trial in range(3):
        shutil.rmtree(ckpt, ignore_errors=True)
        p = subprocess.Popen(["varuna-run", job, "--stages", "2", "--replicas", "2",
                              "--batch", "8", "--micro-batch", "2", "--synthetic",
                              "--steps", "100000", "--timeout", "3",
                              "--checkpoint-timeout", "300", "--checkpoint-dir", ckpt,
                              "--checkpoint-every", "1"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        wait_for_steps(p, rng.randint(2, 12))
        ranks = sorted(children(p.pid))
        if len(ranks) != 4:
            p.kill()
            fail(f"expected 4 rank processes, found {ranks}")
        t = time.time()
        os.kill(ranks[3], signal.SIGSTOP)
        try:
            err = p.communicate(timeout=15)[1]
        except subprocess.TimeoutExpired:
            for pid in ranks + [p.pid]:
                os.kill(pid, signal.SIGKILL)
            fail(f"trial {trial}: still running 15 s after rank 3 froze")
        if p.returncode != 1 or not re.search(r"rank 3 (is|has been) stopped", err):
            fail(f"trial {trial}: exit {p.returncode}: {err[-400:]}")
        print(f"trial {trial}: exit 1 within 15 s, rank 3 named as stopped")
    shutil.rmtree(ckpt, ignore_errors=True)
elif scenario == "stop-starting":
    p = subprocess.Popen(run + ["--replicas", "2", "--steps", "100000", "--timeout", "60"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def rank_pid(r):
        for pid in children(p.pid):
            try:
                env = open(f"/proc/{pid}/environ", "rb").read().split(b"\0")
            except OSError:
                continue
            if f"RANK={r}".encode() in env:
                return pid
        return None

    def catches_term(pid):
        for line in open(f"/proc/{pid}/status"):
            if line.startswith("SigCgt:"):
                return int(line.split()[1], 16) >> (signal.SIGTERM - 1) & 1
        return 0

    deadline = time.time() + 30
    while (r0 := rank_pid(0)) is None and time.time() < deadline:
        time.sleep(0.01)
    if r0 is None:
        p.kill()
        fail("rank 0 did not start")
    os.kill(r0, signal.SIGSTOP)
    while not ((r1 := rank_pid(1)) and catches_term(r1)) and time.time() < deadline:
        time.sleep(0.05)
    time.sleep(0.5)  # waiting at the rendezvous
    t = time.time()
    os.kill(r1, signal.SIGTERM)
    time.sleep(0.5)
    os.kill(r0, signal.SIGCONT)
    try:
        err = p.communicate(timeout=10)[1]
    except subprocess.TimeoutExpired:
        for pid in children(p.pid) + [p.pid]:
            os.kill(pid, signal.SIGKILL)
        fail("still running 10 s after SIGTERM to rank 1")
    # The launcher names the rank that passed the request on (it said
    # "Terminated: asking the 2 rank(s)", as if it had been signalled).
    if (p.returncode != 143 or "rank 1: rendezvous" not in err
            or "rank 1 was asked to stop while waiting for its peers" not in err
            or "Terminated" in err):
        fail(f"exit {p.returncode}: {err[-600:]}")
    print(f"SIGTERM to rank 1 while starting: all stopped, exit 143 in {time.time() - t:.0f} s")
elif scenario == "launcher-kill":
    import json
    trace = job + ".killed-trace.json"
    with open(trace, "w") as fh:
        json.dump({"traceEvents": [{"name": "F0", "ph": "X", "pid": 7, "tid": 0,
                                    "ts": 0, "dur": 1}]}, fh)
    p = subprocess.Popen(run + ["--steps", "100000", "--timeout", "30", "--trace", trace],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_for_steps(p, random.Random(1).randint(3, 20))
    ranks = children(p.pid)
    if len(ranks) != 2:
        fail(f"expected 2 rank processes, found {ranks}")
    victim = ranks[1]
    t = time.time()
    os.kill(victim, signal.SIGKILL)
    stops_within(p, 10, "a rank's death")
    err = p.stderr.read()
    print(f"launcher exited {p.returncode} after {time.time() - t:.2f} s")
    # The launcher's line (the surviving rank's own error may come after).
    print(next((l for l in err.splitlines() if "was killed by signal" in l),
               err.strip().splitlines()[-1]))
    if p.returncode != 1 or "was killed by signal" not in err:
        fail("expected exit 1 and 'rank N was killed by signal'")
    print(next((l for l in err.splitlines() if "timeline" in l), "no line on the timeline"))
    events = json.load(open(trace))["traceEvents"]
    pids = sorted({e["pid"] for e in events if e.get("ph") == "X"})
    left = [f for f in os.listdir(os.path.dirname(trace)) if ".killed-trace.json." in f]
    print(f"partial timeline: {len(pids)} rank(s) {'but the earlier run' * (7 in pids)}, "
          f"{sum(e['name'] == 'F0' for e in events)} F0 spans, "
          f"parts left {left}")
elif scenario in ("crash-signal", "kill-two"):
    trials = ([(signal.SIGSEGV,), (signal.SIGABRT,), (signal.SIGQUIT,)]
              if scenario == "crash-signal" else [(signal.SIGKILL, signal.SIGKILL)])
    grid = ["--replicas", "2"] if scenario == "kill-two" else []
    for sigs in trials:
        p = subprocess.Popen(run + grid + ["--steps", "100000", "--timeout", "30"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        wait_for_steps(p, 3)
        ranks = sorted(children(p.pid))
        victims = ranks[1:1 + len(sigs)]
        t = time.time()
        for v, sig in zip(victims, sigs):
            os.kill(v, sig)
        stops_within(p, 10, str([s.name for s in sigs]))
        err = p.stderr.read()
        named = re.findall(r"error: rank (\d+) was killed by signal ([^;(]+?)"
                           r"(?: \(.*?\))?(?: too)?(?:;|$)", err, re.M)
        want = signal.strsignal(sigs[0])
        if (p.returncode != 1 or len(named) != len(sigs)
                or any(s != want for _, s in named)):
            fail(f"{[s.name for s in sigs]}: exit {p.returncode}, named {named}: "
                 f"{err[-400:]}")
        print(f"{'+'.join(s.name for s in sigs)}: exit 1 in <10 s, "
              f"{len(named)} rank(s) named: killed by signal {want}")
elif scenario == "stall":
    import threading
    t = time.time()
    p = subprocess.Popen(run + ["--steps", "3", "--timeout", "3"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    rank0 = None
    while rank0 is None and time.time() - t < 10:
        for c in children(p.pid):
            env = open(f"/proc/{c}/environ", "rb").read().split(b"\0")
            if b"RANK=0" in env:
                rank0 = c
        time.sleep(0.005)
    if rank0 is None:
        fail("rank 0 did not start")
    err = freeze_and_wait(p, rank0)
    took = time.time() - t
    if p.returncode != 1 or "frame #" in err or "Exception raised from" in err:
        fail(f"exit {p.returncode} after {took:.1f} s: {err[-600:]}")
    # The launcher names the frozen rank, not only the peer that timed out
    # (after the peer's failure, or, over --timeout, before it).
    if not re.search(r"rank 0 (is|has been) stopped \(SIGSTOP or a debugger\)", err):
        fail(f"the frozen rank 0 is not named: {err[-600:]}")
    print(f"rank 0 frozen at the rendezvous: exit 1 in <30 s, no backtrace, named")
    print(err.strip().splitlines()[0][:160])
elif scenario == "peer-kill":
    _, ps = by_hand(lambda r: run + ["--steps", "100000", "--timeout", "20"])
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
    # A failed send or receive names what it carried, not a raw tag number.
    if re.search(r"\(tag -?[0-9]+\)", err):
        fail(f"a raw tag number: {err[-600:]}")
elif scenario == "freeze-replica":
    # Ranks started by hand have no launcher to name a frozen peer: the
    # survivor's collective times out and says that a rank of the group did
    # not take part (Gloo does not say which).
    _, ps = by_hand(lambda r: ["varuna-run", job, "--replicas", "2", "--batch", "8",
                               "--micro-batch", "2", "--synthetic", "--steps", "100000",
                               "--timeout", "3"])
    wait_for_steps(ps[0], 5)
    t = time.time()
    os.kill(ps[1].pid, signal.SIGSTOP)
    try:
        ps[0].wait(timeout=30)
    except subprocess.TimeoutExpired:
        ps[0].kill()
        fail("rank 0 hung after its peer froze")
    finally:
        os.kill(ps[1].pid, signal.SIGCONT)
        ps[1].kill()
        ps[1].wait()
    err = ps[0].stderr.read()
    print(f"rank 0 exited {ps[0].returncode} within 30 s: {time.time() - t < 30}")
    print(err.strip().splitlines()[0][:1000])  # (the source path in it varies)
    if ps[0].returncode != 1 or "did not take part in time" not in err:
        fail("expected exit 1 and a collective's timeout saying a rank did not take part")
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
    s, env = squatter(rank=0)
    r = subprocess.run(run + ["--steps", "1", "--timeout", "2"], env=env,
                       capture_output=True, text=True, timeout=60)
    print(f"rank 0 exited {r.returncode}")
    print(r.stderr.strip()[:300])
    if r.returncode != 1 or "MASTER_PORT " + env["MASTER_PORT"] + " is in use" not in r.stderr:
        fail("expected exit 1 and an error naming the port in use")
elif scenario == "silent-store":
    # Something on MASTER_PORT accepts connections and never answers.
    s, env = squatter(rank=1)
    t = time.time()
    try:
        r = subprocess.run(run + ["--steps", "1", "--timeout", "2"], env=env,
                           capture_output=True, text=True, timeout=30)
    except subprocess.TimeoutExpired:
        fail("rank 1 still waiting 30 s after it met a store that does not answer")
    took = time.time() - t
    print(f"rank 1 exited {r.returncode}")
    print(r.stderr.strip()[:400])
    if r.returncode != 1 or took > 15 or "no answer within 5 s" not in r.stderr:
        fail(f"expected exit 1 within 15 s naming the wait; {took:.1f} s")
elif scenario == "stall-serving":
    # Rank 0 frozen once it serves the store (listening): before, the other
    # rank waited forever in c10d's client, whatever --timeout said.
    port = free_port()
    t = time.time()
    p = subprocess.Popen(run + ["--steps", "3", "--timeout", "3"],
                         env=dict(os.environ, MASTER_PORT=str(port)),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    rank0 = None
    # /proc/net/tcp{,6}: local address:port, remote, state 0A (listening).
    listening = re.compile(f":{port:04X} [0:]+ 0A ")
    while time.time() - t < 20:
        if rank0 is None:
            for c in children(p.pid):
                env = open(f"/proc/{c}/environ", "rb").read().split(b"\0")
                if b"RANK=0" in env:
                    rank0 = c
        if rank0 is not None and any(listening.search(open(f).read())
                                     for f in ("/proc/net/tcp", "/proc/net/tcp6")):
            break
        time.sleep(0.002)
    else:
        fail("rank 0 did not listen")
    err = freeze_and_wait(p, rank0)
    if p.returncode != 1 or not re.search(r"rank 0 (is|has been) stopped \(SIGSTOP or a "
                                          r"debugger\)", err):
        fail(f"exit {p.returncode}: {err[-600:]}")
    print("rank 0 frozen serving the rendezvous: exit 1 in <30 s, named")
elif scenario == "dup-rank":
    # RANK=1 given to a second process while the job trains: it must say so
    # and exit 1; the job goes on. (Started once the others train, so that
    # the store it meets is up -- at the same moment it could also find the
    # run already over.)
    env, ps = by_hand(lambda r: run + ["--steps", "40", "--timeout", "20"])
    wait_for_steps(ps[0], 1)
    dup = subprocess.run(run + ["--steps", "2", "--timeout", "10"], env=dict(env, RANK="1"),
                         capture_output=True, text=True, timeout=60)
    for q in ps:
        try:
            q.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            for k in ps:
                k.kill()
            fail("the job did not finish after the duplicate rank left")
    if dup.returncode != 1 or "rank 1 was started twice" not in dup.stderr:
        fail(f"duplicate exited {dup.returncode}: {dup.stderr[-400:]}")
    if any(q.returncode != 0 for q in ps):
        fail(f"the job's ranks exited {[q.returncode for q in ps]}")
    print(dup.stderr.strip().splitlines()[-1][:300])
elif scenario == "mismatch":
    # Two ranks started by hand with other learning rates (before: both
    # trained, the replicas drifting apart, exit 0), then other step counts
    # (before: the longer one failed later as "that rank is gone").
    # Then --trace on rank 0 only (before: both hung until their --timeout,
    # rank 0 waiting for the others' trace files).
    for what, extra in (("the training configuration", ("--config", "lr0.json", "lr1.json")),
                        ("--steps", ("--steps", "2", "3")),
                        ("--trace", ("--trace", f"{job}.trace.json", None))):
        def args(r):
            value = extra[1 + r]
            if value is None:
                return (["varuna-run", job, "--replicas", "2", "--batch", "8",
                         "--micro-batch", "2", "--synthetic", "--timeout", "20",
                         "--steps", "2"])
            if extra[0] == "--config":
                value = f"{job}.{value}"
                with open(value, "w") as f:
                    f.write('{"optimizer": {"type": "sgd", "lr": %s}}' % (0.1 if r else 0.001))
            return (["varuna-run", job, "--replicas", "2", "--batch", "8", "--micro-batch",
                     "2", "--synthetic", "--timeout", "20", extra[0], value]
                    + (["--steps", "2"] if extra[0] != "--steps" else []))
        _, ps = by_hand(args)
        errs = [q.communicate(timeout=60)[1] for q in ps]
        if any(q.returncode != 1 for q in ps) or not all(
                f"error: {what} differs between the ranks: here (rank {r} of 2)" in e
                for r, e in enumerate(errs)):
            fail(f"{what}: exits {[q.returncode for q in ps]}: {errs}")
        print(errs[1].strip().splitlines()[-1][:400])
elif scenario == "unshared":
    # Two ranks started by hand, each with a checkpoint directory of its own
    # (hosts without a shared file system): refused before the first step
    # (before: failed at the first checkpoint's commit).
    _, ps = by_hand(lambda r: run + ["--steps", "3", "--timeout", "20", "--checkpoint-dir",
                                     f"{job}.own{r}"])
    outs = [q.communicate(timeout=60) for q in ps]
    if any(q.returncode != 1 for q in ps) or any("step 0" in o for o, _ in outs):
        fail(f"exits {[q.returncode for q in ps]}: {[e[-300:] for _, e in outs]}")
    print(outs[0][1].strip().splitlines()[-1][:300])
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
        stops_within(p, 10, f"trial {trial}")
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
elif scenario.startswith("stop-"):
    import re
    import shutil
    ckpt = job + ".stop"

    def alive(pid):
        try:  # a zombie waits for its parent only; a vanished pid is gone
            return open(f"/proc/{pid}/stat").read().split()[2] != "Z"
        except OSError:
            return False

    def start(args, env=None):
        return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, env=env)

    def finish(p, within, what):
        try:
            out, err = p.communicate(timeout=within)
        except subprocess.TimeoutExpired:
            p.kill()
            fail(f"{what}: still running {within} s after the request")
        return out, err

    def stopped_after(err, what):
        m = re.search(r"stopped on request(?: \([^)]*\))? after step (\d+) of", err)
        if not m:
            fail(f"{what}: no 'stopped on request' message: {err[-300:]!r}")
        return int(m.group(1))

    def newest(what):
        r = subprocess.run(["varuna-ckpt", "latest", ckpt], capture_output=True,
                           text=True)
        if r.returncode != 0:
            fail(f"{what}: no complete checkpoint: {r.stderr[-300:]}")
        return int(r.stdout.split()[1])

    def losses(out):
        return {int(m.group(1)): m.group(2) for m in
                re.finditer(r"^step (\d+)  loss (\S+)", out, re.M)}

    grid = ["--stages", "2", "--replicas", "2", "--batch", "8", "--micro-batch", "2",
            "--synthetic", "--timeout", "20"]
    if scenario == "stop-launcher":
        # SIGUSR1: Slurm's warning before the time limit (--signal=USR1@N).
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1):
            shutil.rmtree(ckpt, ignore_errors=True)
            p = start(["varuna-run", job] + grid + ["--steps", "100000",
                                                     "--checkpoint-dir", ckpt])
            wait_for_steps(p, 4)
            ranks = children(p.pid)
            p.send_signal(sig)
            out, err = finish(p, 30, sig.name)
            k = stopped_after(err, sig.name)
            left = [r for r in ranks if alive(r)]
            if p.returncode != 128 + sig or left or len(ranks) != 4 or k < 3:
                fail(f"{sig.name}: exit {p.returncode}, ranks {ranks}, left {left}: "
                     f"{err[-300:]}")
            if newest(sig.name) != k + 1:
                fail(f"{sig.name}: stopped after step {k}, newest checkpoint "
                     f"{newest(sig.name)}")
            # Every rank was asked (by the launcher): none is named, even
            # when one saw the request a step before the others.
            if " to rank " in err:
                fail(f"{sig.name}: a rank named for the launcher's request: {err[-300:]}")
            print(f"{sig.name}: launcher exit {p.returncode}, the ranks stopped "
                  "after step K >= 3, checkpoint step-(K+1)")
        # Resumed from step-(k+1) for 3 more steps = a run never stopped.
        end = k + 4
        r = subprocess.run(["varuna-run", job] + grid + [
            "--steps", str(end), "--checkpoint-dir", ckpt, "--resume"],
            capture_output=True, text=True, timeout=300)
        whole = subprocess.run(["varuna-run", job] + grid + ["--steps", str(end)],
                               capture_output=True, text=True, timeout=300)
        resumed, straight = losses(r.stdout), losses(whole.stdout)
        tail = {s: straight.get(s) for s in range(k + 1, end)}
        if r.returncode or whole.returncode or resumed != tail:
            fail(f"resumed {resumed} != uninterrupted {tail}: {r.stderr[-300:]}")
        print(f"resumed: the {len(resumed)} losses after the stop equal an "
              f"uninterrupted run's")
    elif scenario == "stop-orphan":
        shutil.rmtree(ckpt, ignore_errors=True)
        p = start(["varuna-run", job] + grid + ["--steps", "100000",
                                                 "--checkpoint-dir", ckpt])
        wait_for_steps(p, 4)
        ranks = children(p.pid)
        p.kill()
        out, err = finish(p, 30, "orphaned ranks")  # the ranks hold the pipes
        left = [r for r in ranks if alive(r)]
        k = stopped_after(err, "orphaned ranks")
        if left or len(ranks) != 4 or newest("orphaned ranks") != k + 1:
            fail(f"ranks {ranks}, left {left}: {err[-300:]}")
        print("launcher killed: its 4 ranks stopped after a step, checkpoint "
              "step-(K+1)")
    elif scenario == "stop-rank":
        shutil.rmtree(ckpt, ignore_errors=True)
        env = dict(os.environ, MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(free_port()), WORLD_SIZE="2")
        env.pop("VARUNA_LAUNCHER_PID", None)
        args = ["varuna-run", job] + grid[4:] + [
            "--stages", "2", "--steps", "100000", "--checkpoint-dir", ckpt]
        # The rank asked exits as a shell reports its signal (it said 143
        # for Ctrl-C too); the other, stopped by its request, 143.
        for sig, code in ((signal.SIGTERM, 143), (signal.SIGINT, 130)):
            shutil.rmtree(ckpt, ignore_errors=True)
            env["MASTER_PORT"] = str(free_port())
            ps = [start(args, dict(env, RANK=str(r))) for r in (0, 1)]
            wait_for_steps(ps[0], 4)
            ps[1].send_signal(sig)
            errs = [finish(q, 30, f"rank {r}")[1] for r, q in enumerate(ps)]
            k = stopped_after(errs[0], "rank 0")
            codes = [q.returncode for q in ps]
            if codes != [143, code] or newest("ranks") != k + 1:
                fail(f"{sig.name}: exit codes {codes}: {errs[0][-200:]} "
                     f"{errs[1][-200:]}")
            # Rank 0 names the rank that was asked, and how.
            if f"stopped on request ({sig.name} to rank 1) after step" not in errs[0]:
                fail(f"rank 0 does not name rank 1's {sig.name}: {errs[0][-300:]}")
            print(f"rank 1 asked ({sig.name}): both ranks stopped after the same "
                  f"step, exit 143 and {code}, rank 0 names rank 1's {sig.name}")
    elif scenario == "stop-waiting":
        for r in (0, 1):
            env = dict(os.environ, MASTER_ADDR="127.0.0.1",
                       MASTER_PORT=str(free_port()), WORLD_SIZE="2", RANK=str(r))
            env.pop("VARUNA_LAUNCHER_PID", None)
            p = start(["varuna-run", job] + grid[4:9] + [
                "--stages", "2", "--steps", "10", "--timeout", "120"], env)
            time.sleep(1.5)
            p.send_signal(signal.SIGTERM)
            t = time.time()
            out, err = finish(p, 5, f"rank {r} alone")
            want = (f"rank {r}: rendezvous at 127.0.0.1:{env['MASTER_PORT']}: stopped on "
                    "request while waiting for the other ranks (nothing trained yet)")
            if p.returncode != 143 or want not in err:
                fail(f"rank {r} alone: exit {p.returncode}: {err[-300:]!r}")
            print(f"rank {r} alone: stopped at the rendezvous, exit 143 in <5 s")
    elif scenario == "stop-twice":
        # Slow steps (every message delayed 1.5 s: a step takes ~3 s): the
        # second signal comes while the ranks still finish the step the first
        # asked them to end (the one after step 0, just begun).
        p = start(["varuna-run", job] + grid + ["--steps", "100000",
                                                 "--emulate-latency-ms", "1500"])
        wait_for_steps(p, 1)
        ranks = children(p.pid)
        p.send_signal(signal.SIGINT)
        time.sleep(0.3)
        p.send_signal(signal.SIGINT)
        t = time.time()
        out, err = finish(p, 5, "a second SIGINT")
        left = [r for r in ranks if alive(r)]
        if p.returncode != 130 or left or "again: killing" not in err:
            fail(f"exit {p.returncode}, left {left}: {err[-300:]}")
        print(f"second SIGINT: exit 130 in {'<' if time.time() - t < 5 else '>'}5 s, "
              "no rank left")
    elif scenario == "stop-early":
        for delay in (0.1, 0.5, 1.0, 1.5):
            p = start(["varuna-run", job] + grid + ["--steps", "100000"])
            time.sleep(delay)
            p.send_signal(signal.SIGTERM)
            out, err = finish(p, 60, f"SIGTERM after {delay} s")
            time.sleep(0.2)
            left = [int(q) for q in subprocess.run(
                ["pgrep", "-f", f"varuna-run {job} "], capture_output=True,
                text=True).stdout.split()]
            left = [q for q in left if alive(q)]
            # Before it starts ranks the launcher ends as SIGTERM ends it.
            if p.returncode not in (143, -signal.SIGTERM) or left or "error" in err:
                fail(f"SIGTERM after {delay} s: exit {p.returncode}, left {left}: "
                     f"{err[-400:]}")
        print("SIGTERM while starting: stopped, no process left, no error")
    elif scenario == "stop-timeout":
        for what, shape in (("2 stages", ["--stages", "2"]), ("one process", [])):
            shutil.rmtree(ckpt, ignore_errors=True)
            p = start(["varuna-run", job] + shape + [
                "--batch", "8", "--micro-batch", "2", "--synthetic", "--timeout", "20",
                "--steps", "100000", "--checkpoint-dir", ckpt])
            wait_for_steps(p, 4)
            os.kill(p.pid, signal.SIGTERM)
            os.kill(p.pid, signal.SIGTERM)
            out, err = finish(p, 30, what)
            k = stopped_after(err, what)
            if p.returncode != 143 or newest(what) != k + 1 or "again: killing" in err:
                fail(f"{what}: exit {p.returncode}: {err[-300:]}")
            print(f"{what}: SIGTERM twice at once from one sender: stopped after a step, "
                  "exit 143, checkpoint step-(K+1)")
    elif scenario == "stop-one-dir":
        shutil.rmtree(ckpt, ignore_errors=True)
        first = start(["varuna-run", job, "--stages", "2", "--batch", "8", "--micro-batch",
                       "2", "--synthetic", "--timeout", "20", "--steps", "100000",
                       "--checkpoint-dir", ckpt, "--checkpoint-every", "2"])
        wait_for_steps(first, 3)
        for what, shape in (("one process", []), ("2 stages", ["--stages", "2"])):
            r = subprocess.run(["varuna-run", job] + shape + [
                "--batch", "8", "--micro-batch", "2", "--synthetic", "--steps", "100000",
                "--checkpoint-dir", ckpt, "--resume"], capture_output=True, text=True,
                timeout=120)
            said = f"is in use by another run (pid {first.pid} on host " in r.stderr
            if r.returncode != 1 or not said:
                fail(f"{what}: a second run of the directory: exit {r.returncode}: "
                     f"{r.stderr[-300:]!r}")
            print(f"{what}: a second run of the directory refused, naming the first's pid")
        first.send_signal(signal.SIGTERM)
        out, err = finish(first, 30, "the first run")
        k = stopped_after(err, "the first run")
        r = subprocess.run(["varuna-run", job, "--batch", "8", "--micro-batch", "2",
                            "--synthetic", "--steps", str(k + 3), "--checkpoint-dir", ckpt,
                            "--resume"], capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            fail(f"resume after the first run ended: exit {r.returncode}: {r.stderr[-300:]}")
        print("after the first run stopped: resumed")
    elif scenario == "stop-single":
        # The exit status is 128 + the signal, as a shell reports it.
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1):
            shutil.rmtree(ckpt, ignore_errors=True)
            p = start(run[:2] + ["--batch", "8", "--micro-batch", "2", "--synthetic",
                                 "--steps", "100000", "--checkpoint-dir", ckpt])
            wait_for_steps(p, 4)
            p.send_signal(sig)
            out, err = finish(p, 30, "one process")
            k = stopped_after(err, "one process")
            if p.returncode != 128 + sig or newest("one process") != k + 1:
                fail(f"{sig.name}: exit {p.returncode}: {err[-300:]}")
            if f"stopped on request ({sig.name}) after step" not in err:
                fail(f"{sig.name} not named: {err[-300:]}")
            print(f"one process: {sig.name}: stopped after a step, exit {p.returncode}, "
                  "checkpoint step-(K+1)")
    elif scenario == "stop-finished":
        shutil.rmtree(ckpt, ignore_errors=True)
        n = 6
        p = start(["varuna-run", job] + grid + ["--steps", str(n), "--checkpoint-dir",
                                                 ckpt, "--dump-params", ckpt + "/dump"])
        wait_for_steps(p, n)
        p.send_signal(signal.SIGTERM)
        out, err = finish(p, 30, "SIGTERM after the last step")
        if p.returncode != 0 or newest("finished") != n:
            fail(f"exit {p.returncode}: {err[-400:]}")
        print("SIGTERM as the run finished: exit 0, checkpoint step-N")
    elif scenario == "stop-validating":
        import json
        import numpy as np
        evald = job + ".eval"
        os.makedirs(evald, exist_ok=True)
        ids = np.random.default_rng(0).integers(0, 64, (8 * 8000, 16))
        np.save(evald + "/input_ids.npy", ids)
        np.save(evald + "/labels.npy", np.roll(ids, -1, 1))
        metrics = job + ".metrics"
        for what, layout in (("2 stages", ["--stages", "2"]), ("one process", [])):
            shutil.rmtree(ckpt, ignore_errors=True)
            p = start(["varuna-run", job] + layout + [
                "--batch", "8", "--micro-batch", "2", "--synthetic", "--steps", "100",
                "--eval-data", evald, "--eval-every", "2", "--checkpoint-dir", ckpt,
                "--metrics", metrics])
            wait_for_steps(p, 1)  # step 0; step 1 and its pass follow
            time.sleep(2.0)
            t = time.time()
            p.send_signal(signal.SIGTERM)
            out, err = finish(p, 60, what)
            took = time.time() - t
            k = stopped_after(err, what)
            last = [json.loads(line) for line in open(metrics)][-1]
            said = f"validation after step {k} abandoned after" in err
            if (p.returncode != 143 or took > 5 or last["step"] != k or "eval_loss" in last
                    or not said):
                fail(f"{what}: exit {p.returncode} after {took:.1f} s, stopped after "
                     f"step {k}, last metrics {last}: {err[-300:]!r}")
            if newest(what) != k + 1:
                fail(f"{what}: stopped after step {k}, newest checkpoint is not step-{k + 1}")
            print(f"{what}: SIGTERM while validating: exit 143 in <5 s, stopped after "
                  "step K without its validation (said), checkpoint step-(K+1)")
        os.remove(metrics)
        shutil.rmtree(evald, ignore_errors=True)
    else:
        fail("unknown scenario " + scenario)
    shutil.rmtree(ckpt, ignore_errors=True)
else:
    fail("unknown scenario " + scenario)
print("ok:", scenario)
