"""``--target cuda``: emit a module of Numba CUDA kernels.

Same semantics and module contract as the numba CPU target
(:mod:`netgen.codegen.numba.emit`), laid out for a GPU. The generated
module is assembled from:

* :mod:`netgen.codegen.cuda.kernels`: the kernel sources (one thread block
  per batch row; all lanes of the row's P sweep in that block -- the k
  ranks of the back-sweep, or for sorters the n input columns of the
  forward sweep, the numba target's rule; the
  block's wire arrays -- m n floats for the rows with P, n for values only,
  2 n for the column -- in dynamic shared memory up to the device's opt-in
  limit, 227 KB on Hopper, else in a global scratch row; bad rows flagged on
  the GPU);
* real, tested modules copied by source extraction
  (:func:`netgen.codegen.runtime.assemble`, :func:`~netgen.codegen.runtime.statements`):
  :mod:`netgen.codegen.cuda.driver` (shared-memory limits, opt-in, block
  sizes, the driver check), :mod:`~netgen.codegen.cuda.packing` (Numba's
  kernel ABI packed from torch tensors), :mod:`~netgen.codegen.cuda.launch`
  (host tables, cached ``cuda.core`` kernel handles, launch records,
  torch's current stream), :mod:`~netgen.codegen.cuda.batch` (batch chunks),
  :mod:`~netgen.codegen.cuda.ops` (the ``torch.library`` custom ops
  and their autograd), :mod:`~netgen.codegen.cuda.layer` (the
  once-per-process self-check of the launch packing against Numba's
  dispatcher, ``Layer``) and :mod:`~netgen.codegen.runtime.common` (checks,
  the steepness rule, the second-order and torch.func refusals, ``hard``);
* this file: the header (network, relaxation, the plan, the numpy-2.5
  shim), the constants of a build (block sizes, shared-memory limit,
  whether D is kept, the op namespace) written as literals, and :func:`emit`, plus
  :func:`compile_check`, which compiles every kernel to PTX for a given
  compute capability and assembles it to a cubin in a separate process (no
  GPU needed).

What the rows path keeps for its backward: the comparators' differences d
and swap probabilities p (B x size each) and, in the plan's mode ``save``
(:mod:`netgen.codegen.plan`; this target's budget in
:mod:`netgen.codegen.cuda`), the P sweep's row differences D (B x nnz);
otherwise (sorting) nothing more: the backward recomputes the P sweep into
a scratch D, the batch processed in chunks that fit a working budget. The backward reads p; dp/dd and dp/ds are
recomputed from d (one division, no arctangent).

The module imports without a GPU; using the Layer there raises a
RuntimeError saying a CUDA device is needed. No eager signatures
(``@cuda.jit`` with a signature needs a driver) and no device helper
functions (the distribution is pasted into each kernel). Every value from
the network or the user reaches the module as a literal (``repr``/JSON),
the docstring included; the module is written with the ``Lines`` builder
and a ``Namespace`` of literals, no template is filled.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from ...network import Network
from ..header import FLOAT_TYPES, network_literal, relaxation_literal, swap_code, write_top
from ..lines import Lines
from ..literals import Namespace, literal, top_level_definitions
from ..plan import Plan
from .kernels import KERNEL_ARGS, kernels_source

TARGET = "cuda"


def emit(net: Network, r, plan: Plan, options) -> str:
    """Full source of the generated CUDA module for ``net`` relaxed by
    ``r``, with the P engine's plan (its direction; mode ``save`` keeps D
    from the forward, written as ``SAVE_D``) and ``options``
    (:class:`netgen.codegen.cuda.CudaOptions`: block sizes, the
    shared-memory limit); deterministic."""
    direction = plan.direction
    if plan.nnz >= 2**32 or net.size >= 2**32:
        raise ValueError(f"network too large for the cuda target: {plan.nnz} (comparator, lane) pairs "
                         "(32-bit offsets)")
    lanes = net.n if direction == "forward" else net.k
    if options.lane_groups is False and lanes * net.n >= 2**32:
        # the rows kernels index a row's P state (lanes x n floats) with 32-bit counters; the lane
        # groups split it (each block's state is G x n)
        raise ValueError(f"lane_groups=False needs {lanes} x {net.n} < 2^32 (the rows kernels' 32-bit state index); "
                         "leave lane_groups at None or True")
    from ..plan import sweep_ranges
    from ..runtime import common
    from .layout import WARP, d_stride

    clo, chi, _ = sweep_ranges(net, direction)
    # where the rows kernels keep D (layout.d_slots): a literal of the kernels and the module
    stride = {"windows": WARP, "csr": 1}.get(options.d_layout) or d_stride(clo, chi, net.layer_offsets)
    kernel_args, kernels, table = kernels_source(
        net.n, net.k, options.shared_limit, {ft: swap_code(r, 0, ft, steepness="s") for ft in FLOAT_TYPES},
        direction == "forward", options.lane_groups, dstride=stride,
        tame_swaps={ft: swap_code(r, 0, ft, steepness="s", tame=True) for ft in FLOAT_TYPES})
    names = Namespace()
    L = Lines()
    L(repr(_doc(net, r)))
    L.blank()
    L("import hashlib", "import json", "import logging", "import math", "import os", "import re", "import sys",
      "import tempfile", "import time", "", "import numpy as np", "import torch", "")
    write_top(L, names, TARGET, net, r, (common.refuse_transforms, common.check_input, common.check_labels,
                                           common._SecondOrder, common.refuse_second_order), direction)
    L.blank(2)
    L(_deferred_source(names))
    L.blank(2)
    L("#: argument kinds of each kernel: f1/f2 float arrays, w1 wire vector",
      "#: (WIRE_DTYPE), u1 uint32, i1 int64, b1 int32 vectors, bool a flag")
    names.define("KERNEL_ARGS")
    L(kernel_args)
    L.blank(2)
    for name, _ in top_level_definitions(ast.parse(kernels)):
        names.define(name)
    L(kernels)
    L.blank(2)
    L('#: (dtype, kernel, variant) -> kernel; variant "shared" (wire arrays in',
      "#: dynamic shared memory) exists where n floats (2 n for the column) fit",
      '#: SHARED_LIMIT, "global" always')
    names.define("KERNELS")
    L(table)
    L.blank(2)
    constants = {"THREADS": int(options.threads), "BIG_THREADS": int(options.big_threads),
                 "SHARED_LIMIT": int(options.shared_limit), "SAVE_D": plan.mode == "save", "D_STRIDE": stride}
    constants["OPS_NAMESPACE"] = _ops_namespace(net, r, kernels, direction, constants)
    L(_lanes_source(r, names))
    L.blank(2)
    L(runtime_source(constants, names))
    source = L.render()
    from ..runtime import check_interface, tables
    from ..runtime import lanes as torch_lanes
    from . import deferred

    check_interface(source, names, (common, tables, deferred, torch_lanes, *(m for m, _, _ in _runtime_parts())),
                    "generated cuda module")
    return source


def _lanes_source(r, names: Namespace) -> str:
    """The lane sweeps ``W P`` and ``P V`` (the Layer's ``_back``/``_fwd``):
    for now the torch target's sweeps (:mod:`netgen.codegen.runtime.lanes`,
    torch ops on the device, O(size) floats per lane and row) with its
    rendered ``_swap``; no kernel of their own yet."""
    from ..runtime import assemble
    from ..runtime import lanes as torch_lanes
    from ..swap_code import torch_swap_lines

    L = Lines()
    L("# the lane sweeps W P and P V: torch ops on the device (netgen.codegen.runtime.lanes)")
    names.define("_DEPTH")
    L("_DEPTH = len(_OFFSETS) - 1")
    L.blank(2)
    names.define("_swap")
    L(*torch_swap_lines(r))
    L.blank(2)
    L(assemble(torch_lanes.PARTS, names))
    return L.render().rstrip("\n")


def _deferred_source(names: Namespace) -> str:
    """numba-cuda imported on first need (:mod:`netgen.codegen.cuda.deferred`):
    its stand-in ``cuda`` decorates the kernels, so it comes before them."""
    from ..runtime import assemble, statements
    from . import deferred

    return assemble(deferred.PARTS, names) + "\n\n\n" + statements(deferred, deferred.STATE, names)


# ---------------------------------------------------------------- runtime assembly
#: comments above the build's constants in a generated module
_CONSTANT_DOCS = {
    "THREADS": "threads per block (launches whose shared memory leaves many blocks per SM)",
    "BIG_THREADS": "the most threads per block of a launch whose shared memory leaves few blocks per SM "
                   "(see _block), capped by the kernel's limit",
    "SHARED_LIMIT": "dynamic shared memory a block may ask for (bytes; also capped by the device)",
    "SAVE_D": "the forward keeps D (B x _DLEN) for the backward (the plan's mode save), else the backward "
              "recomputes the P sweep",
    "D_STRIDE": "where the rows kernels keep D: lane l of comparator i at dix[i] + l D_STRIDE (32: a warp's "
                "comparators keep a lane as 32 consecutive floats; 1: the plan's CSR)",
    "OPS_NAMESPACE": "the torch.library namespace of this module's ops",
}


def _runtime_parts():
    """The runtime modules a cuda module copies, as (module, state names,
    functions): the launcher, the ahead-of-time kernel loader, the ops, the
    Layer base, the layer."""
    from ..runtime import layer as base
    from . import batch, cubin, driver, group_ops, lane_ops, launch, layer, layout, ops, packing

    return ((layout, layout.STATE, layout.PARTS), (driver, driver.STATE, driver.PARTS),
            (packing, packing.STATE, packing.PARTS), (launch, launch.STATE, launch.PARTS),
            (batch, batch.STATE, batch.PARTS), (cubin, cubin.STATE, cubin.PARTS),
            (group_ops, group_ops.STATE, group_ops.PARTS), (ops, (), ops.PARTS),
            (lane_ops, lane_ops.STATE, lane_ops.PARTS), (base, (), base.PARTS), (layer, layer.STATE, layer.PARTS))


def _runtime_code(names: Namespace) -> str:
    """The copied runtime: every part's functions, then the module-level
    state (which may call them), then the ops' registration."""
    from ..runtime import assemble, statements

    parts = _runtime_parts()
    L = Lines()
    for _, _, functions in parts:
        L(assemble(functions, names))
        L.blank(2)
    for module, state, _ in parts:
        if state:
            L(statements(module, state, names))
            L.blank(2)
    L("_register()")
    return L.render()


