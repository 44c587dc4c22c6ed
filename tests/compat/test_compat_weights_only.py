"""issue 34 item 6: ``torch.load(weights_only=True)`` of a whole model
holding netgen layers needs no more allowlisted globals than the same model
with the published modules (no numpy internals, no netgen classes besides
the modules themselves), and loads and runs in a new process."""

import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.timeout(600)

SAVE = '''
import contextlib, io, json, sys, torch
impl, path = sys.argv[1], sys.argv[2]
with contextlib.redirect_stdout(io.StringIO()):
    if impl == "netgen":
        import netgen.compat
        netgen.compat.install()  # the same script, netgen's modules
    import difftopk, diffsort
torch.manual_seed(0)
m = torch.nn.Sequential(torch.nn.Linear(4, 8).double(),
                        difftopk.DiffTopkNet("bitonic", 8, 2, steepness=torch.nn.Parameter(torch.ones(1) * 6)),
                        diffsort.DiffSortNet("odd_even", 2, steepness=3.0))
m.loss = difftopk.TopKCrossEntropyLoss("odd_even", 5.0, [0.5, 0.5], 8)
m.nsort = difftopk.TopKCrossEntropyLoss("neuralsort", 5.0, [0.5, 0.5], 8)
torch.save(m, path + "/model.pt")
if impl == "netgen":  # what the loading process must reproduce
    x = torch.randn(3, 4, dtype=torch.float64)
    with torch.no_grad():
        torch.save({"x": x, "out": m[1](m[0](x))[1]}, path + "/io.pt")
print(json.dumps(sorted(torch.serialization.get_unsafe_globals_in_checkpoint(path + "/model.pt"))))
'''

LOAD = '''
import importlib, json, sys, torch
path, names = sys.argv[1], json.loads(sys.argv[2])
classes = [getattr(importlib.import_module(n.rsplit(".", 1)[0]), n.rsplit(".", 1)[1]) for n in names]
with torch.serialization.safe_globals(classes):
    m = torch.load(path + "/model.pt", weights_only=True)
io = torch.load(path + "/io.pt", weights_only=True)
out = m[1](m[0](io["x"]))[1]
err = (out - io["out"]).abs().max().item()
assert err < 1e-6, err
out.sum().backward()
assert m[1].steepness.grad is not None
print(m)
'''


def run(code, *args, tmp):
    env = {**os.environ, "NETGEN_CACHE_DIR": str(tmp / "cache"), "NETGEN_NUMBA_PARALLEL": "0"}
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code), *args], capture_output=True, text=True,
                         env=env, timeout=500)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout


def test_weights_only_needs_what_published_needs(tmp_path):
    pytest.importorskip("difftopk")
    pytest.importorskip("diffsort")
    counts = {}
    for impl in ("published", "netgen"):
        d = tmp_path / impl
        d.mkdir()
        names = run(SAVE, impl, str(d), tmp=tmp_path).strip().splitlines()[-1]
        import json

        counts[impl] = json.loads(names)
        if impl == "netgen":
            printed = run(LOAD, str(d), names, tmp=tmp_path)
            assert "DiffTopkNet()" in printed and "AutoLayer" not in printed
    assert len(counts["netgen"]) <= len(counts["published"]), counts
    assert not any(n.startswith(("numpy", "netgen.network", "netgen.relax", "netgen.codegen")) for n in counts["netgen"])
    # the same classes, by name (the published ones live in difftopk.* / diffsort.*)
    assert sorted(n.rsplit(".", 1)[1] for n in counts["netgen"]) == sorted(
        n.rsplit(".", 1)[1] for n in counts["published"])


def test_autolayer_pickles_plain_data(tmp_path):
    """A bare AutoLayer: only its own class is needed."""
    code = '''
import io, sys, torch
from netgen.codegen.auto import AutoLayer
from netgen.construct import build
from netgen.relax.distributions import Relaxation
layer = AutoLayer(build("splitter", 9, 3), Relaxation("logistic", 4.0), "torch")
x = torch.randn(2, 9)
want = layer(x)[1]
buf = io.BytesIO(); torch.save(layer, buf); buf.seek(0)
names = torch.serialization.get_unsafe_globals_in_checkpoint(buf)
assert names == ["netgen.codegen.auto.AutoLayer"], names
buf.seek(0)
with torch.serialization.safe_globals([AutoLayer]):
    back = torch.load(buf, weights_only=True)
assert torch.equal(back(x)[1], want)
print("ok")
'''
    assert run(code, tmp=tmp_path).strip().endswith("ok")


def test_auto_steepness_needs_no_extra_global():
    """steepness="auto" keeps its state (the chosen s, the call count) in
    the checkpoint as plain data: allowlisting the owner suffices."""
    import io

    import torch

    from netgen import SoftRank
    from netgen.codegen.auto import AutoLayer
    from netgen.compat import DiffSortNet
    from netgen.construct import build
    from netgen.relax.distributions import Relaxation

    torch.manual_seed(0)
    owners = [AutoLayer(build("splitter", 9, 3), Relaxation("logistic", 4.0), "torch", steepness="auto"),
              DiffSortNet("odd_even", 9, steepness="auto"), SoftRank(steepness="auto", target="torch")]
    x = torch.randn(4, 9, dtype=torch.float64)
    for m in owners:
        m.train()(x)
        m(x)
        m.eval()
        want = m(x)
        buf = io.BytesIO()
        torch.save(m, buf)
        buf.seek(0)
        assert torch.serialization.get_unsafe_globals_in_checkpoint(buf) == [
            f"{type(m).__module__}.{type(m).__name__}"]
        buf.seek(0)
        with torch.serialization.safe_globals([type(m)]):
            back = torch.load(buf, weights_only=True)
        a, b = m.auto_steepness, back.auto_steepness
        assert (float(b.steepness), int(b.calls), b.blur, b.training) == (
            float(a.steepness), int(a.calls), a.blur, False)
        got = back(x)
        for w, g in zip(want if isinstance(want, tuple) else (want,), got if isinstance(got, tuple) else (got,)):
            assert torch.equal(w, g)
        assert list(back.state_dict()) == list(m.state_dict())
