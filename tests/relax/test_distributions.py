"""Swap probabilities p = F(s phi(d)) against their defining formulas."""

import math

import pytest
import torch

from netgen.relax.distributions import (
    ART_TIE_FLOOR,
    DISTRIBUTIONS,
    Relaxation,
    default_relaxation,
    swap_probability,
    swap_probability_grad,
)
from netgen.network import Network

torch.set_num_threads(1)  # tiny tensors: intra-op threads only add contention (2-core CI)

D = torch.tensor([-30.0, -2.0, -0.3, -0.01, 0.0, 1e-7, 0.02, 0.2, 0.7, 5.0, 40.0], dtype=torch.float64)


def scalar_cdf(dist, z):
    """The formulas of docs/design.md section 6, scalar by scalar."""
    if dist in ("logistic", "logistic_phi"):
        return 1 / (1 + math.exp(-z))
    if dist == "cauchy":
        return 0.5 + math.atan(z) / math.pi
    if dist == "reciprocal":
        return (z / (2 + abs(z)) + 1) / 2
    if dist == "gaussian":
        return 0.5 * (1 + math.erf(z / math.sqrt(2)))
    if dist == "optimal":
        if abs(z) <= 0.25:
            return z + 0.5
        return 1 - 1 / (16 * z) if z > 0 else -1 / (16 * z)
    raise AssertionError(dist)


@pytest.mark.parametrize("dist", DISTRIBUTIONS)
def test_probability_matches_formula(dist):
    r = Relaxation(dist, steepness=3.0, art_lambda=0.4)
    p = swap_probability(D, r)
    for d, got in zip(D.tolist(), p.tolist()):
        phi = math.copysign(abs(d) ** 0.6, d) if dist == "logistic_phi" else d
        assert got == pytest.approx(scalar_cdf(dist, 3.0 * phi), abs=1e-14)


@pytest.mark.parametrize("dist", DISTRIBUTIONS)
def test_symmetry_and_range(dist):
    r = Relaxation(dist, steepness=7.0)
    p, q = swap_probability(D, r), swap_probability(-D, r)
    assert torch.allclose(p + q, torch.ones_like(p), atol=1e-15)
    assert bool(((p >= 0) & (p <= 1)).all())
    assert bool((p[1:] >= p[:-1]).all())  # monotone in d


@pytest.mark.parametrize("dist", DISTRIBUTIONS)
def test_grad_matches_finite_difference(dist):
    r = Relaxation(dist, steepness=2.5, art_lambda=0.3)
    d = D[D.abs() > 1e-3]
    d = d[(2.5 * d).abs().sub(0.25).abs() > 1e-3]  # avoid optimal's kinks
    h = 1e-6
    fd = (swap_probability(d + h, r) - swap_probability(d - h, r)) / (2 * h)
    assert torch.allclose(swap_probability_grad(d, r), fd, rtol=1e-5, atol=1e-8)


def test_art_tie_slope_is_finite_and_documented():
    r = Relaxation("logistic_phi", steepness=10.0, art_lambda=0.25)
    g0 = swap_probability_grad(torch.zeros(1, dtype=torch.float64), r).item()
    assert g0 == pytest.approx(10.0 * 0.25 * 0.75 * ART_TIE_FLOOR ** -0.25)
    # the slope below the floor is frozen at its value at the floor
    g_floor = swap_probability_grad(torch.tensor([ART_TIE_FLOOR], dtype=torch.float64), r).item()
    assert g0 == pytest.approx(g_floor, rel=1e-6)


def test_art_epsilon_matches_difftopk_form():
    eps = 1e-10
    r = Relaxation("logistic_phi", steepness=10.0, art_lambda=0.25, art_epsilon=eps)
    d = torch.tensor([-1.0, -1e-9, 0.0, 3e-11, 0.5], dtype=torch.float64)
    want = torch.sigmoid(10.0 * d / (d.abs() + eps) ** 0.25)
    assert torch.allclose(swap_probability(d, r), want, atol=1e-15)
    # derivative of d/(|d|+eps)^lambda at 0 is eps^-lambda
    g0 = swap_probability_grad(torch.zeros(1, dtype=torch.float64), r).item()
    assert g0 == pytest.approx(10.0 * 0.25 * eps ** -0.25)


@pytest.mark.parametrize("dist", DISTRIBUTIONS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16])
def test_extremes_are_finite(dist, dtype):
    r = Relaxation(dist, steepness=1e4, art_lambda=0.9)
    big = torch.finfo(dtype).max
    d = torch.tensor([-big, -1e30 if dtype != torch.float16 else -6e4, -1e-30, 0.0, 1e-30, 2e30 if dtype != torch.float16 else 6e4, big], dtype=dtype)
    p, g = swap_probability(d, r), swap_probability_grad(d, r)
    assert p.dtype == dtype and g.dtype == dtype
    assert bool(torch.isfinite(p).all()) and bool(torch.isfinite(g).all())
    assert p[0].item() == pytest.approx(0.0, abs=1e-3) and p[-1].item() == pytest.approx(1.0, abs=1e-3)


def test_relaxation_validation_and_dict():
    with pytest.raises(ValueError, match="distribution"):
        Relaxation("softmax")
    with pytest.raises(ValueError, match="steepness"):
        Relaxation(steepness=0)
    with pytest.raises(ValueError, match="steepness"):
        Relaxation(steepness=float("inf"))
    with pytest.raises(ValueError, match="art_lambda"):
        Relaxation(art_lambda=1.0)
    r = Relaxation("gaussian", 3, 0.5)
    assert r.to_dict() == {"distribution": "gaussian", "steepness": 3.0, "art_lambda": 0.5, "art_epsilon": 0.0}
    assert Relaxation.from_dict(r.to_dict()) == r
    with pytest.raises(ValueError, match="integer|floating"):
        swap_probability(torch.tensor([1, 2]), r)


def test_default_relaxation_ties_steepness_to_depth():
    net = Network.from_layers(4, [[(0, 1), (2, 3)], [(0, 2), (1, 3)], [(1, 2)]])
    r = default_relaxation(net)
    assert r.steepness == 2 * net.depth == 6
    assert r.distribution == "cauchy"
    assert default_relaxation(net, "logistic_phi").distribution == "logistic_phi"
