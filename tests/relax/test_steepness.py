"""steepness="auto"'s estimator (netgen.relax.steepness): the steepness that
gives a target blur on the scores, checked by measuring the blur of the
reference executor's P at the chosen steepness."""

import math

import pytest
import torch

from netgen.compiler import build
from netgen.relax import reference as ref
from netgen.relax.blur import blur
from netgen.relax.distributions import DISTRIBUTIONS, default_relaxation
from netgen.relax.steepness import (DEFAULT_BLUR, TRAINING_BLUR, AutoSteepness, Estimate, check_blur, estimate_steepness, reference_columns,
                                    sweep_columns)


def _net(n, k):
    return build(n, k).network


def _true_blur(net, r, x, s):
    _, P = ref.forward(net, x, r, steepness=s)
    return float(blur(P, ref.hard(net, x)[1]))


@pytest.mark.parametrize("distribution", DISTRIBUTIONS)
def test_sweep_columns_are_the_reference_lanes(distribution):
    net = _net(16, 5)
    r = default_relaxation(net, distribution)
    g = torch.Generator().manual_seed(4)
    x = torch.randn(6, 16, generator=g, dtype=torch.float64)
    y = torch.randint(0, 16, (6, 3), generator=g)
    for s in (0.5, 7.0):
        assert torch.allclose(sweep_columns(net, r)(x, s, y), reference_columns(net, r)(x, s, y), atol=1e-13)


@pytest.mark.parametrize("n,k,distribution", [(16, 1, "cauchy"), (16, 5, "logistic_phi"), (16, 16, "optimal"),
                                              (32, 5, "gaussian"), (24, 24, "reciprocal")])
@pytest.mark.parametrize("scale", [1e-3, 1e3])
@pytest.mark.parametrize("target", [0.05, 0.3])
def test_estimate_hits_the_target_blur(n, k, distribution, scale, target):
    net = _net(n, k)
    r = default_relaxation(net, distribution)
    x = torch.randn(64, n, generator=torch.Generator().manual_seed(n + k), dtype=torch.float64) * scale
    est = estimate_steepness(net, r, x, target)
    assert isinstance(est, Estimate) and est.note == ""
    got = _true_blur(net, r, x, est.steepness)
    assert got == pytest.approx(target, rel=0.1)
    # and the network's default steepness is not what hits it (the test can fail)
    assert abs(_true_blur(net, r, x, r.steepness) / target - 1) > 0.1


def test_steepness_scales_with_the_scores():
    """phi = identity: blur(s, c x) = blur(c s, x), so s(c x) = s(x) / c."""
    net = _net(16, 5)
    r = default_relaxation(net, "cauchy")
    x = torch.randn(32, 16, generator=torch.Generator().manual_seed(9), dtype=torch.float64)
    s1 = estimate_steepness(net, r, x, 0.1).steepness
    s2 = estimate_steepness(net, r, x * 1e3, 0.1).steepness
    assert s2 * 1e3 == pytest.approx(s1, rel=1e-6)
    # a blurrier target needs a smaller steepness
    assert estimate_steepness(net, r, x, 0.3).steepness < s1 < estimate_steepness(net, r, x, 0.03).steepness


