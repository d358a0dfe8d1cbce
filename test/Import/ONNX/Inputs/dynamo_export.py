"""Exports the zoo GPT with torch.onnx.export's default (dynamo) exporter and a
dynamic batch dimension, as a user who did not use varuna.export would."""
import sys
import warnings

import torch

warnings.filterwarnings("ignore")
from varuna import models  # noqa: E402

model, inputs, names = models.make("gpt")
batch = torch.export.Dim("batch")
torch.onnx.export(model, inputs, sys.argv[1], input_names=names, output_names=["loss"],
                  dynamic_shapes={n: {0: batch} for n in names}, dynamo=True,
                  verbose=False, report=False)
