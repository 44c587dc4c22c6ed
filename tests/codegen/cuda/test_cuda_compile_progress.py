"""The CUDA compile check reports its progress: every kernel's PTX, then one
phase per arch (its cubins), so ``netgen build --target cuda``'s bar moves
through the compile instead of sitting at 100% after the portfolio. A
one-kernel module through the real compile workers, and the parent's
handling of the workers' progress lines with a fake worker."""

from __future__ import annotations

import json
import os

import pytest

pytest.importorskip("numba_cuda")

from netgen.codegen.cuda.compile_check import compile_check  # noqa: E402

TINY = '''
"""a stand-in for a generated cuda module: one kernel"""
import numba
from numba import cuda, types
NETWORK, RELAXATION, TARGET = {}, {}, "cuda"
class Layer: pass
@cuda.jit
def _tiny_f32_g(a):
    i = cuda.grid(1)
    if i < a.shape[0]:
        a[i] = a[i] * 2.0
KERNELS = {0: _tiny_f32_g}
def kernel_signatures():
    return [("_tiny_f32_g", _tiny_f32_g.py_func, (types.Array(types.float32, 1, "C"),))]
'''

FAKE_WORKER = '''
import json, sys
part = sys.argv[4]
names = ["k0", "k1", "k2"] if part == "0/2" else ["k3"]
archs = sys.argv[5].split(",")
say = lambda **e: print("netgen-progress " + json.dumps(e), file=sys.stderr, flush=True)
say(total=len(names) * (1 + len(archs)))
for n in names:
    say(done=1, what="PTX " + n)
for a in archs:
    for n in names:
        say(done=1, what=a + " " + n)
print("some other line", file=sys.stderr)
print(json.dumps({"cc": [7, 5], "archs": archs, "assembler": "fake", "skipped": "", "out_dir": sys.argv[2],
                  "kernels": [{"index": i, "name": n, "ptx_bytes": 1, "cubin_bytes": 1} for i, n in enumerate(names)]}))
'''


@pytest.mark.slow
def test_real_workers_report_ptx_then_each_arch(tmp_path):
    from netgen.codegen.cuda.compile import _ptxas

    if _ptxas() is None:
        pytest.skip("no ptxas")
    path = tmp_path / "tiny.py"
    path.write_text(TINY)
    events = []
    res = compile_check(path, cc=(7, 5), archs=["sm_80", "sm_90"], jobs=1,
                        progress=lambda done, total, what: events.append((done, total, what)))
    assert [k["name"] for k in res["kernels"]] == ["_tiny_f32_g"] and set(res["kernels"][0]["cubins"]) == {"sm_80", "sm_90"}
    assert events == [(0, 3, ""), (1, 3, "PTX _tiny_f32_g"), (2, 3, "sm_80 _tiny_f32_g"), (3, 3, "sm_90 _tiny_f32_g")]


def test_parent_sums_the_workers_progress(tmp_path, monkeypatch):
    (tmp_path / "fakeworker.py").write_text(FAKE_WORKER)
    (tmp_path / "m.py").write_text("# a module\n")
    monkeypatch.setenv("NETGEN_CUDA_COMPILE_WORKER", "fakeworker")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]))
    events = []
    res = compile_check(tmp_path / "m.py", cc=(7, 5), archs=["sm_80", "sm_90"], jobs=2,
                        progress=lambda done, total, what: events.append((done, total, what)))
    assert len(res["kernels"]) == 4
    assert events[-1][:2] == (12, 12), events  # the total is exact once both workers said theirs
    dones = [d for d, _, _ in events]
    assert dones == sorted(dones) and all(d <= t for d, t, _ in events)
    whats = [w for _, _, w in events]
    for name in ("k0", "k3"):  # each kernel: its PTX before its cubins
        assert whats.index(f"PTX {name}") < whats.index(f"sm_80 {name}") < whats.index(f"sm_90 {name}")
    assert json.dumps(res)  # the result is plain data
