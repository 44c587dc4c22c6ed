"""The model of the blur that ``steepness="auto"`` solves first: the blur
predicted from the hard network's paths (:class:`~netgen.relax.blur.HardPaths`)
as the mass that leaves each output element's hard path,
``1 - prod(1 - F(-s phi(gap)))`` over the comparators it passes, averaged
over the outputs (:func:`model_blur`), and the steepness at which it
equals a target (:func:`solve_model`)."""

from __future__ import annotations

import functools
import math

import numpy as np
import torch

from ..network import Network
from . import formulas as F
from .blur import HardPaths
from .distributions import Relaxation, _phi
from .expr import evaluate, var


@functools.lru_cache(maxsize=32)
def _cdf_expr(distribution: str, eps: float):
    return F.REGISTRY[distribution].formulas(var("z"), eps)[0]


def _phi_gaps(paths: HardPaths, r: Relaxation) -> torch.Tensor:
    """phi(gap) of every path gap (cached on ``paths``: it does not depend on s)."""
    key = (r.distribution, r.art_lambda, r.art_epsilon) if r.uses_art else None
    cache = paths.__dict__.setdefault("_phi", {})
    if key not in cache:
        d = torch.from_numpy(paths.gaps)
        cache[key] = _phi(d, r) if r.uses_art else d
    return cache[key]


def model_blur(paths: HardPaths, r: Relaxation, s: float) -> float:
    """The model's blur at steepness s: the mean over outputs of the mass
    that leaves the hard path, ``1 - prod(1 - F(-s phi(gap)))``."""
    z = -s * _phi_gaps(paths, r)
    leak = evaluate({"F": _cdf_expr(r.distribution, r.art_epsilon)}, {"z": z}, z.dtype)["F"]
    stay = torch.zeros(paths.outputs, dtype=z.dtype).index_add_(
        0, torch.from_numpy(paths.slot), torch.log1p(-leak.clamp(0.0, 1.0 - 1e-15)))
    return float(1.0 - stay.exp().mean())


def _phi_gap(r: Relaxation, gap: float) -> float:
    return float(_phi(torch.tensor([gap], dtype=torch.float64), r)[0])


def solve_model(paths: HardPaths, r: Relaxation, target: float) -> tuple[float | None, str]:
    """(s with ``model_blur(s) = target``, why) by a bracketed secant
    (Illinois) in (log s, log blur). None when the rows carry no gap (every
    comparator an output meets is a tie: the blur does not depend on s);
    the bracket's end, with a reason, when the target is out of reach (ties
    hold the blur up; at s -> 0 every comparator is 1/2)."""
    pos = paths.gaps[paths.gaps > 0]
    if pos.size == 0:
        return None, "every gap on the outputs' paths is a tie: the blur does not depend on the steepness"
    lo_s = 1e-3 / _phi_gap(r, float(pos.max()))
    hi_s = 1e7 / _phi_gap(r, float(pos.min()))
    f = lambda u: math.log(max(model_blur(paths, r, math.exp(u)), 1e-300)) - math.log(target)  # noqa: E731
    a, b = math.log(lo_s), math.log(hi_s)
    fa, fb = f(a), f(b)
    if fa <= 0:
        return lo_s, f"a blur of {target:g} is above what the network reaches on these scores (s -> 0)"
    if fb >= 0:
        return hi_s, f"a blur of {target:g} is below what ties in these scores allow"
    side = 0
    for _ in range(100):
        c = b - fb * (b - a) / (fb - fa)
        fc = f(c)
        if abs(fc) < 1e-6 or abs(b - a) < 1e-9:
            break
        if fc > 0:
            a, fa = c, fc
            if side == -1:
                fb /= 2
            side = -1
        else:
            b, fb = c, fc
            if side == 1:
                fa /= 2
            side = 1
    return math.exp(c), ""


#: the model reads at most about this many (output, comparator) path entries
MODEL_BUDGET = 200_000


def model_rows(net: Network, rows: int = 256) -> int:
    """How many rows the model reads: ``rows``, fewer where each row's
    output paths are long (about k x depth entries a row; at least 2)."""
    return max(2, min(rows, MODEL_BUDGET // max(1, net.k * net.depth)))


def _model_ranks(paths: HardPaths, r: Relaxation, s: float, ranks: torch.Tensor) -> float:
    """The model's blur over some ranks only (what a measurement of those ranks compares with)."""
    keep = np.isin(paths.slot % paths.k, ranks.numpy())
    part = object.__new__(HardPaths)
    part.gaps, part.k = paths.gaps[keep], paths.k
    rank_pos = np.full(paths.k, -1, dtype=np.int64)
    rank_pos[ranks.numpy()] = np.arange(len(ranks))
    part.slot = (paths.slot[keep] // paths.k) * len(ranks) + rank_pos[paths.slot[keep] % paths.k]
    part.outputs = paths.rows * len(ranks)
    return model_blur(part, r, s)
