"""Issue 20, CUDA: a new process's first call of a cuda layer compiles
nothing with numba-cuda; its kernels come from cubins (or PTX) beside the
module through ``cuda.core``.

No GPU here: the first call runs in a fresh process
(tests/codegen/cuda/_cuda_cubin_driver.py) with numba-cuda's compile entry
points patched to raise, ``cuda.core`` faked to record what it is asked to
load, and torch.cuda claiming one device of a given compute capability.
The build test needs ptxas (the ``cuda`` extra's nvidia-cuda-nvcc wheel)
and skips without it."""

from __future__ import annotations

import hashlib
import json
import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("numba_cuda")

from netgen.codegen import write_module  # noqa: E402
from netgen.codegen.cuda.cubins import ARCHS, REQUIRED_ARCHS, folder_of  # noqa: E402
from netgen.codegen.cuda import cubin as rt  # noqa: E402
from netgen.construct import build  # noqa: E402
from netgen.relax.distributions import default_relaxation  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]
DRIVER = Path(__file__).with_name("_cuda_cubin_driver.py")
#: kernel functions of a module without lane groups: (rows, column: 4 kernels; vals_bwd and the 4 lane
#: kernels of W P / P V: 5) x 2 dtypes x 2 variants
KERNELS_HELD = 9 * 2 * 2
#: the (5, 10450) module of `netgen build` holds the rank-group kernels too
#: (grp_fwd, grp_bwd: k n floats pass 63 KiB, kernels.default_groups)
KERNELS_BUILT = KERNELS_HELD + 2 * 2 * 2
FAMILIES = {"fwd": "rows_forward", "bwd": "rows_backward", "fwd_col": "column_forward", "bwd_col": "column_backward"}


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


@pytest.fixture(scope="module")
def module(tmp_path_factory):
    d = tmp_path_factory.mktemp("cubin_mod")
    net = build("oddeven", 8, 3)
    return write_module("cuda", net, default_relaxation(net), d, build=False)  # these tests build by hand


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


@pytest.mark.parametrize("cc, arch", [("8.6", "sm_86"), ("8.9", "sm_86"), ("9.0", "sm_90"), ("8.0", "sm_80"),
                                      ("12.1", None)])
def test_first_call_loads_cubins_and_compiles_nothing(module, tmp_path, cc, arch):
    """Exact arch, else the highest lower minor of the same major, else the
    PTX (sm_121 here: no Blackwell cubin in this folder)."""
    truth = fabricate(module)
    rec = run_driver(module, cc, tmp_path)
    check_loaded(rec, truth, arch)


def test_dynamic_shared_memory_leaves_room_for_static(module, tmp_path):
    """The fake driver holds each kernel to dynamic + static <= opt-in. On a
    device with 66 bytes of opt-in shared memory and kernels holding 16
    bytes of static shared memory, a launch may have 50 bytes: the rows with
    P (3 x 8 floats = 96 bytes) and the column (2 x 8 = 64) run the global
    variant, values only stays shared in float32 (8 floats = 32 bytes), not
    in float64 (64 bytes). Nothing is refused and, under 48 KB, nothing
    needs an opt-in."""
    truth = fabricate(module)
    rec = run_driver(module, "9.0", tmp_path, env_extra={"NETGEN_FAKE_OPTIN": "66"})
    assert not rec["errors"], rec["errors"]
    assert rec["refused"] == [] and rec["set_attribute"] == []
    # the lane kernels, one lane per block (8 floats): shared in float32 (32 bytes), global in float64 (64)
    name_of = {t["entry"]: name for name, t in truth.items()}
    lanes = {(name_of[e["entry"]], e["shmem"]) for e in rec["launch"]
             if name_of.get(e["entry"], "").startswith(("_wp_", "_pv_"))}
    assert lanes == {(f"_{k}_f32_s", 32) for k in ("wp_fwd", "wp_bwd", "pv_fwd", "pv_bwd")} | {
        (f"_{k}_f64_g", 0) for k in ("wp_fwd", "wp_bwd", "pv_fwd", "pv_bwd")}, sorted(lanes)
    assert rec["variants"]["fwd 3"] == "global" and rec["variants"]["fwd_col 2"] == "global"
    assert {launch["shmem"] for launch in rec["launch"]} == {0, 32}


