"""netgen.compat against diffsort 0.2.0 / difftopk 0.2.0 as oracles: every
public name with the published signature, the losses' values (every
diffsort_method and top1_mode), the matrix-format networks and functional
``sort``/``topk``, NeuralSort/SoftSort, and live attributes."""

import contextlib
import inspect
import io

import numpy as np
import pytest
import torch

import netgen.compat as C
from netgen.bench.difftopk_sparse import SpmmShim
from netgen.codegen.auto import runtime_steepness

torch.set_num_threads(1)
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

with contextlib.redirect_stdout(io.StringIO()):  # difftopk prints at import
    diffsort = pytest.importorskip("diffsort")
    difftopk = pytest.importorskip("difftopk")
    import difftopk.functional as dtf


@contextlib.contextmanager
def spmm_shim():
    saved = getattr(dtf, "torch_sparse", None)
    saved_flag = dtf.SPARSE_INSTALLED
    dtf.torch_sparse, dtf.SPARSE_INSTALLED = SpmmShim, True
    try:
        yield
    finally:
        dtf.SPARSE_INSTALLED = saved_flag
        if saved is None:
            del dtf.torch_sparse
        else:
            dtf.torch_sparse = saved


def quiet(f, *a, **kw):
    with contextlib.redirect_stdout(io.StringIO()):
        return f(*a, **kw)


def public(pkg):
    return sorted(n for n in vars(pkg) if not n.startswith("_") and not inspect.ismodule(getattr(pkg, n)))


def params(obj):
    sig = inspect.signature(obj.__init__ if inspect.isclass(obj) else obj)
    return [(p.name, p.kind, p.default) for p in sig.parameters.values() if p.name != "self"], sig


@pytest.mark.parametrize("pkg,mirror", [("diffsort", C.diffsort), ("difftopk", C.difftopk), ("difftopk", C)])
def test_every_public_name_with_the_published_signature(pkg, mirror):
    theirs = {"diffsort": diffsort, "difftopk": difftopk}[pkg]
    names = public(theirs)
    assert {"DiffSortNet", "sort", "bitonic_network", "odd_even_network", "get_sorting_network"} <= set(
        public(diffsort))
    assert len(names) >= 5
    for name in names:
        assert hasattr(mirror, name), name
        want, _ = params(getattr(theirs, name))
        got, sig = params(getattr(mirror, name))
        assert got[: len(want)] == want, (name, sig)
        for pname, kind, default in got[len(want):]:  # netgen's extras: keyword-only, with defaults
            assert kind is inspect.Parameter.KEYWORD_ONLY and default is not inspect.Parameter.empty, (name, pname)
    if mirror is C:  # the top level also has diffsort's names
        for name in public(diffsort):
            assert hasattr(C, name)


# --------------------------------------------------------------- the losses
METHODS = ["bitonic", "splitter_selection", "bitonic__non_sparse", "odd_even", "neuralsort", "softsort"]


# the fast run (no --run-slow) keeps one of the networks (~5 s each)
@pytest.mark.parametrize("method", [pytest.param(m, marks=pytest.mark.slow) if m in ("bitonic", "odd_even") else m
                                    for m in METHODS])
def test_topk_cross_entropy_every_top1_mode_matches_difftopk(method):
    n, p_k = 16, [0.5, 0.3, 0.2]
    g = torch.Generator().manual_seed(3)
    for dist in ("cauchy", "logistic_phi", "gaussian"):
        for mode in ("sm", "smce", "sort"):
            # moderate losses: where q = P(top-k) ~ 1e-6, float32 P entries of either side differ relatively
            x = torch.randn(7, n, generator=g) * 0.5
            y = torch.randint(0, n, (7,), generator=g)
            theirs = quiet(difftopk.TopKCrossEntropyLoss, method, 2.0, p_k, n, distribution=dist, top1_mode=mode)
            ours = C.TopKCrossEntropyLoss(method, 2.0, p_k, n, distribution=dist, top1_mode=mode)
            xt, xo = x.clone().requires_grad_(), x.clone().requires_grad_()
            with spmm_shim():
                lt = theirs(xt, y)
            lo = ours(xo, y)
            assert lo.dtype == torch.float32
            assert abs(lt.item() - lo.item()) < 1e-5, (method, dist, mode, lt.item(), lo.item())
            lt.backward()
            lo.backward()
            # gradients: float32 noise through 1/q and ART's |d|^-lambda, relative to the largest entry
            assert (xt.grad - xo.grad).abs().max().item() <= 1e-3 * xt.grad.abs().max().item(), (method, dist, mode)


