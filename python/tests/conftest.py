import os
import sys
import warnings

# Make `import varuna` work without PYTHONPATH=python.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402

torch.set_num_threads(1)  # tiny models: threads only add overhead
