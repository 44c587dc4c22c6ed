"""A performance model of the cuda target's kernels on an H100: ESTIMATES,
not measurements (no GPU needed; ``benchmarks/gpu_session.sh`` measures
when one is there).

    python benchmarks/gpu_model.py --B 64 500 4096 [--n 10450] [--k 5] [--old 3ad06ee] [--json FILE]

For the (k, n) splitter network (default relaxation, float32) it builds the
module of this checkout and the module of commit ``--old`` (its
``netgen/`` from git into a temporary package), compiles both with netgen's
compile check (PTX for sm_90, ptxas -> cubins), disassembles the cubins
(``cuobjdump``/``nvdisasm`` from the pip wheels ``nvidia-cuda-cuobjdump``,
``nvidia-cuda-nvdisasm``; absent: fixed instruction counts, said so) and
prints, per kernel and B: grid, dynamic shared memory, registers,
occupancy, SASS instructions per comparator (and per (comparator, rank)
pair), DRAM and L2 bytes per row, and an estimated time:

    t = max(c * issue, c * chain, DRAM, L2)
    issue = warp-instructions / (1.9 per cycle per SM * 132 SMs * 1.98 GHz)
    chain = waves * per-block dependent latency (layers in order; a layer
            of w comparators costs ceil(w / threads) iterations of
            LAT_ITER cycles, plus LAT_PAIR per round of a rank sweep's
            shared loads (one per rank unless the SASS loads the ranks'
            pairs together; LAT_RANK_ISSUE per further rank), plus a
            barrier: LAT_SYNC, or LAT_WARP for a narrow layer on one warp)
    DRAM  = compulsory bytes / 3 TB/s
    L2    = table and d gathers (32-byte sectors) / 4.4 TB/s (low) or 2.6 TB/s (high)

Warp-instructions come from the plan: threads stride over a layer's
comparators, so a warp runs 32 consecutive comparators; its cost is the
comparator body plus the largest rank count among its lanes times the pair
body (divergent lanes wait). ``c`` calibrates the model on the one H100
measurement of a kernel whose structure is unchanged since (e46262c's
``_fwd_vals``, 0.16 ms at B = 500, one block per row, values in shared
memory, issue-bound; the review's figures are in docs/cuda-kernels.md) and
scales the issue and chain terms of every kernel (bandwidths are taken as
they are). Not modelled: launch and host costs (~20-130 us per launch
on the VM that measured them), cache conflicts, tail effects inside a wave.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]

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

_EMIT = r'''
import sys
from netgen.codegen.cuda_target import emit
from netgen.compiler import compile_network
from netgen.construct import build
from netgen.relax.distributions import default_relaxation
net = compile_network(build("splitter", int(sys.argv[2]), int(sys.argv[3]))).network
open(sys.argv[1], "w").write(emit(net, default_relaxation(net)))
# divisions per comparator in the swap code as that tree's kernels paste it
# (MUFU.RCP counts comparators in the SASS loops)
from netgen.codegen._swap_code import swap_code
try:
    swap = swap_code(default_relaxation(net), 0, "float32", steepness="s")
except TypeError:  # trees before the run-time steepness
    swap = swap_code(default_relaxation(net), 0, "float32")
open(sys.argv[1] + ".rcp", "w").write(str(max(1, swap.count(" / "))))
'''
_COMPILE = r'''
import json, sys
from netgen.codegen.cuda_target import compile_check
res = compile_check(sys.argv[1] + "/module.py", out_dir=sys.argv[1] + "/ptx")
json.dump(res, open(sys.argv[1] + "/compile.json", "w"))
'''


def _tool(name):
    found = shutil.which(name)
    if found:
        return found
    try:
        import nvidia  # the NVIDIA pip wheels install under nvidia/cu13/bin

        for base in nvidia.__path__:
            for cand in Path(base).glob(f"*/bin/{name}"):
                return str(cand)
    except ImportError:
        pass
    return None


def build(label, pkg_root, cache, n, k):
    """Emit the module of ``pkg_root`` (a directory holding ``netgen/``) and
    compile it with that tree's compile check; cached in ``cache`` by the
    module's hash."""
    import hashlib

    env = dict(os.environ, PYTHONPATH=str(pkg_root))
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    cache.mkdir(parents=True, exist_ok=True)
    tmp = (cache / f"emit_{label}.py").resolve()
    # cwd: ``python -c`` and ``-m`` put the working directory first on sys.path
    subprocess.run([sys.executable, "-c", _EMIT, str(tmp), str(n), str(k)], check=True, env=env, cwd=pkg_root)
    rcp = int(Path(str(tmp) + ".rcp").read_text())
    out = cache / f"{label}_{hashlib.sha256(tmp.read_bytes()).hexdigest()[:12]}"
    if not (out / "compile.json").exists():
        out.mkdir(parents=True, exist_ok=True)
        shutil.copy(tmp, out / "module.py")
        print(f"[{label}] compiling the ({k}, {n}) module's kernels (cached in {out}) ...", file=sys.stderr,
              flush=True)
        subprocess.run([sys.executable, "-c", _COMPILE, str(out)], check=True, env=env, cwd=pkg_root)
    return dict(json.loads((out / "compile.json").read_text()), rcp_per_comparator=rcp)


