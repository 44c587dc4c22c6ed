"""Issue 20, CUDA: a new process's first call of a cuda layer compiles
nothing with numba-cuda; its kernels come from cubins (or PTX) beside the
module through ``cuda.core``.

No GPU here: the first call runs in a fresh process
(tests/codegen/cuda/_cuda_cubin_driver.py) with numba-cuda's compile entry
points patched to raise, ``cuda.core`` faked to record what it is asked to
load, and torch.cuda claiming one device of a given compute capability.
These tests load stand-in cubins (``fabricate``) or what a fake numba
compile saved into netgen's cache; the real build's files are tested in
test_cuda_cubin_build.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("numba_cuda")

from _cuda_cubin_helpers import DRIVER, KERNELS_HELD, ROOT, check_loaded, fabricate, run_driver, sha  # noqa: E402
from netgen.codegen import write_module  # noqa: E402
from netgen.codegen.cuda.cubins import folder_of  # noqa: E402
from netgen.codegen.cuda import cubin as rt  # noqa: E402
from netgen.construct import build  # noqa: E402
from netgen.relax.distributions import default_relaxation  # noqa: E402


@pytest.fixture(scope="module")
def module(tmp_path_factory):
    d = tmp_path_factory.mktemp("cubin_mod")
    net = build("oddeven", 8, 3)
    return write_module("cuda", net, default_relaxation(net), d, build=False)  # these tests build by hand


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
