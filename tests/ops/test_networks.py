"""Which network the operators run: the portfolio's, built once per
process and read back from netgen's cache by later processes."""

import subprocess
import sys

import pytest
import torch

import netgen.ops as ops
from netgen import Network, save_network
from netgen.ops import netfile
from netgen.ops import networks as nw


def test_built_once_then_read_from_disk(cache, monkeypatch):
    net = nw.network_for(10, 3)
    assert nw.network_for(10, 3) is net  # in memory
    path = nw.cache_dir() / "best_n10_k3.npz"
    got, status, proof = netfile.read(path, 10, 3, 10**6)
    assert status == "proved" and (got.n, got.k) == (10, 3) and got == net
    nw.clear_memory()
    import netgen.compiler

    def no_build(*a, **k):
        raise AssertionError("built again instead of read from the cache")

    monkeypatch.setattr(netgen.compiler, "compile", no_build)
    again = nw.network_for(10, 3)
    assert again == net and again is not net


def test_a_later_process_reads_the_cache(cache):
    code = ("import time, netgen.ops.networks as nw, netgen.compiler as c\n"
            "nw.network_for(12, 12)\n"
            "c.compile = None\n"  # a second build would fail
            "nw.clear_memory(); print(nw.network_for(12, 12).depth)\n")
    first = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    code2 = "import netgen.ops.networks as nw, netgen.compiler as c\nc.compile = None\nprint(nw.network_for(12, 12).depth)\n"
    second = subprocess.run([sys.executable, "-c", code2], capture_output=True, text=True, check=True)
    assert first.stdout == second.stdout and int(second.stdout) > 0


def test_a_damaged_cache_file_is_rebuilt(cache):
    net = nw.network_for(9, 2)
    path = nw.cache_dir() / "best_n9_k2.npz"
    path.write_bytes(path.read_bytes()[:200])  # truncated
    nw.clear_memory()
    assert nw.network_for(9, 2) == net
    assert netfile.read(path, 9, 2, 10**6)[1] == "proved"


def test_large_sorters_skip_the_sampling(cache):
    net = nw.network_for(128, 128)
    _, status, proof = netfile.read(nw.cache_dir() / "best_n128_k128.npz", 128, 128, 10**6)
    assert status == nw.UNCHECKED and "not verified" in proof
    assert net.k == 128
    x = torch.randn(5, 128, dtype=torch.float64)
    assert torch.equal(torch.from_numpy(net.apply(x.numpy())), torch.sort(x, descending=True).values)


def test_a_kind_a_network_and_a_file(cache, tmp_path):
    bit = nw.network_for(8, 8, "bitonic")
    assert bit.construction.get("kind") == "bitonic"
    assert nw.network_for(8, 8, bit) is bit
    path = tmp_path / "net.json"
    save_network(bit, path)
    assert nw.network_for(8, 8, str(path)) == bit
    assert nw.network_for(8, 8, path) == bit
    x = torch.randn(3, 8, dtype=torch.float64)
    torch.testing.assert_close(ops.soft_rank(x, network=path), ops.soft_rank(x, network="bitonic"), atol=0, rtol=0)


def test_a_wrong_network_is_refused(cache, tmp_path):
    good = nw.network_for(6, 6, "oddeven")
    comps = good.comparators[:-1]  # drop the last comparator: no longer a sorter
    bad = Network.from_comparators(6, [tuple(c) for c in comps.tolist()], outputs=good.outputs)
    with pytest.raises(ValueError, match="is not a correct sorting network"):
        ops.soft_rank(torch.randn(2, 6), network=bad)
    path = tmp_path / "bad.json"
    save_network(bad, path)
    with pytest.raises(ValueError, match="the network in .*bad.json is not a correct"):
        ops.soft_sort(torch.randn(2, 6), network=path)
    with pytest.raises(ValueError, match="network must be 'best'"):
        ops.soft_sort(torch.randn(2, 6), network=3)