@pytest.mark.parametrize("method", ["odd_even", "splitter_selection", "softsort"])
def test_topk_cross_entropy_top_m_matches_difftopk(method):
    n, m = 30, 8
    x = torch.randn(9, n, generator=torch.Generator().manual_seed(5))
    y = torch.randint(0, n, (9,), generator=torch.Generator().manual_seed(6))
    for mode in ("sm", "smce", "sort"):
        theirs = quiet(difftopk.TopKCrossEntropyLoss, method, 6.0, [0.6, 0.4], n, m=m, distribution="logistic",
                       top1_mode=mode)
        ours = C.TopKCrossEntropyLoss(method, 6.0, [0.6, 0.4], n, m=m, distribution="logistic", top1_mode=mode)
        with spmm_shim():
            lt = theirs(x, y)
        assert abs(lt.item() - ours(x, y).item()) < 1e-5, mode


def test_loss_arguments():
    with pytest.raises(ValueError, match="top1_mode"):
        C.TopKCrossEntropyLoss("odd_even", 1.0, [1.0], 8, top1_mode="argmax")
    with pytest.raises(ValueError, match="p_k"):
        C.TopKCrossEntropyLoss("odd_even", 1.0, [0.5, 0.6], 8)
    with pytest.raises(ValueError, match="diffsort_method"):
        C.TopKCrossEntropyLoss("quicksort", 1.0, [1.0], 8)
    with pytest.raises(ValueError, match="m must"):
        C.TopKCrossEntropyLoss("odd_even", 1.0, [0.5, 0.5], 8, m=8)
    # difftopk's own default distribution=None: netgen reads it as cauchy (difftopk's network fails on None)
    loss = C.TopKCrossEntropyLoss("odd_even", 2.0, [0.5, 0.5], 8)
    assert loss.top_k_net.relaxation.distribution == "cauchy"
    assert loss(torch.randn(3, 8), torch.tensor([0, 1, 2])).isfinite()


@pytest.mark.parametrize("cls", ["SmoothTopKLoss", "SmoothHardTopKLoss"])
def test_smooth_topk_losses_match_difftopk(cls):
    g = torch.Generator().manual_seed(7)
    for k, tau in ((1, 1.0), (3, 0.5), (5, 2.0)):
        x = torch.randn(12, 20, generator=g) * 4
        x[:3] = torch.randn(3, 20, generator=g) * 1000  # some rows take the hard branch
        y = torch.randint(0, 20, (12,), generator=g)
        if k == 1 and cls == "SmoothTopKLoss":
            continue  # difftopk's SmoothTopKLoss needs k >= 2 (its polynomial recursion)
        theirs, ours = getattr(difftopk, cls)(20, k, tau), getattr(C, cls)(20, k, tau)
        xt, xo = x.clone().requires_grad_(), x.clone().requires_grad_()
        lt, lo = theirs(xt, y), ours(xo, y)
        assert abs(lt.item() - lo.item()) < 1e-4 * max(1.0, abs(lt.item())), (k, tau, lt.item(), lo.item())
        lo.backward()
        if k >= 2:  # difftopk's hand-written backward is wrong for k = 1 (-1/B on every class)
            lt.backward()
            assert (xt.grad - xo.grad).abs().max().item() < 1e-4, (k, tau)
        x64 = x[3:].double().requires_grad_()  # ours is autograd: check it in float64
        assert torch.autograd.gradcheck(lambda v: ours(v, y[3:]), (x64,))


@pytest.mark.parametrize("hard", [False, True])
def test_neuralsort_softsort_match_difftopk(hard):
    x = torch.randn(4, 9, generator=torch.Generator().manual_seed(8)).requires_grad_()
    for cls, kw in (("NeuralSort", {}), ("SoftSort", {}), ("SoftSort", {"pow": 2.0})):
        theirs, ours = getattr(difftopk, cls)(tau=0.7, hard=hard, **kw), getattr(C, cls)(tau=0.7, hard=hard, **kw)
        a, b = theirs(x), ours(x)
        assert a.shape == b.shape == (4, 9, 9)
        assert (a - b).abs().max().item() < 1e-5, cls
        (ga,) = torch.autograd.grad((a * torch.arange(81.0).view(9, 9)).sum(), x)
        (gb,) = torch.autograd.grad((b * torch.arange(81.0).view(9, 9)).sum(), x)
        assert (ga - gb).abs().max().item() < 1e-4, cls


# ------------------------------------------- matrix networks, sort and topk
def _rowset(layer):
    sa, sb, cmin, cmax = (np.asarray(m) for m in layer[:4])
    return sorted(map(tuple, np.concatenate([sa, sb, cmin.T, cmax.T], axis=1).tolist()))


