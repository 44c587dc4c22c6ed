"""``--target cuda``: emit a module of Numba CUDA kernels.

Same semantics, pieces and module contract as the numba CPU target
(:mod:`netgen.codegen.numba_target`); the kernels are laid out for a GPU:

* one thread block per batch row, threads striding over the comparators of
  a layer, ``cuda.syncthreads()`` after each layer (comparators of a layer
  touch distinct wires, so a layer is race-free);
* the row's wires (and the column's unit vector / adjoints) in shared
  memory when they fit the 48 KB static limit (n = 10450 float32 values:
  41.8 KB), otherwise in a global scratch row (float64 at n = 10450);
* the comparator table, layer offsets, outputs and the build-time plan
  (per-comparator P-row ranges, as on CPU) as device arrays, uploaded once
  per device;
* kernels: ``_fwd_vals`` (values, saved p / d / dp), ``_fwd_P`` (P rows by
  the back-sweep, saved row differences), ``_bwd_P`` (adjoint of the
  back-sweep -> dL/dp), ``_bwd_vals`` (adjoint of the values sweep),
  ``_fwd_col`` / ``_bwd_col`` (P[:, y] by the forward sweep and its
  adjoint), each in a float32 and a float64 variant;
* no eager signatures (``@cuda.jit`` with a signature needs a driver) and no
  device helper functions (the distribution is pasted into each kernel).

Torch CUDA tensors are passed zero-copy (``cuda.as_cuda_array(t.detach())``)
and kernels run on torch's current stream. The module imports without a
GPU; using the Layer there raises a RuntimeError saying a CUDA device is
needed. :func:`compile_check` compiles every kernel to PTX for a given
compute capability and assembles it to a cubin in a separate process
(no GPU needed).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from ..network import Network
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

#: static shared memory a block may use (CUDA's limit without opt-in)
SHARED_LIMIT = 48 * 1024
THREADS = 256


def emit(net: Network, r: Any = None, *, shared_limit: int = SHARED_LIMIT, threads: int = THREADS) -> str:
    """Full source of the generated CUDA module; deterministic.
    ``shared_limit`` (bytes of static shared memory per block) decides which
    wire arrays live in shared memory; ``threads`` is the block size."""
    if not isinstance(net, Network):
        raise ValueError(f"expected a Network, got {type(net).__name__}")
    r = relaxation_of(net, r)
    kernels = []
    scratch: dict = {}
    for ft in FLOAT_TYPES:
        size = 4 if ft == "float32" else 8
        k = _KERNELS
        subs = {
            "@@SFX@@": "_f32" if ft == "float32" else "_f64",
            "@@ONE@@": lit(1.0, ft),
            "@@ZERO@@": lit(0.0, ft),
            "@@SWAP12@@": swap_code(r, 12, ft),
        }
        # wire arrays: shared memory while they fit, else a global scratch row
        for kern, names in (("vals", ("v",)), ("col", ("v", "u"))):
            used = 0
            for j, nm in enumerate(names):
                if used + net.n * size <= shared_limit:
                    used += net.n * size
                    code = f"{nm} = cuda.shared.array({net.n}, dtype=np.{ft})"
                    scratch[(ft, kern, j)] = False
                else:
                    code = f"{nm} = scratch{j}[b]"
                    scratch[(ft, kern, j)] = True
                subs[f"@@ALLOC_{kern.upper()}_{nm.upper()}@@"] = code
        for key, val in subs.items():
            k = k.replace(key, val)
        kernels.append(k)
    src = _TEMPLATE
    for key, val in {
        "@@DOC@@": _doc(net, r),
        "@@NETWORK@@": network_literal(net),
        "@@RELAXATION@@": relaxation_literal(r),
        "@@PLAN@@": plan_source().rstrip(),
        "@@THREADS@@": str(int(threads)),
        "@@KERNELS@@": "\n\n".join(kernels),
        "@@SCRATCH@@": "GLOBAL_SCRATCH = {\n"
        + "".join(f"    {key!r}: {val!r},\n" for key, val in sorted(scratch.items()))
        + "}",
    }.items():
        src = src.replace(key, val)
    return src


def _doc(net: Network, r) -> str:
    kind = net.construction.get("kind", "custom")
    return (
        f'"""netgen generated module (target cuda): {kind} network, n={net.n}, k={net.k}, '
        f"depth={net.depth}, size={net.size};\n"
        f"relaxation {r.distribution}, steepness={r.steepness!r}, art_lambda={r.art_lambda!r}, "
        f"art_epsilon={r.art_epsilon!r}.\n\n"
        "Generated code: do not edit. Rebuild with `netgen build ... --target cuda`.\n"
        "Numba CUDA kernels, one block per batch row; torch CUDA tensors are passed zero-copy and\n"
        "kernels run on torch's current stream. Importing needs no GPU; using Layer does.\n"
        "Layer().forward(x) -> (values (..., k), P (..., k, n)); Layer().column(x, y) -> P[..., :, y];\n"
        'Layer().hard(x) -> exact (values, indices).\n"""'
    )


