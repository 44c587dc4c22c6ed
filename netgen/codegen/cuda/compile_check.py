"""The compile check of a generated ``cuda`` module: every kernel compiled to
PTX for a compute capability and assembled to a cubin, in worker processes
(:mod:`netgen.codegen.cuda.compile`: a process is either simulating CUDA or
compiling, never both), no GPU needed. :func:`compile_check` is what
``netgen build --target cuda`` (:mod:`.build`), the cubin tests and the GPU
model (``research/gpu_model``) run; :mod:`.emit` writes the module it
checks (and re-exports :func:`compile_check`, its documented home)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

__all__ = ["compile_check", "default_jobs"]


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