def runtime_source(constants: dict, names: Namespace | None = None) -> str:
    """The constants of a build (as literals) and the copied runtime, for a
    module whose first part (kernels, tables) defines the rest; every
    top-level name is claimed in ``names`` (the module's Namespace, which
    already holds that first part's names)."""
    names = Namespace() if names is None else names
    L = Lines()
    for name, value in constants.items():
        L(f"#: {_CONSTANT_DOCS[name]}")
        L(f"{names.define(name)} = {literal(value)}")
    L.blank(2)
    L(_runtime_code(names))
    return L.render()


def _ops_namespace(net: Network, r, kernels: str, direction: str, constants: dict) -> str:
    """``netgen_cuda_<hash>``: the torch.library namespace of the module's
    ops, one per (network, relaxation, kernel code, P sweep direction,
    build constants): two modules that differ in any of them register
    different ops (ops are global to the process: a shared namespace would
    run the first module's launcher for both)."""
    h = hashlib.sha256()
    for part in (network_literal(net), relaxation_literal(r), repr(KERNEL_ARGS), _runtime_code(Namespace()),
                 kernels, direction, repr(sorted(constants.items()))):
        h.update(part.encode())
    return f"netgen_cuda_{h.hexdigest()[:12]}"


def _doc(net: Network, r) -> str:
    """The module docstring's text (the caller renders it with ``repr``)."""
    kind = net.construction.get("kind", "custom")
    return (
        f"netgen generated module (target cuda): {kind} network, n={net.n}, k={net.k}, "
        f"depth={net.depth}, size={net.size};\n"
        f"relaxation {r.distribution}, steepness={r.steepness!r} (default; Layer(steepness=...) and "
        f"layer.steepness override it at run time), art_lambda={r.art_lambda!r}, "
        f"art_epsilon={r.art_epsilon!r}.\n\n"
        "Generated code: do not edit. Rebuild with `netgen build ... --target cuda`.\n"
        "Numba CUDA kernels, one block per batch row, launched on torch's current stream through\n"
        "torch.library custom ops (torch.compile and CUDA graphs see single ops). Importing needs\n"
        "no GPU; using Layer does. Rows of x with NaN/inf, or whose steepness * (max - min) overflows\n"
        "(or y out of range) give NaN in that row.\n"
        "Layer().forward(x) -> (values (..., k), P (..., k, n)); Layer().values(x) -> values only;\n"
        "Layer().column(x, y) -> P[..., :, y]; Layer().hard(x) -> exact (values, indices).\n"
        "Once differentiable: second-order gradients and torch.func transforms are refused."
    )


