"""The estimate behind ``steepness="auto"``: the steepness that gives a
target blur on the scores (docs/relaxations.md, "Choosing the steepness").

The blur (:mod:`netgen.relax.blur`) depends on the steepness s only through
``s * phi(gap)`` at each comparator an output element passes (for
``phi = identity``, ``blur(s, c x) = blur(c s, x)``; ART's phi makes it
``blur(c^(1 - lambda) s, x)``), on the network (which gaps an element meets
on its way) and on F's tails. The estimator, on a few rows of the scores
(detached):

1. **model**: runs the exact network once (:class:`~netgen.relax.blur.HardPaths`,
   O(size) per row) and predicts the blur as the mass that leaves each
   output element's hard path, ``1 - prod(1 - F(-s phi(gap)))`` over the
   comparators it passes, averaged over the outputs (mass that leaves and
   comes back, and gaps that shrink in the soft run, are not modelled);
   it solves ``model(s) = target`` for s (bracketed secant in log s;
   :mod:`netgen.relax.steepness_model`);
2. **calibrate and refine** (``refine`` steps, default 2): measures the
   blur at that s on some of the rows (``1 - P[r, h_r]`` from forward lanes:
   every rank, or for k > 64 every rank at once by Hutchinson probes;
   :mod:`netgen.relax.steepness_sweeps`),
   scales the model by measured / model on those rows (a calibration of
   the model for this network, distribution and scores, made per
   estimate instead of read from a table: it follows any network and
   score distribution) and corrects s by a secant step in (log s, log
   blur), stopping within ``tol`` (3%) of the target.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from ..network import Network
from .blur import HardPaths, lane_blur, sample_ranks, sample_rows
from .distributions import Relaxation
from .steepness_model import _model_ranks, model_blur, model_rows, solve_model
from .steepness_sweeps import probe_blur, sweep_columns, sweep_lanes

#: the blur ``steepness="auto"`` aims at unless told otherwise (a call, a
#: module in eval mode)
DEFAULT_BLUR = 0.1


def check_blur(b) -> float:
    """A blur target: a real number in (0, 1)."""
    if isinstance(b, bool) or not isinstance(b, (int, float)) or not 0.0 < float(b) < 1.0:
        raise ValueError(f"blur must be a number in (0, 1) (the mean total variation between the relaxed and the "
                         f"hard network's rows), got {b!r}")
    return float(b)


@dataclass
class Estimate:
    """What :func:`estimate_steepness` found: the steepness (None: the rows
    carry no information), the model's s, the blur measured at the final s
    on the sampled rows (None when ``refine=0``), the number of lane
    measurements and a note (target out of reach)."""

    steepness: float | None
    model_steepness: float | None
    measured: float | None
    measurements: int
    note: str = ""


#: a measurement sweeps at most about this many (lane, comparator) pairs
LANE_BUDGET = 8_000_000


#: from this many ranks on, a measurement reads every rank by random probes (:func:`probe_blur`)
PROBE_FROM = 64


def measure_rows(net: Network, ranks: int, rows: int) -> int:
    """How many of the model's ``rows`` a measurement sweeps: all where
    cheap, fewer where ``(ranks + 1) x size`` per row is large (at least 4)."""
    return max(min(4, rows), min(rows, LANE_BUDGET // max(1, (min(ranks, net.k) + 1) * net.size)))


def estimate_steepness(net: Network, r: Relaxation, x: torch.Tensor, blur: float = DEFAULT_BLUR, *,
                       rows: int | None = None, measured_rows: int | None = None, ranks: int = 8, refine: int = 2,
                       tol: float = 0.03, columns=None) -> Estimate:
    """The steepness giving blur ``blur`` on scores ``x`` (``(..., n)``,
    detached; see the module docstring). ``rows``: how many rows (evenly
    spaced) the model reads (default :func:`model_rows`); ``measured_rows`` of them (evenly spaced;
    default :func:`measure_rows`) and
    ``ranks`` ranks (evenly spaced) are measured; ``refine``: measured
    secant steps after the model (0: the calibrated model alone);
    ``columns(x, s, y)``: the forward lanes to measure with (default: the
    reference's).

    A measurement corrects the model on all rows by the ratio measured /
    model on the measured rows (the model follows each row's own gaps, so
    the ratio varies far less from row to row than the blur does)."""
    blur = check_blur(blur)
    xs = sample_rows(x, model_rows(net) if rows is None else rows)
    if xs.shape[0] == 0:
        return Estimate(None, None, None, 0, "an empty batch")
    paths = HardPaths(net, xs.to(torch.float64).cpu().numpy())
    s0, note = solve_model(paths, r, blur)
    if s0 is None or refine <= 0 or note:
        return Estimate(s0, s0, None, 0, note)
    R = xs.shape[0]
    M = measure_rows(net, ranks, R) if measured_rows is None else measured_rows
    mrows = np.arange(R) if R <= M else (np.arange(M) * R) // M
    sub = paths.subset(mrows)
    xm = xs[torch.from_numpy(mrows).to(xs.device)]
    if columns is None:
        xm, columns = xm.to(torch.float64), sweep_columns(net, r)
    h = torch.from_numpy(sub.indices).to(xm.device)
    probes = 0
    if net.k > max(ranks, PROBE_FROM):  # many ranks: every rank at once by random probes
        probes = max(4, min(32, LANE_BUDGET // max(1, len(mrows) * net.size) - 1))
        lanes = sweep_lanes(net, r)
    rk = sample_ranks(net.k, ranks)

    def corrected(s):  # model on all rows x (measured / model) on the measured rows
        if probes:
            e, m_sub = probe_blur(lanes, xm, h, s, probes), model_blur(sub, r, s)
        else:
            e = lane_blur(columns, xm, h, rk, s)
            m_sub = model_blur(sub, r, s) if len(rk) == net.k else _model_ranks(sub, r, s, rk)
        return e, model_blur(paths, r, s) * e / max(m_sub, 1e-300)

    pts = []
    s = s0
    for step in range(refine + 1):
        e, b = corrected(s)
        pts.append((math.log(s), math.log(max(b, 1e-300))))
        if abs(math.log(max(b, 1e-300) / blur)) <= tol or step == refine:
            break
        if len(pts) == 1:  # the model's slope d log blur / d log s at s
            m1 = model_blur(paths, r, s)
            m2 = model_blur(paths, r, s * 1.1)
            slope = (math.log(max(m2, 1e-300)) - math.log(max(m1, 1e-300))) / math.log(1.1)
        else:
            (u0, l0), (u1, l1) = pts[-2], pts[-1]
            slope = (l1 - l0) / (u1 - u0) if u1 != u0 else -1.0
        slope = min(slope, -0.05)  # blur falls as s grows; a flat or wrong-signed slope would overshoot
        step_u = (math.log(blur) - pts[-1][1]) / slope
        s = math.exp(pts[-1][0] + max(-math.log(8.0), min(math.log(8.0), step_u)))
    return Estimate(s, s0, b, len(pts))
