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
``<versions>/networks/`` as a compact ``.npz`` (:mod:`netgen.ops.netfile`:
int32 arrays and a JSON header, no pickles, bounded reads), so a later
process reads it back (a few ms; 0.8 GB in about a second at n = 2^20)
instead of building it. A damaged cache file is rebuilt; the JSON files of
earlier versions are not read (built again once). What the build costs is
measured by ``benchmarks/operator_networks.py`` (docs/operators.md).

Size: a kind's network (``"best"``: the smallest construction's) estimated
past ``max_size`` comparators plus wires (None: the budget in force,
:data:`netgen.network.DEFAULT_MAX_SIZE` = 10 million unless
:func:`netgen.network.size_limit` raised it) is refused before anything is
built or read, naming the estimate and the ``max_size=`` to pass; with it,
the build runs under that budget (which also lifts the constructions'
guard, :func:`netgen.construct._common.comparator_limit`).
"""

from __future__ import annotations

import functools
import os
import threading
from pathlib import Path

from ..network import Network, SizeLimitError, check_max_size, size_limit
from . import netfile

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
    return f"{network}_n{n}_k{k}.npz"


def _read(path: Path, n: int, k: int, limit: int) -> Network | None:
    got = netfile.read(path, n, k, limit)  # missing or damaged: None, build again
    return got[0] if got is not None and got[1] in _STATUSES else None


def _write(path: Path, net: Network, status: str, proof: str) -> None:
    try:
        netfile.write(path, net, status, proof)
    except (OSError, ValueError):  # a read-only cache costs a rebuild next time, nothing else
        pass


@functools.lru_cache(maxsize=1024)
def estimate(n: int, k: int, network: str) -> int:
    """Comparators plus wires the build of a kind's network (``"best"``:
    the smallest construction at (n, k)) is estimated at (what ``max_size``
    is compared with). Kept per (n, k, network): every operator call asks
    (3-7 us each, against 3 ms calls)."""
    from ..construct import size_estimate, smallest_estimate

    kk = None if k == n else k
    return (smallest_estimate(n, kk) if network == "best" else size_estimate(network, n, kk)) + n


def _check_size(n: int, k: int, network: str, max_size, name: str) -> int:
    """The budget for building (n, k, network); SizeLimitError (a
    ValueError) at once when the estimate is past it, naming both and the
    keyword."""
    limit = check_max_size(max_size)
    need = estimate(n, k, network)
    if need > limit:
        what = f"{name}: the" if name else "The"
        raise SizeLimitError(
            f"{what} {network!r} network for n = {n}, k = {k} would need ~{need:,} comparators and wires, more than "
            f"max_size = {limit:,}; pass max_size={need} (or more) to build it (docs/operators-measured.md, \"Scale\": "
            f"time and memory at n = 2^20)")
    return limit


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


def _built(n: int, k: int, network: str, max_size=None, name: str = "") -> Network:
    limit = _check_size(n, k, network, max_size, name)
    key = (n, k, network)
    net = _MEMO.get(key)
    if net is None:
        with _LOCK:
            net = _MEMO.get(key)
            if net is None:
                net = _read(cache_dir() / _file_name(n, k, network), n, k, limit)
                if net is None:
                    with size_limit(limit):
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


def network_for(n: int, k: int, network="best", *, sorter: bool = False, max_size: int | None = None,
                name: str = "") -> Network:
    """The network for ``n`` inputs and ``k`` outputs (``k = n``: a
    sorter). ``sorter=True`` requires all n outputs (soft_sort and
    soft_rank need the full P). A given network must have ``n`` wires and
    at least ``k`` outputs (its first k ranks are used). ``max_size``: the
    size budget of a kind's network (see the module docstring; ``name``,
    the operator, heads its refusal)."""
    if isinstance(network, str) and network in _kinds():
        return _built(n, k, network, max_size, name)
    if max_size is not None:
        check_max_size(max_size)
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