@pytest.mark.parametrize("n", [1, 2, 5, 8, 11, 16])
def test_matrix_networks_equal_the_published_ones(n):
    for name in ("bitonic_network", "odd_even_network"):
        theirs, ours = getattr(diffsort, name)(n), getattr(C, name)(n)
        assert len(theirs) == len(ours), name
        for a, b in zip(theirs, ours):
            assert _rowset(a) == _rowset(b), name


@pytest.mark.parametrize("n", [8, pytest.param(11, marks=pytest.mark.slow)])  # ~9 s each; odd n in the full run
def test_sort_and_topk_functions(n):
    x = torch.randn(5, n, generator=torch.Generator().manual_seed(n))
    for typ in ("bitonic", "odd_even"):
        tn, on = diffsort.get_sorting_network(typ, n, "cpu"), C.get_sorting_network(typ, n, "cpu")
        v, X = diffsort.sort(tn, x, 5.0, 0.25, "logistic_phi")
        for net in (tn, on):
            # their executor on our matrices, ours on theirs
            v2, X2 = diffsort.sort(on, x, 5.0, 0.25, "logistic_phi")
            v3, X3 = C.sort(net, x, 5.0, 0.25, "logistic_phi")
            assert (X - X2).abs().max().item() < 1e-6 and (X - X3).abs().max().item() < 1e-5
            assert (v - v3).abs().max().item() < 1e-5
        _, Xk = quiet(difftopk.topk, tn, x, 3, 4.0)
        vk, Xk2 = C.topk(on, x, 3, 4.0)
        assert Xk2.shape == (5, n, 3) and (Xk - Xk2).abs().max().item() < 1e-5
    for typ in ("sparse_bitonic", "sparse_splitter_selection"):
        tn = quiet(difftopk.get_sorting_network, typ, n, "cpu", 3)
        on = C.get_sorting_network(typ, n, "cpu", 3)
        with spmm_shim():
            _, X = dtf.topk(tn, x, 3, 6.0, sparse=True)
            _, X2 = dtf.topk(on, x, 3, 6.0, sparse=True)
        _, X3 = C.topk(tn, x, 3, 6.0, sparse=True)
        assert (X - X2).abs().max().item() < 1e-6 and (X - X3).abs().max().item() < 1e-5, typ
    with pytest.raises(ValueError, match="sorting network type"):
        C.get_sorting_network("quick", n, "cpu")
    bad = [[m.clone() for m in layer] for layer in C.get_sorting_network("odd_even", n, "cpu")]
    bad[0][2] = torch.zeros_like(bad[0][2])
    with pytest.raises(ValueError, match="layer 0"):
        C.sort(bad, x)


def test_modules_have_sorting_network():
    m = C.DiffSortNet("odd_even", 6, target="torch")
    assert [[t.shape for t in l] for l in m.sorting_network] == [
        [t.shape for t in l] for l in diffsort.DiffSortNet("odd_even", 6).sorting_network]
    t = C.DiffTopkNet("splitter_selection", 12, 3, sparse=True, target="torch")
    assert len(t.sorting_network) == len(quiet(difftopk.DiffTopkNet, "splitter_selection", 12, 3, sparse=True).sorting_network)


# ------------------------------------------------------------ live attributes
def _has_gpu():
    if not torch.cuda.is_available():
        return False
    from netgen.codegen.auto import pick_target

    return pick_target("cuda")[0] == "cuda"


TARGETS = ["torch", "numba",
           pytest.param("cuda", marks=[pytest.mark.gpu, pytest.mark.skipif(not _has_gpu(), reason="needs a CUDA GPU")])]


@pytest.mark.parametrize("target", TARGETS)
def test_attribute_changes_change_the_next_call_like_the_published_module(target):
    n = 10
    dev = "cuda" if target == "cuda" else "cpu"
    x = torch.randn(4, n, generator=torch.Generator().manual_seed(9), dtype=torch.float64).to(dev)
    theirs = diffsort.DiffSortNet("odd_even", n, device=dev)
    theirs.sorting_network = [[m.double() for m in layer] for layer in theirs.sorting_network]
    ours = C.DiffSortNet("odd_even", n, device=dev, target=target)
    first = ours(x)[1]
    changes = [("steepness", 2.0), ("distribution", "logistic_phi"), ("art_lambda", 0.5),
               ("interpolation_type", "logistic"), ("steepness", np.float32(3.5))]
    for name, value in changes:
        setattr(ours, name, value)
        if name == "interpolation_type":
            theirs.distribution = value  # diffsort resolves the alias only in __init__
        else:
            setattr(theirs, name, value)
        _, want = theirs(x)
        _, got = ours(x)
        assert (got - want).abs().max().item() < 1e-10, (name, value)
    assert (first - got).abs().max().item() > 0.1
    assert ours.distribution == "logistic" and ours.relaxation.steepness == 3.5


