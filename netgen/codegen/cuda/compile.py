"""Compile a generated CUDA module's kernels to PTX and a cubin, no GPU needed.

Run as ``python -m netgen.codegen.cuda.compile MODULE.py OUT_DIR 9.0 [I/J [sm_80,sm_90]]``
(:func:`netgen.codegen.cuda.compile_check.compile_check` does that in a separate
process: a process is either simulating CUDA or compiling, never both).
Prints one JSON line: ``{"cc", "assembler", "out_dir", "kernels": [...]}``.

PTX comes from ``numba.cuda.compile_ptx`` (NVVM from the pip package
``nvidia-nvvm``); the cubin from ``ptxas -arch=sm_XY``, found without a
system CUDA toolkit (:func:`_ptxas`: ``NETGEN_PTXAS``, the pip wheel
``nvidia-cuda-nvcc`` of the ``cuda`` extra, PATH, CUDA_HOME, /usr/local),
one per requested arch from the one PTX (``netgen build`` asks for
:data:`netgen.codegen.cuda.cubins.ARCHS` and keeps them beside the module),
else from nvJitLink through ``cuda.core`` where that loads; with neither,
only the PTX is checked and the result says why (``"skipped"``).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path


#: where a ptxas assembler comes from, in this order: NETGEN_PTXAS (a path,
#: or "none" to use no assembler), the pip wheel ``nvidia-cuda-nvcc`` (the
#: ``cuda`` extra; CUDA 13 puts it in nvidia/cu13/bin, CUDA 12 in
#: nvidia/cuda_nvcc/bin), PATH, $CUDA_HOME/bin, $CUDA_PATH/bin, /usr/local/cuda/bin
ENV_PTXAS = "NETGEN_PTXAS"
HINT = ("pip install 'netgen-networks[cuda]' (brings ptxas in the nvidia-cuda-nvcc wheel), "
        f"or set {ENV_PTXAS}=/path/to/ptxas")
#: run this module (python -m) as the compile worker instead of this one
#: (tests use a slow fake worker to interrupt a build mid-check)
ENV_WORKER = "NETGEN_CUDA_COMPILE_WORKER"


@contextlib.contextmanager
def terminate_raises():
    """While the block runs in the main thread, SIGTERM raises
    ``SystemExit(143)`` (where its handler is the default, which would end
    the process without running any cleanup), so ``finally`` blocks and
    context managers kill the workers and remove the scratch folder."""
    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGTERM) != signal.SIG_DFL:
        yield
        return

    def raise_exit(signum, frame):
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, raise_exit)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _wheel_ptxas() -> str | None:
    try:
        import nvidia  # namespace package of NVIDIA's pip wheels
    except ImportError:
        return None
    for root in getattr(nvidia, "__path__", []):
        for sub in ("cu13/bin", "cuda_nvcc/bin", "cu12/bin"):
            cand = os.path.join(root, sub, "ptxas")
            if os.path.isfile(cand) and os.access(cand, os.X_OK):
                return cand
    return None


def _ptxas() -> str | None:
    """The ptxas to assemble cubins with, or None (see ENV_PTXAS for the order)."""
    forced = os.environ.get(ENV_PTXAS)
    if forced is not None and forced.strip():
        if forced.strip().lower() == "none":
            return None
        if os.path.isfile(forced) and os.access(forced, os.X_OK):
            return forced
        raise ValueError(f"{ENV_PTXAS}={forced!r} is not an executable file")
    found = _wheel_ptxas() or shutil.which("ptxas")
    if found:
        return found
    homes = [os.environ.get(v) for v in ("CUDA_HOME", "CUDA_PATH")]
    for cand in [os.path.join(h, "bin", "ptxas") for h in homes if h] + ["/usr/local/cuda/bin/ptxas",
                                                                       "/usr/local/bin/ptxas"]:
        if os.path.isfile(cand) and os.access(cand, os.X_OK):
            return cand
    return None


def _cubin_nvjitlink(ptx: str, arch: str) -> bytes:
    from cuda.core import Linker, LinkerOptions, ObjectCode  # type: ignore

    linker = Linker(ObjectCode.from_ptx(ptx.encode()), options=LinkerOptions(arch=arch))
    return bytes(linker.link("cubin").code)


def numpy_compat() -> None:
    """numba-cuda 0.30.4 registers ``overload(np.row_stack)`` when it first
    lowers a kernel; numpy 2.5 removed that alias of ``np.vstack``. Put it
    back before numba-cuda compiles anything (generated cuda modules carry
    the same two lines, so they work without netgen)."""
    import numpy as np

    if not hasattr(np, "row_stack"):
        np.row_stack = np.vstack


def ptx_entry(ptx: str) -> str:
    """The (mangled) name of the one kernel entry of ``ptx``: what
    ``ObjectCode.get_kernel`` must be asked for (numba mangles the module
    and function names and the argument types into it)."""
    found = _ENTRY.findall(ptx)
    if len(found) != 1:
        raise RuntimeError(f"expected one .entry in the PTX, found {len(found)}")
    return found[0]


def ptx_params(ptx: str) -> list[str]:
    """PTX types of the entry's parameters (``u64`` per array field, ``u8``
    per flag): the launcher's packed words must match them one for one."""
    m = re.search(r"\.entry\s+\S+\s*\((.*?)\)", ptx, re.S)
    return re.findall(r"\.param\s+\.(\w+)", m.group(1)) if m else []