# ---------------------------------------------------------------- compile check
def compile_check(path_or_source, cc=(9, 0), out_dir=None, timeout=600, jobs=None, archs=None, progress=None) -> dict:
    """Compile every kernel of a generated CUDA module to PTX for compute
    capability ``cc`` and assemble it to a cubin (``ptxas -arch=sm_XY``, found
    without a system toolkit: see :func:`netgen.codegen.cuda.compile._ptxas`;
    or nvJitLink via cuda.core where that loads), in separate processes (a
    process is either simulating CUDA or compiling, never both; ``jobs``
    processes, default :func:`default_jobs`, share the kernels). No GPU is
    needed. ``progress(done, total, what)`` (optional) is called as each
    kernel's PTX and each (arch, kernel) cubin is done (a progress bar's
    hook: the PTX phase, then one phase per arch).
    ``path_or_source``: a path (str or PathLike) of a module, or its source
    text (a str with a newline). ``archs``: assemble the one PTX for each of
    these (``["sm_80", "sm_90"]``; default ``sm_<cc>``; a PTX assembles for
    any arch at or above its ``cc``). Returns ``{"summary" (one line), "cc", "archs",
    "assembler" (None when no assembler was found), "skipped" (why the
    cubins were not assembled, else ""), "out_dir", "seconds", "kernels":
    [{"name", "entry" (the PTX entry name), "params" (its parameter types),
    "ptx_bytes", "cubin_bytes", "ptx", "cubin" (the first arch's), "cubins"
    ({arch: path}), "info"}]}``; raises
    RuntimeError with the compiler's message on failure.

    Interrupt-safe: on Ctrl-C, SIGTERM (turned into ``SystemExit(143)`` while
    the check runs in the main thread) or a timeout the workers are killed
    and waited for, and the ``netgen_cuda_*`` scratch folder is removed
    before the exception propagates; workers exit on their own when this
    process dies."""
    from .compile import _ptxas, terminate_raises

    cc = tuple(int(c) for c in cc)
    if len(cc) != 2:
        raise ValueError(f"cc must be (major, minor), got {cc!r}")
    ptxas = _ptxas()  # ValueError for a bad NETGEN_PTXAS, before any work
    with terminate_raises(), tempfile.TemporaryDirectory(prefix="netgen_cuda_") as scratch:
        if _looks_like_source(path_or_source):
            p = Path(scratch) / "netgen_cuda_module.py"
            p.write_text(str(path_or_source), encoding="utf-8")
        else:
            p = Path(os.fspath(path_or_source))
            if not p.is_file():
                raise ValueError(f"no such generated module: {str(p)!r}")
        # PTX and cubins are kept only where out_dir asks for them
        out = Path(out_dir) if out_dir is not None else Path(scratch) / "ptx"
        out.mkdir(parents=True, exist_ok=True)
        archs = [str(a) for a in archs] if archs else [f"sm_{cc[0]}{cc[1]}"]
        results, seconds = _compile_all(p, out, cc, jobs, timeout, ptxas, archs, progress)
    kernels = sorted((k for r in results for k in r["kernels"]), key=lambda k: k["index"])
    skipped = next((r["skipped"] for r in results if r.get("skipped")), "")
    assembler = None if skipped else results[0]["assembler"]
    ptx = f"{len(kernels)} kernels -> PTX for sm_{cc[0]}{cc[1]} ({sum(k['ptx_bytes'] for k in kernels) / 1024:.0f} KB)"
    on = "" if archs == [f"sm_{cc[0]}{cc[1]}"] else f" for {', '.join(archs)}"
    if skipped:
        from .compile import HINT

        summary = f"{ptx} in {seconds} s; cubin assembly skipped: {skipped}; to get it: {HINT}"
    else:
        size = f"{sum(k['cubin_bytes'] for k in kernels) / 1024:.0f} KB" + (" per arch" if on else "")
        summary = (f"{ptx} -> cubin{on} ({size}) in {seconds} s, "
                   f"assembled by {assembler}")
    summary += f"; files in {out}" if out_dir is not None else ""
    return {
        "summary": summary,
        "cc": list(cc),
        "archs": archs,
        "assembler": assembler,
        "skipped": skipped,
        "out_dir": str(out) if out_dir is not None else None,
        "seconds": seconds,
        "kernels": kernels,
    }


