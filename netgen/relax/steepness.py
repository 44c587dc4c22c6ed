"""``steepness="auto"``: the steepness that gives a target blur on the scores
(docs/relaxations.md, "Choosing the steepness").

Every public name is imported from here; the work is spread over

* :mod:`netgen.relax.steepness_estimate`: :func:`estimate_steepness` (how
  s is found: the model, then measured corrections) and :data:`DEFAULT_BLUR`;
* :mod:`netgen.relax.steepness_model`: the model of the blur from the hard
  network's paths, and its solve;
* :mod:`netgen.relax.steepness_sweeps`: the lane sweeps that measure the blur;
* this module: the arguments (``"auto"``, a blur) and the state a layer or
  module holds.

:class:`AutoSteepness` is what a layer or module with ``steepness="auto"``
holds: when it estimates (the first 4 training calls, then s is kept) and
at which blur, and the steepness it keeps (a buffer, in the state_dict).
"""

from __future__ import annotations

import logging
import math

import torch

# what callers import from here (this module's own code uses a few of them)
from .steepness_estimate import DEFAULT_BLUR, LANE_BUDGET, PROBE_FROM, Estimate, check_blur, estimate_steepness, measure_rows
from .steepness_model import MODEL_BUDGET, model_blur, model_rows, solve_model
from .steepness_sweeps import probe_blur, reference_columns, sweep_columns, sweep_lanes

__all__ = ["DEFAULT_BLUR", "TRAINING_BLUR", "AutoSteepness", "optional_blur", "Estimate", "estimate_steepness", "check_blur", "is_auto",
           "model_blur", "solve_model", "model_rows", "sweep_columns", "sweep_lanes", "probe_blur"]

log = logging.getLogger("netgen")

#: the blur a module's ``steepness="auto"`` calibrates at during training
#: unless told otherwise (docs/relaxations.md section 8: measured on both
#: training examples)
TRAINING_BLUR = 0.75


def is_auto(s) -> bool:
    return isinstance(s, str) and s == "auto"


def optional_blur(b) -> float | None:
    """A blur target or None (the default for the mode: :data:`DEFAULT_BLUR`
    or, calibrating in training, :data:`TRAINING_BLUR`)."""
    return None if b is None else check_blur(b)


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
