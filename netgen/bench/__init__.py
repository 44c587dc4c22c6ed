"""``netgen bench``: time, memory and approximation error of netgen's
generated layers against the baseline methods, one process per configuration.

* :mod:`.grid`: grids of (B, n, k), per-method limits and temperatures;
* :mod:`.methods`: building each method as a uniform callable;
* :mod:`.worker`: one configuration (``python -m netgen.bench.worker CONFIG``);
* :mod:`.runner`: runs a grid, ratios, JSON/CSV;
* :mod:`.plots`: matplotlib figures.
"""

from .grid import DEFAULT, QUICK, Grid
from .runner import run_grid, run_one

__all__ = ["Grid", "QUICK", "DEFAULT", "run_grid", "run_one"]