@pytest.mark.parametrize("sms", [132, 2])
def test_grid_within_the_sms_gets_the_kernels_thread_limit(module, tmp_path, sms):
    """A shared-variant launch whose grid has no more blocks than the device
    has SMs runs as many threads as the loaded kernel allows (768 x 48
    registers here: the fake driver refuses more), since each block has an
    SM to itself; with more blocks than SMs (B = 3 rows on a 2-SM device) a
    small block keeps THREADS (256), as does every global-variant launch."""
    truth = fabricate(module)
    rec = run_driver(module, "9.0", tmp_path, env_extra={"NETGEN_FAKE_SMS": str(sms)})
    assert not rec["errors"], rec["errors"]
    assert rec["refused"] == []
    shared = {t["entry"] for k, t in truth.items() if k.endswith("_s")}
    seen = {(e["entry"] in shared, e["grid"] <= sms, e["threads"]) for e in rec["launch"]}
    assert {(s, t) for s, small, t in seen if s and small} <= {(True, 768)}
    assert {t for s, small, t in seen if not (s and small)} <= {256}
    assert any(s and small for s, small, _ in seen) == (sms == 132)  # n = 8: every grid is B = 3 rows or fewer
    assert any(s for s, _, _ in seen)


def test_first_call_with_cubins_imports_no_numba(module, tmp_path):
    """Issue 29 item 6: with cubins present, importing the module and its
    first forward + backward (rows, values only, column; float32 and
    float64) never import numba or numba-cuda (the driver makes such an
    import fail), and the first call's phases are logged on the netgen
    logger at DEBUG: the kernels loaded (module load), their launch
    records (first launch), the tables uploaded."""
    truth = fabricate(module)
    rec = run_driver(module, "9.0", tmp_path, "nonumba")
    assert not rec["errors"], rec["errors"]
    assert rec["numba_imports"] == [] and rec["numba_imported"] == []
    assert sorted(x["name"] for x in rec["from_cubin"]) == sorted(truth)
    log = rec["log"]
    assert any(" loaded from " in line and " ms" in line for line in log), log
    assert any("launch record of fwd" in line for line in log), log
    assert any("tables uploaded" in line for line in log), log


def test_second_device_launches_in_its_own_context_and_stream(module, tmp_path):
    """Issue 29 item 4: tensors on cuda:1 while the current device is 0 (a
    fake second device). Every launch of those calls runs with device 1
    current and on device 1's current stream; its kernels' attributes and
    opt-in are asked of device 1; the current device is 0 again after the
    call. bfloat16 inputs launch the float32 kernels and come back in
    bfloat16 (values, P, column and the gradient)."""
    truth = fabricate(module)
    rec = run_driver(module, "9.0", tmp_path, "device1")
    assert not rec["errors"], rec["errors"]
    dev1 = rec["device1"]
    first, later = rec["launch"][:dev1["launch_from"]], rec["launch"][dev1["launch_from"]:]
    assert {(e["device"], tuple(e["stream"])) for e in first} == {(0, ("stream", 0x7000))}
    assert len(later) >= 2 * 6, later  # two dtypes: fwd+bwd of rows, values only, column
    assert {(e["device"], tuple(e["stream"])) for e in later} == {(1, ("stream", 0x7001))}, later[:3]
    assert dev1["current_after"] == 0
    # each kernel's limits were read and its opt-in asked for on both devices
    assert set(rec["attributes_of"]) == {0, 1} and set(rec["opt_in_devices"]) == {0, 1}
    f32 = {t["entry"] for k, t in truth.items() if "_f32_" in k}
    assert {e["entry"] for e in later} <= f32
    assert dev1["dtypes"]["torch.float32"] == ["torch.float32"] * 5
    assert dev1["dtypes"]["torch.bfloat16"] == ["torch.bfloat16"] * 5


