"""Outside oracle: difftopk 0.2.0's own networks and executors.

difftopk's networks are converted into netgen's IR by reading difftopk's
internal representation (per layer: ``split_a``/``split_b`` select the two
inputs of each row, ``combine_min``/``combine_max`` say which wire receives
the soft min/max; rows with ``split_a == split_b`` are identities), then
netgen's reference executor and generated torch module must reproduce the
P that difftopk's own executor computes, within 1e-5, for its
splitter_selection and bitonic networks at n in {16, 50, 1000}, k = 5, for
every distribution both support: with ``art_epsilon=1e-10`` (difftopk's
epsilon placement) and with netgen's default formula.

difftopk needs ``torch_sparse`` for its sparse executor; a 3-line stand-in
for its ``spmm`` (scatter-add of value * matrix[col]) is installed for the test. At n = 1000 difftopk's
constructor allocates dense (n x n) float64 matrices per layer (~2 GB, ~10 s
for bitonic), so there it runs on a recording stand-in for ``np.zeros``
(same construction code, entries kept in a dict); at n = 16 and 50 the
stand-in is checked to give exactly the unpatched networks.
"""

import contextlib
import io
import types

import numpy as np
import pytest
import torch

from netgen.bench.difftopk_sparse import Recorded, SpmmShim
from netgen.codegen import write_module
from netgen.codegen.cache import load
from netgen.network import Network
from netgen.relax import reference as ref
from netgen.relax.distributions import DIFFTOPK_ART_EPSILON, Relaxation

torch.set_num_threads(1)  # tiny tensors: intra-op threads only add contention (2-core CI)
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")  # difftopk's own deprecation/sparse warnings

with contextlib.redirect_stdout(io.StringIO()):  # difftopk prints at import
    dtf = pytest.importorskip("difftopk.functional")
    dtn = pytest.importorskip("difftopk.networks")

BOTH = ("logistic", "logistic_phi", "cauchy", "reciprocal", "gaussian", "optimal")
K = 5


# --------------------------------------------------------------- scaffolding
# Recorded (a dense np.zeros stand-in that records assignments) and SpmmShim
# (torch_sparse.spmm as a scatter-add): netgen/bench/difftopk_sparse.py
def _entries(m):
    if isinstance(m, Recorded):
        return sorted(m.entries.items())
    m = np.asarray(m)
    return [((int(i), int(j)), float(m[i, j])) for i, j in np.argwhere(m != 0)]


@contextlib.contextmanager
def _recording_numpy():
    fake = types.SimpleNamespace(**{k: getattr(np, k) for k in dir(np) if not k.startswith("__")})
    fake.zeros = lambda shape, *a, **kw: Recorded(shape) if len(shape) == 2 else np.zeros(shape, *a, **kw)
    saved = dtn.np
    dtn.np = fake
    try:
        yield
    finally:
        dtn.np = saved


def difftopk_layers(kind, n, k, recorded):
    """difftopk's own construction (sparse_splitter_selection_network or
    sparse_bitonic_network), as its per-layer tuples."""
    with contextlib.redirect_stdout(io.StringIO()), (_recording_numpy() if recorded else contextlib.nullcontext()):
        if kind == "splitter_selection":
            return dtn.sparse_splitter_selection_network(n, k)
        return dtn.sparse_bitonic_network(n)


def to_netgen(layers, n, k):
    """difftopk layers -> netgen Network (comparator = (max wire, min wire))."""
    out_layers = []
    for split_a, split_b, combine_min, combine_max, *_ in layers:
        rows_a = {i: j for (i, j), v in _entries(split_a)}
        rows_b = {i: j for (i, j), v in _entries(split_b)}
        min_dest = {j: i for (i, j), v in _entries(combine_min)}
        max_dest = {j: i for (i, j), v in _entries(combine_max)}
        layer = []
        for row, wa in sorted(rows_a.items()):
            wb = rows_b[row]
            if wa == wb:
                continue  # identity row (a wire this layer leaves alone)
            lo, hi = min_dest[row], max_dest[row]
            assert {lo, hi} == {wa, wb}
            layer.append((hi, lo))
        if layer:
            out_layers.append(layer)
    # difftopk's P keeps the last k wires, ascending: wire n-1 holds rank 0
    return Network.from_layers(n, out_layers, list(range(n - 1, n - 1 - k, -1)))