def test_model_alone_is_close():
    net = _net(16, 16)
    r = default_relaxation(net)
    x = torch.randn(64, 16, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    e0 = estimate_steepness(net, r, x, 0.1, refine=0)
    e2 = estimate_steepness(net, r, x, 0.1)
    assert e0.measured is None and e0.measurements == 0
    assert e2.measured == pytest.approx(0.1, rel=0.05)
    assert 0.5 < e0.steepness / e2.steepness < 2


@pytest.mark.parametrize("bad", [0, 1, 1.0, -0.1, 1.5, "0.1", True, float("nan"), None])
def test_blur_target_must_lie_in_0_1(bad):
    with pytest.raises(ValueError, match=r"blur must be a number in \(0, 1\)"):
        check_blur(bad)
    net = _net(8, 3)
    with pytest.raises(ValueError, match="blur must be"):
        estimate_steepness(net, default_relaxation(net), torch.randn(4, 8), bad)


def test_ties_and_empty_batches_carry_no_information():
    net = _net(8, 3)
    r = default_relaxation(net)
    est = estimate_steepness(net, r, torch.ones(5, 8), 0.1)
    assert est.steepness is None and "tie" in est.note
    assert estimate_steepness(net, r, torch.zeros(0, 8), 0.1).steepness is None


def test_auto_state_estimates_on_a_schedule_and_checkpoints():
    net = _net(16, 5)
    r = default_relaxation(net)
    x = torch.randn(32, 16, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    calls = []

    def estimate(t, blur):
        calls.append(blur)
        return estimate_steepness(net, r, t, blur)

    auto = AutoSteepness(0.1, every=4)
    assert [c for c in range(13) if auto.due(c)] == [0, 1, 2, 4, 8, 12]
    # the default: calibrate on the first 4 training calls, then keep s (a swept steepness's dynamics)
    assert [c for c in range(300) if AutoSteepness().due(c)] == [0, 1, 2, 3]
    assert [c for c in range(300) if AutoSteepness(calibrate=2).due(c)] == [0, 1]
    assert [c for c in range(300) if AutoSteepness(every=100).due(c)] == [0, 1, 2, 4, 8, 16, 32, 64, 100, 200]
    s = auto(x, estimate, fallback=1.0)
    assert len(calls) == 1 and s == pytest.approx(estimate_steepness(net, r, x, 0.1).steepness)
    for _ in range(5):
        auto(x * 2, estimate, 1.0)
    assert len(calls) == 4  # calls 0, 1, 2 and 4 estimate (every=4)
    assert float(auto.steepness) < s  # x * 2 asks for half the steepness; the average moves towards it
    state = auto.state_dict()
    assert set(state) == {"steepness", "calls"}
    other = AutoSteepness(0.1)
    other.load_state_dict(state)
    other.eval()
    assert other(x, estimate, 1.0) == float(auto.steepness) and len(calls) == 4  # eval: the buffer as it is
    fresh = AutoSteepness(0.1).eval()
    assert fresh(torch.ones(3, 16), estimate, fallback=7.0) == 7.0  # no information yet: the fallback
    with pytest.raises(ValueError, match="every"):
        AutoSteepness(0.1, every=0)
    with pytest.raises(ValueError, match="calibrate"):
        AutoSteepness(calibrate=0)
    assert set(calls) == {0.1}  # a blur given is used in every mode


def test_auto_blur_default_depends_on_the_mode():
    """blur=None: TRAINING_BLUR when calibrating in training, DEFAULT_BLUR
    for a first estimate in eval mode."""
    net = _net(16, 5)
    r = default_relaxation(net)
    x = torch.randn(32, 16, generator=torch.Generator().manual_seed(6), dtype=torch.float64)
    seen = []

    def estimate(t, blur):
        seen.append(blur)
        return estimate_steepness(net, r, t, blur)

    trained = AutoSteepness()
    for _ in range(6):
        s_train = trained(x, estimate, 1.0)
    assert seen == [TRAINING_BLUR] * 4 and int(trained.calls) == 6
    assert s_train == pytest.approx(estimate_steepness(net, r, x, TRAINING_BLUR).steepness, rel=1e-6)
    seen.clear()
    s_eval = AutoSteepness().eval()(x, estimate, 1.0)
    assert seen == [DEFAULT_BLUR]
    assert s_eval > 2 * s_train  # 0.1 is sharper than 0.75: a larger s
    with pytest.raises(ValueError, match="blur"):
        AutoSteepness(2.0)


def test_probe_blur_estimates_every_rank():
    """Hutchinson's probes: unbiased for 1 - trace(P H^T) / k; close with a few probes at k = 128."""
    from netgen.relax.steepness import probe_blur, sweep_lanes

    net = _net(128, 128)
    r = default_relaxation(net, "cauchy")
    x = torch.randn(3, 128, generator=torch.Generator().manual_seed(11), dtype=torch.float64)
    s = estimate_steepness(net, r, x, 0.1).steepness
    exact = _true_blur(net, r, x, s)
    h = ref.hard(net, x)[1]
    got = probe_blur(sweep_lanes(net, r), x, h, s, probes=8)
    assert got == pytest.approx(exact, rel=0.03)
    assert got != probe_blur(sweep_lanes(net, r), x, h, s, probes=8, seed=1)  # a real random estimate
    assert exact == pytest.approx(0.1, rel=0.1)