def old_package(commit, cache):
    """``netgen/`` of ``commit`` from git, in a temporary package directory."""
    root = cache / f"pkg_{commit}"
    if not (root / "netgen").exists():
        root.mkdir(parents=True, exist_ok=True)
        arch = subprocess.run(["git", "-C", str(ROOT), "archive", commit, "netgen"], check=True,
                              capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(root)], input=arch, check=True)
    return root


# ------------------------------------------------------------------ SASS
_INSTR = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;")


def sass(cubin):
    """[(address, instruction text)] of the cubin's code, or None."""
    tool = _tool("cuobjdump")
    if tool is None:
        return None
    out = subprocess.run([tool, "-sass", str(cubin)], capture_output=True, text=True).stdout
    return [(int(m.group(1), 16), m.group(2)) for m in _INSTR.finditer(out)]


def loop_costs(ins, rcp_per_comp):
    """From the SASS: the comparator loops, each as instructions per
    comparator (``comp``), per rank pair (``pair``, None for a loop without
    a rank loop), ranks handled by unrolled code outside the rank loop
    (``unrolled``) and instructions up to the first branch (``skip``).
    Comparator loops are the innermost loops holding the swap code's
    MUFU.RCP (their comparators counted by MUFU.RCP, ``rcp_per_comp`` per
    swap code) and loops without the swap code whose nested loops are leaf
    loops with shared loads (the rank sweeps that read p); rank pairs are
    counted by shared loads (two per pair) or, failing those, global loads.
    A rank sweep whose ranks the kernel unrolls (small k: every rank's
    update guarded, no rank loop) is a leaf loop without the swap code that
    loads the uint16 tables (clo, chi, wa, wb: four ``LDG.E.U16``) and has two or more
    shared loads and stores: its whole body is per comparator (``pair`` 0, all its
    ranks ``unrolled``); the layer loops around it are not comparator loops."""
    addr = [a for a, _ in ins]
    idx = {a: i for i, a in enumerate(addr)}
    loops = []
    for i, (a, text) in enumerate(ins):
        m = re.search(r"\bBRA\s+(?:`?\(?)(0x[0-9a-f]+)", text)
        if m:
            tgt = int(m.group(1), 16)
            if tgt < a and tgt in idx:
                loops.append((idx[tgt], i))

    def count(lo, hi, pat):
        return sum(1 for j in range(lo, hi + 1) if re.search(pat, ins[j][1]))

    def rounds(lo, hi):
        """Dependent rounds of shared loads: runs of LDS that a store
        follows (each waits for the stores before it)."""
        n, in_run = 0, False
        for j in range(lo, hi + 1):
            if re.search(r"\bLDS\b", ins[j][1]):
                in_run = True
            elif re.search(r"\bSTS\b", ins[j][1]) and in_run:
                n, in_run = n + 1, False
        return max(1, n)

    def nested(lp):
        return [o for o in loops if o != lp and lp[0] <= o[0] and o[1] <= lp[1]]

    def outermost(lps):
        return [o for o in lps if not any(p != o and p[0] <= o[0] and o[1] <= p[1] for p in lps)]

    def unrolled_ranks(lp):
        return (not nested(lp) and not count(*lp, r"MUFU\.RCP") and count(*lp, r"\bLDS\b") >= 2
                and count(*lp, r"\bSTS\b") >= 2 and count(*lp, r"LDG\.E\.U16") >= 4)

    out = []
    for lp in loops:
        inner = nested(lp)
        rcp = count(*lp, r"MUFU\.RCP")
        if unrolled_ranks(lp):
            first_branch = next((j for j in range(lp[0], lp[1]) if re.search(r"\bBRA\b", ins[j][1])), lp[0])
            out.append({"at": ins[lp[0]][0], "rcp": False, "comp": float(lp[1] - lp[0] + 1), "pair": 0.0,
                        "stores": count(*lp, r"\bSTG\b") > 0, "unrolled": count(*lp, r"\bLDS\b") // 2,
                        "skip": first_branch - lp[0] + 4, "rounds": rounds(*lp)})
            continue
        if any(unrolled_ranks(o) for o in inner):
            continue  # a layer loop around an unrolled rank sweep
        if rcp:
            if any(count(*o, r"MUFU\.RCP") for o in inner):
                continue  # not innermost
            comps = max(1.0, rcp / rcp_per_comp)
        else:
            if (not inner or any(nested(o) for o in inner) or not any(count(*o, r"\bLDS\b") >= 2 for o in inner)
                    or count(*lp, r"LDG\.E\.U16") < 2):  # a comparator loop reads the uint16 tables
                continue
            comps = 1.0
        top = outermost(inner)
        body = lp[1] - lp[0] + 1 - sum(o[1] - o[0] + 1 for o in top)
        pair = None
        for o in inner:
            lds, ldg = count(*o, r"\bLDS\b"), count(*o, r"\bLDG\b")
            per = (o[1] - o[0] + 1) / max(1.0, lds / 2 if lds else ldg)
            pair = per if pair is None else max(pair, per)
        lds_out = count(*lp, r"\bLDS\b") - sum(count(*o, r"\bLDS\b") for o in top)
        first_branch = next((j for j in range(lp[0], lp[1]) if re.search(r"\bBRA\b", ins[j][1])), lp[0])
        stg = count(*lp, r"\bSTG\b") - sum(count(*o, r"\bSTG\b") for o in top)
        out.append({"at": ins[lp[0]][0], "rcp": bool(rcp), "comp": body / comps, "pair": pair, "stores": stg > 0,
                    "unrolled": lds_out // 2 if pair is not None and not rcp else 0,
                    "skip": first_branch - lp[0] + 4})
    return out


