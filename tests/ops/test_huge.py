"""The operators at scale (issue 31 item 5): the ``max_size=`` opt-in and
its refusal, the compact network cache (netgen/ops/netfile.py) and the
lean numba layers (no P plan, int32 wires, checkpointed sweeps) against
the reference executor. n = 2^20 itself runs in benchmarks/operators.py
(cases rank1M, sort1M)."""

import functools
import io
import json
import time
import zipfile

import numpy as np
import pytest
import torch

import netgen.ops as ops
from netgen.construct import construct
from netgen.network import size_limit
from netgen.ops import netfile
from netgen.ops import networks as nw

pytest.importorskip("numba")


# ----------------------------------------------------------------- the opt-in
@pytest.mark.parametrize("call", [lambda x: ops.soft_rank(x), lambda x: ops.soft_sort(x), lambda x: ops.SoftRank()(x),
                                  lambda x: ops.topk_mask(x, 1 << 19)])
def test_2_20_is_refused_at_once_without_max_size(cache, call):
    x = torch.randn(1, 1 << 20)
    t0 = time.perf_counter()
    with pytest.raises(ValueError, match=r"n = 1048576.* would need ~[0-9,]+ comparators and wires, more than "
                                         r"max_size = 10,000,000; pass max_size=[0-9]+ \(or more\)"):
        call(x)
    assert time.perf_counter() - t0 < 5
    assert not list(cache.rglob("*.npz"))  # nothing built or written


def test_the_refusal_names_the_operator_and_the_estimate(cache):
    need = nw.estimate(1 << 20, 1 << 20, "best")
    assert need == (1 << 20) // 2 * 210 + (1 << 20)  # the bitonic bound on 2^20 wires, plus the wires
    with pytest.raises(ValueError, match=f"^soft_rank: the 'best' network .* pass max_size={need} "):
        ops.soft_rank(torch.randn(1, 1 << 20))


@pytest.mark.parametrize("bad", [0, -1, 1.5, "big", True])
def test_max_size_values_are_checked(bad):
    with pytest.raises(ValueError, match="max_size must be a positive integer"):
        ops.soft_rank(torch.randn(2, 8), max_size=bad)
    with pytest.raises(ValueError, match="max_size must be a positive integer"):
        ops.SoftSort(max_size=bad)


def test_a_lowered_budget_refuses_and_max_size_opts_in(cache):
    x = torch.randn(2, 300, dtype=torch.float64)
    need = nw.estimate(300, 300, "best")
    with size_limit(1000):
        with pytest.raises(ValueError, match=f"pass max_size={need} "):
            ops.soft_rank(x)
        got = ops.soft_rank(x, max_size=need)
        assert torch.equal(ops.SoftRank(max_size=need)(x), got)
    assert torch.allclose(got, ops.soft_rank(x, target="reference"), rtol=0, atol=1e-10)


# ------------------------------------------------------------- the cache file
def _members(path):
    with zipfile.ZipFile(path) as z:
        return {name: z.read(name) for name in z.namelist()}


def _rewrite(path, members):
    with zipfile.ZipFile(path, "w") as z:
        for name, data in members.items():
            z.writestr(name, data)


def _npy(a, **kw):
    buf = io.BytesIO()
    np.save(buf, a, **kw)
    return buf.getvalue()


def test_netfile_round_trip(tmp_path):
    net = construct("oddeven", 100, 7)
    path = tmp_path / "net.npz"
    netfile.write(path, net, "proved", "proved (reachable states)")
    got, status, proof = netfile.read(path, 100, 7, 10**6)
    assert got == net and (status, proof) == ("proved", "proved (reachable states)")
    assert got.comparators.dtype == np.int32 and not got.comparators.flags.writeable
    assert netfile.read(path, 100, 8, 10**6) is None  # another (n, k)
    assert netfile.read(path, 100, 7, net.size + 99) is None  # over the budget in force
    assert not list(tmp_path.glob(".*.tmp*"))  # the temporary file was renamed into place


