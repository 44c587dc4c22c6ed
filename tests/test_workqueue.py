"""Issue 19 finding 8: a numba layer called from several Python threads
under numba's ``workqueue`` threading layer (the one numba falls back to
without OpenMP or TBB; not reentrant) must not abort the process. The
generated module serialises kernel calls under it with a lock.

The test runs the same threaded workload twice in fresh processes: with the
module as generated (must give correct results), and with the lock switched
off (the generated module's ``_needs_lock`` patched to return False, the
hook its runtime consults on every parallel call), which must fail: numba
aborts the process ("Terminating: Nested parallel kernel launch detected",
SIGABRT) or the results are wrong. Without that control the first half
could pass by luck (e.g. threads that never overlap)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from netgen.codegen import TARGETS
from netgen.construct import build
from netgen.relax.distributions import Relaxation

_SCRIPT = textwrap.dedent('''
    import sys, threading
    import numba, torch
    from netgen.codegen.cache import load
    from netgen.construct import build
    from netgen.relax import reference
    from netgen.relax.distributions import Relaxation
    mod = load(sys.argv[1])
    assert mod._PARALLEL
    mod._SERIAL_WORK = 0  # parallel kernels even for this tiny case
    if hasattr(mod, "_STALL_WORK"):
        mod._STALL_WORK = 0  # and no serial back-off after a slow (stalled) parallel call
    if sys.argv[2] == "no-lock":  # the control: the module's lock switched off
        mod._needs_lock = lambda: False
    layer = mod.Layer(threads=2)
    net = build("oddeven", 6, 6)
    r = Relaxation("logistic", 4.0)
    torch.manual_seed(0)
    xs = [torch.randn(40, 6, dtype=torch.float64) for _ in range(4)]
    want = [reference.forward(net, x, r)[1] for x in xs]
    bad = []
    start = threading.Barrier(4)
    def work(i):
        start.wait()  # the four threads enter the kernels together
        for _ in range(20):
            with torch.no_grad():
                P = layer(xs[i])[1]
            if not torch.allclose(P, want[i], atol=1e-12, rtol=0):
                bad.append(i)
    ts = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    [t.start() for t in ts]
    [t.join() for t in ts]
    print(numba.threading_layer(), "bad", len(bad))
''')


def _run(path, lock: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, NUMBA_THREADING_LAYER="workqueue", NETGEN_NUMBA_PARALLEL="1", NUMBA_NUM_THREADS="2")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = os.pathsep.join([root, env.get("PYTHONPATH", "")])
    return subprocess.run([sys.executable, "-c", _SCRIPT, str(path), lock], env=env, capture_output=True,
                          text=True, timeout=900)


@pytest.mark.slow
def test_workqueue_layer_is_thread_safe_and_the_lock_is_what_makes_it(tmp_path):
    path = tmp_path / "wq_mod.py"
    path.write_text(TARGETS["numba"].emit(build("oddeven", 6, 6), Relaxation("logistic", 4.0)))
    ok = _run(path, "lock")  # compiles the parallel kernels (numba caches them beside the file)
    assert ok.returncode == 0, ok.stderr[-3000:]
    assert "workqueue bad 0" in ok.stdout, ok.stdout
    control = _run(path, "no-lock")
    aborted = control.returncode != 0 and "workqueue threading layer is not threadsafe" in control.stderr
    wrong = control.returncode == 0 and "workqueue bad 0" not in control.stdout
    assert aborted or wrong, ("without the lock the threaded calls should fail", control.returncode,
                              control.stdout, control.stderr[-2000:])
