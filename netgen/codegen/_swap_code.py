"""The swap code pasted into the Numba CPU and CUDA kernels.

:func:`swap_code` turns a relaxation into straight-line scalar code that
computes ``p = F(s * phi(d))`` and ``dp = dp/dd`` as
:mod:`netgen.relax.distributions` defines them (clamps, ART tie floor,
difftopk's epsilon form), in the kernel's float type. It is pasted into
every kernel: no device helper functions (numba-cuda 0.30.4 queries a
driver when compiling kernels that call ``device=True`` helpers), and only
the chosen distribution is compiled.

The CPU kernels evaluate it in a loop over 16 batch rows that LLVM
vectorises only if the code is branch-free (conditional *expressions*
become selects) and calls no library function LLVM cannot vectorise.
Hence:

* ART with lambda 0.25 or 0.5 (and difftopk's epsilon form) uses square
  roots instead of general powers, and one power/root shared by phi and
  phi';
* logistic shares one division between p and the density;
* gaussian in float32 computes the normal CDF from the exponential it needs
  for the density anyway: ``1 - Phi(|z|) = exp(-z^2/2) t h(t) / 2`` with
  ``t = 1 / (1 + |z| / sqrt(2) / 2)`` and ``h`` a degree-10 polynomial
  (a least-squares fit of ``erfcx(x) / t`` in relative error on t in (0, 1],
  fit error 4e-8, ~2e-7 evaluated in float32) instead of the libm ``erf``
  call that kept the loop scalar; float64 keeps ``math.erf`` (1e-12 against
  the reference);
* in float32 the CPU kernels compute the exponential inline too
  (``inline_exp``: range reduction, polynomial, a power of two built from its exponent bits;
  the GPU keeps its fast ``expf``);
* cauchy in float32 inlines the arctangent (Cephes-style range reduction and
  odd polynomial, ~1 ulp).
"""

from __future__ import annotations

import math
import textwrap

import numpy as np

FLOAT_TYPES = ("float32", "float64")

# h(t) ~ erfcx(x) / t with t = 1 / (1 + x / 2), x >= 0, lowest degree first
# (see the module doc); h(1) = erfcx(0) = 1, h(0) = 1 / sqrt(pi).
_ERFCX_T = (
    0.282094806432724, 0.2820930480957031, 0.24690276384353638, 0.17510701715946198,
    0.09474892914295197, -0.06389185786247253, 0.14271552860736847, -0.46980881690979004,
    0.5063961148262024, -0.24077945947647095, 0.04442194476723671,
)


def lit(v: float, ft: str) -> str:
    """A float literal of type ``ft`` in generated kernel code: plain for
    float64, ``np.float32(...)`` for float32 (a bare literal would promote
    float32 arithmetic to float64)."""
    s = repr(float(v))
    return s if ft == "float64" else f"np.float32({s})"


def _horner(coefs, var: str, L) -> str:
    expr = L(coefs[-1])
    for c in reversed(coefs[:-1]):
        expr = f"({expr} * {var} + {L(c)})"
    return expr


def _exp_lines(dst: str, arg: str, L) -> list[str]:
    """float32 ``dst = exp(arg)`` for ``arg <= 0`` without a libm call (so a
    loop over batch rows stays one vector loop): arg clamped to -87,
    ``arg = r - m ln2`` with m in 0..126 and |r| <= ln2 / 2 (ln2 split in
    two, the first part exact in m * ln2_hi), ``exp(r)`` by its degree-7
    Taylor polynomial (truncation 5e-9 relative), ``2^-m`` built from its
    bits (exponent field 127 - m, an int32 viewed as float32). ~1-2 ulp;
    exp(arg) below e^-87 ~ 1.6e-38 reads as that value instead of a smaller
    one or 0."""
    poly = _horner([1.0 / math.factorial(i) for i in range(8)], "er", L)
    # 2^-m from its bits: exponent field 127 - m (1..127: a normal float32),
    # int32 throughout (int64 conversions would not vectorise)
    scale = "np.int32((np.int32(127) - em) << np.int32(23)).view(np.float32)"
    return [
        f"ex = max({arg}, {L(-87.0)})",
        f"em = np.int32(-ex * {L(1.0 / math.log(2.0))} + {L(0.5)})",  # int32: converts as a vector
        "fm = np.float32(em)",  # an int times a float32 would be float64
        f"er = ex + fm * {L(0.693359375)} + fm * {L(-2.12194440e-4)}",
        f"{dst} = {poly} * {scale}",
    ]


