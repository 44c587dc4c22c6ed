"""Suite-wide settings. CI runs `pytest -n 2` on 2 cores: each worker uses
one thread, so workers do not fight over cores (a tiny torch op took ~23 ms
with 2 threads per worker on a loaded machine, ~3 us with 1)."""

import os

for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ.setdefault(var, "1")

try:
    import torch

    torch.set_num_threads(1)
except ImportError:  # pragma: no cover - torch is a test dependency
    pass
