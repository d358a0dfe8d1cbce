"""The loss varuna computes for an exported model: evaluate(DIR) imports
DIR/m.pt with varuna-translate and runs it with varuna-eval on the inputs
in DIR/in (tools from PATH); shared by the edge-case scripts here."""
import os
import re
import subprocess


def evaluate(d):
    mlir = os.path.join(d, "m.mlir")
    subprocess.run(["varuna-translate", "--import-torchscript", os.path.join(d, "m.pt"), "-o",
                    mlir], check=True)
    run = subprocess.run(["varuna-eval", mlir, "--inputs", os.path.join(d, "in")],
                         check=True, capture_output=True, text=True)
    return float(re.search(r"loss[^0-9-]*(-?[0-9.eE+-]+)", run.stdout).group(1))
