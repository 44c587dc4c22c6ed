"""netgen.compat: diffsort/difftopk argument names and orientation, checked
against diffsort 0.2.0 and difftopk 0.2.0 themselves."""

import contextlib
import io

import pytest
import torch

from netgen.bench.difftopk_sparse import SpmmShim
from netgen.compat import DiffSortNet, DiffTopkNet, original_network
from netgen.relax import reference as ref
from netgen.relax.distributions import DIFFTOPK_ART_EPSILON, Relaxation

torch.set_num_threads(1)  # tiny tensors: intra-op threads only add contention (2-core CI)
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")  # difftopk's own deprecation/sparse warnings

with contextlib.redirect_stdout(io.StringIO()):  # difftopk prints at import
    diffsort = pytest.importorskip("diffsort")
    difftopk = pytest.importorskip("difftopk")
    import difftopk.functional as dtf
    import difftopk.networks as dtn

DISTS = ("logistic", "logistic_phi", "cauchy", "reciprocal", "gaussian", "optimal")


@contextlib.contextmanager
def float64_default():
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)  # their executors make eye() in the default dtype
    try:
        yield
    finally:
        torch.set_default_dtype(old)


def x_for(n, seed=0):
    return torch.randn(3, n, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


@pytest.mark.parametrize("kind", ["odd_even", "bitonic"])
@pytest.mark.parametrize("n", [8, 11, 16])
def test_diffsortnet_matches_diffsort(kind, n):
    x = x_for(n)
    for dist in DISTS:
        theirs = diffsort.DiffSortNet(kind, n, steepness=5.0, distribution=dist)
        theirs.sorting_network = [[m.double() for m in layer] for layer in theirs.sorting_network]
        tv, tX = theirs(x)
        ours = DiffSortNet(kind, n, steepness=5.0, distribution=dist, target="torch")
        v, X = ours(x)
        assert v.shape == tv.shape and X.shape == tX.shape == (3, n, n)
        assert (v - tv).abs().max().item() < 1e-10, dist
        assert (X - tX).abs().max().item() < 1e-10, dist


@pytest.mark.parametrize("kind", ["odd_even", "bitonic"])
@pytest.mark.parametrize("n", [10, 16])
def test_difftopknet_dense_matches_difftopk(kind, n):
    x = x_for(n, 1)
    for dist in DISTS:
        with contextlib.redirect_stdout(io.StringIO()):
            theirs = difftopk.DiffTopkNet(kind, n, 5, steepness=7.0, distribution=dist)
        theirs.sorting_network = [[m.double() for m in layer] for layer in theirs.sorting_network]
        with float64_default():
            none, tX = theirs(x)
        assert none is None
        v, X = DiffTopkNet(kind, n, 5, steepness=7.0, distribution=dist, target="torch")(x)
        assert X.shape == tX.shape == (3, n, 5)
        assert (X - tX).abs().max().item() < 1e-10, dist
        # our first output: the soft top-5 values, ascending
        assert torch.allclose(v, (X.transpose(-1, -2) @ x.unsqueeze(-1)).squeeze(-1))


@pytest.mark.parametrize("n", [16, 50])
def test_difftopknet_splitter_matches_difftopk_sparse(n):
    with contextlib.redirect_stdout(io.StringIO()):
        net = dtn.get_sorting_network("sparse_splitter_selection", n, "cpu", 5)
    net = [[m.double() if m.is_sparse else m for m in layer] for layer in net]
    x = x_for(n, 2)
    saved = getattr(dtf, "torch_sparse", None)
    dtf.torch_sparse = SpmmShim
    try:
        for dist in DISTS:
            _, tX = dtf.execute_sparse_topk(net, x, 5, 9.0, 0.25, dist)
            _, X = DiffTopkNet("splitter_selection", n, 5, sparse=True, steepness=9.0, distribution=dist, target="torch")(x)
            assert (X - tX).abs().max().item() < 1e-10, dist
    finally:
        if saved is None:
            del dtf.torch_sparse
        else:
            dtf.torch_sparse = saved


def test_orientation_against_netgen_P():
    n, k = 12, 4
    x = x_for(n, 3).requires_grad_()
    m = DiffTopkNet("bitonic", n, k, steepness=4.0, distribution="logistic", target="torch")
    v, X = m(x)
    r = Relaxation("logistic", 4.0, 0.25, DIFFTOPK_ART_EPSILON)
    vals, P = ref.forward(original_network("bitonic", n, k), x, r)
    for j in range(k):
        for c in range(n):
            assert torch.allclose(X[:, c, j], P[:, k - 1 - j, c])
    assert torch.allclose(v, vals.flip(-1))
    # gradients flow through the compat layer
    X[..., -1].sum().backward()
    assert x.grad is not None and bool(torch.isfinite(x.grad).all())


def test_arguments():
    with pytest.raises(ValueError, match="two different distributions"):
        DiffSortNet("bitonic", 8, interpolation_type="logistic", distribution="gaussian")
    m = DiffSortNet("bitonic", 8, interpolation_type="logistic")
    assert m.distribution == "logistic"
    with pytest.raises(ValueError, match="sorting_network_type"):
        DiffSortNet("quicksort", 8)
    with pytest.raises(ValueError, match=r"\(\.\.\., 8\)"):
        DiffSortNet("bitonic", 8)(torch.zeros(2, 7))
    m = DiffTopkNet("bitonic", 8, 3, art_epsilon=0.0)
    assert m.relaxation.art_epsilon == 0.0 and m.k == 3


def test_network_netgen_option_sorts_correctly():
    # difftopk's bitonic network is not a sorter for n = 22 (docs/design.md section 4)
    n = 22
    x = torch.randn(200, n, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    want = torch.sort(x, dim=-1).values
    theirs = original_network("bitonic", n)
    assert not torch.equal(torch.from_numpy(theirs.select(x.numpy())).flip(-1), want)
    ours = DiffSortNet("bitonic", n, network="netgen", steepness=1e4, target="torch")
    assert torch.equal(torch.from_numpy(ours.network.select(x.numpy())).flip(-1), want)
    v, X = ours(x)
    assert X.shape == (200, n, n)