def _art_lines(lam: float, eps: float, ft: str, L) -> list[str]:
    """phi(d) -> ph and phi'(d) -> dph from ``dd`` (clamped d) and ``ad = |dd|``."""
    if eps > 0:
        # phi = d (|d| + e)^-lam, phi' = ((1 - lam)|d| + e) (|d| + e)^-lam / (|d| + e)
        lines = [f"ae = ad + {L(eps)}"]
        if lam == 0.5:
            lines.append(f"rp = {L(1.0)} / math.sqrt(ae)")
        elif lam == 0.25:
            lines.append(f"rp = {L(1.0)} / math.sqrt(math.sqrt(ae))")
        else:
            lines.append(f"rp = ae ** {L(-lam)}")
        return lines + [
            "ph = dd * rp",
            f"dph = ({L(1.0 - lam)} * ad + {L(eps)}) * rp / ae",
        ]
    # phi = sgn(d) |d|^(1 - lam) (0 at 0), phi' = (1 - lam) max(|d|, floor)^-lam
    from ..relax.distributions import ART_TIE_FLOOR

    floor = float(np.dtype(ft).type(ART_TIE_FLOOR))
    if lam == 0.5:
        return [
            "r2 = math.sqrt(ad)",
            "ph = math.copysign(r2, dd)",
            f"dph = {L(0.5)} / max(r2, {L(math.sqrt(floor))})",
        ]
    if lam == 0.25:
        return [
            "r2 = math.sqrt(ad)",
            "r4 = math.sqrt(r2)",
            "ph = math.copysign(r2 * r4, dd)",
            f"dph = {L(0.75)} / max(r4, {L(math.sqrt(math.sqrt(floor)))})",
        ]
    return [
        f"ph = math.copysign(ad ** {L(1.0 - lam)}, dd)",
        f"dph = {L(1.0 - lam)} * max(ad, {L(floor)}) ** {L(-lam)}",
    ]


