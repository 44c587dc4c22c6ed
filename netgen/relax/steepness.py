"""``steepness="auto"``: the steepness that gives a target blur on the scores
(docs/relaxations.md, "Choosing the steepness").

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
   it solves ``model(s) = target`` for s (bracketed secant in log s);
2. **calibrate and refine** (``refine`` steps, default 2): measures the
   blur at that s on some of the rows (``1 - P[r, h_r]`` from forward lanes:
   every rank, or for k > 64 every rank at once by Hutchinson probes),
   scales the model by measured / model on those rows (a calibration of
   the model for this network, distribution and scores, made per
   estimate instead of read from a table: it follows any network and
   score distribution) and corrects s by a secant step in (log s, log
   blur), stopping within ``tol`` (3%) of the target.

:class:`AutoSteepness` is what a layer or module with ``steepness="auto"``
holds: when it estimates (the first 4 training calls, then s is kept) and
at which blur, and the steepness it keeps (a buffer, in the state_dict).
"""

from __future__ import annotations

import functools
import logging
import math
from dataclasses import dataclass

import numpy as np
import torch

from ..network import Network
from .blur import HardPaths, _layers, lane_blur, sample_ranks, sample_rows
from . import formulas as F
from .distributions import Relaxation, _cdf, _phi
from .expr import evaluate, var
from .reference import fwd as _ref_fwd

__all__ = ["DEFAULT_BLUR", "TRAINING_BLUR", "AutoSteepness", "optional_blur", "Estimate", "estimate_steepness", "check_blur", "is_auto",
           "model_blur", "solve_model", "model_rows", "sweep_columns", "sweep_lanes", "probe_blur"]

log = logging.getLogger("netgen")

#: the blur ``steepness="auto"`` aims at unless told otherwise (a call, a
#: module in eval mode)
DEFAULT_BLUR = 0.1
#: the blur a module's ``steepness="auto"`` calibrates at during training
#: unless told otherwise (docs/relaxations.md section 8: measured on both
#: training examples)
TRAINING_BLUR = 0.75

def is_auto(s) -> bool:
    return isinstance(s, str) and s == "auto"


def check_blur(b) -> float:
    """A blur target: a real number in (0, 1)."""
    if isinstance(b, bool) or not isinstance(b, (int, float)) or not 0.0 < float(b) < 1.0:
        raise ValueError(f"blur must be a number in (0, 1) (the mean total variation between the relaxed and the "
                         f"hard network's rows), got {b!r}")
    return float(b)


def optional_blur(b) -> float | None:
    """A blur target or None (the default for the mode: :data:`DEFAULT_BLUR`
    or, calibrating in training, :data:`TRAINING_BLUR`)."""
    return None if b is None else check_blur(b)


# ---------------------------------------------------------------- the model
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


# ------------------------------------------------------------- the estimate
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


def reference_columns(net: Network, r: Relaxation):
    """``columns(x, s, y) -> P[..., :, y]`` (``(R, k, m)``) by the reference's
    forward lanes (the definition; plain autograd, slow)."""

    def columns(x, s, y):
        V = torch.nn.functional.one_hot(y, net.n).to(x.dtype).transpose(-1, -2)  # (R, n, m)
        with torch.no_grad():
            return _ref_fwd(net, x, V, r, s)

    return columns


def sweep_lanes(net: Network, r: Relaxation):
    """``lanes(x, s, V) -> P V`` for ``V`` of shape ``(R, n, m)``, as
    ``(R, k, m)``: the reference's forward lanes (:func:`~netgen.relax.reference.fwd`,
    the same mixing, bit-identical) written for measuring only: no
    autograd, the steepness a plain number, wire-major (each gather moves
    contiguous rows), each layer mixed in place. O(m size) work per row."""
    layers = _torch_layers(net)
    outs = torch.as_tensor(np.asarray(net.outputs, dtype=np.int64))

    def lanes_of(x, s, V):
        with torch.no_grad():
            dev = x.device
            v = x.t().contiguous()  # (n, R)
            lanes = V.permute(1, 0, 2).contiguous()  # (n, R, m)
            for a, b in layers:
                a, b = a.to(dev), b.to(dev)
                va, vb = v[a], v[b]
                p = _cdf((float(s) * _phi(va - vb, r)).clamp(-_BIG, _BIG), r)  # (c, R)
                v[a], v[b] = torch.lerp(vb, va, p), torch.lerp(va, vb, p)
                la, lb, q = lanes[a], lanes[b], p.unsqueeze(-1)
                lanes[a], lanes[b] = torch.lerp(lb, la, q), torch.lerp(la, lb, q)
            return lanes[outs.to(dev)].permute(1, 0, 2)  # (R, k, m)

    return lanes_of


