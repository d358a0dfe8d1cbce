"""For each NAME with a compiled job DIR/job-NAME: evaluate the job through
its generated stage code on DIR/NAME.inputs and compare with onnxruntime on
DIR/NAME.onnx (ort_check.py). Tools come from PATH.

    python3 ort_jobs.py DIR NAME..."""
import os
import subprocess
import sys

d = sys.argv[1]
check = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ort_check.py")
status = 0
for name in sys.argv[2:]:
    job = os.path.join(d, "job-" + name)
    inputs = os.path.join(d, name + ".inputs")
    out = os.path.join(d, name + ".gen")
    with open(out, "w") as fh:
        r = subprocess.run(["varuna-eval", os.path.join(job, "job.mlir"), "--inputs", inputs,
                            "--stage-library", os.path.join(job, "libstages.so")], stdout=fh)
    if r.returncode:
        print(f"FAIL: varuna-eval of {job}", file=sys.stderr)
        status = 1
        continue
    status |= subprocess.run([sys.executable, check, os.path.join(d, name + ".onnx"), inputs,
                              out]).returncode
sys.exit(status)