def test_fallback_without_a_fitting_cubin_is_numba_and_logged(module, tmp_path):
    """A Turing device (7.5) with cubins for 8.x/9.0 and PTX only for 8.0:
    nothing fits, so numba-cuda compiles (here: the driver's fake compile)
    and the netgen logger says why; the self-check is not skipped."""
    fabricate(module, ptx_cc=(8, 0))
    rec = run_driver(module, "7.5", tmp_path, "numba")
    assert rec["from_cubin"] == rec["from_ptx"] == []
    assert len(rec["compiled"]) == KERNELS_HELD, rec["compiled"]
    assert any("no cubin for sm_75 and no PTX at or below it" in line for line in rec["log"]), rec["log"]
    # numba-cuda's kernels get the same request as loaded ones: opt-in less their static shared memory
    assert rec["refused"] == []
    assert {v for h, v in rec["set_attribute"] if h == "numba"} == {227 * 1024 - 16}
    assert not any("self-check skipped" in line for line in rec["log"])


def test_stale_or_damaged_files_are_not_loaded(module, tmp_path):
    """Files of another build of the module (another tag) are ignored, and
    so is a metadata file whose parameter list disagrees with the launcher's
    packing (logged): numba compiles instead."""
    truth = fabricate(module)
    folder, tag, _ = rt.cubin_source(str(module))
    name = sorted(truth)[0]
    meta_path = Path(folder) / rt.cubin_names(name, tag)
    meta = json.loads(meta_path.read_text())
    meta["params"] = meta["params"][:-1]
    meta_path.write_text(json.dumps(meta))
    rec = run_driver(module, "9.0", tmp_path, "numba")
    assert rec["compiled"] == [name]
    assert any("the launcher packs" in line for line in rec["log"]), rec["log"]
    # the same files under another module's tag: nothing loads
    for p in Path(folder).iterdir():
        p.rename(p.with_name(p.name.replace(tag, "0" * 16)))
    rec = run_driver(module, "9.0", tmp_path, "numba")
    assert rec["from_cubin"] == [] and len(rec["compiled"]) == KERNELS_HELD


@pytest.mark.slow
def test_module_in_the_cache_saves_numba_cubin_for_the_next_process(tmp_path):
    """A module built in memory (netgen's cache: content-addressed file):
    the first process compiles (fake numba compile) and saves what numba
    linked; a second process loads those cubins and compiles nothing. A
    module outside the cache never gets files written beside it."""
    from netgen.codegen import cache
    from netgen.codegen import emit

    net = build("oddeven", 6, 2)
    source = emit("cuda", net, default_relaxation(net))
    env = {"NETGEN_CACHE_DIR": str(tmp_path / "cache")}
    os.environ["NETGEN_CACHE_DIR"] = env["NETGEN_CACHE_DIR"]
    try:
        path = cache.module_file(cache.qualname_for("cubin_test", source))
        cache._write_once(path, source.encode())
    finally:
        del os.environ["NETGEN_CACHE_DIR"]
    folder, tag, writable = rt.cubin_source(str(path))
    assert writable
    # (the self-check's reference run launches through numba's dispatcher: no GPU here)
    first = run_driver(path, "8.6", tmp_path, "numba", env_extra={**env, "NETGEN_CUDA_SELFCHECK": "0"})
    assert not first["errors"], first["errors"]
    assert len(first["compiled"]) == KERNELS_HELD and first["from_cubin"] == []
    saved = sorted(p.name for p in Path(folder).iterdir())
    assert len(saved) == 2 * KERNELS_HELD and all(tag in n for n in saved), saved
    assert sum(n.endswith(".sm_86.cubin") for n in saved) == KERNELS_HELD
    second = run_driver(path, "8.6", tmp_path, env_extra=env)  # compiling raises in this one
    assert not second["errors"], second["errors"]
    assert second["compiled"] == [] and len(second["from_cubin"]) == KERNELS_HELD
    for x in second["from_cubin"]:
        data = (Path(folder) / rt.cubin_names(x["name"], tag, "sm_86")).read_bytes()
        assert x["sha"] == sha(data) and data.startswith(b"\x7fELF numba-linked cubin of ")
    entries = {json.loads((Path(folder) / rt.cubin_names(k, tag)).read_text())["entry"] for k in second["kernels"]}
    assert {g["entry"] for g in second["get_kernel"]} == entries
    # outside the cache (a netgen build folder): nothing is written
    other = tmp_path / "built" / "layer.py"
    other.parent.mkdir()
    other.write_text(source)
    rec = run_driver(other, "8.6", tmp_path, "numba")
    assert len(rec["compiled"]) == KERNELS_HELD and not folder_of(other).exists()