def test_steepness_types_and_argument_domain():
    x = torch.randn(3, 8, dtype=torch.float64)
    ref = C.DiffTopkNet("bitonic", 8, 3, steepness=5.0, target="torch")(x)[1]
    for s in (5, np.float32(5), np.float64(5), torch.tensor(5.0)):
        got = C.DiffTopkNet("bitonic", 8, 3, steepness=s, target="torch")(x)[1]
        assert (got - ref).abs().max().item() < 1e-6, type(s)
    # not a number, or a tensor that cannot broadcast over the batch (s <= 0 and NaN: tests/compat/test_steepness.py)
    for bad in ("5", torch.ones(2), True, None):
        with pytest.raises(ValueError, match="steepness"):
            C.DiffTopkNet("bitonic", 8, 3, steepness=bad, target="torch")
    m = C.DiffTopkNet("bitonic", 8, 3, target="torch")
    m.steepness = torch.ones(3, 2)
    with pytest.raises(ValueError, match="steepness"):
        m(x)
    # art_lambda: read (and checked) only for logistic_phi; None is difftopk's README value
    for lam in (None, 5.0):
        assert C.DiffTopkNet("bitonic", 8, 3, art_lambda=lam, distribution="cauchy", target="torch")(x)[1].isfinite().all()
    with pytest.raises(ValueError, match="art_lambda"):
        C.DiffTopkNet("bitonic", 8, 3, art_lambda=None, distribution="logistic_phi", target="torch")
    with pytest.raises(ValueError, match="art_lambda"):
        C.DiffTopkNet("bitonic", 8, 3, art_lambda=1.5, distribution="logistic_phi", target="torch")
    assert C.DiffSortNet("bitonic", 8, distribution=None, target="torch").relaxation.distribution == "cauchy"


def _runtime_steepness_available(target):
    from netgen.codegen.auto import build_layer
    from netgen.relax.distributions import Relaxation

    return runtime_steepness(build_layer(C.original_network("odd_even", 4), Relaxation(), target))


@pytest.mark.parametrize("target", TARGETS)
def test_learnable_steepness_gets_the_finite_difference_gradient(target):
    """Needs PLAN interface 2 (run-time steepness in the generated layers)."""
    if not _runtime_steepness_available(target):
        pytest.skip(f"the {target} target has no run-time steepness yet (PLAN interface 2)")
    n, k = 9, 4
    dev = "cuda" if target == "cuda" else "cpu"
    x = torch.randn(5, n, generator=torch.Generator().manual_seed(10), dtype=torch.float64)
    w = torch.randn(5, n, k, generator=torch.Generator().manual_seed(11), dtype=torch.float64)
    m = C.DiffTopkNet("odd_even", n, k, steepness=torch.nn.Parameter(torch.tensor(3.0, dtype=torch.float64, device=dev)),
                      distribution="logistic", device=dev, target=target)
    assert [name for name, _ in m.named_parameters()] == ["steepness"]
    (m(x.to(dev))[1] * w.to(dev)).sum().backward()
    g = m.steepness.grad.item()

    def f(s):
        with torch.no_grad():
            return (C.DiffTopkNet("odd_even", n, k, steepness=s, distribution="logistic", target="torch")(x)[1] * w).sum().item()

    h = 1e-6
    fd = (f(3.0 + h) - f(3.0 - h)) / (2 * h)
    assert abs(g - fd) < 1e-6 * max(1.0, abs(fd)), (g, fd)
    # the parameter stays the module's own: state_dict keys do not depend on what was built
    assert list(m.state_dict()) == ["steepness"]


@pytest.mark.parametrize("target", TARGETS)
def test_steepness_schedule_reuses_one_module(target):
    """Needs PLAN interface 2: a steepness change never builds another module."""
    if not _runtime_steepness_available(target):
        pytest.skip(f"the {target} target has no run-time steepness yet (PLAN interface 2)")
    dev = "cuda" if target == "cuda" else "cpu"
    m = C.DiffTopkNet("bitonic", 8, 3, device=dev, target=target)
    x = torch.randn(2, 8, dtype=torch.float64, device=dev)
    outs = []
    for s in (1.0, 10.0, 100.0, np.float64(3.0), torch.tensor(5.0, dtype=torch.float64, device=dev)):
        m.steepness = s
        outs.append(m(x)[1])
    assert len(m.layer._built) == 1
    assert (outs[0] - outs[1]).abs().max().item() > 1e-3
    want = C.DiffTopkNet("bitonic", 8, 3, steepness=5.0, device=dev, target="torch")(x)[1]
    assert (outs[-1] - want).abs().max().item() < 1e-12
