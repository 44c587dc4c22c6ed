"""``--target cuda``: emit a module of Numba CUDA kernels.

Same semantics, pieces and module contract as the numba CPU target
(:mod:`netgen.codegen.numba_target`), laid out for a GPU. The generated
module is assembled from three parts, one file each:

* :mod:`netgen.codegen._cuda_kernels`: the kernel sources (one thread block
  per batch row; the row's wires in shared memory when they fit the 48 KB
  static limit, else a global scratch row; bad rows flagged on the GPU);
* :mod:`netgen.codegen._cuda_runtime`: the launcher (cached ``cuda.core``
  kernel handles, Numba's kernel ABI filled from torch tensors, torch's
  current stream) and the ``torch.library`` custom ops and ``Layer``;
* this file: the header (network, relaxation, tables, the numpy-2.5 shim)
  and :func:`emit`, plus :func:`compile_check`, which compiles every kernel
  to PTX for a given compute capability and assembles it to a cubin in a
  separate process (no GPU needed).

The module imports without a GPU; using the Layer there raises a
RuntimeError saying a CUDA device is needed. No eager signatures
(``@cuda.jit`` with a signature needs a driver) and no device helper
functions (the distribution is pasted into each kernel).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from ..network import Network
from ._cuda_kernels import KERNEL_ARGS, KERNELS, STORE_R, WIRE_ARRAYS, alloc, split_kernels
from ._cuda_runtime import RUNTIME
from ._numba_common import (
    FLOAT_TYPES,
    lit,
    network_literal,
    plan_source,
    relaxation_literal,
    relaxation_of,
    swap_code,
)

TARGET = "cuda"

#: the most dynamic shared memory a block may ask for: 227 KB, Hopper's
#: opt-in limit (the launcher also caps it by the device's own limit)
SHARED_LIMIT = 227 * 1024
THREADS = 256


def emit(net: Network, r: Any = None, *, shared_limit: int = SHARED_LIMIT, threads: int = THREADS) -> str:
    """Full source of the generated CUDA module; deterministic.
    ``shared_limit``: the most dynamic shared memory (bytes) a block may ask
    for; a kernel whose wire arrays fit gets a shared-memory variant besides
    its global-scratch one (the launcher also respects the device's limit).
    ``threads`` is the block size."""
    if not isinstance(net, Network):
        raise ValueError(f"expected a Network, got {type(net).__name__}")
    r = relaxation_of(net, r)
    kernels, table = [], []
    for ft in FLOAT_TYPES:
        size = 4 if ft == "float32" else 8
        for src in split_kernels(KERNELS):
            name = src.split("def _", 1)[1].split("@@SFX@@", 1)[0]
            fits = WIRE_ARRAYS[name] * net.n * size <= shared_limit
            for variant in ("global", "shared") if fits else ("global",):
                sfx = f"_f{size * 8}_{variant[0]}"
                src_v = re.sub(r"@@ALLOC ([\w ]+) FROM (\w+)@@",
                               lambda m: alloc(m.group(1).split(), m.group(2), variant == "shared", ft), src)
                kernels.append(_fill(src_v, {
                    "@@STORE_R@@": STORE_R[variant == "shared"],
                    "@@SFX@@": sfx,
                    "@@ONE@@": lit(1.0, ft),
                    "@@ZERO@@": lit(0.0, ft),
                    "@@NAN@@": "np.float32(math.nan)" if ft == "float32" else "math.nan",
                    "@@SWAP12@@": swap_code(r, 12, ft),
                    "@@SWAP16@@": swap_code(r, 16, ft),
                }).rstrip() + "\n")
                table.append(f"    (np.dtype(np.{ft}), {name!r}, {variant!r}): _{name}{sfx},")
    body = _fill(RUNTIME, {"@@OPS@@": _ops_namespace(net, r)})
    return _fill(_HEADER, {
        "@@DOC@@": _doc(net, r),
        "@@NETWORK@@": network_literal(net),
        "@@RELAXATION@@": relaxation_literal(r),
        "@@PLAN@@": plan_source().rstrip(),
        "@@THREADS@@": str(int(threads)),
        "@@SHARED_LIMIT@@": str(int(shared_limit)),
        "@@WIRE_ARRAYS@@": f"WIRE_ARRAYS = {WIRE_ARRAYS!r}",
        "@@KERNEL_ARGS@@": "KERNEL_ARGS = {\n" + "".join(f"    {k!r}: {v!r},\n" for k, v in KERNEL_ARGS.items()) + "}",
        "@@KERNELS@@": "\n\n".join(kernels).rstrip(),
        "@@KERNEL_TABLE@@": "KERNELS = {\n" + "\n".join(table) + "\n}",
    }) + body


def _fill(template: str, subs: dict) -> str:
    for key, val in subs.items():
        template = template.replace(key, val)
    return template


def _ops_namespace(net: Network, r) -> str:
    """``netgen_cuda_<hash>``: the torch.library namespace of the module's
    ops, one per (network, relaxation, kernel code)."""
    h = hashlib.sha256()
    for part in (network_literal(net), relaxation_literal(r), KERNELS, RUNTIME):
        h.update(part.encode())
    return f"netgen_cuda_{h.hexdigest()[:12]}"


def _doc(net: Network, r) -> str:
    kind = net.construction.get("kind", "custom")
    return (
        f'"""netgen generated module (target cuda): {kind} network, n={net.n}, k={net.k}, '
        f"depth={net.depth}, size={net.size};\n"
        f"relaxation {r.distribution}, steepness={r.steepness!r}, art_lambda={r.art_lambda!r}, "
        f"art_epsilon={r.art_epsilon!r}.\n\n"
        "Generated code: do not edit. Rebuild with `netgen build ... --target cuda`.\n"
        "Numba CUDA kernels, one block per batch row, launched on torch's current stream through\n"
        "torch.library custom ops (torch.compile and CUDA graphs see single ops). Importing needs\n"
        "no GPU; using Layer does. Rows of x with NaN/inf (or y out of range) give NaN in that row.\n"
        "Layer().forward(x) -> (values (..., k), P (..., k, n)); Layer().column(x, y) -> P[..., :, y];\n"
        'Layer().hard(x) -> exact (values, indices).\n"""'
    )