def _torch_sparse_T(m, dtype):
    ent = _entries(m)
    idx = torch.tensor([[j for (i, j), _ in ent], [i for (i, j), _ in ent]], dtype=torch.int64).reshape(2, -1)
    val = torch.tensor([v for _, v in ent], dtype=dtype)
    return torch.sparse_coo_tensor(idx, val, (m.shape[1], m.shape[0])).coalesce()


def difftopk_P(layers, x, k, r):
    """P from difftopk's own sparse executor, in netgen's orientation."""
    net = []
    for split_a, split_b, combine_min, combine_max, *idx in layers:
        mats = [_torch_sparse_T(m, x.dtype) for m in (split_a, split_b, combine_min, combine_max)]
        net.append(mats + [torch.from_numpy(np.asarray(a)).float() for a in idx])
    saved = getattr(dtf, "torch_sparse", None)
    dtf.torch_sparse = SpmmShim
    try:
        _, X = dtf.execute_sparse_topk(net, x, k, r.steepness, r.art_lambda, r.distribution)
    finally:
        if saved is None:
            del dtf.torch_sparse
        else:
            dtf.torch_sparse = saved
    return X.flip(-1).transpose(-1, -2)  # X[..., c, j] = P[..., k-1-j, c]


CASES = [(kind, n) for n in (16, 50, 1000) for kind in ("splitter_selection", "bitonic")]
_nets = {}


def case(kind, n):
    if (kind, n) not in _nets:
        layers = difftopk_layers(kind, n, K, recorded=n > 100)
        _nets[(kind, n)] = (layers, to_netgen(layers, n, K))
    return _nets[(kind, n)]


@pytest.mark.parametrize("kind,n", CASES)
def test_netgen_reproduces_difftopk_P(kind, n, tmp_path):
    layers, net = case(kind, n)
    x = torch.randn(2 if n > 100 else 4, n, generator=torch.Generator().manual_seed(n), dtype=torch.float64)
    for dist in BOTH:
        # difftopk's P (its executor ignores art_epsilon: it always uses 1e-10)
        want = difftopk_P(layers, x, K, Relaxation(dist, steepness=8.0, art_lambda=0.25))
        for eps in (DIFFTOPK_ART_EPSILON, 0.0):
            r = Relaxation(dist, steepness=8.0, art_lambda=0.25, art_epsilon=eps)
            _, P = ref.forward(net, x, r)
            err = (P - want).abs().max().item()
            assert err < 1e-5, (kind, n, dist, eps, err)
            if eps:  # compat epsilon: agreement to rounding; and the generated module
                assert err < 1e-10, (kind, n, dist, err)
                layer = load(write_module("torch", net, r, tmp_path)).Layer()
                _, Pg = layer(x)
                assert (Pg - want).abs().max().item() < 1e-10, (kind, n, dist, "generated")


@pytest.mark.parametrize("kind,n", [c for c in CASES if c[1] < 100])
def test_recording_stand_in_gives_difftopk_network(kind, n):
    plain = to_netgen(difftopk_layers(kind, n, K, recorded=False), n, K)
    assert plain == to_netgen(difftopk_layers(kind, n, K, recorded=True), n, K)
    assert plain.size > 0


@pytest.mark.parametrize("n", [16, 50])
def test_dense_bitonic_executor_agrees(n):
    """difftopk's dense path (DiffTopkNet('bitonic', sparse=False)) too."""
    with contextlib.redirect_stdout(io.StringIO()):
        dense = [[m.double() for m in layer] for layer in dtn.get_sorting_network("bitonic", n, "cpu")]
    default = torch.get_default_dtype()
    _, net = case("bitonic", n)
    x = torch.randn(3, n, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    for dist in BOTH:
        r = Relaxation(dist, steepness=6.0, art_epsilon=DIFFTOPK_ART_EPSILON)
        torch.set_default_dtype(torch.float64)  # its executor makes eye() in the default dtype
        try:
            _, X = dtf.execute_topk(dense, x, K, r.steepness, r.art_lambda, r.distribution)
        finally:
            torch.set_default_dtype(default)
        _, P = ref.forward(net, x, r)
        assert (P - X.flip(-1).transpose(-1, -2)).abs().max().item() < 1e-5, dist