# ---------------------------------------------------------------- compile check
def compile_check(path_or_source, cc=(9, 0), out_dir=None, timeout=600, jobs=None) -> dict:
    """Compile every kernel of a generated CUDA module to PTX for compute
    capability ``cc`` and assemble it to a cubin (``ptxas -arch=sm_XY``, or
    nvJitLink via cuda.core when ptxas is missing), in separate processes
    (a process is either simulating CUDA or compiling, never both; ``jobs``
    processes, default min(2, CPUs), share the kernels). No GPU is needed.
    Returns ``{"summary" (one line), "cc", "assembler", "out_dir", "seconds", "kernels": [{"name",
    "ptx_bytes", "cubin_bytes", "ptx", "cubin", "info"}]}``; raises
    RuntimeError with the compiler's message on failure."""
    cc = tuple(int(c) for c in cc)
    if len(cc) != 2:
        raise ValueError(f"cc must be (major, minor), got {cc!r}")
    with tempfile.TemporaryDirectory(prefix="netgen_cuda_") as scratch:
        if _looks_like_source(path_or_source):
            p = Path(scratch) / "netgen_cuda_module.py"
            p.write_text(str(path_or_source))
        else:
            p = Path(str(path_or_source))
            if not p.is_file():
                raise ValueError(f"no such generated module: {str(p)!r}")
        # PTX and cubins are kept only where out_dir asks for them
        out = Path(out_dir) if out_dir is not None else Path(scratch) / "ptx"
        out.mkdir(parents=True, exist_ok=True)
        results, seconds = _compile_all(p, out, cc, jobs, timeout)
    kernels = sorted((k for r in results for k in r["kernels"]), key=lambda k: k["index"])
    summary = (
        f"{len(kernels)} kernels -> PTX for sm_{cc[0]}{cc[1]} ({sum(k['ptx_bytes'] for k in kernels) / 1024:.0f} KB) "
        f"-> cubin ({sum(k['cubin_bytes'] for k in kernels) / 1024:.0f} KB) in {seconds} s, "
        f"assembled by {results[0]['assembler']}" + (f"; files in {out}" if out_dir is not None else "")
    )
    return {
        "summary": summary,
        "cc": list(cc),
        "assembler": results[0]["assembler"],
        "out_dir": str(out) if out_dir is not None else None,
        "seconds": seconds,
        "kernels": kernels,
    }


def _compile_all(p: Path, out: Path, cc, jobs, timeout) -> tuple[list, float]:
    """Run the compile worker (netgen.codegen._cuda_compile) in ``jobs``
    processes sharing the kernels; RuntimeError with the compiler's message
    on failure."""
    import time

    env = dict(os.environ)
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    jobs = max(1, int(jobs if jobs is not None else min(2, os.cpu_count() or 1)))
    t0 = time.perf_counter()
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "netgen.codegen._cuda_compile", str(p), str(out), f"{cc[0]}.{cc[1]}", f"{j}/{jobs}"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for j in range(jobs)
    ]
    results, errors = [], []
    for proc in procs:
        try:
            so, se = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            so, se = proc.communicate()
            errors.append(f"timed out after {timeout} s")
            continue
        if proc.returncode != 0:
            errors.append(se.strip()[-4000:])
        else:
            results.append(json.loads(so.strip().splitlines()[-1]))
    if errors:
        raise RuntimeError("CUDA compile check failed:\n" + "\n".join(errors))
    return results, round(time.perf_counter() - t0, 2)


