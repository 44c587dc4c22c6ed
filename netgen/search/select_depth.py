"""Optimal-depth search for sorted top-k selection networks (issue 22).

Question: is there a comparator network of depth ``d`` on ``n`` wires that
leaves the k largest inputs, sorted, on ``outputs = (0, ..., k-1)`` (rank 0,
the largest, on wire 0: netgen's convention)? SAT gives a network, UNSAT is a
proof that depth ``d`` is impossible (so ``d + 1`` is a lower bound).

By the 0-1 principle a network is such a selector iff every 0-1 input with
1..k ones ends with its c ones exactly on wires 0..c-1; only those inputs
are encoded. Symmetry breaking, each step without loss of generality (the
docstring of :func:`search` gives the argument):

1. *standard comparators*: every comparator is ``(i, j)`` with ``i < j``
   (max to the lower wire) -- untangling a generalized network (Knuth
   5.3.4 ex. 16) relabels only later layers; a standard selector has rank r
   on wire r (the sorted input never moves), so the outputs are 0..k-1;
2. *maximal first layer* ``(0, 1), (2, 3), ...``: comparators added in front
   of a selector keep it a selector, and the inputs are symmetric;
3. *second layer up to symmetry*: every matching of layer 2 (standard
   orientation) is reduced to one representative per orbit under the
   permutations of the first layer's pairs, and a representative whose
   set of 0-1 vectors after two layers is a superset of another's is
   dropped (subsumption, Codish et al. 2014: a finish for the superset
   finishes the subset too). Each remaining prefix is one SAT call; UNSAT
   needs all of them UNSAT.

The 0-1 vectors after the fixed layers are computed exactly (bit masks) and
deduplicated before encoding. Layer variables: one per wire pair and layer
("comparator (i, j) in layer t"), at most one comparator per wire and layer
(pairwise), a "wire used" variable, and for every vector and layer one
variable per wire (constants folded where the value is forced). Solver:
python-sat (CaDiCaL 1.9.5 by default), one thread, stopped at the time
limit (then status "UNKNOWN": no bound; CaDiCaL cannot be interrupted in
python-sat, so it runs in a forked child that is killed).
"""

from __future__ import annotations

import functools
import itertools
import multiprocessing
import threading
import time
from dataclasses import dataclass, field

import numpy as np

from ..network import Network
from .masks import apply_layers, masks_upto, untangle

__all__ = ["search", "improve", "complete", "encode", "second_layers", "first_layer", "masks_upto",
           "apply_layers", "untangle", "SearchResult", "DEFAULT_SOLVER", "SYMMETRY_BREAKING"]

DEFAULT_SOLVER = "cadical195"
SYMMETRY_BREAKING = ("standard comparators, outputs on wires 0..k-1; first layer maximal (0,1),(2,3),...; "
                     "second layer one representative per orbit under permutations of the first-layer pairs, "
                     "subsumed prefixes dropped")


@dataclass
class SearchResult:
    n: int
    k: int
    depth: int
    status: str  # "SAT", "UNSAT" or "UNKNOWN" (time limit)
    seconds: float
    solver: str
    prefixes: int = 0  # second-layer prefixes (SAT calls needed for UNSAT)
    solved: int = 0  # prefixes answered
    variables: int = 0  # largest instance
    clauses: int = 0
    network: Network | None = None
    notes: list = field(default_factory=list)

    def line(self) -> str:
        return (f"n={self.n} k={self.k} depth={self.depth}: {self.status} in {self.seconds:.1f} s "
                f"({self.solved}/{self.prefixes} prefixes, {self.solver}, <= {self.variables} vars, {self.clauses} clauses)")


def _require_pysat():
    try:
        from pysat.solvers import Solver
    except ImportError:
        raise ValueError("the SAT search needs python-sat: pip install 'netgen-networks[search]' (or pip install python-sat)") from None
    return Solver


