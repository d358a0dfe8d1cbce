"""A model whose forward returns logits, not a loss."""
import sys
import warnings

import torch

warnings.filterwarnings("ignore")
m = torch.nn.Linear(4, 3)
torch.onnx.export(m, (torch.randn(2, 4),), sys.argv[1], dynamo=False, input_names=["x"],
                  output_names=["logits"], dynamic_axes={"x": {0: "b"}})
