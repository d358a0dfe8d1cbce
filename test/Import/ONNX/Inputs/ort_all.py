"""For each MODEL: import MODELS/MODEL.onnx and evaluate it (varuna-eval),
compile it and evaluate the compiled job through its generated stage code,
and compare both with onnxruntime (ort_check.py). Tools come from PATH.

    python3 ort_all.py MODELS_DIR WORK_DIR MODEL..."""
import os
import subprocess
import sys

models, work = sys.argv[1], sys.argv[2]
check = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ort_check.py")
status = 0


def run(*cmd, out=None):
    with open(out, "w") if out else open(os.devnull, "w") as fh:
        r = subprocess.run(cmd, stdout=fh)
    if r.returncode:
        print("FAIL:", " ".join(cmd), file=sys.stderr)
    return r.returncode


for name in sys.argv[3:]:
    onnx = os.path.join(models, name + ".onnx")
    inputs = os.path.join(models, name + ".inputs")
    mlir = os.path.join(work, name + ".mlir")
    job = os.path.join(work, name + "-job")
    imported = os.path.join(work, name + ".eval")
    generated = os.path.join(work, name + ".gen")
    status |= run("varuna-translate", "--import-onnx", onnx, "-o", mlir)
    status |= run("varuna-eval", mlir, "--inputs", inputs, out=imported)
    status |= run(sys.executable, check, onnx, inputs, imported)
    status |= run("varuna-compile", onnx, "-o", job)
    status |= run("varuna-eval", os.path.join(job, "job.mlir"), "--inputs", inputs,
                  "--stage-library", os.path.join(job, "libstages.so"), out=generated)
    status |= run(sys.executable, check, onnx, inputs, generated)
sys.exit(status)
