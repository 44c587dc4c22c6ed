"""Building netgen's (k, n) cuda module of a source tree and reading its
kernels' SASS, for the performance model of ``gpu_model.py`` (ESTIMATES:
nothing here runs a GPU).

``build`` emits the module of a tree (this checkout, or a commit's
``netgen/`` from git: ``old_package``) and compiles it with that tree's
compile check (PTX for sm_90, ptxas -> cubins); ``sass`` disassembles a
cubin (``cuobjdump`` from the pip wheel ``nvidia-cuda-cuobjdump``; None
without it); ``loop_costs`` finds the comparator loops of a kernel's SASS
and counts their instructions per comparator and per rank pair;
``kernel_sass`` gathers a kernel's registers and loops.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from _gpu_latency import classes, loop_latency, sweep_latency

ROOT = Path(__file__).resolve().parents[2]

_EMIT = r'''
import sys
from netgen.codegen import emit
from netgen.compiler import compile_network
from netgen.construct import build
from netgen.relax.distributions import default_relaxation
net = compile_network(build("splitter", int(sys.argv[2]), int(sys.argv[3]))).network
open(sys.argv[1], "w").write(emit("cuda", net, default_relaxation(net)))
# divisions per comparator in the swap code as that tree's kernels paste it
# (MUFU.RCP counts comparators in the SASS loops)
try:
    from netgen.codegen.swap_code import swap_code
except ImportError:  # older trees
    from netgen.codegen._swap_code import swap_code
try:
    swap = swap_code(default_relaxation(net), 0, "float32", steepness="s")
except TypeError:  # trees before the run-time steepness
    swap = swap_code(default_relaxation(net), 0, "float32")
open(sys.argv[1] + ".rcp", "w").write(str(max(1, swap.count(" / "))))
# the kernels' (name, kind) arguments, where the tree describes them (the
# model classes global loads by the array they read)
import json
try:
    from netgen.codegen.cuda.kernels import KERNELS
    args = {k.name: [list(a) for a in k.args] for k in KERNELS}
except (ImportError, AttributeError):  # trees before the Kernel objects
    args = {}
open(sys.argv[1] + ".args", "w").write(json.dumps(args))
'''
_COMPILE = r'''
import json, sys
import importlib
for where in ("netgen.codegen.cuda.compile_check", "netgen.codegen.cuda.emit", "netgen.codegen.cuda_target"):
    try:  # its file now; cuda/emit.py before that; cuda_target.py in older trees
        compile_check = importlib.import_module(where).compile_check
        break
    except ImportError:
        continue
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
    args = json.loads(Path(str(tmp) + ".args").read_text())
    return dict(json.loads((out / "compile.json").read_text()), rcp_per_comparator=rcp, kernel_args=args)


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


def loop_costs(ins, rcp_per_comp, args=None, dram=()):
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
    ranks ``unrolled``); the layer loops around it are not comparator loops.

    Each loop also gets its dependent-path latency (``_gpu_latency``; ``args``:
    the kernel's (name, kind) arguments, to class its global loads): ``lat``
    cycles per comparator iteration in the steady state (its rank loop left
    out), ``lat_pair`` per rank of a rank loop, ``sweep(its, bars)``: cycles
    of each layer of a sweep whose layers run ``its[l]`` comparator
    iterations and barriers of ``bars[l]`` cycles (the layer loop around the
    comparator loop: table offsets, bounds, the iterations; registers
    carried from layer to layer), and ``narrow``: the cycles of a layer of
    one iteration among others like it, its barrier left out. Where the
    kernel peels a layer's first comparator (``peeled``: a copy before the
    loop, its tables loaded a layer earlier) that copy is one of the
    iterations.""" 
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

    def enclosing(lp):
        """The smallest loop around ``lp`` (its layer loop), or None."""
        around = [o for o in loops if o != lp and o[0] <= lp[0] and lp[1] <= o[1]]
        return min(around, key=lambda o: o[1] - o[0]) if around else None

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
                        "skip": first_branch - lp[0] + 4, "rounds": rounds(*lp), "range": lp, "inner": [],
                        "comps": 1.0, "outer": enclosing(lp)})
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
                    "skip": first_branch - lp[0] + 4, "range": lp, "inner": top, "comps": comps,
                    "outer": enclosing(lp)})
    for lp in out:
        lp["acc"] = _accumulates(ins, *lp["range"], lp["inner"])
        # the swap code's clamps to the finite range (FMNMX with the float's
        # largest value): the kernels' tame copy drops those of d and z
        lp["clamps"] = count(*lp["range"], r"FMNMX.*3\.40282346638528859812e\+38")
    cls = classes(ins, args, dram)
    for lp in out:
        (lo, hi), comps, outer = lp["range"], lp["comps"], lp["outer"]
        lp["lat"] = loop_latency(cls, lo, hi, skip=lp["inner"]) / comps
        lp["lat_pair"] = max([loop_latency(cls, *o) / max(1.0, count(*o, r"\bLDS\b") / 2) for o in lp["inner"]],
                             default=0.0)
        if outer:
            others = [o for o in loops if o != outer and o != lp["range"] and outer[0] <= o[0] and o[1] <= outer[1]
                      and not (lo <= o[0] and o[1] <= hi)]
            # a peeled first iteration (the kernel's prefetching layers: the
            # layer's first comparator a copy of its own before the loop):
            # the layer loop holds, outside every loop in it, at least the
            # comparator loop's shared stores and divisions
            nested_all = [o for o in loops if o != outer and outer[0] <= o[0] and o[1] <= outer[1]]

            def outside(pat, outer=outer, nested_all=nested_all):
                return sum(1 for j in range(outer[0], outer[1] + 1) if re.search(pat, ins[j][1])
                           and not any(a <= j <= b for a, b in nested_all))

            lp["peeled"] = all(outside(pat) >= count(lo, hi, pat) for pat in (r"\bSTS\b", r"MUFU\.RCP")) \
                and count(lo, hi, r"\bSTS\b") > 0
            lp["sweep"] = (lambda its, bars, lp=lp, outer=outer, others=others: sweep_latency(
                cls, outer, lp["range"], [math.ceil(it / lp["comps"]) for it in its], bars, others, lp["inner"],
                lp["peeled"]))
        else:
            lp["peeled"] = False
            lp["sweep"] = lambda its, bars, lat=lp["lat"]: [it * lat + bar for it, bar in zip(its, bars)]
        # a layer of one comparator per thread, among others like it (barrier left out)
        lp["narrow"] = (lambda s: (s[3] + s[2]) / 2)([c - 120 for c in lp["sweep"]([1] * 4, [120] * 4)])
    return out



