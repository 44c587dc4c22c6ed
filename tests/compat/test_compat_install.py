"""issue 34 item 4: every module of the published diffsort 0.2.0 and
difftopk 0.2.0 has a mirror in netgen.compat with every public name (the
published signature for their own functions and classes), and
``netgen.compat.install()`` makes every import path of them resolve to
netgen, with or without the published packages imported first (run in
subprocesses: sys.modules is process state)."""

import contextlib
import importlib
import inspect
import io
import json
import os
import pkgutil
import subprocess
import sys
import textwrap

import pytest

import netgen.compat as C
from netgen.compat.smooth import NOT_PROVIDED, NotProvided
from netgen.compat.swap import PUBLISHED_MODULES

with contextlib.redirect_stdout(io.StringIO()):  # difftopk prints at import
    pytest.importorskip("diffsort")
    pytest.importorskip("difftopk")


def published_modules(pkg):
    root = importlib.import_module(pkg)
    return [pkg] + [f"{pkg}.{m.name}" for m in pkgutil.iter_modules(root.__path__)]


def public(mod):
    return sorted(n for n in vars(mod) if not n.startswith("_"))


@pytest.mark.parametrize("pkg", ["diffsort", "difftopk"])
def test_every_module_and_public_name_has_a_mirror(pkg):
    assert sorted(published_modules(pkg)) == sorted(PUBLISHED_MODULES[pkg])
    for name in published_modules(pkg):
        with contextlib.redirect_stdout(io.StringIO()):
            theirs = importlib.import_module(name)
        mine = importlib.import_module(f"netgen.compat.{name}")
        for attr in public(theirs):
            assert hasattr(mine, attr), f"{name}.{attr}"
            t, m = getattr(theirs, attr), getattr(mine, attr)
            if inspect.ismodule(t):
                assert inspect.ismodule(m) and m.__name__.rsplit(".", 1)[-1] == t.__name__.rsplit(".", 1)[-1]
                continue
            own = getattr(t, "__module__", None) or ""
            defined_there = inspect.isfunction(t) or inspect.isclass(t)
            if defined_there and own.startswith(("diffsort", "difftopk")) or isinstance(m, NotProvided):
                check_same_call(f"{name}.{attr}", t, m)
            elif callable(t) or inspect.ismodule(t):  # torch, math, np, List, reduce, ...: the same object
                assert m is t, f"{name}.{attr}"
            elif attr == "SPARSE_INSTALLED":  # netgen reads the sparse format without torch_sparse
                assert m is True
            else:  # SORTING_NETWORK_TYPE
                assert m == t, f"{name}.{attr}"


def check_same_call(where, t, m):
    """m has t's parameters (netgen's extras keyword-only with defaults), or
    is a named-but-not-provided internal that says so when called."""
    if isinstance(m, NotProvided):
        assert where.rsplit(".", 1)[1] in NOT_PROVIDED
        with pytest.raises(NotImplementedError, match=where.rsplit(".", 1)[1]):
            m()
        return
    if inspect.isclass(t) and issubclass(t, __import__("torch").autograd.Function):
        assert issubclass(m, __import__("torch").autograd.Function)  # NormalCDF: used as .apply(x, sigma)
        return
    sig_t, sig_m = inspect.signature(t), inspect.signature(m)  # a class: its constructor's
    want = [(p.name, p.kind) for p in sig_t.parameters.values()]
    got = [(p.name, p.kind) for p in sig_m.parameters.values()]
    assert got[:len(want)] == want, (where, sig_m, sig_t)
    for p in list(sig_m.parameters.values())[len(want):]:
        assert p.kind is inspect.Parameter.KEYWORD_ONLY and p.default is not p.empty, (where, p)


SWAPPED = '''
import contextlib, importlib, io, json, os, sys, warnings
names = json.loads(sys.argv[1])
first = sys.argv[2] == "published-first"
if first:
    with contextlib.redirect_stdout(io.StringIO()):
        import difftopk, diffsort
        from difftopk.losses import TopKCrossEntropyLoss as Published
import netgen.compat
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    netgen.compat.install()
assert bool(caught) == first, [str(w.message) for w in caught]
for mod, attrs in names.items():
    m = importlib.import_module(mod)
    assert m.__name__ == "netgen.compat." + mod, (mod, m.__name__)
    for a in attrs:
        exec(f"from {mod} import {a}")
import difftopk.losses, diffsort.functional, difftopk.smooth_topk as st
from difftopk.losses import TopKCrossEntropyLoss
from diffsort.functional import sort
from difftopk.networks import get_sorting_network
assert TopKCrossEntropyLoss.__module__ == "netgen.compat.losses"
assert difftopk.networks.diffsort is sys.modules["diffsort"]
import torch
loss = TopKCrossEntropyLoss("splitter_selection", 5.0, [0.5, 0.5], 10)
assert torch.isfinite(loss(torch.randn(4, 10), torch.tensor([1, 2, 3, 4])))
x = torch.randn(2, 6)
assert sort(get_sorting_network("odd_even", 6, "cpu"), x)[0].shape == (2, 6)
if not first:  # nothing of the published packages was ever imported
    pub = [n for n, m in sys.modules.items() if "site-packages/diff" in str(getattr(m, "__file__", ""))]
    assert not pub, pub
netgen.compat.uninstall()
with contextlib.redirect_stdout(io.StringIO()):
    import difftopk.losses as again
assert again.TopKCrossEntropyLoss.__module__ == "difftopk.losses"
if first:
    assert again.TopKCrossEntropyLoss is Published
print("ok")
'''


@pytest.mark.parametrize("order", ["netgen-only", "published-first"])
def test_install_swaps_every_import_path(order):
    names = {}
    for pkg in ("diffsort", "difftopk"):
        for name in published_modules(pkg):
            with contextlib.redirect_stdout(io.StringIO()):
                names[name] = public(importlib.import_module(name))
    env = {**os.environ, "NETGEN_NUMBA_PARALLEL": "0"}
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(SWAPPED), json.dumps(names), order],
                         capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip().endswith("ok")


def test_install_arguments():
    with pytest.raises(ValueError, match="unknown package"):
        C.install("torchsort")


def test_published_pickle_loads_as_netgen_after_install(tmp_path):
    """A checkpoint saved with the published difftopk (its classes by name)
    loads as netgen's modules after install()."""
    code = '''
import contextlib, io, sys, torch
path = sys.argv[1]
if sys.argv[2] == "save":
    with contextlib.redirect_stdout(io.StringIO()):
        import difftopk
    torch.save(torch.nn.Sequential(difftopk.DiffTopkNet("bitonic", 8, 3, steepness=4.0)), path)
else:
    import netgen.compat
    netgen.compat.install()
    m = torch.load(path, weights_only=False)
    assert type(m[0]).__module__ == "netgen.compat.nets", type(m[0])
    x = torch.randn(2, 8, dtype=torch.float64)
    want = netgen.compat.DiffTopkNet("bitonic", 8, 3, steepness=4.0)(x)[1]
    assert torch.equal(m(x)[1], want)
    print("ok")
'''
    env = {**os.environ, "NETGEN_NUMBA_PARALLEL": "0"}
    for step in ("save", "load"):
        out = subprocess.run([sys.executable, "-c", textwrap.dedent(code), str(tmp_path / "m.pt"), step],
                             capture_output=True, text=True, env=env, timeout=300)
        assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip().endswith("ok")