_ENTRY = re.compile(r"^\s*\.(?:visible\s+)?\.entry\s+([A-Za-z_$][\w$]*)", re.M)


#: prefix of the worker's progress lines on stderr (one JSON object each:
#: ``{"total": steps}`` first, then ``{"done": 1, "what": ...}`` per step)
PROGRESS = "netgen-progress "


def _say(report, **event) -> None:
    if report is not None:
        report(event)


def compile_module(path: str, out_dir: str, cc: tuple[int, int], part: tuple[int, int] = (0, 1),
                   archs: list[str] | None = None, report=None) -> dict:
    """Compile kernels number ``part[0]``, ``part[0] + part[1]``, ... of the
    module's :func:`kernel_signatures` (all of them by default) to PTX for
    ``cc`` and assemble each PTX for every arch of ``archs`` (``sm_XY``;
    default ``sm_<cc>``): ``NAME.ptx`` and ``NAME.sm_XY.cubin`` in ``out_dir``.
    PTX for a lower ``cc`` assembles for any higher arch (ptxas, like the
    driver's JIT), so one NVVM compile serves every arch.

    In phases: every kernel's PTX (NVVM, the bulk of the time), then one
    phase per arch (ptxas). ``report(event)`` (optional) gets
    ``{"total": steps}`` and then ``{"done": 1, "what": "PTX _fwd_f32_s"}`` /
    ``{"done": 1, "what": "sm_90 _fwd_f32_s"}`` as each step finishes."""
    if os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0"):
        raise RuntimeError("cannot compile CUDA kernels in a process that runs the CUDA simulator")
    numpy_compat()
    import numba.cuda
    from numba.cuda import dispatcher

    # numba-cuda 0.30.4 queries the current device while compiling some
    # kernels; there is none here, and the target is given explicitly.
    dispatcher.get_current_device = lambda: None  # type: ignore[attr-defined]

    mod = _import_file(path)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    archs = list(archs) if archs else [f"sm_{cc[0]}{cc[1]}"]
    ptxas = _ptxas()
    assembler = ptxas or "nvJitLink (cuda.core)"
    skipped = ""
    # each kernel as its module compiles it: the float32 kernels with fastmath
    fastmath = {k.py_func.__name__: bool(getattr(k, "targetoptions", {}).get("fastmath"))
                for k in getattr(mod, "KERNELS", {}).values() if hasattr(k, "py_func")}
    # and the kernels that run one block per SM with their launch bounds (kernels.launch_bounds)
    bounds = getattr(mod, "LAUNCH_BOUNDS", {})
    mine = [(idx, name, fn, sig) for idx, (name, fn, sig) in enumerate(mod.kernel_signatures())
            if idx % part[1] == part[0]]
    _say(report, total=len(mine) * (1 + len(archs)))
    ptxs = {}
    for idx, name, fn, sig in mine:  # phase 1: PTX
        ptx, _ = numba.cuda.compile_ptx(fn, sig, cc=cc, fastmath=fastmath.get(name, False),
                                        launch_bounds=bounds.get(name))
        ptx_path = out / f"{name}.ptx"
        ptx_path.write_text(ptx)
        ptxs[name] = (ptx, ptx_path)
        _say(report, done=1, what=f"PTX {name}")
    cubins = {name: {} for _, name, _, _ in mine}
    info = {name: "" for _, name, _, _ in mine}
    for arch in archs:  # one phase per arch: its cubins
        for idx, name, fn, sig in mine:
            ptx, ptx_path = ptxs[name]
            cubin_path = out / f"{name}.{arch}.cubin"
            if ptxas:
                proc = subprocess.run(
                    [ptxas, f"-arch={arch}", "-v", "-o", str(cubin_path), str(ptx_path)],
                    capture_output=True,
                    text=True,
                )
                if proc.returncode != 0:
                    raise RuntimeError(f"ptxas -arch={arch} failed on {name}:\n{proc.stderr}")
                info[name] = info[name] or " ".join(line.split("ptxas info    : ", 1)[-1].strip()
                                                    for line in proc.stderr.splitlines() if "Used" in line)
            elif not skipped:
                try:  # works only where nvJitLink (and, for some versions, a driver) loads
                    cubin_path.write_bytes(_cubin_nvjitlink(ptx, arch))
                except Exception as e:  # noqa: BLE001 - any failure means: no assembler here
                    skipped = f"no ptxas found and nvJitLink failed ({type(e).__name__})"
                    assembler = None
            if cubin_path.exists():
                cubins[name][arch] = str(cubin_path)
            _say(report, done=1, what=f"{arch} {name}")
    kernels = []
    for idx, name, fn, sig in mine:
        ptx, ptx_path = ptxs[name]
        first = next(iter(cubins[name].values()), None)
        kernels.append(
            {
                "index": idx,
                "name": name,
                "entry": ptx_entry(ptx),
                "params": ptx_params(ptx),
                "ptx": str(ptx_path),
                "cubin": first,
                "cubins": cubins[name],
                "ptx_bytes": ptx_path.stat().st_size,
                "cubin_bytes": os.path.getsize(first) if first else 0,
                "info": info[name],
            }
        )
    return {
        "cc": list(cc),
        "archs": archs,
        "assembler": assembler,
        "skipped": skipped,
        "out_dir": str(out),
        "kernels": kernels,
    }


