"""oracles.py SCRIPT ARGS... [+ SCRIPT ARGS...]...:
runs each PyTorch oracle script (hf_oracle.py, loss_oracle.py,
train_oracle.py) with its arguments in turn, in this one process, as if it
were started alone (`runpy.run_path` as __main__, fresh globals, its own
sys.argv). Every oracle seeds what it draws, so the results are the ones of
separate runs; what is saved is importing torch, transformers and the
torch._dynamo that torch.optim's first optimizer imports (about 5 s a run,
more than the training itself). A test lists its oracles in one RUN line.
Stops at the first oracle that fails, naming it."""
import os
import runpy
import sys

jobs, job = [], []
for arg in sys.argv[1:]:
    if arg == "+":
        jobs.append(job)
        job = []
    else:
        job.append(arg)
jobs.append(job)
if any(not j for j in jobs):
    sys.exit("oracles.py: empty job (expected SCRIPT ARGS... [+ SCRIPT ARGS...])")

for job in jobs:
    script = job[0]
    sys.argv = list(job)
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as e:
        if e.code not in (None, 0):
            print(f"oracles.py: {' '.join(job)} failed: {e.code}", file=sys.stderr)
            sys.exit(1)
    finally:
        sys.path.pop(0)