def _dist_lines(dist: str, eps: float, ft: str, L, inline_exp: bool) -> list[str]:
    """F(z) -> p and f(z) -> f from the clamped ``z``."""
    one, half, zero = L(1.0), L(0.5), L(0.0)

    def exp(dst, arg):
        return _exp_lines(dst, arg, L) if inline_exp and ft == "float32" else [f"{dst} = math.exp({arg})"]

    if dist in ("logistic", "logistic_phi"):
        return exp("ez", "-abs(z)") + [
            f"inv = {one} / ({one} + ez)",
            "pm = ez * inv",  # F(-|z|)
            f"p = inv if z >= {zero} else pm",
            "f = inv * pm",
        ]
    if dist == "cauchy" and ft == "float32":
        # atan inline (Cephes atanf: range reduction + odd polynomial, error
        # ~1 float32 ulp) instead of a libm call, and one division shared by
        # the range reduction and the density 1/(pi (1 + z^2))
        return [
            "az = abs(z)",
            f"big = az > {L(2.414213562373095)}",
            f"mid = az > {L(0.41421356237309503)}",
            f"num = -{one} if big else (az - {one} if mid else az)",
            f"den = az if big else (az + {one} if mid else {one})",
            f"y0 = {L(math.pi / 2)} if big else ({L(math.pi / 4)} if mid else {zero})",
            f"zc = min(az, {L(1e19)})",  # z2 stays finite; den * z2 may overflow -> inv = 0 (f ~ 0 there)
            f"z2 = {one} + zc * zc",
            f"inv = {one} / (den * z2)",
            "xr = num * z2 * inv",
            "zz = xr * xr",
            f"at = y0 + ((({L(8.05374449538e-2)} * zz - {L(1.38776856032e-1)}) * zz + {L(1.99777106478e-1)}) * zz"
            f" - {L(3.33329491539e-1)}) * zz * xr + xr",
            f"p = {half} + (at if z >= {zero} else -at) * {L(1.0 / math.pi)}",
            f"f = den * inv * {L(1.0 / math.pi)}",
        ]
    if dist == "cauchy":
        return [
            f"p = {half} + math.atan(z) / {L(math.pi)}",
            f"f = {one} / ({L(math.pi)} * ({one} + z * z))",
        ]
    if dist == "reciprocal":
        return [
            f"rz = {one} / ({L(2.0)} + abs(z))",
            f"p = {half} * (z * rz + {one})",
            "f = rz * rz",
        ]
    if dist == "gaussian" and ft == "float32":
        return exp("ez", f"{L(-0.5)} * z * z") + [
            f"t = {one} / ({one} + abs(z) * {L(0.5 / math.sqrt(2.0))})",
            f"tail = {half} * ez * t * {_horner(_ERFCX_T, 't', L)}",  # 1 - Phi(|z|)
            f"p = {one} - tail if z >= {zero} else tail",
            f"f = ez * {L(1.0 / math.sqrt(2.0 * math.pi))}",
        ]
    if dist == "gaussian":
        return [
            f"p = {half} * ({one} + math.erf(z * {L(1.0 / math.sqrt(2.0))}))",
            f"f = math.exp({L(-0.5)} * z * z) * {L(1.0 / math.sqrt(2.0 * math.pi))}",
        ]
    if dist == "optimal":
        # |z| <= 1/4: p = z + 1/2, f = 1; else the tails 1/(16 (|z| + e))
        return [
            "az = abs(z)",
            f"rt = {one} / ({L(16.0)} * (max(az, {L(0.25)}) + {L(eps)}))",
            f"lin = az <= {L(0.25)}",
            f"p = z + {half} if lin else ({one} - rt if z > {zero} else rt)",
            f"f = {one} if lin else {L(16.0)} * rt * rt",
        ]
    raise ValueError(f"unknown distribution {dist!r}")  # pragma: no cover - Relaxation validates


def swap_code(r, indent: int, ft: str = "float64", inline_exp: bool = False, steepness: str | None = None) -> str:
    """Scalar code reading ``d`` (of type ``ft``) and defining ``p`` (swap
    probability), ``dp`` (dp/dd) and ``dps`` (dp/ds, the derivative with
    respect to the steepness s: ``f(z) * phi(d)``), all in ``ft`` arithmetic
    like the reference in that dtype. Uses only ``math``, ``np.float32`` and
    literals, so it runs under njit, cuda.jit and the CUDA simulator.
    ``inline_exp`` (CPU kernels): float32 exponentials without libm calls
    (:func:`_exp_lines`). ``steepness``: the name of a variable (of type
    ``ft``) holding s at run time; None bakes ``r.steepness`` in as a
    literal. Code that does not use ``dps`` pays nothing for it (the
    compiler drops it)."""
    if ft not in FLOAT_TYPES:
        raise ValueError(f"unknown float type {ft!r}")
    if steepness is not None and not str(steepness).isidentifier():
        raise ValueError(f"steepness must name a variable, got {steepness!r}")
    L = lambda v: lit(v, ft)  # noqa: E731
    big = L(np.finfo(ft).max)
    s = L(r.steepness) if steepness is None else str(steepness)
    # clamps as min/max (branch-free: the kernels' loops over a block of
    # batch rows vectorise)
    lines = [f"dd = min(max(d, -{big}), {big})"]
    if r.uses_art:
        lines.append("ad = abs(dd)")
        lines += _art_lines(float(r.art_lambda), float(r.art_epsilon), ft, L)
        lines.append(f"z = {s} * ph")
    else:
        lines += [f"dph = {L(1.0)}", "ph = dd", f"z = {s} * dd"]
    lines.append(f"z = min(max(z, -{big}), {big})")
    lines += _dist_lines(r.distribution, float(r.art_epsilon), ft, L, inline_exp)
    lines.append(f"dp = min({s} * f * dph, {big})")
    lines.append(f"dps = min(max(f * ph, -{big}), {big})")
    return textwrap.indent("\n".join(lines), " " * indent)