def _import_file(path: str):
    """The generated module at ``path``, imported in this (worker) process
    under its own name; nothing of netgen's cache is needed here."""
    import importlib.util

    name = f"_netgen_compile_{Path(path).stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def _exit_with_parent() -> None:
    """Exit when the process that started this worker goes away (a worker
    must never outlive an interrupted build)."""
    import time

    parent = os.getppid()

    def watch():
        while True:
            time.sleep(0.5)
            if os.getppid() != parent:
                os._exit(1)

    threading.Thread(target=watch, name="netgen-parent-watch", daemon=True).start()


def main(argv: list[str]) -> int:
    _exit_with_parent()
    if len(argv) not in (3, 4, 5):
        print("usage: python -m netgen.codegen.cuda.compile MODULE.py OUT_DIR CC [I/J [ARCHS]]  "
              "(e.g. 7.5 0/2 sm_80,sm_90)", file=sys.stderr)
        return 2
    major, minor = (int(v) for v in argv[2].split("."))
    part = tuple(int(v) for v in argv[3].split("/")) if len(argv) >= 4 else (0, 1)
    archs = [a for a in argv[4].split(",") if a] if len(argv) == 5 else None
    def report(event):
        print(PROGRESS + json.dumps(event), file=sys.stderr, flush=True)

    result = compile_module(argv[0], argv[1], (major, minor), part, archs, report=report)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":  # pragma: no cover - run as a subprocess
    sys.exit(main(sys.argv[1:]))