# ---------------------------------------------------------------- compile check
def compile_check(path_or_source, cc=(9, 0), out_dir=None, timeout=600, jobs=None) -> dict:
    """Compile every kernel of a generated CUDA module to PTX for compute
    capability ``cc`` and assemble it to a cubin (``ptxas -arch=sm_XY``, found
    without a system toolkit: see :func:`netgen.codegen._cuda_compile._ptxas`;
    or nvJitLink via cuda.core where that loads), in separate processes (a
    process is either simulating CUDA or compiling, never both; ``jobs``
    processes, default min(2, CPUs), share the kernels). No GPU is needed.
    ``path_or_source``: a path (str or PathLike) of a module, or its source
    text (a str with a newline). Returns ``{"summary" (one line), "cc",
    "assembler" (None when no assembler was found), "skipped" (why the
    cubins were not assembled, else ""), "out_dir", "seconds", "kernels":
    [{"name", "ptx_bytes", "cubin_bytes", "ptx", "cubin", "info"}]}``; raises
    RuntimeError with the compiler's message on failure.

    Interrupt-safe: on Ctrl-C, SIGTERM (turned into ``SystemExit(143)`` while
    the check runs in the main thread) or a timeout the workers are killed
    and waited for, and the ``netgen_cuda_*`` scratch folder is removed
    before the exception propagates; workers exit on their own when this
    process dies."""
    from ._cuda_compile import _ptxas, terminate_raises

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
        results, seconds = _compile_all(p, out, cc, jobs, timeout, ptxas)
    kernels = sorted((k for r in results for k in r["kernels"]), key=lambda k: k["index"])
    skipped = next((r["skipped"] for r in results if r.get("skipped")), "")
    assembler = None if skipped else results[0]["assembler"]
    ptx = f"{len(kernels)} kernels -> PTX for sm_{cc[0]}{cc[1]} ({sum(k['ptx_bytes'] for k in kernels) / 1024:.0f} KB)"
    if skipped:
        from ._cuda_compile import HINT

        summary = f"{ptx} in {seconds} s; cubin assembly skipped: {skipped}; to get it: {HINT}"
    else:
        summary = (f"{ptx} -> cubin ({sum(k['cubin_bytes'] for k in kernels) / 1024:.0f} KB) in {seconds} s, "
                   f"assembled by {assembler}")
    summary += f"; files in {out}" if out_dir is not None else ""
    return {
        "summary": summary,
        "cc": list(cc),
        "assembler": assembler,
        "skipped": skipped,
        "out_dir": str(out) if out_dir is not None else None,
        "seconds": seconds,
        "kernels": kernels,
    }


