"""Issue 32, M3, M8 and the minor list: empty batches in every target and
path, the readers' strictness, refusals with netgen's message, the loss's
arguments, the benchmark's cache and threads. Each test failed on 064e1b4
unless it says otherwise."""

import os
import subprocess
import sys
from unittest import mock

import pytest
import torch
from click.testing import CliRunner

from netgen.cli import main
from netgen.codegen.auto import AutoLayer, build_layer
from netgen.construct import build
from netgen.io import from_dict, loads
from netgen.network import Network
from netgen.relax import reference
from netgen.relax.distributions import Relaxation

NET = build("splitter", 6, 2)
R = Relaxation("logistic", 3.0)
SHAPES = [(0, 6), (3, 0, 6), (0, 0, 6)]


def _build(target):
    with mock.patch.dict(os.environ, {"NETGEN_NUMBA_PARALLEL": "0"}):  # serial kernels compile ~3x faster
        if target == "auto":
            a = AutoLayer(NET, R)  # on a CPU: numba
            a.layer_for(torch.device("cpu"))
            return a
        return build_layer(NET, R, target)


@pytest.fixture(scope="module", params=["torch", "numba", "auto"])
def layer(request):
    return _build(request.param)


# -------------------------------------------------------- M3: empty batches
@pytest.mark.parametrize("shape", SHAPES)
def test_empty_batches_forward_backward_column_hard(layer, shape):
    lead = shape[:-1]
    x = torch.randn(*shape, dtype=torch.float64, requires_grad=True)
    v, P = layer(x)
    assert v.shape == (*lead, 2) and P.shape == (*lead, 2, 6) and v.dtype == P.dtype == torch.float64
    (v.sum() + P.sum()).backward()
    assert x.grad is not None and x.grad.shape == shape
    x2 = torch.randn(*shape, dtype=torch.float32, requires_grad=True)
    c = layer.column(x2, torch.zeros(lead, dtype=torch.long))
    assert c.shape == (*lead, 2) and c.dtype == torch.float32
    c.sum().backward()
    hv, hi = layer.hard(x.detach())
    assert hv.shape == hi.shape == (*lead, 2)


def test_autolayer_on_a_cpu_serves_empty_batches_with_numba():
    a = AutoLayer(NET, R)
    assert a(torch.randn(0, 6))[1].shape == (0, 2, 6)
    assert a.targets == {"cpu": "numba"}


@pytest.mark.slow
def test_empty_batches_in_the_cuda_simulator():
    code = ("import torch; from netgen.construct import build; from netgen.relax.distributions import Relaxation; "
            "from netgen.codegen.auto import build_layer; l = build_layer(build('splitter', 6, 2), "
            "Relaxation('logistic', 3.0), 'cuda')\n"
            "for s in [(0, 6), (3, 0, 6)]:\n"
            "    x = torch.randn(*s, dtype=torch.float64, requires_grad=True); v, P = l(x); "
            "(v.sum() + P.sum()).backward(); assert x.grad.shape == s\n"
            "    assert l.column(x, torch.zeros(s[:-1], dtype=torch.long)).shape == (*s[:-1], 2)\n"
            "    assert l.hard(x)[0].shape == (*s[:-1], 2)\n"
            "print('ok')")
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "1", "NETGEN_CUDA_SELFCHECK": "0", "PYTHONPATH": os.pathsep.join(
        [os.getcwd(), os.environ.get("PYTHONPATH", "")])}
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0 and "ok" in p.stdout, p.stderr[-1500:]


# -------------------------------------------------------- netgen's refusals
@pytest.mark.parametrize("target", ["torch", "numba"])
def test_hard_refuses_complex_and_meta_input_with_a_message(target):
    layer = _build(target)
    with pytest.raises(ValueError, match="real numbers"):
        layer.hard(torch.randn(2, 6, dtype=torch.complex64))
    with pytest.raises(ValueError, match="meta device"):
        layer.hard(torch.randn(2, 6, device="meta"))
    with pytest.raises(ValueError, match="meta device"):
        layer.column(torch.randn(2, 6), torch.zeros(2, dtype=torch.long, device="meta"))


@pytest.mark.parametrize("target", ["torch", "numba"])
def test_vmap_of_hard_gives_netgens_refusal(target):
    layer = _build(target)
    with pytest.raises(ValueError, match="netgen: torch.func transforms"):
        torch.func.vmap(layer.hard)(torch.randn(3, 2, 6))