def test_netfile_damage_reads_as_none(tmp_path):
    net = construct("bitonic", 64)
    path = tmp_path / "net.npz"
    netfile.write(path, net, "proved", "p")
    good = _members(path)
    header = json.loads(np.load(io.BytesIO(good["header.npy"])).tobytes())

    def damaged(**changes):
        m = dict(good, **changes)
        _rewrite(path, {k: v for k, v in m.items() if v is not None})
        return netfile.read(path, 64, 64, 10**6)

    assert damaged() is not None  # rewritten unchanged: still read
    comps = net.comparators
    assert damaged(**{"comparators.npy": _npy(comps.astype(np.int64))}) is None  # another dtype
    assert damaged(**{"comparators.npy": _npy(np.array([object()] * 3), allow_pickle=True)}) is None  # a pickle
    assert damaged(**{"comparators.npy": _npy(comps[:-1])}) is None  # another shape
    assert damaged(**{"outputs.npy": None}) is None  # a member missing
    assert damaged(**{"extra.npy": _npy(np.zeros(2))}) is None  # a member too many
    huge = dict(header, size=1 << 40)
    assert damaged(**{"header.npy": _npy(np.frombuffer(json.dumps(huge).encode(), np.uint8))}) is None
    deep = dict(header, construction=functools.reduce(lambda d, _: {"x": d}, range(200), {}))
    assert damaged(**{"header.npy": _npy(np.frombuffer(json.dumps(deep).encode(), np.uint8))}) is None  # too deep
    record = dict(header, construction={"note": "x" * 60_000})  # counts against the budget, as in a JSON file
    assert damaged(**{"header.npy": _npy(np.frombuffer(json.dumps(record).encode(), np.uint8))}) is not None
    _rewrite(path, dict(good, **{"header.npy": _npy(np.frombuffer(json.dumps(record).encode(), np.uint8))}))
    assert netfile.read(path, 64, 64, net.size + 64 + 10) is None
    assert netfile.read(path, 64, 64, net.size + 64 + 10**5) is not None
    other = dict(header, format="netgen-network-npz/0")
    assert damaged(**{"header.npy": _npy(np.frombuffer(json.dumps(other).encode(), np.uint8))}) is None
    bad = comps.copy()
    bad[3] = [5, 5]  # a comparator on one wire: the network's own checks
    assert damaged(**{"comparators.npy": _npy(bad)}) is None
    netfile.write(path, net, "proved", "p")
    data = bytearray(path.read_bytes())
    path.write_bytes(bytes(data[: len(data) // 2]))  # truncated
    assert netfile.read(path, 64, 64, 10**6) is None
    with zipfile.ZipFile(io.BytesIO(bytes(data))) as z:
        info = z.getinfo("comparators.npy")
    at = info.header_offset + 30 + len(info.filename) + len(info.extra) + 300  # inside the comparators' data
    data[at] ^= 0xFF
    path.write_bytes(bytes(data))
    assert netfile.read(path, 64, 64, 10**6) is None  # the zip CRC
    path.write_bytes(b"not a zip file")
    assert netfile.read(path, 64, 64, 10**6) is None


# ------------------------------------------------------------ the lean layers
def _layer_globals(net):
    from netgen.ops.backends import lanes_for
    from netgen.relax.distributions import default_relaxation

    lanes = lanes_for(net, default_relaxation(net), "numba", torch.device("cpu"))
    layer = lanes._for(torch.zeros(1, net.n))
    return layer, type(layer)._values.__globals__


@pytest.mark.parametrize("op", ["rank", "sort"])
def test_lean_layer_end_to_end_against_the_reference(cache, monkeypatch, op):
    """n = 1,024 with the budget lowered below its sorter and the layer made
    lean (no P plan) and checkpointed, as at n = 2^20: soft_rank and
    soft_sort forward and backward equal the reference executor's in
    float64."""
    from netgen.codegen.numba import shared

    monkeypatch.setattr(shared, "LEAN_SIZE", 0)
    n = 1024
    need = nw.estimate(n, n, "best")
    with size_limit(1000):
        net = nw.network_for(n, n, max_size=need)
    layer, g = _layer_globals(net)
    assert g["_CLO"].size == 0 and g["_WA"].dtype == np.int32 and g["_LIVE"].all()
    monkeypatch.setitem(g, "_CK_BYTES", 0)  # checkpointed sweeps, as at n = 2^20
    calls = []
    ck = g["ck_numpy"]
    monkeypatch.setitem(g, "ck_numpy", lambda *a: calls.append(1) or ck(*a))
    with pytest.raises(ValueError, match="P .* is not formed at this size"):
        layer(torch.zeros(1, n))
    gen = torch.Generator().manual_seed(5)
    x = torch.randn(2, n, generator=gen, dtype=torch.float64)
    w = torch.randn(2, n, generator=gen, dtype=torch.float64)
    f = (lambda t, tg: ops.soft_rank(t, target=tg, max_size=need)) if op == "rank" else (
        lambda t, tg: ops.soft_sort(t, target=tg, max_size=need).values)
    out = {}
    for tg in ("numba", "reference"):
        xr = x.clone().requires_grad_(True)
        y = f(xr, tg)
        (y * w).sum().backward()
        out[tg] = (y.detach(), xr.grad)
    assert torch.allclose(out["numba"][0], out["reference"][0], rtol=0, atol=1e-9)
    assert torch.allclose(out["numba"][1], out["reference"][1], rtol=0, atol=1e-9)
    assert calls  # the checkpointed sweep ran


@pytest.mark.parametrize("n,k", [(32, 3), (100, 1), (64, 64)])
def test_live_is_the_back_plans_nonempty_ranges(n, k):
    from netgen.codegen.numba.checkpoint import live
    from netgen.codegen.runtime.tables import plan

    sorter = construct("oddeven", n)
    net = sorter.with_(outputs=sorter.outputs[:k])  # not pruned: comparators outside the outputs' cone
    got = live(n, net.comparators, net.layer_offsets, net.outputs)
    clo, chi, _ = plan(n, net.comparators, net.layer_offsets, list(net.outputs), "back")
    assert np.array_equal(got, clo < chi)
    assert got.all() == (k == n)