def _looks_like_source(v) -> bool:
    return isinstance(v, str) and ("\n" in v or "NETWORK" in v)


_KERNELS = '''@cuda.jit
def _fwd_vals@@SFX@@(x, ca, cb, offs, outs, values, ps, ds, dps, save, scratch0):
    b = cuda.blockIdx.x
    t = cuda.threadIdx.x
    nt = cuda.blockDim.x
    n = x.shape[1]
    @@ALLOC_VALS_V@@
    for w in range(t, n, nt):
        v[w] = x[b, w]
    cuda.syncthreads()
    for l in range(offs.shape[0] - 1):
        for i in range(offs[l] + t, offs[l + 1], nt):
            a = ca[i]
            c = cb[i]
            xa = v[a]
            xc = v[c]
            d = xa - xc
@@SWAP12@@
            q = @@ONE@@ - p
            v[a] = p * xa + q * xc
            v[c] = q * xa + p * xc
            ps[b, i] = p
            if save:
                ds[b, i] = d
                dps[b, i] = dp
        cuda.syncthreads()
    for r in range(t, outs.shape[0], nt):
        values[b, r] = v[outs[r]]


@cuda.jit
def _fwd_P@@SFX@@(ca, cb, offs, clo, chi, doff, outs, ps, P, D, save):
    b = cuda.blockIdx.x
    t = cuda.threadIdx.x
    nt = cuda.blockDim.x
    k = P.shape[1]
    n = P.shape[2]
    for r in range(k):
        for w in range(t, n, nt):
            P[b, r, w] = @@ZERO@@
    cuda.syncthreads()
    for r in range(t, k, nt):
        P[b, r, outs[r]] = @@ONE@@
    cuda.syncthreads()
    for l in range(offs.shape[0] - 2, -1, -1):
        for i in range(offs[l] + t, offs[l + 1], nt):
            lo = clo[i]
            hi = chi[i]
            if lo < hi:
                a = ca[i]
                c = cb[i]
                p = ps[b, i]
                q = @@ONE@@ - p
                o = doff[i] - lo
                for r in range(lo, hi):
                    ra = P[b, r, a]
                    rc = P[b, r, c]
                    if save:
                        D[b, o + r] = ra - rc
                    P[b, r, a] = p * ra + q * rc
                    P[b, r, c] = q * ra + p * rc
        cuda.syncthreads()


@cuda.jit
def _bwd_P@@SFX@@(ca, cb, offs, clo, chi, doff, ps, D, G, gpp):
    b = cuda.blockIdx.x
    t = cuda.threadIdx.x
    nt = cuda.blockDim.x
    for l in range(offs.shape[0] - 1):
        for i in range(offs[l] + t, offs[l + 1], nt):
            lo = clo[i]
            hi = chi[i]
            acc = @@ZERO@@
            if lo < hi:
                a = ca[i]
                c = cb[i]
                p = ps[b, i]
                q = @@ONE@@ - p
                o = doff[i] - lo
                for r in range(lo, hi):
                    ga = G[b, r, a]
                    gc = G[b, r, c]
                    acc += (ga - gc) * D[b, o + r]
                    G[b, r, a] = p * ga + q * gc
                    G[b, r, c] = q * ga + p * gc
            gpp[b, i] = acc
        cuda.syncthreads()


@cuda.jit
def _bwd_vals@@SFX@@(ca, cb, offs, outs, gv, ps, ds, dps, gpp, has_gpp, gx, scratch0):
    b = cuda.blockIdx.x
    t = cuda.threadIdx.x
    nt = cuda.blockDim.x
    n = gx.shape[1]
    @@ALLOC_VALS_V@@
    g = v
    for w in range(t, n, nt):
        g[w] = @@ZERO@@
    cuda.syncthreads()
    for r in range(t, outs.shape[0], nt):
        g[outs[r]] = gv[b, r]
    cuda.syncthreads()
    for l in range(offs.shape[0] - 2, -1, -1):
        for i in range(offs[l] + t, offs[l + 1], nt):
            a = ca[i]
            c = cb[i]
            p = ps[b, i]
            q = @@ONE@@ - p
            ga = g[a]
            gc = g[c]
            gp = (ga - gc) * ds[b, i]
            if has_gpp:
                gp += gpp[b, i]
            gd = gp * dps[b, i]
            g[a] = p * ga + q * gc + gd
            g[c] = q * ga + p * gc - gd
        cuda.syncthreads()
    for w in range(t, n, nt):
        gx[b, w] = g[w]


@cuda.jit
def _fwd_col@@SFX@@(x, y, ca, cb, offs, outs, col, ps, ds, dps, dus, save, scratch0, scratch1):
    b = cuda.blockIdx.x
    t = cuda.threadIdx.x
    nt = cuda.blockDim.x
    n = x.shape[1]
    @@ALLOC_COL_V@@
    @@ALLOC_COL_U@@
    for w in range(t, n, nt):
        v[w] = x[b, w]
        u[w] = @@ZERO@@
    cuda.syncthreads()
    if t == 0:
        u[y[b]] = @@ONE@@
    cuda.syncthreads()
    for l in range(offs.shape[0] - 1):
        for i in range(offs[l] + t, offs[l + 1], nt):
            a = ca[i]
            c = cb[i]
            xa = v[a]
            xc = v[c]
            d = xa - xc
@@SWAP12@@
            q = @@ONE@@ - p
            v[a] = p * xa + q * xc
            v[c] = q * xa + p * xc
            ua = u[a]
            uc = u[c]
            u[a] = p * ua + q * uc
            u[c] = q * ua + p * uc
            if save:
                ps[b, i] = p
                ds[b, i] = d
                dps[b, i] = dp
                dus[b, i] = ua - uc
        cuda.syncthreads()
    for r in range(t, outs.shape[0], nt):
        col[b, r] = u[outs[r]]


@cuda.jit
def _bwd_col@@SFX@@(ca, cb, offs, outs, gcol, ps, ds, dps, dus, gx, scratch0, scratch1):
    b = cuda.blockIdx.x
    t = cuda.threadIdx.x
    nt = cuda.blockDim.x
    n = gx.shape[1]
    @@ALLOC_COL_V@@
    @@ALLOC_COL_U@@
    g = v
    gu = u
    for w in range(t, n, nt):
        g[w] = @@ZERO@@
        gu[w] = @@ZERO@@
    cuda.syncthreads()
    for r in range(t, outs.shape[0], nt):
        gu[outs[r]] = gcol[b, r]
    cuda.syncthreads()
    for l in range(offs.shape[0] - 2, -1, -1):
        for i in range(offs[l] + t, offs[l + 1], nt):
            a = ca[i]
            c = cb[i]
            p = ps[b, i]
            q = @@ONE@@ - p
            ga = g[a]
            gc = g[c]
            ua = gu[a]
            uc = gu[c]
            gd = ((ga - gc) * ds[b, i] + (ua - uc) * dus[b, i]) * dps[b, i]
            g[a] = p * ga + q * gc + gd
            g[c] = q * ga + p * gc - gd
            gu[a] = p * ua + q * uc
            gu[c] = q * ua + p * uc
        cuda.syncthreads()
    for w in range(t, n, nt):
        gx[b, w] = g[w]
'''


