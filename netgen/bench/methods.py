"""The methods ``netgen bench`` can time, each built into a uniform callable.

``make(name, n, k, device, cache_dir)`` returns ``(fn, kind)`` where
``fn(x)`` maps scores ``(B, n)`` to ``(values or None, P (B, k, n))`` for
``kind == "permutation"``, to an indicator ``(B, n)`` for ``"indicator"``,
or ``fn(x, y)`` to a scalar loss for ``"loss"``. A method whose code cannot
be imported, or that cannot run here, raises :class:`Unavailable` with the
reason (the harness records it as ``skipped``).

Names: every baseline in :data:`netgen.relax.baselines.BASELINES` (default
temperatures), ``netgen-torch``, ``netgen-numba``, ``netgen-cuda`` (netgen's
generated layers, with ``default_relaxation``, for the network ``netgen build``
chooses at (n, k): the portfolio, :func:`netgen.bench.networks.portfolio_network`;
the harness builds it once and passes its file as ``network``), ``difftopk`` (``DiffTopkNet("bitonic", n, k)``, dense:
the published sparse path needs torch_sparse) and ``diffsort``
(``DiffSortNet("bitonic", n)``, a full sort of which the top k rows are used).
difftopk/diffsort return ``X[..., c, j] = P[..., k-1-j, c]`` (ranks ascending);
it is converted to netgen's orientation ``P = X^T`` flipped along the ranks.
"""

from __future__ import annotations

import importlib
from pathlib import Path

EXTERNAL = ("difftopk", "diffsort")


class Unavailable(Exception):
    """The method cannot run here; the message says why."""


def all_names() -> list[str]:
    from ..codegen import TARGETS
    from ..relax.baselines import BASELINES

    return sorted(BASELINES) + [f"netgen-{t}" for t in TARGETS] + list(EXTERNAL)


def make(name: str, n: int, k: int, device: str, cache_dir: str | None = None, options: dict | None = None,
         network: str | None = None):
    """``network``: a network file for the netgen methods (default: the
    portfolio's choice at (n, k), built here)."""
    options = dict(options or {})
    if name.startswith("netgen-") or name in EXTERNAL:
        if options:
            raise ValueError(f"method {name!r} takes no options, got {sorted(options)}")
    if name.startswith("netgen-"):
        return _netgen(name[len("netgen-"):], n, k, device, cache_dir, network)
    if name == "difftopk":
        return _difftopk(n, k, device)
    if name == "diffsort":
        return _diffsort(n, k, device)
    from ..relax import baselines

    if name not in baselines.BASELINES:
        raise ValueError(f"unknown method {name!r}; choose from {', '.join(all_names())}")
    layer = baselines.get(name, k=k, **options)
    if hasattr(layer, "to"):
        layer = layer.to(device)
    return layer, layer.kind


def _import(mod: str, why: str):
    try:
        return importlib.import_module(mod)
    except Exception as e:  # noqa: BLE001 - any import failure means "not available yet"
        raise Unavailable(f"{why}: cannot import {mod} ({type(e).__name__}: {e})") from None


def _netgen(target: str, n: int, k: int, device: str, cache_dir, network=None):
    codegen = _import("netgen.codegen", "code generation")
    if target not in codegen.TARGETS:
        raise ValueError(f"unknown netgen target {target!r}; choose from {', '.join(codegen.TARGETS)}")
    t = codegen.TARGETS[target]
    dev = device.split(":")[0]
    if not t.runs_on(dev):
        raise Unavailable(f"the {target} target runs on {', '.join(t.devices)} only, not on {dev}")
    why_not = t.available()
    if why_not is not None:
        raise Unavailable(f"the {target} target cannot run here: {why_not}")
    dist = _import("netgen.relax.distributions", "relaxation")
    if network is not None:
        from ..io import load as load_network

        net = load_network(network)
        if (net.n, net.k) != (n, k):
            raise ValueError(f"network file {network} has n = {net.n}, k = {net.k}, not n = {n}, k = {k}")
    else:
        from .networks import portfolio_network

        _, net = portfolio_network(n, k, Path(cache_dir or default_cache_dir()) / "networks")
    relax = dist.default_relaxation(net)
    # netgen's own cache (netgen.codegen.cache): the module is checked against
    # its hash before it runs, and the index keys on netgen's version and
    # generator, so an upgraded netgen builds its module afresh
    from ..codegen import cache
    from ..codegen.auto import build_layer

    with cache.using_root(cache_dir):
        layer = build_layer(net, relax, target)
    if target != "numba":
        layer = layer.to(device)
    return layer, "permutation"



def _difftopk(n, k, device):
    m = _import("difftopk", "difftopk not installed")
    net = m.DiffTopkNet("bitonic", n, k, device=device)

    def fn(x):
        _, X = net(x)  # (B, n, k): X[b, c, j] = P[b, k-1-j, c]
        return None, X.transpose(-1, -2).flip(-2)

    return fn, "permutation"


def _diffsort(n, k, device):
    m = _import("diffsort", "diffsort not installed")
    net = m.DiffSortNet("bitonic", n, device=device)

    def fn(x):
        values, X = net(x)  # ascending values; X[b, c, j] = P[b, n-1-j, c]
        return values.flip(-1)[..., :k], X.transpose(-1, -2).flip(-2)[..., :k, :]

    return fn, "permutation"


def default_cache_dir() -> Path:
    """Where the benchmark keeps its network files: ``bench/`` in netgen's
    cache root (the generated modules live in the cache itself)."""
    from ..codegen.cache import root

    r = root()
    if not r.exists():  # created as the cache creates it: 0700
        r.parent.mkdir(parents=True, exist_ok=True)
        r.mkdir(mode=0o700, exist_ok=True)
    return r / "bench"