def _accumulates(ins, lo, hi, inner):
    """Whether the loop body (its nested loops left out) sums into a
    register across iterations: one written only by ``FFMA Rd, x, y, Rd`` or
    ``FADD Rd, Rd, x`` (the adjoints' dL/ds, ``acc_s``; the kernels run
    the loop once with it and once without: ``sweeps.per_flag``)."""
    writes: dict = {}
    for j in range(lo, hi + 1):
        if any(a <= j <= b for a, b in inner):
            continue
        m = re.match(r"(?:@!?P\d+\s+)?([A-Z0-9.]+)\s+(R\d+)\s*,\s*(.*)", ins[j][1])
        if not m or m.group(1).startswith(("ST", "BRA", "ISETP", "FSETP", "BAR")):
            continue
        op, dst, srcs = m.group(1), m.group(2), [s.strip() for s in m.group(3).split(",")]
        pure = (op.startswith("FFMA") and len(srcs) == 3 and srcs[2] == dst) or (
            op.startswith("FADD") and dst in srcs)
        writes.setdefault(dst, []).append(pure)
    return any(all(w) for w in writes.values())


def element_loops(ins):
    """Instructions per element of the loops outside the sweeps (leaf
    loops without the swap code's MUFU.RCP and without uint16 table loads),
    by class: ``fill`` (shared stores only: zeroing the wire arrays),
    ``load`` (global loads into shared memory: the row of x, dL/dP),
    ``store`` (shared loads to global stores: P, dL/dx). Per element: the
    loop body over its global loads (``load``, ``store``: its global
    stores) or shared stores (``fill``); the cheapest loop of a class (the
    compiler's unrolled copy; the remainder copies run a few times)."""
    addr = [a for a, _ in ins]
    idx = {a: i for i, a in enumerate(addr)}
    loops = []
    for i, (a, text) in enumerate(ins):
        m = re.search(r"\bBRA\s+(?:`?\(?)(0x[0-9a-f]+)", text)
        if m and int(m.group(1), 16) < a and int(m.group(1), 16) in idx:
            loops.append((idx[int(m.group(1), 16)], i))
    out = {}
    for lo, hi in loops:
        if any(o != (lo, hi) and lo <= o[0] and o[1] <= hi for o in loops):
            continue

        def count(pat, lo=lo, hi=hi):
            return sum(1 for j in range(lo, hi + 1) if re.search(pat, ins[j][1]))

        if count(r"MUFU\.RCP") or count(r"LDG\.E\.U16") or count(r"\bBAR\b"):
            continue
        lds, sts, ldg, stg = count(r"\bLDS\b"), count(r"\bSTS\b"), count(r"\bLDG\b"), count(r"\bSTG\b")
        cls, per = (("fill", sts) if sts and not (lds or ldg or stg) else ("load", ldg) if ldg and sts and not stg
                    else ("store", stg) if lds and stg and not sts else (None, 0))
        if cls:
            out[cls] = min(out.get(cls, 1e9), (hi - lo + 1) / per)
    return out


def kernel_sass(compile_res, name, rcp_per_comp, dram=()):
    """Per-phase SASS costs of kernel ``name`` (float32, shared variant);
    ``dram``: the arrays it reads from DRAM (the cost model's
    ``FROM_DRAM``)."""
    (k,) = [k for k in compile_res["kernels"] if k["name"] == f"_{name}_f32_s"]
    regs = re.search(r"Used (\d+) registers", k["info"] or "")
    ins = sass(k["cubin"])
    args = (compile_res.get("kernel_args") or {}).get(name)
    loops = loop_costs(ins, rcp_per_comp, args, dram) if ins else []
    return {"regs": int(regs.group(1)) if regs else 64, "loops": loops, "sass": bool(ins),
            "instructions": len(ins) if ins else None, "elements": element_loops(ins) if ins else {}}
