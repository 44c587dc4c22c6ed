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
# the earlier model's fixed dependent latencies (cycles), kept to print its
# chain beside the SASS chain and as the fallback without a disassembler:
# one comparator iteration (L2-hit table and d loads, shared loads, the swap
# code's dependent chain, stores), one rank of a comparator (two shared
# loads, FMAs, two stores); a rank whose shared loads were issued in the
# same round as an earlier rank's: its update's issue (LAT_RANK_ISSUE)
LAT_ITER, LAT_PAIR, LAT_RANK_ISSUE = 900, 60, 10
# barriers, charged per layer by both chains (assumed, no published Hopper
# figure found): a block barrier, a warp barrier
LAT_SYNC, LAT_WARP = 120, 10
# fallback SASS counts (instructions per comparator / per pair) when the
# disassembler is missing: medians of what the sm_90 cubins gave here
FALLBACK = {"comp": 170, "pair": 14, "skip": 14, "inner": 8}
#: float arrays each kernel reads that an earlier launch wrote (the
#: forward's saved d, p, D and the incoming gradients): the SASS chain
#: charges their loads DRAM latency, every other global load an L2 hit
FROM_DRAM = {"bwd": ("ds", "ps", "D", "gP", "gv"), "bwd_col": ("cs", "gcol")}
CALIBRATION = ("old", "fwd_vals", 500, 0.16)  # e46262c's _fwd_vals on an H100, B = 500, ms (Rounds 1-5)
#: the kernels' device time on an H100 80GB (issue 29: torch profiler, float32, (5, 10450), fwd + bwd,
#: medians of 20; the kernels of f97d855, unchanged since): path -> {B: ms}. The model is calibrated on these
MEASURED = {"rows": {64: 0.18, 500: 0.83, 4096: 6.58}, "column": {64: 0.07, 500: 0.23, 4096: 1.67}}
#: the kernels of each measured path
PATHS = {"rows": ("fwd", "bwd"), "column": ("fwd_col", "bwd_col")}
#: a kernel's start and drain on the device (its first blocks launched, the last wave's blocks retiring):
#: cycles added to every kernel (ASSUMED: ~3 us; the issue's B = 64 figures allow 2-5 us)
LAT_LAUNCH = 6000
#: elements a thread's unrolled load loop has in flight (NVVM unrolls the strided loops fourfold)
UNROLL = 4


# ------------------------------------------------------------------ structure
def warps(offs):
    """(layer, comparator index array) of every warp's comparators: the
    kernels' threads run a layer's comparators in order (``sweeps.layers``),
    so a warp holds 32 consecutive ones of a layer (fewer at its end)."""
    for l, (s, e) in enumerate(zip(offs[:-1], offs[1:])):
        for g in range(s, e, 32):
            yield l, np.arange(g, min(e, g + 32))


