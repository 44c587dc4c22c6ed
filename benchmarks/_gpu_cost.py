"""The cost model of ``gpu_model.py`` (ESTIMATES, not measurements): the
H100 figures it uses, the network's structure as the kernels walk it
(layers, the plan's rank counts, warps of 32 comparators), block size and
occupancy as the generated launcher picks them, and per kernel the
warp-instructions, dependent chain, DRAM and L2 bytes per row that
``estimate`` turns into times. gpu_model.py's docstring states the model.
"""

from __future__ import annotations

import math

import numpy as np

# H100 SXM figures the model uses
SMS, GHZ, ISSUE = 132, 1.98, 1.9
DRAM_BW, L2_FAST, L2_SLOW = 3.0e12, 4.4e12, 2.6e12
SMEM_SM, SMEM_RESERVED, REGS_SM, THREADS_SM, BLOCKS_SM = 228 * 1024, 1024, 65536, 2048, 32
# dependent latencies (cycles): one comparator iteration (L2-hit table and
# d loads, shared loads, the swap code's dependent chain, stores), one rank
# of a comparator (two shared loads, FMAs, two stores), a block barrier, a
# warp barrier
LAT_ITER, LAT_PAIR, LAT_SYNC, LAT_WARP = 900, 60, 120, 10
# a rank whose shared loads were issued in the same round as an earlier
# rank's (an unrolled rank sweep that loads every rank's pair before its
# first store): its update's issue, not another round of load latency
LAT_RANK_ISSUE = 10
# fallback SASS counts (instructions per comparator / per pair) when the
# disassembler is missing: medians of what the sm_90 cubins gave here
FALLBACK = {"comp": 170, "pair": 14, "skip": 14, "inner": 8}
CALIBRATION = ("old", "fwd_vals", 500, 0.16)  # e46262c's _fwd_vals on an H100, B = 500, ms


# ------------------------------------------------------------------ structure
class Structure:
    """Layer widths, the plan's rank counts, per-warp groups."""

    def __init__(self, net, threads=256):
        from netgen.codegen.runtime.tables import plan

        self.n, self.k, self.size, self.threads = net.n, net.k, net.size, threads
        self.offs = np.asarray(net.layer_offsets)
        clo, chi, doff = plan(net.n, net.comparators, net.layer_offsets, list(net.outputs))
        self.m = np.maximum(chi - clo, 0)
        self.clo, self.chi = clo, chi
        self.nnz = int(doff[-1])
        self.widths = np.diff(self.offs)

    def groups(self):
        """(layer, comparator index array) of every warp's 32 comparators."""
        for l, (s, e) in enumerate(zip(self.offs[:-1], self.offs[1:])):
            for g in range(s, e, 32):
                yield l, np.arange(g, min(e, g + 32))

    def warp_iters(self):
        return int(sum(math.ceil(w / 32) for w in self.widths))

    def warp_pairs(self, unrolled=0):
        """Sum over warps of the largest rank count among its lanes (less the
        ranks the compiler's unrolled code handles before the rank loop)."""
        return int(sum(max(0, int(self.m[ix].max()) - unrolled) for _, ix in self.groups()))

    def warp_active(self, r):
        """Warps in which some lane's comparator touches rank r (old kernels:
        one block per (row, rank))."""
        return int(sum(bool(((self.clo[ix] <= r) & (r < self.chi[ix])).any()) for _, ix in self.groups()))

    def chain(self, pair_ranks=False, narrow_warp=False, threads=256, rounds=None):
        """Dependent cycles of one block of ``threads`` sweeping all layers;
        ``rounds``: the rank sweep's rounds of shared loads where the SASS
        groups ranks' loads (None: one round per rank)."""
        cyc = 0
        for l, w in enumerate(self.widths):
            s, e = self.offs[l], self.offs[l + 1]
            it = math.ceil(w / threads)
            if pair_ranks and w:
                m = int(self.m[s:e].max())
                r = m if rounds is None else min(m, rounds)
                cyc += (r * LAT_PAIR + (m - r) * LAT_RANK_ISSUE) * it
            cyc += it * LAT_ITER
            cyc += LAT_WARP if narrow_warp and w <= 32 else LAT_SYNC
        return cyc


