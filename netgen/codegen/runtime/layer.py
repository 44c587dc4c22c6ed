"""The one ``Layer`` base: what every netgen layer does the same way, for
the three targets' generated ``Layer`` classes and
:class:`netgen.codegen.auto.AutoLayer`.

* ``forward(x) -> (values, P)``, ``values(x)``, ``column(x, y)`` and
  ``hard(x)``: torch.func transforms refused and ``x`` checked (a floating
  tensor of shape (..., n)) with one wording (:mod:`.common`), then handed
  to the subclass's ``_forward(x, s)``, ``_values(x, s)``,
  ``_column(x, y, s)`` and ``_hard(x)`` with the steepness to compute with;
  ``values`` defaults to ``forward``'s values;
* ``steepness``: an attribute read at every call (None: the relaxation's,
  ``_default_steepness()``); a number, numpy scalar, 1-element tensor or
  ``nn.Parameter`` (then it learns). :meth:`LayerBase.steepness_value` is
  THE rule, used when it is set and at every call: extend it there.

Real code, copied into every generated module by source extraction
(:func:`netgen.codegen.runtime.assemble`), so it reads no module constant:
a subclass gives ``n``, ``k`` and the hooks.
"""

from __future__ import annotations

import math

import torch

from .common import check_input, refuse_transforms

__all__ = ["LayerBase", "PARTS"]


class LayerBase(torch.nn.Module):
    """A relaxed top-k / sorting layer: ``layer(x) -> (values, P)`` (see the
    module docstring of netgen.codegen.runtime.layer)."""

    n = 0
    k = 0

    def __init__(self, steepness=None):
        super().__init__()
        self.steepness = steepness

    @staticmethod
    def steepness_value(s):
        """The steepness rule: ``s`` as computed with, a float or a 0-d
        tensor (then a gradient can reach it). Must be a real number or a
        1-element tensor, finite and > 0 (ValueError); a tensor on a GPU, or
        any tensor under torch.compile, is not inspected (that would
        synchronise)."""
        if isinstance(s, torch.Tensor):
            if s.numel() != 1 or s.is_complex() or s.dtype == torch.bool:
                raise ValueError(f"steepness must be a real number or a 1-element tensor, got shape "
                                 f"{tuple(s.shape)} {s.dtype}")
            s = s.reshape(())
            if s.device.type == "cpu" and not torch.compiler.is_compiling():
                v = float(s.detach())
                if not (math.isfinite(v) and v > 0):
                    raise ValueError(f"steepness must be finite and > 0, got {v!r}")
            return s
        if type(s).__name__ in ("bool", "bool_") or not hasattr(s, "__float__"):
            raise ValueError(f"steepness must be a real number or a 1-element tensor, got {type(s).__name__}")
        v = float(s)
        if not (math.isfinite(v) and v > 0):
            raise ValueError(f"steepness must be finite and > 0, got {v!r}")
        return v

    def __setattr__(self, name, value):
        if name == "steepness":
            if value is not None:
                self.steepness_value(value)  # a bad value fails here already (a GPU tensor is not read)
            self._parameters.pop("steepness", None)  # a number may replace a Parameter and back
            self.__dict__.pop("steepness", None)
        super().__setattr__(name, value)

    def _default_steepness(self):
        raise NotImplementedError

    def _call(self, x, steepness=None):
        """The checks of every call; the steepness to compute with
        (``steepness``: this call's, else the layer's, else the relaxation's)."""
        refuse_transforms()
        check_input(x, self.n)
        s = self.steepness if steepness is None else steepness
        return self.steepness_value(self._default_steepness() if s is None else s)

    def forward(self, x, steepness=None):
        """x (..., n) -> soft values (..., k) (rank 0 = largest) and
        P (..., k, n) with values = P @ x. ``steepness``: this call's (None:
        the layer's), as for every method below."""
        return self._forward(x, self._call(x, steepness))

    def values(self, x, steepness=None):
        """The soft values only, shape (..., k)."""
        return self._values(x, self._call(x, steepness))

    def column(self, x, y, steepness=None):
        """P[..., :, y] of shape (..., k) for integer class indices y (...)."""
        return self._column(x, y, self._call(x, steepness))

    def back(self, x, W, steepness=None):
        """W P of shape (..., m, n) for x (..., n) and W (m, k) or (..., m, k),
        without forming P (docs/operators.md, the lane sweeps)."""
        return self._back(x, W, self._call(x, steepness))

    def fwd(self, x, V, steepness=None):
        """P V of shape (..., k, d) for x (..., n) and V (n, d) or (..., n, d),
        without forming P."""
        return self._fwd(x, V, self._call(x, steepness))

    def hard(self, x):
        """The exact network: values (..., k) and the input indices they came
        from (int64); a comparator swaps only on a strict inequality. Never
        writes to x."""
        refuse_transforms()
        return self._hard(x)

    def _values(self, x, s):
        return self._forward(x, s)[0]

    def _back(self, x, W, s):
        raise NotImplementedError(f"{type(self).__name__} has no lane sweeps (back)")

    def _fwd(self, x, V, s):
        raise NotImplementedError(f"{type(self).__name__} has no lane sweeps (fwd)")


#: what a generated module copies from this file
PARTS = (LayerBase,)