_TEMPLATE = '''@@DOC@@

import math

import numpy as np
import torch
from numba import cuda

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
#: (dtype, kernel family, j) -> True when the j-th wire array of that kernel
#: family lives in a global (B, n) scratch block (it did not fit in shared
#: memory); the launchers then need a real scratch array there.
@@SCRATCH@@


@@KERNELS@@


KERNELS = {
    np.dtype(np.float32): {
        "fwd_vals": _fwd_vals_f32, "fwd_P": _fwd_P_f32, "bwd_P": _bwd_P_f32,
        "bwd_vals": _bwd_vals_f32, "fwd_col": _fwd_col_f32, "bwd_col": _bwd_col_f32,
    },
    np.dtype(np.float64): {
        "fwd_vals": _fwd_vals_f64, "fwd_P": _fwd_P_f64, "bwd_P": _bwd_P_f64,
        "bwd_vals": _bwd_vals_f64, "fwd_col": _fwd_col_f64, "bwd_col": _bwd_col_f64,
    },
}


def kernel_signatures():
    """(name, python function, argument types) of every kernel, for
    ``numba.cuda.compile_ptx`` (used by netgen's compile check)."""
    from numba import types

    i1 = types.Array(types.int64, 1, "C")
    bl = types.boolean
    out = []
    for ft in (types.float32, types.float64):
        f2 = types.Array(ft, 2, "C")
        f3 = types.Array(ft, 3, "C")
        kern = KERNELS[np.dtype(str(ft))]
        sigs = {
            "fwd_vals": (f2, i1, i1, i1, i1, f2, f2, f2, f2, bl, f2),
            "fwd_P": (i1, i1, i1, i1, i1, i1, i1, f2, f3, f2, bl),
            "bwd_P": (i1, i1, i1, i1, i1, i1, f2, f2, f3, f2),
            "bwd_vals": (i1, i1, i1, i1, f2, f2, f2, f2, f2, bl, f2, f2),
            "fwd_col": (f2, i1, i1, i1, i1, i1, f2, f2, f2, f2, f2, bl, f2, f2),
            "bwd_col": (i1, i1, i1, i1, f2, f2, f2, f2, f2, f2, f2, f2),
        }
        for name, sig in sigs.items():
            out.append((kern[name].py_func.__name__, kern[name].py_func, sig))
    return out


# ---------------------------------------------------------------- launchers
# These take arrays the kernels can read: device arrays (torch tensors via
# cuda.as_cuda_array) on a GPU, or numpy arrays under the CUDA simulator.
# The torch wrappers below and netgen's simulator tests both use them.
def launch_rows_forward(x, tabs, values, P, ps, ds, dps, D, save, scratch, stream=0, threads=THREADS):
    B = x.shape[0]
    kern = KERNELS[np.dtype(x.dtype)]
    kern["fwd_vals"][B, threads, stream](x, tabs["ca"], tabs["cb"], tabs["offs"], tabs["outs"],
                                         values, ps, ds, dps, save, scratch)
    kern["fwd_P"][B, threads, stream](tabs["ca"], tabs["cb"], tabs["offs"], tabs["clo"], tabs["chi"],
                                      tabs["doff"], tabs["outs"], ps, P, D, save)


def launch_rows_backward(tabs, gv, G, ps, ds, dps, D, gpp, has_gP, gx, scratch, stream=0, threads=THREADS):
    """``G`` holds a copy of dL/dP (it is overwritten); ``gpp`` is (B, size)
    scratch. Writes dL/dx into ``gx``."""
    B = gx.shape[0]
    kern = KERNELS[np.dtype(gx.dtype)]
    if has_gP:
        kern["bwd_P"][B, threads, stream](tabs["ca"], tabs["cb"], tabs["offs"], tabs["clo"], tabs["chi"],
                                          tabs["doff"], ps, D, G, gpp)
    kern["bwd_vals"][B, threads, stream](tabs["ca"], tabs["cb"], tabs["offs"], tabs["outs"], gv, ps, ds, dps,
                                         gpp, has_gP, gx, scratch)


def launch_column_forward(x, y, tabs, col, ps, ds, dps, dus, save, scratch0, scratch1, stream=0, threads=THREADS):
    B = x.shape[0]
    KERNELS[np.dtype(x.dtype)]["fwd_col"][B, threads, stream](
        x, y, tabs["ca"], tabs["cb"], tabs["offs"], tabs["outs"], col, ps, ds, dps, dus, save, scratch0, scratch1)


def launch_column_backward(tabs, gcol, ps, ds, dps, dus, gx, scratch0, scratch1, stream=0, threads=THREADS):
    B = gx.shape[0]
    KERNELS[np.dtype(gx.dtype)]["bwd_col"][B, threads, stream](
        tabs["ca"], tabs["cb"], tabs["offs"], tabs["outs"], gcol, ps, ds, dps, dus, gx, scratch0, scratch1)


# ------------------------------------------------------------ torch wrappers
_DEVICE_TABLES = {}


def _require_cuda(x):
    if not (torch.cuda.is_available() and cuda.is_available()):
        raise RuntimeError(
            "this netgen module (target cuda) needs a CUDA device, and none is available here "
            "(torch.cuda.is_available() = %s, numba.cuda.is_available() = %s); "
            "build with --target numba or --target torch for CPU" % (torch.cuda.is_available(), cuda.is_available())
        )
    if x.device.type != "cuda":
        raise ValueError(f"the cuda target needs CUDA tensors; got a tensor on {x.device}")


def _dev_tables(device):
    key = device.index if device.index is not None else torch.cuda.current_device()
    if key not in _DEVICE_TABLES:
        _DEVICE_TABLES[key] = {k: torch.from_numpy(v).to(device) for k, v in TABLES.items()}
    return {k: cuda.as_cuda_array(v) for k, v in _DEVICE_TABLES[key].items()}


def _stream(device):
    return cuda.external_stream(torch.cuda.current_stream(device).cuda_stream)


def _arr(t):
    return cuda.as_cuda_array(t.detach())


def _dummy(x):
    return torch.empty((1, 1), dtype=x.dtype, device=x.device)


def _scratch(x, j, kernel):
    """A (B, n) global scratch row block when the kernel's j-th wire array
    is not in shared memory, else a dummy."""
    ft = str(x.dtype).replace("torch.", "")
    return torch.empty(x.shape, dtype=x.dtype, device=x.device) if GLOBAL_SCRATCH[(ft, kernel, j)] else _dummy(x)


class _Rows(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.set_materialize_grads(False)
        save = bool(ctx.needs_input_grad[0])
        B, dev = x.shape[0], x.device
        e = lambda *s: torch.empty(s, dtype=x.dtype, device=dev)  # noqa: E731
        values, P, ps = e(B, _K), e(B, _K, _N), e(B, _SIZE)
        ds, dps, D = (e(B, _SIZE), e(B, _SIZE), e(B, max(_NNZ, 1))) if save else (_dummy(x),) * 3
        with torch.cuda.device(dev):
            launch_rows_forward(_arr(x), _dev_tables(dev), _arr(values), _arr(P), _arr(ps), _arr(ds), _arr(dps),
                                _arr(D), save, _arr(_scratch(x, 0, "vals")), _stream(dev))
        ctx.saved = (ps, ds, dps, D)
        return values, P

    @staticmethod
    def backward(ctx, gv, gP):
        if gv is None and gP is None:
            return None
        ps, ds, dps, D = ctx.saved
        B, dev = ps.shape[0], ps.device
        gv = torch.zeros((B, _K), dtype=ps.dtype, device=dev) if gv is None else gv.to(ps.dtype).contiguous()
        has_gP = gP is not None
        G = gP.to(ps.dtype).clone(memory_format=torch.contiguous_format) if has_gP else torch.empty(
            (1, 1, 1), dtype=ps.dtype, device=dev)
        gpp = torch.empty((B, _SIZE), dtype=ps.dtype, device=dev) if has_gP else _dummy(ps)
        gx = torch.empty((B, _N), dtype=ps.dtype, device=dev)
        with torch.cuda.device(dev):
            launch_rows_backward(_dev_tables(dev), _arr(gv), _arr(G), _arr(ps), _arr(ds), _arr(dps), _arr(D),
                                 _arr(gpp), has_gP, _arr(gx), _arr(_scratch(gx, 0, "vals")), _stream(dev))
        return gx


class _Column(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, y):
        ctx.set_materialize_grads(False)
        save = bool(ctx.needs_input_grad[0])
        B, dev = x.shape[0], x.device
        e = lambda *s: torch.empty(s, dtype=x.dtype, device=dev)  # noqa: E731
        col = e(B, _K)
        ps, ds, dps, dus = (e(B, _SIZE) for _ in range(4)) if save else (_dummy(x),) * 4
        with torch.cuda.device(dev):
            launch_column_forward(_arr(x), _arr(y), _dev_tables(dev), _arr(col), _arr(ps), _arr(ds), _arr(dps),
                                  _arr(dus), save, _arr(_scratch(x, 0, "col")), _arr(_scratch(x, 1, "col")),
                                  _stream(dev))
        ctx.saved = (ps, ds, dps, dus)
        return col

    @staticmethod
    def backward(ctx, gcol):
        if gcol is None:
            return None, None
        ps, ds, dps, dus = ctx.saved
        B, dev = ps.shape[0], ps.device
        gx = torch.empty((B, _N), dtype=ps.dtype, device=dev)
        with torch.cuda.device(dev):
            launch_column_backward(_dev_tables(dev), _arr(gcol.to(ps.dtype).contiguous()), _arr(ps), _arr(ds),
                                   _arr(dps), _arr(dus), _arr(gx), _arr(_scratch(gx, 0, "col")),
                                   _arr(_scratch(gx, 1, "col")), _stream(dev))
        return gx, None


def _prepare(x):
    if not isinstance(x, torch.Tensor):
        raise ValueError(f"expected a torch.Tensor, got {type(x).__name__}")
    if x.shape[-1:] != (_N,):
        raise ValueError(f"input must have shape (..., {_N}), got {tuple(x.shape)}")
    _require_cuda(x)
    if not x.dtype.is_floating_point:
        raise ValueError(f"input must be floating point, got {x.dtype}")
    if not bool(torch.isfinite(x).all()):
        raise ValueError("input contains NaN or inf")
    cdt = x.dtype if x.dtype in (torch.float32, torch.float64) else torch.float32
    return x.reshape(-1, _N).to(cdt).contiguous(), x.shape[:-1], x.dtype


class Layer(torch.nn.Module):
    """Relaxed top-k / sorting layer for the network in ``NETWORK`` (CUDA)."""

    n = _N
    k = _K

    def forward(self, x):
        x2, lead, dt = _prepare(x)
        values, P = _Rows.apply(x2)
        return values.reshape(*lead, _K).to(dt), P.reshape(*lead, _K, _N).to(dt)

    def column(self, x, y):
        x2, lead, dt = _prepare(x)
        y = torch.as_tensor(y, device=x.device)
        if y.dtype.is_floating_point or y.dtype == torch.bool or y.is_complex():
            raise ValueError(f"y must be an integer tensor, got {y.dtype}")
        if tuple(y.shape) != tuple(lead):
            raise ValueError(f"y must have shape {tuple(lead)}, got {tuple(y.shape)}")
        y = y.reshape(-1).to(torch.int64).contiguous()
        if y.numel() and (int(y.min()) < 0 or int(y.max()) >= _N):
            raise ValueError(f"y must lie in 0..{_N - 1}")
        return _Column.apply(x2, y).reshape(*lead, _K).to(dt)

    def hard(self, x):
        """The exact network: ``(values, indices)`` of shapes (..., k) (torch
        ops; runs on any device)."""
        if not isinstance(x, torch.Tensor) or x.dim() < 1 or x.shape[-1] != _N:
            raise ValueError(f"input must be a tensor of shape (..., {_N})")
        if x.dtype.is_floating_point and bool(torch.isnan(x).any()):
            raise ValueError("input contains NaN values; the exact network needs ordered inputs")
        lead = x.shape[:-1]
        v = x.detach().reshape(-1, _N).clone()
        idx = torch.arange(_N, device=v.device).expand(v.shape[0], _N).clone()
        for l in range(len(_OFFSETS) - 1):
            a = torch.from_numpy(TABLES["ca"][_OFFSETS[l]:_OFFSETS[l + 1]]).to(v.device)
            c = torch.from_numpy(TABLES["cb"][_OFFSETS[l]:_OFFSETS[l + 1]]).to(v.device)
            va, vc = v[:, a], v[:, c]
            ia, ic = idx[:, a], idx[:, c]
            swap = vc > va
            v[:, a] = torch.where(swap, vc, va)
            v[:, c] = torch.where(swap, va, vc)
            idx[:, a] = torch.where(swap, ic, ia)
            idx[:, c] = torch.where(swap, ia, ic)
        o = torch.from_numpy(_OUTPUTS).to(v.device)
        return v[:, o].reshape(*lead, _K), idx[:, o].reshape(*lead, _K)

    def extra_repr(self):
        return f"n={_N}, k={_K}, target=cuda, {RELAXATION['distribution']}"
'''
