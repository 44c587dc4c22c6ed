"""research/gpu_model's cost terms that need no compile (the model itself
builds and compiles the (5, 10450) module: run by hand, see its docstring)."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "research" / "gpu_model"))

from _gpu_cost import LAT_LAUNCH, SMS, Structure, estimate, phases  # noqa: E402


@pytest.fixture(scope="module")
def st():
    from netgen.compiler import compile_network
    from netgen.construct import build

    return Structure(compile_network(build("splitter", 300, 5)).network)


def test_scatter_sectors_by_brute_force(st):
    """Sectors of the D scatter: per warp of 32 comparators and rank, the
    distinct 32-byte sectors of the lanes' D indices (the module's layout:
    dix[i] + r stride), counted lane by lane."""
    want = 0
    for _, ix in st.groups():
        for r in range(st.k):
            sectors = {int(st.dix[i] + r * st.dstride) * 4 // 32 for i in ix if st.clo[i] <= r < st.chi[i]}
            want += len(sectors)
    got = st.scatter_sectors()
    assert got == want
    assert got >= math.ceil(st.nnz * 4 / 32)  # at least D's own sectors


def test_warp_windows_touch_about_d_own_sectors():
    """The (5, 10450) layer keeps D in warp windows: a warp's store of a
    lane is its comparators' consecutive floats, so D's stores touch about
    D's own sectors (with the CSR: 60,393 per row, 4.2x)."""
    from netgen.compiler import compile_network
    from netgen.construct import build

    big = Structure(compile_network(build("splitter", 10450, 5)).network)
    assert big.dstride == 32 and big.dlen <= 1.03 * big.nnz
    assert big.scatter_sectors() <= 1.05 * math.ceil(big.dlen * 4 / 32)


def _kern(blocks=1, layers=((1000.0, 10.0),), outside=()):
    return dict(blocks=blocks, shared=200 * 1024, regs=40, threads=1024, layers=list(layers),
                warp_instr=sum(i for i, _ in layers), chain=sum(c for _, c in layers), chain_fixed=0,
                dram=0, l2=0, scatter=0, outside=list(outside))


def test_busiest_sm_runs_a_whole_row():
    """B = 64 < 132 SMs: the busiest SM runs one row (the Rounds 1-5 model
    charged 64 / 132 of one); B = 133: two waves of one row."""
    k = _kern()
    one = estimate(k, 64, 1.0)["compute"]
    assert estimate(k, 1, 1.0)["compute"] == pytest.approx(one)
    assert estimate(k, 64, 1.0, recal=False)["compute"] == pytest.approx(one * 64 / SMS)
    assert estimate(k, SMS + 1, 1.0)["compute"] == pytest.approx(2 * one)


def test_outside_loops_and_launch_are_added():
    base = estimate(_kern(), 500, 1.5)
    more = estimate(_kern(outside=[(5000.0, 0.0, 0)]), 500, 1.5)
    assert more["compute"] - base["compute"] == pytest.approx(more["outside"])
    assert more["outside"] > 0
    assert base["launch"] == pytest.approx(LAT_LAUNCH / 1.98e9 * 1e3)
    assert estimate(_kern(), 500, 1.5, recal=False)["launch"] == 0


def test_load_phase_waits_for_dram():
    """A load phase of many elements costs at least a DRAM latency per round
    of threads x unroll elements; a fill phase none."""
    sx = {"elements": {"load": 10.0, "fill": 10.0}}
    (load,) = phases(None, sx, [("load", 1024 * 4 * 10, 0)], 1024)
    (fill,) = phases(None, sx, [("fill", 1024 * 4 * 10, 0)], 1024)
    assert load[0] == fill[0] == np.ceil(1024 * 4 * 10 / 32) * 10
    assert load[1] > fill[1] + 10 * 400


def test_bank_conflicts_of_wire_accesses():
    """research/gpu_model/banks.py: a warp's access to 32 words in 32
    banks is one wavefront; 32 words in one bank (stride 32) are 32; pairs
    (2i, 2i + 1) put two words in every even bank (two wavefronts a side),
    and a state of m = 5 lanes (odd) spreads stride-32 wires over the
    banks again (5 * 32 i + r: bank r for every i: still 32)."""
    from banks import layer_accesses, wavefronts

    def one_layer(pairs, **lanes):
        return layer_accesses(pairs, [0, len(pairs)], **lanes)

    assert wavefronts(np.arange(32)) == 1 and wavefronts(np.arange(32) * 32) == 32
    assert wavefronts([7, 7, 7]) == 1  # one word read by many threads: a broadcast
    assert one_layer([(i, i + 32) for i in range(32)]) == [1, 1]
    assert one_layer([(2 * i, 2 * i + 1) for i in range(32)]) == [2, 2]
    strided = [(32 * i, 32 * i + 1) for i in range(32)]
    assert one_layer(strided) == [32, 32] and one_layer(strided, lanes=5, rank=2) == [32, 32]
    # two warps of a 40-comparator layer (32, then 8 comparators); two layers of 16: a warp each
    assert len(one_layer([(i, i + 40) for i in range(40)])) == 4
    assert layer_accesses([(i, i + 16) for i in range(32)], [0, 16, 32]) == [1, 1, 1, 1]
