"""What the cubin tests share (test_cuda_cubin.py: stand-in cubins under the
fake driver; test_cuda_cubin_build.py: the session's real build): the
fake-driver run in a fresh process (_cuda_cubin_driver.py), the stand-in
kernels folder, and the check of what a first call loaded.
benchmarks/cuda_import_phases.py uses ``fabricate`` and ``DRIVER`` too."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

from netgen.codegen.cuda import cubin as rt
from netgen.codegen.cuda.cubins import folder_of

ROOT = Path(__file__).resolve().parents[3]
DRIVER = Path(__file__).with_name("_cuda_cubin_driver.py")
#: kernel functions of a module without lane groups: (rows, column: 4 kernels; vals_bwd and the 4 lane
#: kernels of W P / P V: 5) x 2 dtypes x 2 variants
KERNELS_HELD = 9 * 2 * 2
#: the (5, 10450) module of `netgen build` holds the rank-group kernels too
#: (grp_fwd, grp_bwd: k n floats pass 63 KiB, kernels.default_groups)
KERNELS_BUILT = KERNELS_HELD + 2 * 2 * 2


def run_driver(module: Path, cc: str, tmp_path: Path, *extra: str, env_extra=None) -> dict:
    out = tmp_path / f"rec-{cc}-{len(list(tmp_path.glob('rec-*')))}.json"
    env = dict(os.environ, PYTHONPATH=str(ROOT), **(env_extra or {}))
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    proc = subprocess.run([sys.executable, str(DRIVER), str(module), cc, str(out), *extra], capture_output=True,
                          text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(out.read_text())


def params_of(kinds) -> list[str]:
    """The PTX parameter list of a numba kernel taking ``kinds``: an array
    is 5 + 2 ndim 64-bit words, a flag one byte (written here independently
    of the launcher's packing)."""
    out = []
    for k in kinds:
        out += ["u8"] if k == "bool" else ["u64"] * (5 + 2 * int(k[1]))
    return out


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def fabricate(module: Path, archs=("sm_80", "sm_86", "sm_90"), ptx_cc=(7, 5)) -> dict:
    """A kernels folder as netgen build writes it, with stand-in cubins
    (distinct bytes per kernel and arch) and mangled-looking entry names;
    returns {kernel: {"entry", arch: sha, "ptx": sha}}."""
    from netgen.codegen.cache import load

    mod = load(module)
    folder, tag, writable = rt.cubin_source(str(module))
    assert not writable and Path(folder) == folder_of(module)
    Path(folder).mkdir(exist_ok=True)
    truth = {}
    for (_, family, _), kern in mod.KERNELS.items():
        name = kern.py_func.__name__
        entry = f"_ZN6cudapy{len(name)}{name}B2v3E5ArrayIfLi2E1C7mutable7alignedE_{tag}"
        truth[name] = {"entry": entry}
        for arch in archs:
            data = b"\x7fELF stand-in cubin " + f"{name} {arch}".encode()
            (Path(folder) / rt.cubin_names(name, tag, arch)).write_bytes(data)
            truth[name][arch] = sha(data)
        ptx = f".version 9.0\n.target sm_{ptx_cc[0]}{ptx_cc[1]}\n.visible .entry {entry}()\n{{ ret; }}\n".encode()
        (Path(folder) / f"{name}.{tag}.ptx").write_bytes(ptx)
        truth[name]["ptx"] = sha(ptx)
        meta = {"format": rt.CUBIN_FORMAT, "kernel": name, "entry": entry, "ptx": f"{name}.{tag}.ptx",
                "params": params_of(mod.KERNEL_ARGS[family]), "ptx_cc": list(ptx_cc)}
        (Path(folder) / rt.cubin_names(name, tag)).write_text(json.dumps(meta))
    return truth


def check_loaded(rec: dict, truth: dict, arch: str | None) -> None:
    assert not rec["errors"], rec["errors"]
    assert rec["compiled"] == [], rec["compiled"]
    assert rec["first_call_launches"] >= 2 * 6  # two dtypes: fwd+bwd of rows, values only, column
    assert all(launch["from_cuda_core"] for launch in rec["launch"]), rec["launch"][:3]
    loaded = rec["from_cubin"] if arch else rec["from_ptx"]
    assert (rec["from_ptx"] if arch else rec["from_cubin"]) == []
    # every kernel once, from the right file, asked for by its PTX entry name
    assert sorted(x["name"] for x in loaded) == sorted(truth) == rec["kernels"]
    for x in loaded:
        assert x["sha"] == truth[x["name"]][arch or "ptx"], (x["name"], arch)
    asked = sorted((g["name"], g["entry"]) for g in rec["get_kernel"])
    assert asked == sorted((k, t["entry"]) for k, t in truth.items())
    assert {e["entry"] for e in rec["launch"]} <= {t["entry"] for t in truth.values()}
    # shared variants were allowed the device's 227 KB of opt-in shared memory less their own 16 bytes of
    # static shared memory (the driver refuses dynamic + static > opt-in), through the loaded handle
    shared = {t["entry"] for k, t in truth.items() if k.endswith("_s")}
    assert rec["refused"] == []
    assert {h for h, v in rec["set_attribute"] if v == 227 * 1024 - 16} == shared
    assert rec["maxthreads"] == ["(768, 48)"]
    assert any("self-check skipped" in line for line in rec["log"]), rec["log"]
    # W P and P V ran in the lane kernels (and vals_bwd), both dtypes, within the driver's rules
    launched = {name for name, t in truth.items() for e in rec["launch"] if e["entry"] == t["entry"]}
    for lane in ("wp_fwd", "wp_bwd", "pv_fwd", "pv_bwd", "vals_bwd"):
        assert {f"_{lane}_f32_s", f"_{lane}_f64_s"} <= launched, (lane, sorted(launched))