def sweep_columns(net: Network, r: Relaxation):
    """``columns(x, s, y) -> P[..., :, y]`` (``(R, k, m)``) for indices
    ``y`` of shape ``(R, m)``: :func:`sweep_lanes` of the unit vectors."""
    lanes = sweep_lanes(net, r)

    def columns(x, s, y):
        return lanes(x, s, torch.nn.functional.one_hot(y, net.n).to(x.dtype).transpose(-1, -2))

    return columns


def probe_blur(lanes, x: torch.Tensor, indices: torch.Tensor, s, probes: int, seed: int = 0) -> float:
    """The blur over ALL k ranks of the rows ``x``, ``1 - trace(P H^T) / k``,
    by Hutchinson's estimator: for Rademacher ``z`` (``(R, probes, k)``),
    ``z^T P H^T z`` is unbiased for the trace, and ``H^T z`` is a vector
    on the inputs (``z_r`` at ``h_r``), so each probe is ONE forward lane.
    Its variance is twice the squared off-diagonal mass, ``sum_{r != r'}
    P[r, h_r']^2``: tiny next to the trace when k is large (a sorter),
    where sampling ranks is not (a heavy-tailed F blurs a few ranks much
    more than the rest). Deterministic (its own generator, ``seed``)."""
    R, k = indices.shape
    g = torch.Generator().manual_seed(seed)
    z = (torch.randint(0, 2, (R, probes, k), generator=g) * 2 - 1).to(device=x.device, dtype=x.dtype)
    V = torch.zeros(R, x.shape[-1], probes, dtype=x.dtype, device=x.device)
    V.scatter_(1, indices.unsqueeze(-1).expand(R, k, probes), z.transpose(1, 2))  # V[h_r, q] = z[q, r]
    PV = lanes(x, s, V)  # (R, k, probes)
    trace = (PV * z.transpose(1, 2)).sum(1)  # (R, probes)
    return float(1.0 - trace.mean() / k)


_BIG = 1e300


def _torch_layers(net: Network) -> list[tuple[torch.Tensor, torch.Tensor]]:
    return [(torch.from_numpy(a).long(), torch.from_numpy(b).long()) for a, b in _layers(net)]


#: the model reads at most about this many (output, comparator) path entries
MODEL_BUDGET = 200_000


#: a measurement sweeps at most about this many (lane, comparator) pairs
LANE_BUDGET = 8_000_000


#: from this many ranks on, a measurement reads every rank by random probes (:func:`probe_blur`)
PROBE_FROM = 64