def default_jobs() -> int:
    """Compile processes by default: one per available CPU, at most 4 (each
    holds numba-cuda and the module, ~0.5 GB; the 16 kernels of a module
    split 4 ways leave the start-up a small part of each process's time)."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        cpus = os.cpu_count() or 1
    return max(1, min(4, cpus))


def _compile_all(p: Path, out: Path, cc, jobs, timeout, ptxas=None, archs=None, progress=None) -> tuple[list, float]:
    """Run the compile worker (netgen.codegen.cuda.compile, or the module
    named by NETGEN_CUDA_COMPILE_WORKER) in ``jobs`` processes sharing the
    kernels; RuntimeError with the compiler's message on failure. Whatever
    ends this call (failure, timeout, KeyboardInterrupt, SystemExit), no
    worker is left running. ``progress(done, total, what)`` follows the
    workers' progress lines (PTX per kernel, then each arch's cubins)."""
    import threading
    import time

    from .compile import ENV_PTXAS, ENV_WORKER, PROGRESS

    env = dict(os.environ)
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    env[ENV_PTXAS] = ptxas or "none"
    worker = os.environ.get(ENV_WORKER) or "netgen.codegen.cuda.compile"
    jobs = max(1, int(jobs if jobs is not None else default_jobs()))
    t0 = time.perf_counter()
    deadline = t0 + timeout
    procs: list[subprocess.Popen] = []
    lock = threading.Lock()
    totals, counts = {}, {"done": 0}

    def follow(j, stream, keep):
        for line in stream:
            if not line.startswith(PROGRESS):
                keep.append(line)
                continue
            try:
                event = json.loads(line[len(PROGRESS):])
            except ValueError:
                continue
            with lock:
                if "total" in event:
                    totals[j] = int(event["total"])
                counts["done"] += int(event.get("done", 0))
                # until every worker has said how many steps it has, count the others like the ones heard
                total = round(sum(totals.values()) * jobs / len(totals)) if totals else 0
                done = counts["done"]
            if progress is not None and total:
                progress(min(done, total), total, str(event.get("what", "")))

    readers, outs, errs = [], [], []
    try:
        for j in range(jobs):
            procs.append(subprocess.Popen(
                [sys.executable, "-m", worker, str(p), str(out), f"{cc[0]}.{cc[1]}", f"{j}/{jobs}",
                 ",".join(archs or [f"sm_{cc[0]}{cc[1]}"])],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                stdin=subprocess.DEVNULL,
                text=True,
                env=env,
            ))
            outs.append([])
            errs.append([])
            for stream, keep in ((procs[-1].stdout, outs[-1]), (procs[-1].stderr, errs[-1])):
                readers.append(threading.Thread(target=follow, args=(j, stream, keep), daemon=True))
                readers[-1].start()
        results, errors = [], []
        for j, proc in enumerate(procs):
            try:
                proc.wait(timeout=max(0.1, deadline - time.perf_counter()))
            except subprocess.TimeoutExpired:
                errors.append(f"timed out after {timeout} s")
                break
            for r in readers[2 * j: 2 * j + 2]:
                r.join(timeout=30)
            so, se = "".join(outs[j]), "".join(errs[j])
            if proc.returncode != 0:
                errors.append(se.strip()[-4000:])
            else:
                try:
                    results.append(json.loads(so.strip().splitlines()[-1]))
                except (ValueError, IndexError):
                    errors.append(f"the compile worker printed no result: {so.strip()[-200:]!r} {se.strip()[-2000:]}")
        if errors:
            raise RuntimeError("CUDA compile check failed:\n" + "\n".join(errors))
        return results, round(time.perf_counter() - t0, 2)
    finally:
        for proc in procs:  # no-op for the ones that finished
            if proc.poll() is None:
                proc.kill()
        for proc in procs:
            try:
                proc.wait(timeout=30)
            except (subprocess.TimeoutExpired, OSError):
                pass
        for r in readers:
            r.join(timeout=5)


def _looks_like_source(v) -> bool:
    """A str with a newline is module source (a module always has several
    lines); anything else (a path, a str without a newline) names a file."""
    return isinstance(v, str) and "\n" in v

