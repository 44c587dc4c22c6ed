"""Issue 20, CUDA: the files of the session's one ``netgen build --target
cuda`` (tests/conftest.py's ``cuda_cli_build``): a cubin per listed
architecture, the PTX's entry names, write_module running the same build
step, and a fresh process's first call loading those cubins under the
fake driver (``_cuda_cubin_driver.py``); on a GPU, the cubins' results
against numba-cuda's own compile. Needs ptxas (the ``cuda`` extra's
nvidia-cuda-nvcc wheel) and skips without it. Stand-in cubins:
test_cuda_cubin.py."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("numba_cuda")

from _cuda_cubin_helpers import KERNELS_BUILT, ROOT, check_loaded, run_driver, sha  # noqa: E402
from netgen.codegen import write_module  # noqa: E402
from netgen.codegen.cuda.cubins import ARCHS, REQUIRED_ARCHS, folder_of  # noqa: E402
from netgen.codegen.cuda import cubin as rt  # noqa: E402


def _elf_sm(data: bytes) -> int:
    """The SM number a cubin's ELF header names (CUDA ELF ABI v8: e_flags
    bits 8-15; older: bits 0-7)."""
    flags = struct.unpack_from("<I", data, 48)[0]
    return (flags >> 8) & 0xFF if data[8] >= 8 else flags & 0xFF


@pytest.fixture(scope="module")
def built(cuda_cli_build):
    """The session's one ``netgen build --target cuda`` (tests/conftest.py)."""
    from netgen.codegen.cuda.compile import _ptxas

    if _ptxas() is None:
        pytest.skip("no ptxas (pip install 'netgen-networks[cuda]' brings the nvidia-cuda-nvcc wheel)")
    assert cuda_cli_build["returncode"] == 0, cuda_cli_build["stderr"][-3000:]
    return Path(cuda_cli_build["module"]), cuda_cli_build["stderr"]


@pytest.mark.slow
def test_build_writes_cubins_for_the_listed_architectures(built):
    module, log = built
    folder, tag, _ = rt.cubin_source(str(module))
    assert Path(folder) == folder_of(module) and Path(folder).is_dir()
    metas = [json.loads(p.read_text()) for p in Path(folder).glob(f"*.{tag}.json")]
    assert len(metas) == KERNELS_BUILT
    for meta in metas:
        name = meta["kernel"]
        assert set(REQUIRED_ARCHS) <= set(meta["archs"]) <= set(ARCHS)
        for arch in meta["archs"]:
            data = (Path(folder) / rt.cubin_names(name, tag, arch)).read_bytes()
            assert data[:4] == b"\x7fELF" and _elf_sm(data) == int(arch[3:]), (name, arch)
        ptx = (Path(folder) / meta["ptx"]).read_text()
        assert meta["ptx_cc"] == [7, 5] and ".target sm_75" in ptx
        # the entry the loader asks for is the PTX's one .entry, numba's mangled name
        (entry,) = [line.split()[-1].rstrip("(") for line in ptx.splitlines() if ".entry" in line]
        assert meta["entry"] == entry and entry.startswith("_ZN") and name in entry
    assert "kernels for sm_80, sm_86, sm_89, sm_90" in log


@pytest.mark.slow
def test_write_module_gives_what_netgen_build_gives(built, tmp_path, monkeypatch):
    """The Python API runs the target's build step too: write_module of the
    built module's network and relaxation hands the build step the same
    module source (same bytes) and installs the same kernels beside it (same
    files, same PTX). The build step's compile is the CLI build's: a second
    compile of the same source (~50 CPU-s) would test NVVM's determinism,
    not netgen; the fake refuses any other source."""
    import netgen.codegen.cuda.compile_check as cuda_check
    from netgen.codegen.cache import load
    from netgen.io import from_dict
    from netgen.relax.distributions import Relaxation

    module, _ = built
    mod = load(module)
    net, r = from_dict(mod.NETWORK), Relaxation.from_dict(mod.RELAXATION)
    folder, tag, _ = rt.cubin_source(str(module))
    compiled = []

    def cli_kernels(path, cc, archs, out_dir, progress=None, **kw):  # compile_check, from the CLI build's files
        assert Path(path).read_bytes() == module.read_bytes(), "the build step got another source"
        compiled.append(Path(path).name)
        metas = [json.loads(p.read_text()) for p in Path(folder).glob(f"*.{tag}.json")]
        kernels = [{"name": m["kernel"], "entry": m["entry"], "params": m["params"],
                    "ptx": str(Path(folder) / m["ptx"]),
                    "cubins": {a: str(Path(folder) / rt.cubin_names(m["kernel"], tag, a)) for a in m["archs"]}}
                   for m in metas]
        return {"kernels": kernels, "cc": tuple(metas[0]["ptx_cc"]), "archs": list(archs), "skipped": False,
                "assembler": metas[0]["assembler"], "summary": f"{len(kernels)} kernels (the CLI build's)"}

    monkeypatch.setattr(cuda_check, "compile_check", cli_kernels)
    lines = []
    path = write_module("cuda", net, r, tmp_path, name=module.stem, log=lines.append)
    assert compiled == [module.name]
    assert path.read_bytes() == module.read_bytes()
    ours, theirs = folder_of(path), folder_of(module)
    assert sorted(p.name for p in ours.iterdir()) == sorted(p.name for p in theirs.iterdir())
    for p in theirs.glob("*.ptx"):
        assert (ours / p.name).read_bytes() == p.read_bytes(), p.name
    assert any(line.startswith("compile check passed") for line in lines), lines
    # build=False: the module alone, as before the build step was the target's
    bare = write_module("cuda", net, r, tmp_path / "bare", name=module.stem, build=False)
    assert bare.read_bytes() == module.read_bytes() and not folder_of(bare).exists()


