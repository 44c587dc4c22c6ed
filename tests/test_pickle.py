"""A model holding netgen layers saved in one process loads and runs in a
NEW process: ``torch.save(model)`` (compat modules, an AutoLayer from
``topk_loss``, a generated layer built in memory and one from
``netgen.load(path)``) and a ``state_dict`` round trip, the latter with
``torch.load(..., weights_only=True)``, which refuses the pickled model
(docs/faq.md: save the state_dict)."""

import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.timeout(600)

MODEL = '''
import torch
import netgen
from netgen.codegen.auto import build_layer, runtime_steepness
from netgen.compat import DiffSortNet, DiffTopkNet
from netgen.construct import build
from netgen.relax.distributions import Relaxation
from netgen import topk_loss


# a learnable steepness needs run-time steepness in the generated layers (PLAN interface 2)
LEARN = runtime_steepness(build_layer(build("transposition", 3, 3), Relaxation(), "torch"))


class Model(torch.nn.Module):
    def __init__(self, generated_path):
        super().__init__()
        self.lin = torch.nn.Linear(6, 10).double()
        self.sort = DiffSortNet("odd_even", 10, steepness=torch.nn.Parameter(torch.tensor(4.0, dtype=torch.float64)) if LEARN else 4.0,
                                target="torch")
        self.topk = DiffTopkNet("bitonic", 10, 3, distribution="logistic", target="numba")
        self.loss = topk_loss(10, [0.5, 0.5], target="auto")
        self.mem = build_layer(build("splitter", 10, 2), Relaxation("gaussian", 3.0), "torch")
        self.file = netgen.load(generated_path).Layer()

    def forward(self, f, y):
        s = self.lin(f)
        return [self.sort(s)[1], self.topk(s)[1], self.loss(s, y).reshape(1), self.mem(s)[1], self.file(s)[1]]
'''

SAVE = '''
import sys, torch
sys.path.insert(0, sys.argv[1])
from netgen.codegen import write_module
from netgen.construct import build
from netgen.relax.distributions import Relaxation
import model
p = write_module("torch", build("transposition", 10, 4), Relaxation("cauchy", 2.0), sys.argv[1] + "/gen")
torch.manual_seed(0)
m = model.Model(str(p))
f, y = torch.randn(5, 6, dtype=torch.float64), torch.tensor([0, 3, 9, 2, 2])
if model.LEARN:
    m.sort.steepness.data.fill_(2.5)  # a changed parameter travels in the pickle and in the state_dict
else:
    m.sort.steepness = 2.5
m.topk.steepness = 7.0            # so does a changed plain attribute (in the pickle)
outs = m(f, y)
torch.save(m, sys.argv[1] + "/model.pt")
torch.save(m.state_dict(), sys.argv[1] + "/state.pt")
torch.save({"f": f, "y": y, "outs": [o.detach() for o in outs], "path": str(p)}, sys.argv[1] + "/io.pt")
print("keys", sorted(m.state_dict()), model.LEARN)
'''

LOAD = '''
import sys, torch
sys.path.insert(0, sys.argv[1])
io = torch.load(sys.argv[1] + "/io.pt")
try:  # torch's safe loader (the default since torch 2.6) refuses a pickled model: docs/faq.md
    torch.load(sys.argv[1] + "/model.pt", weights_only=True)
except Exception as e:  # pickle.UnpicklingError naming the class it will not build
    assert "weights_only" in str(e), e
else:
    raise AssertionError("a pickled model loaded with weights_only=True")
m = torch.load(sys.argv[1] + "/model.pt", weights_only=False)
outs = m(io["f"], io["y"])
err = max((a - b).abs().max().item() for a, b in zip(outs, io["outs"]))
assert err < 1e-12, err
outs[0].sum().backward()
import model  # a fresh model, then the state_dict
assert (getattr(m.sort.steepness, "grad", None) is not None) == model.LEARN
torch.manual_seed(1)
fresh = model.Model(io["path"])
fresh.load_state_dict(torch.load(sys.argv[1] + "/state.pt", weights_only=True))  # the safe route
fresh.topk.steepness = 7.0  # plain attributes are not state (as in difftopk)
if not model.LEARN:
    fresh.sort.steepness = 2.5
outs = fresh(io["f"], io["y"])
err2 = max((a - b).abs().max().item() for a, b in zip(outs, io["outs"]))
assert err2 < 1e-12, err2
print("ok", err, err2)
'''


@pytest.mark.slow
def test_torch_save_and_state_dict_load_in_a_new_process(tmp_path):
    (tmp_path / "model.py").write_text(textwrap.dedent(MODEL))
    env = {"NETGEN_CACHE_DIR": str(tmp_path / "cache"), "NETGEN_NUMBA_PARALLEL": "0"}
    import os

    env = {**os.environ, **env}
    out = subprocess.run([sys.executable, "-c", SAVE, str(tmp_path)], capture_output=True, text=True, env=env,
                         timeout=500)
    assert out.returncode == 0, out.stderr[-3000:]
    # the state_dict holds the learnable steepness and the Linear, nothing of the generated layers
    learn = out.stdout.strip().endswith("True")
    want = ["lin.bias", "lin.weight"] + (["sort.steepness"] if learn else [])
    assert f"keys {want}" in out.stdout, out.stdout
    out = subprocess.run([sys.executable, "-c", LOAD, str(tmp_path)], capture_output=True, text=True, env=env,
                         timeout=500)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.startswith("ok")