def _compile_all(p: Path, out: Path, cc, jobs, timeout, ptxas=None) -> tuple[list, float]:
    """Run the compile worker (netgen.codegen._cuda_compile, or the module
    named by NETGEN_CUDA_COMPILE_WORKER) in ``jobs`` processes sharing the
    kernels; RuntimeError with the compiler's message on failure. Whatever
    ends this call (failure, timeout, KeyboardInterrupt, SystemExit), no
    worker is left running."""
    import time

    from ._cuda_compile import ENV_PTXAS, ENV_WORKER

    env = dict(os.environ)
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    env[ENV_PTXAS] = ptxas or "none"
    worker = os.environ.get(ENV_WORKER) or "netgen.codegen._cuda_compile"
    jobs = max(1, int(jobs if jobs is not None else min(2, os.cpu_count() or 1)))
    t0 = time.perf_counter()
    deadline = t0 + timeout
    procs: list[subprocess.Popen] = []
    try:
        for j in range(jobs):
            procs.append(subprocess.Popen(
                [sys.executable, "-m", worker, str(p), str(out), f"{cc[0]}.{cc[1]}", f"{j}/{jobs}"],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                stdin=subprocess.DEVNULL,
                text=True,
                env=env,
            ))
        results, errors = [], []
        for proc in procs:
            try:
                so, se = proc.communicate(timeout=max(0.1, deadline - time.perf_counter()))
            except subprocess.TimeoutExpired:
                errors.append(f"timed out after {timeout} s")
                break
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
                proc.communicate(timeout=30)
            except (subprocess.TimeoutExpired, ValueError, OSError):
                pass


def _looks_like_source(v) -> bool:
    """A str with a newline is module source (a module always has several
    lines); anything else (a path, a str without a newline) names a file."""
    return isinstance(v, str) and "\n" in v


_HEADER = '''@@DOC@@

import math
import os

import numpy as np

# numba-cuda 0.30.4 registers an overload of np.row_stack when it first
# compiles a kernel; numpy 2.5 removed that alias of np.vstack.
if not hasattr(np, "row_stack"):
    np.row_stack = np.vstack

import numba  # noqa: E402
import torch  # noqa: E402
from numba import cuda  # noqa: E402

TARGET = "cuda"

@@NETWORK@@

@@RELAXATION@@


@@PLAN@@
#: host copies of the tables the kernels read (uploaded once per device)
TABLES = {
    "ca": np.ascontiguousarray(_COMPS[:, 0]),
    "cb": np.ascontiguousarray(_COMPS[:, 1]),
    "offs": _OFFSETS,
    "outs": _OUTPUTS,
    "clo": _CLO,
    "chi": _CHI,
    "doff": _DOFF,
}
THREADS = @@THREADS@@
#: dynamic shared memory a block may ask for (bytes; also capped by the device)
SHARED_LIMIT = @@SHARED_LIMIT@@
#: wire arrays of n floats each kernel keeps per block (in shared memory or
#: in a global scratch row)
@@WIRE_ARRAYS@@
#: argument kinds of each kernel: f2 float matrix, i1 int64 vector, b1 int32
#: vector, bool a flag (see _numba_types)
@@KERNEL_ARGS@@


@@KERNELS@@


#: (dtype, kernel, variant) -> kernel; variant "shared" (wire arrays in
#: dynamic shared memory) exists where they fit SHARED_LIMIT, "global" always
@@KERNEL_TABLE@@
'''