@pytest.mark.slow
def test_built_module_first_call_loads_its_cubins(built, tmp_path):
    """The real build's files, a fresh process, numba-cuda's compile patched
    to raise: every kernel comes from the sm_89 cubin by its real entry."""
    module, _ = built
    folder, tag, _ = rt.cubin_source(str(module))
    truth = {}
    for p in Path(folder).glob(f"*.{tag}.json"):
        meta = json.loads(p.read_text())
        cubin = (Path(folder) / rt.cubin_names(meta["kernel"], tag, "sm_89")).read_bytes()
        truth[meta["kernel"]] = {"entry": meta["entry"], "sm_89": sha(cubin)}
    rec = run_driver(module, "8.9", tmp_path)
    check_loaded(rec, truth, "sm_89")



GPU_CHILD = r"""
import json, logging, sys
path, out, patch = sys.argv[1], sys.argv[2], sys.argv[3] == "patch"
log = []


class H(logging.Handler):
    def emit(self, record):
        log.append(record.getMessage())


logging.getLogger("netgen").addHandler(H())
logging.getLogger("netgen").setLevel(logging.DEBUG)
import numba.cuda
import numba.cuda.compiler as C
import numba.cuda.dispatcher as D


def boom(*a, **k):
    raise AssertionError("numba-cuda compiled")


if patch:
    for n in ("compile_cuda", "compile_ptx", "compile"):
        setattr(C, n, boom)
    D.CUDADispatcher.compile = boom
import importlib.util
import torch
spec = importlib.util.spec_from_file_location("gpu_cubin_module", path)
mod = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = mod
spec.loader.exec_module(mod)
res = {}
for dt in (torch.float32, torch.float64):
    g = torch.Generator().manual_seed(1)
    x = torch.randn(5, mod._N, generator=g, dtype=dt).cuda().requires_grad_(True)
    v, P = mod.Layer()(x)
    w = torch.arange(v.shape[-1], device=x.device, dtype=dt)
    (gx,) = torch.autograd.grad((v * w).sum() + 0.5 * P.sum(), x)
    c = mod.Layer().column(x.detach(), torch.zeros(5, dtype=torch.int64, device=x.device))
    res[str(dt)] = {"v": v.tolist(), "P": P.tolist(), "gx": gx.tolist(), "c": c.tolist()}
with open(out, "w") as fh:
    json.dump({"res": res, "log": log}, fh)
"""


def _has_gpu() -> bool:
    import torch

    return torch.cuda.is_available()


@pytest.mark.gpu
@pytest.mark.skipif(not _has_gpu(), reason="needs a CUDA GPU")
def test_gpu_first_call_from_cubins_equals_numba(built, tmp_path):
    """On a GPU: a fresh process with numba-cuda's compile patched to raise
    runs the built module's layer from its cubins; the results equal a
    process that compiles with numba-cuda (NETGEN_CUDA_CUBINS=0)."""
    import torch

    module, _ = built
    outs = {}
    for mode, extra in (("patch", {}), ("numba", {"NETGEN_CUDA_CUBINS": "0"})):
        env = dict(os.environ, PYTHONPATH=str(ROOT), **extra)
        env.pop("NUMBA_ENABLE_CUDASIM", None)
        out = tmp_path / f"{mode}.json"
        proc = subprocess.run([sys.executable, "-c", GPU_CHILD, str(module), str(out), mode], capture_output=True,
                              text=True, env=env, timeout=1200)
        assert proc.returncode == 0, proc.stderr[-3000:]
        outs[mode] = json.loads(out.read_text())
    assert sum("loaded from" in line for line in outs["patch"]["log"]) >= 8, outs["patch"]["log"]
    assert any("self-check skipped" in line for line in outs["patch"]["log"])
    for dt, tol in (("torch.float32", 1e-5), ("torch.float64", 1e-12)):
        for key in ("v", "P", "gx", "c"):
            a, b = (torch.tensor(outs[m]["res"][dt][key], dtype=torch.float64) for m in ("patch", "numba"))
            torch.testing.assert_close(a, b, atol=tol * max(1.0, float(b.abs().max())), rtol=0)
