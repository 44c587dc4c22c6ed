"""The swap code pasted into the numba kernels, compiled on its own in a
small njit loop, against the reference formulas (netgen.relax.distributions)
for every distribution and every special ART form (lambda 0.25 / 0.5 by
square roots, the general power, difftopk's epsilon form): float64 within
1e-12, float32 within 1e-6 (p) and 2e-6 relative (dp/dd), on ordinary
differences, ties, tiny and huge ones."""

from __future__ import annotations

import math
import textwrap

import numba
import numpy as np
import pytest
import torch

from netgen.codegen.swap_code import swap_code
from netgen.relax.distributions import DISTRIBUTIONS, Relaxation, swap_probability, swap_probability_grad

CASES = [Relaxation(d, 7.0) for d in DISTRIBUTIONS] + [
    Relaxation("logistic_phi", 10.0, art_lambda=0.5),
    Relaxation("logistic_phi", 10.0, art_lambda=0.4),
    Relaxation("logistic_phi", 10.0, art_lambda=0.25, art_epsilon=1e-10),
    Relaxation("logistic_phi", 10.0, art_lambda=0.5, art_epsilon=1e-10),
    Relaxation("logistic_phi", 10.0, art_lambda=0.4, art_epsilon=1e-10),
    Relaxation("optimal", 3.0, art_epsilon=1e-10),
]


def _kernel(r, ft, inline_exp=True):
    src = "def f(ds, out_p, out_dp):\n    for i in range(ds.shape[0]):\n        d = ds[i]\n"
    src += swap_code(r, 8, ft, inline_exp) + "\n        out_p[i] = p\n        out_dp[i] = dp\n"
    ns = {"math": math, "np": np}
    exec(compile(textwrap.dedent(src), "<swap>", "exec"), ns)
    return numba.njit(ns["f"])


def _diffs(ft):
    g = np.random.default_rng(0)
    big = float(np.finfo(ft).max)
    d = np.concatenate([
        np.linspace(-6, 6, 2001), g.standard_normal(2000) * 0.05, [0.0, -0.0, 1e-12, -1e-12, 1e-9, 1e-10, 3e-11],
        [1e3, -1e3, 1e20, -1e20, big, -big, 0.24 / 3, 0.26 / 3, 0.25 / 3],
    ])
    return d.astype(ft)


@pytest.mark.parametrize("r", CASES, ids=lambda r: f"{r.distribution}-{r.art_lambda}-{r.art_epsilon}")
def test_swap_code_equals_reference(r):
    for ft, ptol, grtol in (("float64", 1e-12, 1e-12), ("float32", 1e-6, 2e-6)):
        d = _diffs(ft)
        p = np.empty_like(d)
        dp = np.empty_like(d)
        _kernel(r, ft)(d, p, dp)
        td = torch.from_numpy(d)
        p0 = swap_probability(td, r).numpy()
        dp0 = swap_probability_grad(td, r).numpy()
        assert np.isfinite(p).all() and np.isfinite(dp).all()
        np.testing.assert_allclose(p, p0, atol=ptol, rtol=0, err_msg=f"p, {ft}")
        np.testing.assert_allclose(dp, dp0, rtol=grtol, atol=ptol * r.steepness, err_msg=f"dp/dd, {ft}")


def test_float32_gaussian_cdf_accuracy():
    """The float32 normal CDF (exp and a polynomial fit of erfcx) against
    math.erfc in double: within 3e-7 absolute; relative, in the tails, 1e-6
    for |z| <= 5 and 5e-6 out to |z| = 12 (float32 rounding of z^2 inside
    exp: z^2 * 2^-24)."""
    r = Relaxation("gaussian", 1.0)
    z = np.concatenate([np.linspace(-12, 12, 24001), [0.0]]).astype(np.float32)
    p = np.empty_like(z)
    dp = np.empty_like(z)
    _kernel(r, "float32")(z, p, dp)
    exact = np.array([0.5 * math.erfc(-float(v) / math.sqrt(2.0)) for v in z])
    np.testing.assert_allclose(p, exact, atol=3e-7, rtol=0)
    near = (z < -1) & (z >= -5)
    np.testing.assert_allclose(p[near], exact[near], rtol=1e-6, atol=0)
    far = z < -5
    np.testing.assert_allclose(p[far], exact[far], rtol=5e-6, atol=0)
    assert p[-1] == np.float32(0.5)


def _kernel_runtime_s(r, ft):
    src = "def f(ds, s, out_p, out_dp, out_ds):\n    for i in range(ds.shape[0]):\n        d = ds[i]\n"
    src += swap_code(r, 8, ft, True, steepness="s") + "\n        out_p[i] = p\n        out_dp[i] = dp\n        out_ds[i] = dps\n"
    ns = {"math": math, "np": np}
    exec(compile(textwrap.dedent(src), "<swap>", "exec"), ns)
    return numba.njit(ns["f"])