def test_pick_order(tmp_path):
    """Which file a device gets, on the runtime module itself."""
    meta = {"ptx": "k.t.ptx", "ptx_cc": [7, 5]}
    for arch in ("sm_80", "sm_86", "sm_90a", "sm_100"):
        (tmp_path / rt.cubin_names("k", "t", arch)).write_bytes(b"x")
    (tmp_path / "k.t.ptx").write_text("ptx")

    def pick(cc):
        r = rt.cubin_pick(str(tmp_path), "k", "t", meta, cc)
        return r and (r[0], Path(r[1]).name)

    assert pick((8, 6)) == ("cubin", "k.t.sm_86.cubin")
    assert pick((8, 7)) == pick((8, 9)) == ("cubin", "k.t.sm_86.cubin")
    assert pick((8, 0)) == ("cubin", "k.t.sm_80.cubin")
    assert pick((9, 0)) == ("cubin", "k.t.sm_90a.cubin")
    assert pick((10, 3)) == ("cubin", "k.t.sm_100.cubin")
    assert pick((12, 0)) == pick((7, 5)) == ("ptx", "k.t.ptx")
    assert pick((7, 0)) is None
    assert rt.cubin_pick(str(tmp_path), "k", "t", {"ptx": "../k.t.ptx", "ptx_cc": [7, 5]}, (12, 0)) is None


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


@pytest.mark.slow
def test_concurrent_first_processes_share_the_cache(tmp_path):
    """Three processes' first calls at once on one module in the cache:
    each compiles (fake) and saves; the files are complete, written once,
    no temporary file is left, and a fourth process loads them all."""
    from netgen.codegen import cache
    from netgen.codegen import emit

    net = build("oddeven", 5, 2)
    source = emit("cuda", net, default_relaxation(net))
    env = dict(os.environ, PYTHONPATH=str(ROOT), NETGEN_CACHE_DIR=str(tmp_path / "cache"), NETGEN_CUDA_SELFCHECK="0")
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    os.environ["NETGEN_CACHE_DIR"] = env["NETGEN_CACHE_DIR"]
    try:
        path = cache.module_file(cache.qualname_for("cubin_race", source))
        cache._write_once(path, source.encode())
    finally:
        del os.environ["NETGEN_CACHE_DIR"]
    procs = [subprocess.Popen([sys.executable, str(DRIVER), str(path), "8.6", str(tmp_path / f"r{i}.json"), "numba"],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in range(3)]
    for p in procs:
        _, err = p.communicate(timeout=600)
        assert p.returncode == 0, err[-3000:]
    folder, tag, _ = rt.cubin_source(str(path))
    names = sorted(p.name for p in Path(folder).iterdir())
    assert len(names) == 2 * KERNELS_HELD and not [n for n in names if n.startswith(".tmp-")], names
    for n in names:
        if n.endswith(".cubin"):
            assert (Path(folder) / n).read_bytes().startswith(b"\x7fELF numba-linked cubin of ")
        else:
            assert json.loads((Path(folder) / n).read_text())["format"] == rt.CUBIN_FORMAT
    rec = run_driver(path, "8.6", tmp_path, env_extra={"NETGEN_CACHE_DIR": env["NETGEN_CACHE_DIR"]})
    assert not rec["errors"] and rec["compiled"] == [] and len(rec["from_cubin"]) == KERNELS_HELD


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