class Structure:
    """Layer widths, the plan's rank counts, per-warp groups."""

    def __init__(self, net, threads=256):
        from netgen.codegen.runtime.tables import plan

        self.n, self.k, self.size, self.threads = net.n, net.k, net.size, threads
        self.offs = np.asarray(net.layer_offsets)
        from netgen.codegen.cuda.layout import d_slots, d_stride

        clo, chi, doff = plan(net.n, net.comparators, net.layer_offsets, list(net.outputs))
        self.m = np.maximum(chi - clo, 0)
        self.clo, self.chi = clo, chi
        self.nnz = int(doff[-1])
        # where the kernels keep D (the module's layout, netgen/codegen/cuda/layout.py): lane r of
        # comparator i at dix[i] + r stride
        self.dstride = d_stride(clo, chi, net.layer_offsets)
        dix = d_slots(clo, chi, net.layer_offsets, self.dstride)
        self.dix, self.dlen = dix[:-1], int(dix[-1])
        self.widths = np.diff(self.offs)

    def groups(self):
        """(layer, comparator index array) of every warp's 32 comparators (:func:`warps`)."""
        return warps(self.offs)

    def scatter_sectors(self):
        """32-byte sectors the rank sweeps' D accesses touch per row: per
        warp of 32 consecutive comparators and per rank r (one store, or
        load, instruction per rank), the distinct sectors of ``dix[i] + r
        stride`` (the module's D layout) over the lanes whose plan range
        holds r. (nnz floats fill nnz / 8 sectors; with the plan's CSR
        issue 29 counted 60,400 requests per row at (5, 10450): 4.2x; the
        warp windows: one line per instruction.)"""
        if getattr(self, "_sectors", None) is None:
            tot = 0
            for _, ix in self.groups():
                for r in range(self.k):
                    on = (self.clo[ix] <= r) & (r < self.chi[ix])
                    if on.any():
                        tot += len(np.unique((self.dix[ix][on] + r * self.dstride) * 4 // 32))
            self._sectors = tot
        return self._sectors

    def layer_active(self, r):
        """Per layer, warps in which some lane's comparator touches rank r
        (old kernels: one block per (row, rank))."""
        out = [0] * len(self.widths)
        for l, ix in self.groups():
            out[l] += bool(((self.clo[ix] <= r) & (r < self.chi[ix])).any())
        return out

    def chain(self, pair_ranks=False, narrow_warp=False, threads=256, rounds=None):
        """The earlier model's chain (fixed latencies, kept to print beside
        the SASS chain): dependent cycles of one block of ``threads``
        sweeping all layers; ``rounds``: the rank sweep's rounds of shared
        loads where the SASS groups ranks' loads (None: one round per rank)."""
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


def _phase(sx, kind, idx=-1, stores=False, acc=None):
    """Pick a phase's SASS costs: loops with rank pairs (``"pairs"``) or
    without (``"plain"``), in address order; ``stores``: of the swap-code
    loops, those that store (the compiler duplicates a loop per flag: the
    column forward that saves for the backward); ``acc`` False: of the
    swap-code loops, those that sum nothing across iterations (the
    adjoints' copy without dL/ds, the default: a steepness that does not
    learn); of the swap-code loops, those with the fewest clamps (the tame
    copy, without the clamps of d and z: every finite row whose s (max -
    min) is under 2^-24 of the float's largest value, ``updates.per_range``);
    fallback constants otherwise (the chain then takes the earlier model's
    fixed latencies)."""
    cands = [lp for lp in sx["loops"] if (lp["pair"] is not None) == (kind == "pairs")]
    if acc is not None and kind == "plain" and any(lp["rcp"] and lp.get("acc") == acc for lp in cands):
        cands = [lp for lp in cands if not lp["rcp"] or lp.get("acc") == acc]
    if kind == "plain" and any(lp["rcp"] for lp in cands):
        least = min(lp.get("clamps", 0) for lp in cands if lp["rcp"])
        cands = [lp for lp in cands if not lp["rcp"] or lp.get("clamps", 0) == least]
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
        return dict(FALLBACK, fallback=True, unrolled=0, rounds=None, lat=LAT_ITER, lat_pair=LAT_PAIR,
                    narrow=LAT_ITER, sweep=lambda its, bars: [it * LAT_ITER + bar for it, bar in zip(its, bars)])
    lp = cands[idx] if -len(cands) <= idx < len(cands) else cands[-1]
    return {"comp": lp["comp"], "pair": lp["pair"] if lp["pair"] is not None else FALLBACK["pair"],
            "skip": lp["skip"], "inner": lp["pair"] if lp["pair"] is not None else FALLBACK["inner"],
            "unrolled": lp.get("unrolled", 0), "rounds": lp.get("rounds"), "lat": lp["lat"],
            "lat_pair": lp["lat_pair"], "sweep": lp["sweep"], "narrow": lp["narrow"]}


def sweep(st, ph, threads, pairs=False, narrow_warp=True, active=None):
    """One sweep over all layers: per layer (warp-instructions per row,
    dependent cycles per block). Issue as the plan gives it (a warp runs 32
    consecutive comparators; its rank loop as long as its busiest lane;
    ``active``: the old P kernels' per-rank blocks, warps without the rank
    paying ``skip``); the chain from the SASS (``sweep``: the layer loop run
    layer after layer with ceil(width / threads) comparator iterations and
    its barrier, registers carried; plus ``lat_pair`` per rank of a rank
    loop)."""
    issues, its, bars, ranks = [], [], [], []
    for l, w in enumerate(st.widths):
        s, e = st.offs[l], st.offs[l + 1]
        warps = math.ceil(w / 32)
        if active is not None:
            issue = sum(a[l] * ph["comp"] + (warps - a[l]) * ph["skip"] for a in active)
        else:
            issue = warps * ph["comp"]
        m = int(st.m[s:e].max()) if w else 0
        if pairs:
            issue += sum(max(0, int(st.m[g:min(e, g + 32)].max()) - ph["unrolled"]) for g in range(s, e, 32)) \
                * ph["pair"]
        issues.append(issue)
        its.append(math.ceil(w / threads))
        bars.append(LAT_WARP if narrow_warp and w <= 32 else LAT_SYNC)
        ranks.append(its[-1] * max(0, m - ph["unrolled"]) * ph["lat_pair"] if pairs else 0.0)
    return list(zip(issues, (c + r for c, r in zip(ph["sweep"](its, bars), ranks))))


def phases(st, sx, spec, threads):
    """The loops outside the sweeps, per row: [(warp-instructions, chain
    cycles, DRAM bytes)] for ``spec`` [(class, elements, DRAM bytes)]: a
    class's instructions per element from the SASS (``element_loops``; a
    fixed 15 without it), threads striding over the elements; a ``load``
    phase waits a DRAM latency per round of ``threads * UNROLL`` elements."""
    from _gpu_latency import LAT

    out = []
    for cls, elements, dram in spec:
        per = sx.get("elements", {}).get(cls, 15.0)
        issue = math.ceil(elements / 32) * per
        rounds = math.ceil(elements / (threads * UNROLL))
        chain = rounds * (LAT["dram"] + per * UNROLL) if cls == "load" else rounds * per * UNROLL
        out.append((issue, chain, dram))
    return out


def kernels(which, st, sx, isz=4):
    """Per kernel: grid per row factor, shared bytes, registers, threads,
    SASS per comparator and per pair, the SASS latency per comparator
    iteration of each sweep (``lat``), per layer and sweep (warp-instructions
    per row, chain cycles per block) (``layers``), the earlier model's
    fixed-latency chain (``chain_fixed``), DRAM and L2 bytes per row."""
    n, k, S, nnz = st.n, st.k, st.size, st.nnz
    out = {}

    def kern(name, sweeps, shared, blocks=1, threads=None, chain_fixed=None, outside=(), scatter=0, **kw):
        t = threads or block_threads(shared, sx[name]["regs"])
        layers = [x for ph, opts in sweeps for x in sweep(st, ph, t, **opts)]
        phases_ = sweeps
        out[name] = dict(blocks=blocks, shared=shared, regs=sx[name]["regs"], threads=t,
                         cpc=tuple(ph["comp"] for ph, _ in phases_), lat=tuple(ph["lat"] for ph, _ in phases_),
                         narrow=tuple(ph["narrow"] for ph, _ in phases_),
                         layers=layers, warp_instr=sum(i for i, _ in layers), chain=sum(c for _, c in layers),
                         chain_fixed=chain_fixed(t), outside=phases(st, sx[name], outside, t),
                         scatter=scatter * 32, **kw)

    if which == "new":
        v = _phase(sx["fwd"], "plain", 0)
        bs = _phase(sx["fwd"], "pairs", -1)
        g = _phase(sx["bwd"], "pairs", -1)
        gv = _phase(sx["bwd"], "plain", -1, acc=False)
        # outside the sweeps: the row of x in, the k n state zeroed, P out (fwd); the state zeroed, dL/dP in,
        # the n values' adjoint zeroed, dL/dx out (bwd); the D scatter (fwd) and gather (bwd) through L2
        kern("fwd", [(v, {}), (bs, {"pairs": True})], k * n * isz, ppc=bs["pair"],
             outside=[("load", n, isz * n), ("fill", k * n, 0), ("store", k * n, isz * k * n)],
             scatter=st.scatter_sectors(),
             chain_fixed=lambda t: st.chain(narrow_warp=True, threads=t) + st.chain(
                 pair_ranks=True, narrow_warp=True, threads=t, rounds=bs["rounds"]),
             dram=isz * (n + 2 * S + k * n + st.dlen + k), l2=(4 + 12 + isz) * S + isz * S)
        kern("bwd", [(g, {"pairs": True}), (gv, {})], k * n * isz, ppc=g["pair"],
             outside=[("fill", k * n, 0), ("load", k * n, isz * k * n), ("fill", n, 0), ("store", n, isz * n)],
             scatter=st.scatter_sectors(),
             chain_fixed=lambda t: st.chain(pair_ranks=True, narrow_warp=True, threads=t, rounds=g["rounds"])
             + st.chain(narrow_warp=True, threads=t),
             # d and p read twice (p by the G sweep and the values' adjoint), dL/dp written and read
             dram=isz * (k * n + 3 * S + st.dlen + S + n), l2=(12 + isz) * S + (4 + 3 * isz) * S)
        for name in ("fwd_col", "bwd_col"):
            c = _phase(sx[name], "plain", -1, stores=name == "fwd_col", acc=False if name == "bwd_col" else None)
            kern(name, [(c, {})], 2 * n * isz, ppc=None,
                 outside=[("load", n, isz * n)] if name == "fwd_col" else [("fill", 2 * n, 0), ("store", n, isz * n)],
                 chain_fixed=lambda t: st.chain(narrow_warp=True, threads=t),
                 # d, du and p per comparator (the backward reads p, no arctangent)
                 dram=isz * (n + 3 * S + k) if name == "fwd_col" else isz * (3 * S + k + n), l2=(4 + 3 * isz) * S)
        return out
    # the kernels at 3ad06ee: int64 tables, one block per (row, rank) for P
    v = _phase(sx["fwd_vals"], "plain", 0)
    fp = _phase(sx["fwd_P"], "plain", 0)
    bp = _phase(sx["bwd_P"], "plain", 0)
    bv = _phase(sx["bwd_vals"], "pairs", -1)
    active = [st.layer_active(r) for r in range(k)]
    mean_m = nnz / max(1, int((st.m > 0).sum()))
    strided = nnz * min(32.0, 4 * mean_m)  # D/C in CSR by (row, rank) blocks: a sector per lane
    old = {"narrow_warp": False}
    kern("fwd_vals", [(v, old)], n * isz, threads=256, ppc=None, chain_fixed=lambda t: st.chain(),
         dram=isz * (n + S + k), l2=16 * S)
    for name, ph, extra_dram in (("fwd_P", fp, isz * (n + nnz)), ("bwd_P", bp, isz * (n + 2 * nnz))):
        # per block; the k blocks of a row run side by side
        kern(name, [(ph, dict(old, active=active))], n * isz, blocks=k, threads=256, ppc=None,
             chain_fixed=lambda t: st.chain(), dram=extra_dram + isz * S,
             l2=k * 16 * S + nnz * (24 + isz) + strided * (1 if name == "fwd_P" else 2))
    kern("bwd_vals", [(dict(bv, pair=bv["inner"]), dict(old, pairs=True))], n * isz, threads=256, ppc=bv["inner"],
         chain_fixed=lambda t: st.chain(), dram=isz * (S + nnz + k + n), l2=24 * S + isz * nnz)
    for name in ("fwd_col", "bwd_col"):
        c = _phase(sx[name], "plain", -1, stores=name == "fwd_col")
        kern(name, [(c, old)], 2 * n * isz, threads=256, ppc=None, chain_fixed=lambda t: st.chain(),
             dram=isz * (n + 2 * S + k) if name == "fwd_col" else isz * (2 * S + k + n), l2=16 * S)
    return out


def estimate(kern, B, c=1.0, chain_c=False, recal=True):
    """Terms in ms for a batch of B rows: ``issue`` (warp-instructions at the
    issue rate, not scaled), ``chain`` (the SASS chain, scaled by ``c`` only
    where ``chain_c``), ``chain_fixed`` (the earlier model's, not scaled),
    ``compute`` (per wave, the layers in order, each the larger of its
    c-scaled issue on the SM and its chain; then the loops outside the
    sweeps), ``dram``, ``l2`` (fast, slow), ``launch`` and ``bound_by``
    ("issue" or "chain": which gives most of ``compute``).

    ``recal`` (Round 6, calibrated on issue 29's measurements) charges what
    the Rounds 1-5 model left out: the **busiest SM** (ceil(blocks / SMs)
    blocks, in waves of the blocks an SM holds: at B = 64 an SM runs a whole
    row, not 64 / 132 of one, and at B = 500 the fourth wave's 104 rows take
    as long as a full one), the **loops outside the sweeps** (``outside``:
    zero fills, the row in, P or dL/dP, dL/dx; run after the sweeps by the
    same block, so added to the compute, each the larger of its issue, its
    load latency and its share of DRAM), the **D scatter and gather** as L2
    sectors (``scatter`` bytes per row), and the kernel's **start and drain**
    (LAT_LAUNCH). ``recal=False`` is the Rounds 1-5 model."""
    threads = kern.get("threads", 256)
    grid = B * kern["blocks"]
    occ = occupancy(kern["shared"], kern["regs"], threads)
    if recal:
        per_sm = math.ceil(grid / SMS)
        waves = math.ceil(per_sm / occ)
        rows = per_sm / waves / kern["blocks"]  # rows per wave on the busiest SM (a row: ``blocks`` blocks)
    else:
        waves = math.ceil(grid / (occ * SMS))
        rows = B / (SMS * waves)  # rows per SM per wave
    s = c if chain_c else 1.0
    by = {"issue": 0.0, "chain": 0.0}
    for issue, chain in kern["layers"]:
        i, ch = c * rows * issue / ISSUE, s * chain
        by["issue" if i >= ch else "chain"] += max(i, ch)
    cyc = 1 / (GHZ * 1e9) * 1e3
    extra = 0.0
    if recal:
        active = min(SMS, grid)
        for issue, chain, dram in kern.get("outside", ()):
            # the blocks of a wave run a phase at about the same time: their DRAM bytes share the bandwidth
            share = rows * dram * active / DRAM_BW * GHZ * 1e9
            extra += max(c * rows * issue / ISSUE, s * chain, share)
    l2 = kern["l2"] + (kern.get("scatter", 0) if recal else 0)
    return dict(grid=grid, occ=occ, waves=waves, issue=B * kern["warp_instr"] / (ISSUE * SMS) * cyc,
                chain=waves * s * kern["chain"] * cyc, chain_fixed=waves * kern["chain_fixed"] * cyc,
                compute=waves * (by["issue"] + by["chain"] + extra) * cyc, outside=waves * extra * cyc,
                bound_by=max(by, key=by.get), dram=B * kern["dram"] / DRAM_BW * 1e3,
                l2=(B * l2 / L2_FAST * 1e3, B * l2 / L2_SLOW * 1e3),
                launch=LAT_LAUNCH * cyc if recal else 0.0)


def total(e, slow=False):
    """A kernel's estimated time (ms) from :func:`estimate`'s terms: the
    largest of compute, DRAM and L2 (the fast or the ``slow`` L2 figure),
    plus its start and drain."""
    return max(e["compute"], e["dram"], e["l2"][1 if slow else 0]) + e["launch"]


def path_ms(ks, path, B, c, chain_c=False, recal=True, slow=False):
    """fwd + bwd of a measured ``path`` ("rows", "column"): the sum of its
    kernels' :func:`total`."""
    return sum(total(estimate(ks[nm], B, c, chain_c, recal), slow) for nm in PATHS[path])


def fit(ks, chain_c=False, slow=False):
    """The issue scale c that fits the model to :data:`MEASURED`: least
    squares of log(model / measured) over every figure (golden-section
    search; the error is unimodal in c). Returns (c, {(path, B): (model,
    measured)})."""
    def err(c):
        return sum(math.log(path_ms(ks, p, B, c, chain_c, True, slow) / ms) ** 2
                   for p, row in MEASURED.items() for B, ms in row.items())

    lo, hi = 0.3, 5.0
    g = (math.sqrt(5) - 1) / 2
    for _ in range(80):
        a, b = hi - g * (hi - lo), lo + g * (hi - lo)
        lo, hi = (lo, b) if err(a) < err(b) else (a, hi)
    c = (lo + hi) / 2
    return c, beside_measured(ks, c, chain_c, slow)


def beside_measured(ks, c, chain_c=False, slow=False):
    """{(path, B): (model, measured)} for :data:`MEASURED` at calibration c."""
    return {(p, B): (path_ms(ks, p, B, c, chain_c, True, slow), ms)
            for p, row in MEASURED.items() for B, ms in row.items()}


def calibrate(kern, B, ms, chain_c=False):
    """The Rounds 1-5 calibration: the c at which that model's time for
    ``kern`` at ``B`` rows is the measured ``ms`` (bisection; the model's
    time grows with c)."""
    lo, hi = 0.05, 20.0
    for _ in range(60):
        mid = (lo + hi) / 2
        e = estimate(kern, B, mid, chain_c, recal=False)
        lo, hi = (mid, hi) if max(e["compute"], e["dram"], e["l2"][0]) < ms else (lo, mid)
    return (lo + hi) / 2