def model_rows(net: Network, rows: int = 256) -> int:
    """How many rows the model reads: ``rows``, fewer where each row's
    output paths are long (about k x depth entries a row; at least 2)."""
    return max(2, min(rows, MODEL_BUDGET // max(1, net.k * net.depth)))


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


# --------------------------------------------------------------- the state
class AutoSteepness(torch.nn.Module):
    """``steepness="auto"`` of one layer or module: the target ``blur`` and
    the steepness in use (buffer ``steepness``, NaN until the first
    estimate; it is in the state_dict, so a checkpoint reproduces).

    * **training mode** (default ``every=None``): the first ``calibrate``
      training calls (default 4) estimate s from their scores, each moving
      the buffer by ``momentum`` (an average in log s, so one odd batch
      does not set it alone); after them s stays fixed, as a swept
      steepness would: the model learns scores for that s and the blur
      falls as it grows confident. Re-estimating all along instead holds
      the blur and makes the loss blind to the scores' scale, which then
      drifts (measured in docs/relaxations.md section 8: 10-20 points of
      exact match lost on the sorting example). ``every=N`` re-estimates
      anyway: on calls 0, 1, 2, 4, ... below N, then every N-th.
      A schedule of calls, not of time: training reproduces, and the count
      is a buffer, so a resumed checkpoint keeps the schedule.
    * **eval mode**: the buffer as it is (a result does not depend on which
      rows share its batch); an instance never trained estimates on its
      first call and keeps that.

    ``blur=None`` (default) aims at :data:`TRAINING_BLUR` (0.75) when
    calibrating in training and at :data:`DEFAULT_BLUR` (0.1) otherwise:
    a sharp relaxation is what a forward pass wants, a soft one what
    training wants (0.1 trains a top-5 loss to 28% where 0.75 matches the
    best swept steepness; docs/relaxations.md section 8).

    ``estimate(x, blur) -> Estimate`` is the owner's (it knows the network
    and the lanes to measure with)."""

    calibrate = 4  # (a class default too: pickles of older versions lack it)

    def __init__(self, blur: float | None = None, every: int | None = None, momentum: float = 0.5,
                 calibrate: int = 4):
        super().__init__()
        self.blur = optional_blur(blur)
        for name, v in (("every", every), ("calibrate", calibrate)):
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
                raise ValueError(f"{name} must be a positive integer{' or None' if name == 'every' else ''}, "
                                 f"got {v!r}")
        if not 0.0 < float(momentum) <= 1.0:
            raise ValueError(f"momentum must lie in (0, 1], got {momentum!r}")
        self.every, self.momentum, self.calibrate = every, float(momentum), calibrate
        self.register_buffer("steepness", torch.tensor(math.nan, dtype=torch.float64))
        self.register_buffer("calls", torch.tensor(0, dtype=torch.int64))
        self.last: Estimate | None = None

    def target(self, training: bool | None = None) -> float:
        """The blur an estimate aims at (in training mode, or as told)."""
        if self.blur is not None:
            return self.blur
        return TRAINING_BLUR if (self.training if training is None else training) else DEFAULT_BLUR

    def due(self, c: int) -> bool:
        """Whether training call number ``c`` (from 0) estimates."""
        if self.every is None:
            return c < self.calibrate
        return (c & (c - 1)) == 0 if c < self.every else c % self.every == 0

    def forward(self, x: torch.Tensor, estimate, fallback: float) -> float:
        """The steepness for this call (a float); ``fallback`` when no
        estimate has had information yet (e.g. all scores equal)."""
        have = not math.isnan(float(self.steepness))
        due = not have or (self.training and self.due(int(self.calls)))
        if self.training:
            self.calls += 1
        if due:
            blur = self.target()
            est = estimate(x, blur)
            self.last = est
            if est.note:
                log.warning("netgen: steepness='auto': %s; using s = %g", est.note,
                            fallback if est.steepness is None else est.steepness)
            if est.steepness is not None:
                old = float(self.steepness)
                new = est.steepness if not have else math.exp(
                    (1 - self.momentum) * math.log(old) + self.momentum * math.log(est.steepness))
                self.steepness.fill_(new)
                log.debug("netgen: steepness='auto' (blur %g): estimated s = %.6g (model %.6g, measured blur %s, "
                          "%d measurements), using %.6g", blur, est.steepness, est.model_steepness,
                          "-" if est.measured is None else f"{est.measured:.4f}", est.measurements, new)
        s = float(self.steepness)
        return fallback if math.isnan(s) else s

    def extra_repr(self):
        s = float(self.steepness)
        blur = "default" if self.blur is None else f"{self.blur:g}"
        when = f"every={self.every}" if self.every is not None else f"calibrate={self.calibrate}"
        return f"blur={blur}, {when}, steepness={'not estimated yet' if math.isnan(s) else f'{s:.6g}'}"

    # ------------------------------------------------------------ pickling
    def plain(self) -> dict:
        """This module as plain data (numbers, tensors): see :func:`plain_state`."""
        return {"blur": self.blur, "every": self.every, "momentum": self.momentum, "calibrate": self.calibrate,
                "training": self.training,
                "steepness": self.steepness, "calls": self.calls}

    @classmethod
    def from_plain(cls, d: dict) -> "AutoSteepness":
        a = cls(d["blur"], d["every"], d["momentum"], d.get("calibrate", 4))
        a.steepness.copy_(d["steepness"])
        a.calls.copy_(d["calls"])
        return a.train(bool(d["training"]))


def plain_state(state: dict) -> dict:
    """A module's pickled ``state`` (its ``__dict__``) with its
    ``auto_steepness`` child as plain data, so that
    ``torch.load(..., weights_only=True)`` of a whole model needs only the
    owner's class allowlisted, not this one (the child's place in
    ``_modules`` holds None; :func:`restore_state` puts it back)."""
    mods = state.get("_modules")
    auto = None if mods is None else mods.get("auto_steepness")
    if not isinstance(auto, AutoSteepness):
        return state
    return {**state, "_modules": {**mods, "auto_steepness": None}, "_auto_steepness": auto.plain()}


def restore_state(state: dict) -> dict:
    """Undo :func:`plain_state` on an unpickled ``state``."""
    plain = state.get("_auto_steepness")
    if plain is None:
        return state
    state = {k: v for k, v in state.items() if k != "_auto_steepness"}
    state["_modules"] = {**state["_modules"], "auto_steepness": AutoSteepness.from_plain(plain)}
    return state