def block_threads(shared, regs, base=256, big=1024):
    """Threads per block as the generated launcher picks them (``_block``):
    ~2048 threads per SM over the blocks that shared memory allows, within
    the registers."""
    per_sm = max(1, SMEM_SM // (shared + SMEM_RESERVED))
    regs = math.ceil(max(1, regs) / 8) * 8  # allocated 8 registers per thread at a time
    return max(base, min(big, 2048 // per_sm, REGS_SM // regs // per_sm) // 32 * 32)


def occupancy(shared, regs, threads=256):
    by_smem = SMEM_SM // (shared + SMEM_RESERVED) if shared else BLOCKS_SM
    by_regs = REGS_SM // (math.ceil(regs / 8) * 8 * threads)
    return max(1, min(by_smem, by_regs, THREADS_SM // threads, BLOCKS_SM))


def _phase(sx, kind, idx=-1, stores=False):
    """Pick a phase's SASS costs: loops with rank pairs (``"pairs"``) or
    without (``"plain"``), in address order; ``stores``: of the swap-code
    loops, those that store (the compiler duplicates a loop per flag: the
    column forward that saves for the backward); fallback constants
    otherwise."""
    cands = [lp for lp in sx["loops"] if (lp["pair"] is not None) == (kind == "pairs")]
    if stores and any(lp["stores"] for lp in cands):
        cands = [lp for lp in cands if lp["stores"]]
    if kind == "pairs" and any(not lp["rcp"] for lp in cands):
        # rank sweeps that read p (no swap code); the compiler duplicates the
        # loop per flag (saving D or not): the copy with a global store (the
        # training path), the costliest of those
        rank = [lp for lp in cands if not lp["rcp"]]
        stores = [lp for lp in rank if lp["stores"]] or rank
        cands = [max(stores, key=lambda lp: lp["comp"] + 4 * lp["pair"])]
    elif kind == "plain":
        cands = [lp for lp in cands if lp["rcp"]]  # the swap code's loops
    if not cands:
        return dict(FALLBACK, fallback=True, unrolled=0, rounds=None)
    lp = cands[idx] if -len(cands) <= idx < len(cands) else cands[-1]
    return {"comp": lp["comp"], "pair": lp["pair"] if lp["pair"] is not None else FALLBACK["pair"],
            "skip": lp["skip"], "inner": lp["pair"] if lp["pair"] is not None else FALLBACK["inner"],
            "unrolled": lp.get("unrolled", 0), "rounds": lp.get("rounds")}


def kernels(which, st, sx, isz=4):
    """Per kernel: grid per row factor, shared bytes, registers, per-row
    warp-instructions, chain cycles, DRAM and L2 bytes per row."""
    n, k, S, nnz = st.n, st.k, st.size, st.nnz
    wi, wp = st.warp_iters(), st.warp_pairs()
    out = {}
    if which == "new":
        v = _phase(sx["fwd"], "plain", 0)
        bs = _phase(sx["fwd"], "pairs", -1)
        g = _phase(sx["bwd"], "pairs", -1)
        gv = _phase(sx["bwd"], "plain", -1)
        out["fwd"] = dict(
            blocks=1, shared=k * n * isz, regs=sx["fwd"]["regs"], cpc=(v["comp"], bs["comp"]), ppc=bs["pair"],
            warp_instr=wi * v["comp"] + wi * bs["comp"] + st.warp_pairs(bs["unrolled"]) * bs["pair"],
            threads=block_threads(k * n * isz, sx["fwd"]["regs"]))
        t = out["fwd"]["threads"]
        out["fwd"]["chain"] = st.chain(narrow_warp=True, threads=t) + st.chain(pair_ranks=True, narrow_warp=True,
                                                                               threads=t, rounds=bs["rounds"])
        out["fwd"].update(
            dram=isz * (n + 2 * S + k * n + nnz + k), l2=(4 + 12 + isz) * S + isz * S)
        out["bwd"] = dict(
            blocks=1, shared=k * n * isz, regs=sx["bwd"]["regs"], cpc=(g["comp"], gv["comp"]), ppc=g["pair"],
            warp_instr=wi * g["comp"] + st.warp_pairs(g["unrolled"]) * g["pair"] + wi * gv["comp"],
            threads=block_threads(k * n * isz, sx["bwd"]["regs"]))
        t = out["bwd"]["threads"]
        out["bwd"]["chain"] = st.chain(pair_ranks=True, narrow_warp=True, threads=t,
                                       rounds=g["rounds"]) + st.chain(narrow_warp=True, threads=t)
        out["bwd"].update(
            # d and p read twice (p by the G sweep and the values' adjoint), dL/dp written and read
            dram=isz * (k * n + 3 * S + nnz + S + n), l2=(12 + isz) * S + (4 + 3 * isz) * S)
        for name in ("fwd_col", "bwd_col"):
            c = _phase(sx[name], "plain", -1, stores=name == "fwd_col")
            t = block_threads(2 * n * isz, sx[name]["regs"])
            out[name] = dict(blocks=1, shared=2 * n * isz, regs=sx[name]["regs"], cpc=(c["comp"],), ppc=None,
                             threads=t, warp_instr=wi * c["comp"], chain=st.chain(narrow_warp=True, threads=t),
                             # d, du and p per comparator (the backward reads p, no arctangent)
                             dram=isz * (n + 3 * S + k) if name == "fwd_col" else isz * (3 * S + k + n),
                             l2=(4 + 3 * isz) * S)
        return out
    # the kernels at 3ad06ee: int64 tables, one block per (row, rank) for P
    v = _phase(sx["fwd_vals"], "plain", 0)
    fp = _phase(sx["fwd_P"], "plain", 0)
    bp = _phase(sx["bwd_P"], "plain", 0)
    bv = _phase(sx["bwd_vals"], "pairs", -1)
    active = [st.warp_active(r) for r in range(k)]
    mean_m = nnz / max(1, int((st.m > 0).sum()))
    strided = nnz * min(32.0, 4 * mean_m)  # D/C in CSR by (row, rank) blocks: a sector per lane
    out["fwd_vals"] = dict(blocks=1, shared=n * isz, regs=sx["fwd_vals"]["regs"], cpc=(v["comp"],), ppc=None,
                           warp_instr=wi * v["comp"], chain=st.chain(), dram=isz * (n + S + k), l2=16 * S)
    for name, ph, extra_dram in (("fwd_P", fp, isz * (n + nnz)), ("bwd_P", bp, isz * (n + 2 * nnz))):
        out[name] = dict(
            blocks=k, shared=n * isz, regs=sx[name]["regs"], cpc=(ph["comp"],), ppc=None,
            warp_instr=sum(a * ph["comp"] + (wi - a) * ph["skip"] for a in active),
            chain=st.chain(),  # per block; the k blocks of a row run side by side
            dram=extra_dram + isz * S, l2=k * 16 * S + nnz * (24 + isz) + strided * (1 if name == "fwd_P" else 2))
    out["bwd_vals"] = dict(blocks=1, shared=n * isz, regs=sx["bwd_vals"]["regs"], cpc=(bv["comp"],),
                           ppc=bv["inner"], warp_instr=wi * bv["comp"] + wp * bv["inner"], chain=st.chain(),
                           dram=isz * (S + nnz + k + n), l2=24 * S + isz * nnz)
    for name in ("fwd_col", "bwd_col"):
        c = _phase(sx[name], "plain", -1, stores=name == "fwd_col")
        out[name] = dict(blocks=1, shared=2 * n * isz, regs=sx[name]["regs"], cpc=(c["comp"],), ppc=None,
                         warp_instr=wi * c["comp"], chain=st.chain(),
                         dram=isz * (n + 2 * S + k) if name == "fwd_col" else isz * (2 * S + k + n), l2=16 * S)
    return out


def estimate(kern, B):
    """(issue, chain, dram, l2 fast, l2 slow) in ms for a batch of B rows."""
    threads = kern.get("threads", 256)
    grid = B * kern["blocks"]
    occ = occupancy(kern["shared"], kern["regs"], threads)
    waves = math.ceil(grid / (occ * SMS))
    t_issue = B * kern["warp_instr"] / (ISSUE * SMS * GHZ * 1e9) * 1e3
    t_chain = waves * kern["chain"] / (GHZ * 1e9) * 1e3
    t_dram = B * kern["dram"] / DRAM_BW * 1e3
    t_l2 = (B * kern["l2"] / L2_FAST * 1e3, B * kern["l2"] / L2_SLOW * 1e3)
    return dict(grid=grid, occ=occ, waves=waves, issue=t_issue, chain=t_chain, dram=t_dram, l2=t_l2)
