"""The swap code pasted into the Numba CPU and CUDA kernels.

:func:`swap_code` renders the swap program of :mod:`netgen.relax.formulas`
(the one definition of every distribution, ART and the clamps) as
straight-line scalar code computing ``p = F(s * phi(d))``, ``dp = dp/dd``
and ``dps = dp/ds`` in the kernel's float type, with
:class:`netgen.codegen.render.ScalarSource`. It is pasted into every kernel:
no device helper functions (numba-cuda 0.30.4 queries a driver when
compiling kernels that call ``device=True`` helpers), and only the chosen
distribution is compiled.

The CPU kernels evaluate it in a loop over 16 batch rows that LLVM
vectorises only if the code is branch-free (conditional *expressions*
become selects) and calls no library function LLVM cannot vectorise.
Hence the renderer's rewrites (see :mod:`netgen.codegen.render`):

* ART with lambda 0.25 or 0.5 (and difftopk's epsilon form) uses square
  roots instead of general powers, one root shared by phi and phi';
* logistic computes p and the density from one exponential of -|z|;
* gaussian in float32 computes the normal CDF from the exponential it
  needs for the density anyway: ``1 - Phi(|z|) = exp(-z^2/2) t h(t) / 2``
  with ``t = 1 / (1 + |z| / sqrt(2) / 2)`` and ``h`` a degree-10 polynomial
  fit of ``erfcx(x) / t`` (fit error 4e-8, ~2e-7 evaluated in float32)
  instead of the libm ``erf`` call that kept the loop scalar; float64 keeps
  ``math.erf`` (1e-12 against the reference);
* in float32 the CPU kernels compute the exponential inline too
  (``inline_exp``: range reduction, polynomial, a power of two built from
  its exponent bits; the GPU keeps its fast ``expf``);
* cauchy in float32 inlines the arctangent (Cephes-style range reduction
  and odd polynomial, ~1 ulp).

Temporaries are named ``sw_*`` so they never clobber a kernel's variables.
"""

from __future__ import annotations

import textwrap

from ..relax.expr import var
from ..relax.formulas import swap_exprs
from .lines import Lines
from .render import ScalarSource, TorchSource

FLOAT_TYPES = ("float32", "float64")


def swap_code(r, indent: int, ft: str = "float64", inline_exp: bool = False, steepness: str | None = None,
              tame: bool = False) -> str:
    """Scalar code reading ``d`` (of type ``ft``) and defining ``p`` (swap
    probability), ``dp`` (dp/dd) and ``dps`` (dp/ds, the derivative with
    respect to the steepness s: ``f(z) * phi(d)``), all in ``ft`` arithmetic
    like the reference in that dtype. Uses only ``math``, ``np.float32`` and
    literals, so it runs under njit, cuda.jit and the CUDA simulator.
    ``inline_exp`` (CPU kernels): float32 exponentials without libm calls.
    ``steepness``: the name of a variable (of type ``ft``) holding s at run
    time; None bakes ``r.steepness`` in as a literal. Code that does not use
    ``dps`` pays nothing for it (the compiler drops it). ``tame``: without
    the clamps of d and z (:func:`netgen.relax.formulas.swap_exprs`; the
    CUDA kernels run that copy only in rows where the clamps cannot act)."""
    if ft not in FLOAT_TYPES:
        raise ValueError(f"unknown float type {ft!r}")
    if steepness is not None and not str(steepness).isidentifier():
        raise ValueError(f"steepness must name a variable, got {steepness!r}")
    env = {"d": "d"}
    if steepness is not None:
        env["s"] = str(steepness)
    renderer = ScalarSource(env, ft, inline_exp)
    (lines,) = renderer.render([swap_exprs(r, None if steepness is None else var("s"), tame)])
    return textwrap.indent("\n".join(lines), " " * indent)


def torch_swap_lines(r) -> list[str]:
    """``_swap(d, s, ds=False) -> (p, dp/dd[, dp/ds])`` rendered from the
    one definition of the relaxation (:func:`netgen.relax.formulas.swap_exprs`)."""
    prog = swap_exprs(r, var("s"))
    renderer = TorchSource({"d": "d", "s": "s"}, reserved={"big", "ds", "torch", "math"})
    first, second = renderer.render([{"p": prog["p"], "dp": prog["dp"]}, {"dps": prog["dps"]}])
    L = Lines()
    with L.block("def _swap(d, s, ds=False):"):
        L(f'"""p = F(s * phi(d)), dp/dd and (with ds) dp/ds for d = x - y ({r.distribution}; '
          'rendered from netgen.relax.formulas)."""')
        L("big = torch.finfo(d.dtype).max")
        L(*first)
        with L.block("if not ds:"):
            L("return p, dp")
        L(*second)
        L("return p, dp, dps")
    return L.render().rstrip("\n").split("\n")