def kernel_sass(compile_res, name, rcp_per_comp):
    """Per-phase SASS costs of kernel ``name`` (float32, shared variant)."""
    (k,) = [k for k in compile_res["kernels"] if k["name"] == f"_{name}_f32_s"]
    regs = re.search(r"Used (\d+) registers", k["info"] or "")
    ins = sass(k["cubin"])
    loops = loop_costs(ins, rcp_per_comp) if ins else []
    return {"regs": int(regs.group(1)) if regs else 64, "loops": loops, "sass": bool(ins),
            "instructions": len(ins) if ins else None}


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


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=10450)
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--B", type=int, nargs="+", default=[64, 500, 4096])
    ap.add_argument("--old", default="3ad06ee", help="commit of the kernels to compare with")
    ap.add_argument("--cache", default=os.path.join(tempfile.gettempdir(), "netgen_gpu_model"))
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from netgen.compiler import compile_network
    from netgen.construct import build as build_net
    from netgen.relax.distributions import default_relaxation

    net = compile_network(build_net("splitter", args.n, args.k)).network
    r = default_relaxation(net)
    st = Structure(net)
    cache = Path(args.cache)
    head = "new"
    res = {"new": build("new", ROOT, cache, args.n, args.k),
           "old": build("old", old_package(args.old, cache), cache, args.n, args.k)}
    names = {"new": ("fwd", "bwd", "fwd_col", "bwd_col"),
             "old": ("fwd_vals", "fwd_P", "bwd_P", "bwd_vals", "fwd_col", "bwd_col")}
    # each tree's own swap code: its divisions per comparator
    sx = {w: {nm: kernel_sass(res[w], nm, res[w]["rcp_per_comparator"]) for nm in names[w]} for w in names}
    have_sass = all(v["sass"] for w in sx.values() for v in w.values())
    ks = {w: kernels(w, st, sx[w]) for w in names}
    # calibration: the model's raw time for e46262c's _fwd_vals structure vs its measurement
    w, nm, Bc, ms = CALIBRATION
    e = estimate(ks[w][nm], Bc)
    c = ms / max(e["issue"], e["chain"], e["dram"], e["l2"][0])
    print(f"ESTIMATES (model, not measurements): {net!r}, {r.distribution} (ART {r.art_lambda}), float32, "
          f"nnz = {st.nnz} ({st.nnz / (st.k * st.n):.2f} k n), H100 SXM ({SMS} SMs, {GHZ} GHz, issue {ISSUE} "
          f"warp-instr/cycle/SM, DRAM 3 TB/s, L2 2.6-4.4 TB/s); SASS from cuobjdump: "
          f"{'yes' if have_sass else 'NO (fixed counts used)'}; calibration c = {c:.2f} "
          f"({nm} at B = {Bc}: {ms} ms measured at e46262c)")
    print(f"{'kernels':8s} {'kernel':9s} {'grid/row':>8s} {'thr':>4s} {'smem KB':>7s} {'regs':>4s} {'blk/SM':>6s} "
          f"{'SASS/comp':>11s} {'/pair':>5s} {'DRAM KB/row':>11s} {'L2 KB/row':>9s} " +
          " ".join(f"{'B=' + str(B) + ' ms':>14s}" for B in args.B))
    rows = []
    for which in ("old", "new"):
        label = f"{args.old}" if which == "old" else f"{head}"
        for nm, kern in ks[which].items():
            cells = []
            for B in args.B:
                e = estimate(kern, B)
                lo = max(c * e["issue"], c * e["chain"], e["dram"], e["l2"][0])
                hi = max(c * e["issue"], c * e["chain"], e["dram"], e["l2"][1])
                bound = max(("issue", c * e["issue"]), ("chain", c * e["chain"]), ("DRAM", e["dram"]),
                            ("L2", e["l2"][1]), key=lambda t: t[1])[0]
                cells.append((B, lo, hi, bound))
                rows.append({"kernels": which, "commit": label, "kernel": nm, "B": B, "estimate_ms": [lo, hi],
                             "bound": bound, "issue_ms": c * e["issue"], "chain_ms": c * e["chain"],
                             "dram_ms": e["dram"], "grid": e["grid"], "blocks_per_sm": e["occ"],
                             "shared_bytes": kern["shared"], "regs": kern["regs"],
                             "sass_per_comparator": kern["cpc"], "sass_per_pair": kern["ppc"],
                             "dram_bytes_per_row": kern["dram"], "l2_bytes_per_row": kern["l2"]})
            e = estimate(kern, args.B[0])
            cpc = "/".join(f"{v:.0f}" for v in kern["cpc"])
            ppc = f"{kern['ppc']:.0f}" if kern["ppc"] else "-"
            print(f"{label:8s} {nm:9s} {kern['blocks']:8d} {kern.get('threads', 256):4d} "
                  f"{kern['shared'] / 1024:7.1f} {kern['regs']:4d} "
                  f"{e['occ']:6d} {cpc:>11s} {ppc:>5s} {kern['dram'] / 1024:11.0f} {kern['l2'] / 1024:9.0f} " +
                  " ".join(f"{lo:6.3f}-{hi:<6.3f}{b[0]}" for _, lo, hi, b in cells))
    print("(bound: i issue, c dependent chain, D DRAM, L L2; issue and chain scaled by the calibration c)")
    print("\nfwd+bwd, ESTIMATES (ms):")
    paths = {"old": {"rows": ("fwd_vals", "fwd_P", "bwd_P", "bwd_vals"), "column": ("fwd_col", "bwd_col")},
             "new": {"rows": ("fwd", "bwd"), "column": ("fwd_col", "bwd_col")}}
    targets = {"rows": (0.5, 0.8, 4.0), "column": (0.1, 0.25, 1.5)}
    summary = {}
    for path in ("rows", "column"):
        for which in ("old", "new"):
            label = args.old if which == "old" else head
            cells = []
            for B in args.B:
                lo = sum(x["estimate_ms"][0] for x in rows if x["kernels"] == which and x["B"] == B
                         and x["kernel"] in paths[which][path])
                hi = sum(x["estimate_ms"][1] for x in rows if x["kernels"] == which and x["B"] == B
                         and x["kernel"] in paths[which][path])
                cells.append(f"B={B}: {lo:.2f}-{hi:.2f}")
                summary[(path, which, B)] = (lo, hi)
            dram = sum(ks[which][nm]["dram"] for nm in paths[which][path])
            print(f"  {path:6s} {label:8s} " + "  ".join(cells) + f"   DRAM {dram / 1e6:.2f} MB/row (estimate)")
        tg = targets[path]
        print(f"  {path:6s} target   " + "  ".join(f"B={B}: {t}" for B, t in zip(args.B, tg * 2)))
    kept_new = 4 * (2 * st.size + (st.nnz if st.nnz <= 4 * st.k * st.n else 0)) + 4
    kept_old = 4 * (st.size + st.nnz) + 4
    print(f"\nkept for the rows backward per row (float32): {args.old} {kept_old / 1e6:.2f} MB (d, D; C of "
          f"{4 * st.nnz / 1e6:.2f} MB more allocated in the backward), {head} {kept_new / 1e6:.2f} MB (d, p, D; "
          f"dL/dp of {4 * st.size / 1e6:.2f} MB in the backward)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"calibration": c, "sass": have_sass, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