@pytest.mark.parametrize("r", CASES, ids=lambda r: f"{r.distribution}-{r.art_lambda}-{r.art_epsilon}")
def test_runtime_steepness_and_dp_ds(r):
    """With the steepness a run-time variable the code gives the same p and
    dp/dd as with it baked in, and dp/ds = f(z) phi(d) (checked against a
    central finite difference of the reference p in float64)."""
    from netgen.relax import distributions as D

    d = _diffs("float64")
    d = d[np.abs(d) < 1e6]
    for s in (0.5, 7.0, 33.0):
        rs = Relaxation(r.distribution, s, r.art_lambda, r.art_epsilon)
        p, dp, dps = np.empty_like(d), np.empty_like(d), np.empty_like(d)
        _kernel_runtime_s(r, "float64")(d, np.float64(s), p, dp, dps)
        td = torch.from_numpy(d)
        np.testing.assert_allclose(p, swap_probability(td, rs).numpy(), atol=1e-12, rtol=0)
        np.testing.assert_allclose(dp, swap_probability_grad(td, rs).numpy(), rtol=1e-12, atol=1e-12 * s)
        exact = (D._pdf(D._z(td, rs), rs) * D._phi(td, rs)).numpy()
        np.testing.assert_allclose(dps, exact, rtol=1e-12, atol=1e-15)
        h = 1e-6 * s
        up = swap_probability(td, Relaxation(r.distribution, s + h, r.art_lambda, r.art_epsilon)).numpy()
        dn = swap_probability(td, Relaxation(r.distribution, s - h, r.art_lambda, r.art_epsilon)).numpy()
        smooth = np.abs(np.abs(d * s) - 0.25) > 1e-3  # optimal's kinks at |z| = 1/4
        np.testing.assert_allclose(dps[smooth], ((up - dn) / (2 * h))[smooth], rtol=1e-5, atol=1e-7)
    p32, dp32, dps32 = (np.empty(len(d), np.float32) for _ in range(3))
    _kernel_runtime_s(r, "float32")(d.astype(np.float32), np.float32(r.steepness), p32, dp32, dps32)
    p0 = swap_probability(torch.from_numpy(d.astype(np.float32)), r).numpy()
    np.testing.assert_allclose(p32, p0, atol=1e-6, rtol=0)
    assert p32.dtype == np.float32 and np.isfinite(dps32).all()


def _kernel_pairs(r, ft, tame):
    """The CUDA kernels' form of the swap code (run-time steepness, no
    inline exponential) over pairs (d[i], s[i])."""
    src = "def f(ds, ss, out_p, out_dp, out_ds):\n    for i in range(ds.shape[0]):\n        d = ds[i]\n        s = ss[i]\n"
    src += swap_code(r, 8, ft, steepness="s", tame=tame)
    src += "\n        out_p[i] = p\n        out_dp[i] = dp\n        out_ds[i] = dps\n"
    ns = {"math": math, "np": np}
    exec(compile(textwrap.dedent(src), "<swap>", "exec"), ns)
    return numba.njit(ns["f"])


def _run_pairs(r, ft, tame, d, s):
    out = [np.empty_like(d) for _ in range(3)]
    _kernel_pairs(r, ft, tame)(d, s, *out)
    return out


@pytest.mark.parametrize("r", CASES, ids=lambda r: f"{r.distribution}-{r.art_lambda}-{r.art_epsilon}")
def test_tame_swap_code_is_the_clamped_code_bit_for_bit_where_the_clamps_cannot_act(r):
    """The CUDA kernels run the swap code without the clamps of d and z in
    tame rows (s max(1, max - min) <= 2^-24 of the float's largest value;
    netgen.codegen.cuda.updates.per_range): for every pair with s max(1,
    |d|) up to that bound, with 2^24 of slack for the sweep's rounding
    drift included (up to the float's largest value / 2), p, dp/dd and
    dp/ds are the same bits as the clamped code's. Past it (d infinite, or
    s |d| overflowing) the two differ: the clamps are not dead code."""
    from netgen.codegen.cuda.row_io import tame_bound

    for ft in ("float32", "float64"):
        big = float(np.finfo(ft).max)
        reach = big / 2  # the bound with all of its slack used
        d0 = np.array([0.0, 1e-30, 1e-7, 0.01, 0.3, 1.0, 5.0, 1e3, 1e20, 1e30, 1e100, 1e300])
        s0 = np.array([1e-30, 1e-3, 0.25, 1.0, 7.0, 1e3, 1e20, tame_bound(ft), reach])
        dd, ss = np.meshgrid(np.concatenate([d0, -d0, [reach, -reach]]), s0)
        with np.errstate(over="ignore"):  # values past the float's range (float32) and pairs past the bound: left out
            dd, ss = dd.ravel().astype(ft), ss.ravel().astype(ft)
            keep = np.isfinite(dd) & np.isfinite(ss) & (ss > 0) & (ss.astype(np.float64) * np.maximum(
                1.0, np.abs(dd.astype(np.float64))) <= reach)
        d, s = dd[keep], ss[keep]
        assert len(d) > 100, ft
        clamped, tame = _run_pairs(r, ft, False, d, s), _run_pairs(r, ft, True, d, s)
        for name, a, b in zip(("p", "dp", "dps"), clamped, tame):
            assert np.array_equal(a, b, equal_nan=True) and np.array_equal(np.signbit(a), np.signbit(b)), (ft, name)
        # outside: an infinite d (dp/ds = f(inf) phi(inf) = 0 inf) and an overflowing s |d|
        d = np.array([np.inf, -np.inf, big, -big], ft)
        s = np.array([1.0, 1.0, 4.0, 4.0], ft)
        clamped, tame = _run_pairs(r, ft, False, d, s), _run_pairs(r, ft, True, d, s)
        assert np.isfinite(clamped[2]).all() and np.isnan(tame[2]).any(), (ft, clamped[2], tame[2])
