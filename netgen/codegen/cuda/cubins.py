"""Build side of a cuda module's ahead-of-time kernels (the run-time side,
pasted into every module, is :mod:`netgen.codegen.cuda.cubin`).

``netgen build --target cuda`` compiles each kernel once to PTX for compute
capability :data:`PTX_CC` (NVVM, in the compile workers of
:func:`netgen.codegen.cuda.compile_check.compile_check`), assembles that PTX with
ptxas for every arch of :data:`ARCHS` this ptxas knows, and installs the
files in ``<stem>.cubins/`` beside the module (:func:`write_folder`,
:func:`install`). A first call then loads the kernels through ``cuda.core``
and compiles nothing; see docs/targets-cuda.md, "First call of a cuda layer".
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from . import cubin as _rt

__all__ = ["ARCHS", "REQUIRED_ARCHS", "PTX_CC", "ENV_ARCHS", "chosen_archs", "build_archs",
           "write_folder", "install", "folder_of"]

#: architectures ``netgen build`` assembles cubins for: Ampere (A100, sm_80;
#: RTX 30xx/A10/A40, sm_86), Ada (L4/L40/RTX 40xx, sm_89), Hopper (sm_90),
#: Blackwell (B200, sm_100; RTX 50xx, sm_120); the last two where the ptxas
#: found knows them (CUDA >= 12.8)
ARCHS = ("sm_80", "sm_86", "sm_89", "sm_90", "sm_100", "sm_120")
#: the ones every build with an assembler has
REQUIRED_ARCHS = ARCHS[:4]
#: the PTX kept beside the cubins targets this compute capability, the
#: lowest CUDA 13's NVVM accepts: the driver JITs it for any device at or
#: above it (sm_87, sm_103, sm_121, ...) that has no cubin here
PTX_CC = (7, 5)


def folder_of(module_path) -> Path:
    """Where the kernels of the module file ``module_path`` live."""
    return Path(os.path.splitext(os.path.abspath(os.fspath(module_path)))[0] + ".cubins")


#: ``NETGEN_CUDA_ARCHS=sm_90`` (comma-separated, from :data:`ARCHS`):
#: assemble cubins for these archs only (one ptxas run per kernel and arch,
#: most of a build's time); the PTX kept beside them still serves any other
#: device at or above compute 7.5 through the driver's JIT
ENV_ARCHS = "NETGEN_CUDA_ARCHS"


def chosen_archs() -> tuple[str, ...]:
    """:data:`ARCHS`, or the ones ``NETGEN_CUDA_ARCHS`` names (ValueError
    for a name not in :data:`ARCHS` or an empty list)."""
    raw = os.environ.get(ENV_ARCHS, "").strip()
    if not raw:
        return ARCHS
    names = [a.strip() for a in raw.split(",") if a.strip()]
    bad = [a for a in names if a not in ARCHS]
    if bad or not names:
        raise ValueError(f"{ENV_ARCHS}={raw!r}: expected a comma-separated list of {', '.join(ARCHS)}"
                         + (f" (not one: {', '.join(map(repr, bad))})" if bad else ""))
    return tuple(a for a in ARCHS if a in names)


def build_archs(ptxas: str | None) -> list[str]:
    """:data:`ARCHS` (or ``NETGEN_CUDA_ARCHS``'s, :func:`chosen_archs`) less
    the ones ``ptxas`` does not know (from the allowed values its ``--help``
    lists; all of them when that cannot be read)."""
    wanted = chosen_archs()
    if not ptxas:
        return list(wanted)
    try:
        text = subprocess.run([ptxas, "--help"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return list(wanted)
    known = set(re.findall(r"'(sm_\w+)'", text))
    return [a for a in wanted if a in known] if known else list(wanted)


def write_folder(info: dict, module_path, dest) -> dict:
    """Write the kernels of :func:`compile_check`'s result ``info`` for the
    module file ``module_path`` into folder ``dest`` under the names the
    loader looks for; returns ``{"kernels", "archs", "ptx"}`` (counts)."""
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    _, tag, _ = _rt.cubin_source(os.fspath(module_path))
    with open(module_path, "rb") as fh:
        sha = hashlib.sha256(fh.read()).hexdigest()
    archs = set()
    for k in info["kernels"]:
        name = k["name"]
        ptx_name = f"{name}.{tag}.ptx"
        shutil.copyfile(k["ptx"], dest / ptx_name)
        for arch, path in (k.get("cubins") or {}).items():
            shutil.copyfile(path, dest / _rt.cubin_names(name, tag, arch))
            archs.add(arch)
        meta = {"format": _rt.CUBIN_FORMAT, "kernel": name, "entry": k["entry"], "params": k["params"],
                "ptx": ptx_name, "ptx_cc": list(info["cc"]), "archs": sorted(k.get("cubins") or {}, key=_arch_order),
                "source_sha256": sha, "assembler": info.get("assembler"), "by": "netgen build"}
        (dest / _rt.cubin_names(name, tag)).write_text(json.dumps(meta), encoding="utf-8")
    return {"kernels": len(info["kernels"]), "archs": sorted(archs, key=_arch_order), "ptx": len(info["kernels"])}


def _arch_order(arch: str) -> tuple:
    m = re.fullmatch(r"sm_(\d+)(\d)([a-z]*)", arch)
    return (int(m.group(1)), int(m.group(2)), m.group(3)) if m else (1 << 30, 0, arch)


def install(src: Path, module_path) -> Path:
    """Move the folder ``src`` to the place of the module file
    ``module_path``'s kernels, replacing what was there (renames only,
    within the module's folder); returns that place."""
    final = folder_of(module_path)
    stage = Path(tempfile.mkdtemp(prefix=".netgen_cubins_", dir=final.parent))
    try:
        shutil.copytree(src, stage / "new")
        old = stage / "old"
        if final.exists():
            os.replace(final, old)
        os.replace(stage / "new", final)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    return final
