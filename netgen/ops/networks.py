"""Which network an operator runs, with no build step.

``network`` (the operators' argument):

* ``"best"`` (default): the portfolio's winner at (n, k), which includes
  the best-known networks (``netgen build --network best``) for n <= 64
  (:func:`netgen.compiler.compile`: every cheap construction built, passes
  run, proved, the shallowest kept). Where no complete method exists
  (sorters above 64 wires; n > 64 with k > 16) ``netgen build`` samples
  the winner, seconds that prove nothing about a construction correct by
  its theorem; the operators skip that sampling (the cache file says
  "not verified");
* a construction kind (``"bitonic"``, ``"oddeven"``, ``"splitter"``, ...):
  ``netgen build --network KIND`` (passes and proof);
* a :class:`~netgen.network.Network` or the path of a network file
  (interchange format or Dobbelaere's JSON): used as given, after its
  proof or sampling (a counterexample is refused).

A network is built once per process (kept in memory) and written to
netgen's on-disk cache (``$NETGEN_CACHE_DIR``, ``netgen cache info``) under
``<versions>/networks/``, so a later process reads it back (a few ms)
instead of building it. A damaged cache file is rebuilt. What the build
costs is measured by ``benchmarks/operator_networks.py``
(docs/operators.md).
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

from ..network import Network

__all__ = ["network_for", "cache_dir", "clear_memory"]

_MEMO: dict[tuple, Network] = {}
_FILES: dict[tuple, Network] = {}  # (path, mtime, size) or id -> checked network
_LOCK = threading.Lock()


def cache_dir() -> Path:
    """Where built networks are kept: ``<netgen cache>/<versions>/networks``."""
    from ..codegen.cache import version_dir

    return version_dir() / "networks"


def clear_memory() -> None:
    """Forget the networks of this process (the disk cache stays)."""
    with _LOCK:
        _MEMO.clear()
        _FILES.clear()


def _kinds() -> tuple[str, ...]:
    from ..construct import KINDS

    return ("best",) + KINDS + ("record",)


def _file_name(n: int, k: int, network: str) -> str:
    return f"{network}_n{n}_k{k}.json"


def _read(path: Path, n: int, k: int) -> Network | None:
    from ..io import from_dict

    try:
        d = json.loads(path.read_text(encoding="utf-8"))
        if d.get("status") not in _STATUSES:
            return None
        net = from_dict(d["network"], source=str(path))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None  # missing or damaged: build again
    return net if (net.n, net.k) == (n, k) else None


def _write(path: Path, net: Network, status: str, proof: str) -> None:
    from ..io import atomic_write_text, to_dict

    try:
        atomic_write_text(path, json.dumps({"status": status, "proof": proof, "network": to_dict(net)}))
    except OSError:  # a read-only cache costs a rebuild next time, nothing else
        pass


#: the cache file's "status" when no check ran (see _build)
UNCHECKED = "construction"
_STATUSES = ("proved", "sampled", UNCHECKED)


def _build(n: int, k: int, network: str) -> Network:
    from ..compiler import compile as compile_nk
    from ..portfolio import sample_only

    # Where no complete method exists (sorters above 64 wires, n > 64 with
    # k > 16) netgen build samples the winner: seconds (4.7 s at n = 1024)
    # that prove nothing about a construction correct by its theorem (tested
    # in tests/construct). The operators skip that sampling; proofs run.
    check = not sample_only(n, k)
    compiled = compile_nk(n, k, None if network == "best" else network, verify=check)
    report = compiled.report
    if report is None:
        status, proof = UNCHECKED, "not verified: no complete method at this size (netgen build samples it)"
    elif report.status in ("proved", "sampled"):
        status, proof = report.status, str(report)
    else:  # pragma: no cover - constructions are correct
        raise RuntimeError(f"netgen: the {network} network for n = {n}, k = {k} failed its check: {report}")
    _write(cache_dir() / _file_name(n, k, network), compiled.network, status, proof)
    return compiled.network


def _built(n: int, k: int, network: str) -> Network:
    key = (n, k, network)
    net = _MEMO.get(key)
    if net is None:
        with _LOCK:
            net = _MEMO.get(key)
            if net is None:
                net = _read(cache_dir() / _file_name(n, k, network), n, k)
                if net is None:
                    net = _build(n, k, network)
                _MEMO[key] = net
    return net


def _checked(net: Network, where: str) -> Network:
    """A user's network after its proof (or sampling); a counterexample is
    refused."""
    from ..verify import verify

    report = verify(net)
    if report.status not in ("proved", "sampled"):
        raise ValueError(f"{where} is not a correct {'sorting' if net.k == net.n else 'top-k'} network: {report}")
    return net


def _given(network, n: int) -> Network:
    if isinstance(network, Network):
        key = ("net", id(network))
        with _LOCK:
            hit = _FILES.get(key)
        if hit is network:
            return network
        net = _checked(network, "the given network")
        with _LOCK:
            _FILES[key] = net
        return net
    path = Path(network)
    try:
        st = path.stat()
    except OSError as e:
        raise ValueError(f"network {str(network)!r} is neither 'best', a construction kind "
                         f"({', '.join(_kinds()[1:])}) nor a readable network file ({e.strerror})") from None
    key = ("file", str(path.resolve()), st.st_mtime_ns, st.st_size)
    with _LOCK:
        hit = _FILES.get(key)
    if hit is not None:
        return hit
    from ..io import load

    net = _checked(load(path), f"the network in {path}")
    with _LOCK:
        _FILES[key] = net
    return net


def network_for(n: int, k: int, network="best", *, sorter: bool = False) -> Network:
    """The network for ``n`` inputs and ``k`` outputs (``k = n``: a
    sorter). ``sorter=True`` requires all n outputs (soft_sort and
    soft_rank need the full P). A given network must have ``n`` wires and
    at least ``k`` outputs (its first k ranks are used)."""
    if isinstance(network, str) and network in _kinds():
        return _built(n, k, network)
    if not isinstance(network, (str, os.PathLike, Network)):
        raise ValueError(f"network must be 'best', a construction kind, a netgen.Network or a path, got {network!r}")
    net = _given(network, n)
    if net.n != n:
        raise ValueError(f"the network has n = {net.n} wires but the input has {n} values along dim")
    if sorter and net.k != n:
        raise ValueError(f"this operator needs a sorting network (k = n = {n} outputs); the given network has "
                         f"k = {net.k} (soft_rank and soft_sort use every rank; use topk_mask or soft_topk)")
    if net.k < k:
        raise ValueError(f"the network has k = {net.k} outputs, fewer than the k = {k} asked for")
    return net