# ----------------------------------------------------------------- prefixes
def first_layer(n: int) -> list[tuple[int, int]]:
    return [(2 * i, 2 * i + 1) for i in range(n // 2)]


#: the second-layer reduction is used up to this n (the orbit enumeration grows fast)
SECOND_LAYER_MAX_N = 11


def second_layers(n: int, k: int) -> list[list[tuple[int, int]]]:
    """Representatives of the second layers after the maximal first layer:
    one per orbit under permutations of the first-layer pairs, subsumed ones
    dropped (see the module docstring)."""
    reps = [list(x) for x in _orbit_reps(n)]
    inputs = apply_layers(masks_upto(n, k), [first_layer(n)])
    sets = [frozenset(np.unique(apply_layers(inputs, [r])).tolist()) for r in reps]
    order = sorted(range(len(reps)), key=lambda i: len(sets[i]))
    kept: list[int] = []
    for i in order:  # keep i unless a kept set is a subset of its set
        if not any(sets[j] <= sets[i] for j in kept):
            kept.append(i)
    return [reps[i] for i in kept]


@functools.lru_cache(maxsize=None)
def _orbit_reps(n: int) -> tuple:
    """One standard second layer per orbit under the first-layer pair permutations."""
    pairs = n // 2
    wires = list(range(n))
    seen: dict[tuple, list] = {}

    def matchings(free):
        if not free:
            yield []
            return
        a, rest = free[0], free[1:]
        yield from matchings(rest)  # a unused
        for i, b in enumerate(rest):
            if a // 2 == b // 2 and b < 2 * pairs:  # the first-layer pair again: useless
                continue
            for m in matchings(rest[:i] + rest[i + 1:]):
                yield [(a, b)] + m

    perms = list(itertools.permutations(range(pairs)))
    for m in matchings(wires):
        best = None
        for p in perms:
            def f(w):
                return 2 * p[w // 2] + (w & 1) if w < 2 * pairs else w
            key = tuple(sorted(tuple(sorted((f(a), f(b)))) for a, b in m))
            if best is None or key < best:
                best = key
        seen.setdefault(best, best)
    return tuple(seen.values())


# ----------------------------------------------------------------- SAT model
class _Model:
    def __init__(self):
        self.top = 0
        self.clauses: list[list[int]] = []

    def new(self) -> int:
        self.top += 1
        return self.top

    def add(self, lits) -> None:
        """Add a clause; literals may be Python bools (constants)."""
        out = []
        for x in lits:
            if x is True:
                return
            if x is False:
                continue
            out.append(x)
        if not out:
            raise _Unsat
        self.clauses.append(out)


class _Unsat(Exception):
    pass


def _neg(x):
    return (not x) if isinstance(x, bool) else -x


def encode(n: int, k: int, vectors, free: int, ranks=None, unsorted: bool = False):
    """Clauses for ``free`` standard layers taking every vector (bit masks)
    to a sorted top-k on wires 0..k-1 (only rank r on wire r for r in
    ``ranks``, if given; ``unsorted``: the vectors have k ones, which must
    end on wires 0..k-1 in any order). Returns (model, edge variables)."""
    md = _Model()
    pairs = list(itertools.combinations(range(n), 2))
    edge = [{p: md.new() for p in pairs} for _ in range(free)]
    used = []
    for t in range(free):
        u = {}
        for w in range(n):
            inc = [v for (a, b), v in edge[t].items() if w in (a, b)]
            for x, y in itertools.combinations(inc, 2):
                md.add([-x, -y])
            u[w] = md.new()
            md.add([-u[w]] + inc)
            for v in inc:
                md.add([-v, u[w]])
        used.append(u)
    for vec in vectors:
        vec = int(vec)
        ones = bin(vec).count("1")
        cur = [bool(vec >> w & 1) for w in range(n)]
        for t in range(free):
            nxt = []
            for w in range(n):
                c = cur[w]
                if c is True and all(cur[p] is True for p in range(w)):
                    nxt.append(True)  # a 1 with only 1s above stays
                elif c is False and all(cur[p] is False for p in range(w + 1, n)):
                    nxt.append(False)  # a 0 with only 0s below stays
                else:
                    nxt.append(md.new())
            for w in range(n):
                u, x, y = used[t][w], cur[w], nxt[w]
                md.add([u, _neg(x), y])
                md.add([u, x, _neg(y)])
            for (a, b), e in edge[t].items():
                xa, xb, ya, yb = cur[a], cur[b], nxt[a], nxt[b]
                md.add([-e, _neg(xa), ya])
                md.add([-e, _neg(xb), ya])
                md.add([-e, xa, xb, _neg(ya)])
                md.add([-e, _neg(xa), _neg(xb), yb])
                md.add([-e, xa, _neg(yb)])
                md.add([-e, xb, _neg(yb)])
            cur = nxt
        for r in (range(k) if ranks is None else ranks):
            md.add([cur[r]] if ones > r or unsorted else [_neg(cur[r])])
    return md, edge


def complete(n: int, k: int, prefix, free: int, *, solver: str = DEFAULT_SOLVER,
             time_limit: float | None = None, max_free_comparators: int | None = None, ranks=None,
             unsorted: bool = False):
    """Can the fixed standard ``prefix`` (list of layers) be finished with
    ``free`` standard layers (at most ``max_free_comparators`` comparators in
    them, if given) into a sorted top-k selector (outputs 0..k-1)?
    Returns ``(status, layers or None, variables, clauses)``."""
    _require_pysat()
    if max_free_comparators is not None and max_free_comparators < 0:
        return "UNSAT", None, 0, 0
    inputs = masks_upto(n, k)
    if ranks is not None or unsorted:
        # only the inputs with r or r + 1 ones decide rank r, only those with
        # k ones decide the unsorted top k (monotonicity)
        counts = np.array([bin(int(v)).count("1") for v in inputs])
        keep = [k] if unsorted else sorted({c for r in ranks for c in (r, r + 1) if c >= 1})
        inputs = inputs[np.isin(counts, keep)]
    vectors = np.unique(apply_layers(inputs, prefix))
    if free == 0:
        ok = all(_correct(int(v), n, k, ranks, unsorted) for v in vectors)
        return ("SAT" if ok else "UNSAT"), ([list(map(tuple, l)) for l in prefix] if ok else None), 0, 0
    try:
        md, edge = encode(n, k, vectors, free, ranks, unsorted)
    except _Unsat:
        return "UNSAT", None, 0, 0
    if max_free_comparators is not None:
        from pysat.card import CardEnc, EncType

        lits = [v for layer in edge for v in layer.values()]
        card = CardEnc.atmost(lits=lits, bound=max_free_comparators, top_id=md.top, encoding=EncType.seqcounter)
        md.clauses += card.clauses
        md.top = max(md.top, card.nv)
    ans, model = _solve(solver, md.clauses, time_limit)
    if ans is None:
        return "UNKNOWN", None, md.top, len(md.clauses)
    if not ans:
        return "UNSAT", None, md.top, len(md.clauses)
    true = {v for v in model if v > 0}
    layers = [list(map(tuple, l)) for l in prefix]
    layers += [[p for p, v in edge[t].items() if v in true] for t in range(free)]
    return "SAT", layers, md.top, len(md.clauses)


#: python-sat solvers whose interrupt() works (CaDiCaL's and Kissat's raise NotImplementedError)
_INTERRUPTIBLE = ("glucose", "maple", "minisat", "gluecard", "minicard", "mergesat")


def _solve(solver: str, clauses, time_limit: float | None):
    """(True, model), (False, None) or (None, None) when ``time_limit``
    seconds pass first. Solvers without a working interrupt run in a forked
    child that is killed at the limit."""
    Solver = _require_pysat()
    if time_limit is None or solver.startswith(_INTERRUPTIBLE):
        with Solver(name=solver, bootstrap_with=clauses) as s:
            timer = None
            if time_limit is not None:
                timer = threading.Timer(max(time_limit, 0.0), s.interrupt)
                timer.start()
            try:
                ans = s.solve_limited(expect_interrupt=True) if timer is not None else s.solve()
            finally:
                if timer is not None:
                    timer.cancel()
            return ans, (s.get_model() if ans else None)
    ctx = multiprocessing.get_context("fork")
    recv, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(solver, clauses, send), daemon=True)
    proc.start()
    send.close()
    try:
        if recv.poll(max(time_limit, 0.0)):
            try:
                return recv.recv()
            except EOFError:  # the child died (out of memory?): no answer
                return None, None
        return None, None
    finally:
        recv.close()
        if proc.is_alive():
            proc.kill()
        proc.join()


def _child(solver, clauses, send):  # pragma: no cover - runs in the forked child
    Solver = _require_pysat()
    with Solver(name=solver, bootstrap_with=clauses) as s:
        ans = s.solve()
        send.send((ans, s.get_model() if ans else None))
    send.close()


def _correct(v: int, n: int, k: int, ranks=None, unsorted: bool = False) -> bool:
    c = bin(v).count("1")
    if unsorted:
        return c != k or v == (1 << k) - 1
    return all(bool(v >> r & 1) == (c > r) for r in (range(k) if ranks is None else ranks))


def search(n: int, k: int, depth: int, *, solver: str = DEFAULT_SOLVER, time_limit: float | None = None,
           construction: dict | None = None, max_size: int | None = None, ranks=None,
           unsorted: bool = False) -> SearchResult:
    """Is there a depth-``depth`` sorted top-k selector on n wires? With the
    symmetry breaking of the module docstring. ``time_limit`` (seconds) for
    the whole question (the one-off enumeration of second layers, cached per
    n, is not interrupted: about 10 s at n = 11); past it the status is
    "UNKNOWN". ``max_size``: at
    most that many comparators, the maximal first layer included (a
    heuristic for small networks of that depth: the symmetry breaking is not
    without loss of generality for size, so UNSAT then proves nothing).
    ``ranks``: require only rank r on wire r for r in ``ranks`` (a subset of
    0..k-1; default all: the sorted top k). The symmetry breaking holds for
    any set of ranks (the same argument). ``unsorted``: the k largest on
    wires 0..k-1 in any order (a standard network leaves a sorted input
    alone, so the set is on 0..k-1 here too).

    Why the symmetry breaking loses nothing: take any selector N of depth d.
    Fill its first layer up to a maximal matching (comparators put in front
    of a selector keep it one), rename wires so that layer 1 is
    (0,1),(2,3),... (the problem is symmetric in the inputs), untangle the
    rest (it changes only later layers and makes every comparator standard).
    A standard selector holds rank r on wire r (a sorted input never moves).
    Permuting the first-layer pairs and untangling again maps layer 2 to its
    orbit representative, and subsumption only drops prefixes whose vector
    set contains another kept prefix's."""
    _require_pysat()
    if not (2 <= n <= 40 and 1 <= k < n and depth >= 1):
        raise ValueError(f"need 2 <= n <= 40, 1 <= k < n, depth >= 1; got n={n}, k={k}, depth={depth}")
    if ranks is not None:
        ranks = sorted(set(ranks))
        if not ranks or not all(isinstance(r, int) and 0 <= r < k for r in ranks):
            raise ValueError(f"ranks must be a non-empty subset of 0..{k - 1}, got {ranks}")
    t0 = time.perf_counter()
    res = SearchResult(n, k, depth, "UNSAT", 0.0, solver)
    l1 = first_layer(n)
    if depth <= 2 or n > SECOND_LAYER_MAX_N:
        prefixes = [[l1]]
    else:
        prefixes = [[l1, l2] for l2 in second_layers(n, k)]
    res.prefixes = len(prefixes)
    unknown = False
    for pre in prefixes:
        left = None if time_limit is None else time_limit - (time.perf_counter() - t0)
        if left is not None and left <= 0:
            unknown = True
            break
        cap = None if max_size is None else max_size - sum(len(l) for l in pre)
        status, layers, nv, nc = complete(n, k, pre, depth - len(pre), solver=solver, time_limit=left,
                                          max_free_comparators=cap, ranks=ranks, unsorted=unsorted)
        res.variables, res.clauses = max(res.variables, nv), max(res.clauses, nc)
        if status == "UNKNOWN":
            unknown = True
            break
        res.solved += 1
        if status == "SAT":
            res.status = "SAT"
            con = {"kind": "sat-select", "n": n, "k": k} if construction is None else construction
            res.network = Network.from_layers(n, [l for l in layers if l], tuple(range(k)), con)
            break
    if res.status != "SAT" and unknown:
        res.status = "UNKNOWN"
    res.seconds = time.perf_counter() - t0
    return res


def improve(net: Network, keep: int, free: int, *, solver: str = DEFAULT_SOLVER,
            time_limit: float | None = None) -> tuple[str, Network | None]:
    """Prefix search: keep the first ``keep`` layers of ``net`` (untangled)
    and ask for a finish in ``free`` layers (for an upper bound only: the
    prefix is not without loss of generality). Returns (status, network)."""
    prefix = untangle([l.tolist() for l in net.layers[:keep]])
    status, layers, _, _ = complete(net.n, net.k, prefix, free, solver=solver, time_limit=time_limit)
    if status != "SAT":
        return status, None
    con = {"kind": "sat-select", "n": net.n, "k": net.k}
    return status, Network.from_layers(net.n, [l for l in layers if l], tuple(range(net.k)), con)