@pytest.mark.parametrize("kwargs, words", [
    ({"eps": -1.0}, "eps must be in"), ({"eps": float("nan")}, "eps must be in"), ({"eps": 0.5}, "eps must be in"),
    ({"eps": "1e-7"}, "eps must be a number"), ({"p_k": "1"}, "p_k must be a sequence of numbers"),
    ({"p_k": ["0.5", 0.5]}, "p_k must be a sequence of numbers"), ({"p_k": [True]}, "p_k must be a sequence"),
])
def test_the_loss_refuses_bad_eps_and_p_k(kwargs, words):
    from netgen.relax.loss import TopKCrossEntropyLoss

    args = {"p_k": [0.5, 0.5], **kwargs}
    with pytest.raises(ValueError, match=words):
        TopKCrossEntropyLoss(build_layer(NET, R, "torch"), **args)


# -------------------------------------------------------- readers (minor)
@pytest.mark.parametrize("text", ["[(0, 1), (2, 3)]\n[(1, 2)]\n", "# from a paper\n[(0,1),(2,3)]\n[(1,2)]",
                                  "[(0,1),(2,3)]\r\n\n# mid\n[(1,2)]\r\n", "[ (0 ,1) ,\t(2,3) ]\n[(1,2)]"])
def test_layer_text_in_pythons_repr_and_with_comments(text):
    net = loads(text)
    assert (net.n, net.size, net.depth) == (4, 3, 2)


@pytest.mark.parametrize("text", ["[(0,\u0661)]", "[(0,1),,(2,3)]", "[(0,1)]\u2028[(1,2)]", "[(0,1),]",
                                  "[(0,1)][(1,2)]", "[(0,1)]x", "[([1],2)]", "[(0,1)]\x0c[(1,2)]", "[(+1,2)]"])
def test_layer_text_coerces_nothing(text):
    with pytest.raises(ValueError, match="not a layer"):
        loads(text)


def test_a_wire_in_brackets_is_refused():
    with pytest.raises(ValueError, match="pair"):
        from_dict({"format": "netgen-network/1", "n": 3, "outputs": [2], "layers": [[[[0], [1]]]]})
    with pytest.raises(ValueError, match="pair"):
        Network.from_comparators(3, [[[0], [1]]])
    with pytest.raises(ValueError, match="pair"):
        Network.from_layers(4, [[0, 1, 2, 3]])  # a flat list is not two comparators
    with pytest.raises(ValueError, match="flat list"):
        Network.from_layers(3, [[(0, 1)]], outputs=[[1], [0]])


def test_netgen_and_dobbelaere_fields_together_are_ambiguous():
    d = {"format": "netgen-network/1", "n": 2, "outputs": [1], "layers": [[[1, 0]]], "N": 3, "nw": [[0, 1], [1, 2]]}
    with pytest.raises(ValueError, match="ambiguous"):
        from_dict(d)


# -------------------------------------------------------- netgen bench (M8)
def test_bench_threads_are_bounded():
    r = CliRunner().invoke(main, ["bench", "--threads", "100000", "--no-plots", "--methods", "softsort"])
    assert r.exit_code == 2 and "--threads must be between 1 and" in r.output, r.output


def test_bench_builds_its_modules_in_the_checked_cache(tmp_path):
    """A file planted where the old benchmark kept its modules
    (<cache-dir>/<module name>.py, loaded unchecked and never refreshed)
    never runs; the module comes from netgen's cache, hash-checked."""
    from netgen.bench.methods import make
    from netgen.codegen import cache, module_name
    from netgen.io import save
    from netgen.relax.distributions import default_relaxation

    net = build("splitter", 16, 2)
    f = tmp_path / "net.json"
    save(net, f)
    d = tmp_path / "bench-cache"
    d.mkdir(mode=0o700)
    planted = d / f"{module_name(net, default_relaxation(net), 'torch')}.py"
    planted.write_text("raise RuntimeError('PLANTED')\n")
    fn, kind = make("netgen-torch", 16, 2, "cpu", str(d), network=str(f))
    mod = sys.modules[type(fn).__module__]
    assert kind == "permutation" and fn(torch.randn(3, 16))[1].shape == (3, 2, 16)
    with cache.using_root(d):
        assert mod.__file__.startswith(str(cache.version_dir() / "modules"))
