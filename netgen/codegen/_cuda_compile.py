"""Compile a generated CUDA module's kernels to PTX and a cubin, no GPU needed.

Run as ``python -m netgen.codegen._cuda_compile MODULE.py OUT_DIR 9.0``
(:func:`netgen.codegen.cuda_target.compile_check` does that in a separate
process: a process is either simulating CUDA or compiling, never both).
Prints one JSON line: ``{"cc", "assembler", "out_dir", "kernels": [...]}``.

PTX comes from ``numba.cuda.compile_ptx`` (NVVM from the pip package
``nvidia-nvvm``); the cubin from ``ptxas -arch=sm_XY`` when ptxas is on
PATH or at /usr/local/bin/ptxas, else from nvJitLink through ``cuda.core``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path


def _ptxas() -> str | None:
    found = shutil.which("ptxas")
    if found:
        return found
    for cand in ("/usr/local/bin/ptxas", "/usr/local/cuda/bin/ptxas"):
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


def compile_module(path: str, out_dir: str, cc: tuple[int, int], part: tuple[int, int] = (0, 1)) -> dict:
    """Compile kernels number ``part[0]``, ``part[0] + part[1]``, ... of the
    module's :func:`kernel_signatures` (all of them by default)."""
    if os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0"):
        raise RuntimeError("cannot compile CUDA kernels in a process that runs the CUDA simulator")
    numpy_compat()
    import numba.cuda
    from numba.cuda import dispatcher

    # numba-cuda 0.30.4 queries the current device while compiling some
    # kernels; there is none here, and the target is given explicitly.
    dispatcher.get_current_device = lambda: None  # type: ignore[attr-defined]

    from .loader import load

    mod = load(path)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    arch = f"sm_{cc[0]}{cc[1]}"
    ptxas = _ptxas()
    kernels = []
    for idx, (name, fn, sig) in enumerate(mod.kernel_signatures()):
        if idx % part[1] != part[0]:
            continue
        ptx, _ = numba.cuda.compile_ptx(fn, sig, cc=cc)
        ptx_path = out / f"{name}.ptx"
        ptx_path.write_text(ptx)
        cubin_path = out / f"{name}.{arch}.cubin"
        info = ""
        if ptxas:
            proc = subprocess.run(
                [ptxas, f"-arch={arch}", "-v", "-o", str(cubin_path), str(ptx_path)],
                capture_output=True,
                text=True,
            )
            if proc.returncode != 0:
                raise RuntimeError(f"ptxas failed on {name}:\n{proc.stderr}")
            info = " ".join(line.split("ptxas info    : ", 1)[-1].strip() for line in proc.stderr.splitlines()
                            if "Used" in line)
        else:
            cubin_path.write_bytes(_cubin_nvjitlink(ptx, arch))
        kernels.append(
            {
                "index": idx,
                "name": name,
                "ptx": str(ptx_path),
                "cubin": str(cubin_path),
                "ptx_bytes": ptx_path.stat().st_size,
                "cubin_bytes": cubin_path.stat().st_size,
                "info": info,
            }
        )
    return {
        "cc": list(cc),
        "assembler": ptxas or "nvJitLink (cuda.core)",
        "out_dir": str(out),
        "kernels": kernels,
    }


def main(argv: list[str]) -> int:
    if len(argv) not in (3, 4):
        print("usage: python -m netgen.codegen._cuda_compile MODULE.py OUT_DIR CC [I/J]  (e.g. 9.0 0/2)",
              file=sys.stderr)
        return 2
    major, minor = (int(v) for v in argv[2].split("."))
    part = tuple(int(v) for v in argv[3].split("/")) if len(argv) == 4 else (0, 1)
    result = compile_module(argv[0], argv[1], (major, minor), part)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":  # pragma: no cover - run as a subprocess
    sys.exit(main(sys.argv[1:]))
