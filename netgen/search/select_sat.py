"""SAT model: is there a comparator network of a given depth on m wires
(nothing known about the inputs) that puts the rank-r value on wire r by
layer d_r, for given targets {r: d_r}? (issue 12, research tooling)

Encoding in the style of the optimal-depth sorting network searches
(Bundala & Zavodny 2014; Codish et al.): layer t is a matching, one variable
per wire pair and orientation ("max to a, min to b"); values are propagated
for each relevant 0-1 input. By monotonicity the rank-r output is right on
all inputs iff it is 0 on every input with r ones and 1 on every input with
r + 1 ones, so only those inputs are encoded.

Two symmetries are fixed without loss of generality, both because a
*generalized* network (comparators of either orientation) can rename two
wires from any layer on: the outputs sit on wires 0, 1, ... (renamed at the
end), and since the inputs are symmetric under every permutation of the
wires, the first layer is (0, 1), (2, 3), ..., max to the even wire, for
some number of comparators. A target's wire is left alone after its layer.

Needs python-sat (``pip install 'netgen-networks[search]'``).
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass

from ..network import Network


@dataclass(frozen=True)
class SatResult:
    m: int
    depth: int
    targets: dict  # rank -> layer by which it must be on wire `rank`
    status: str  # "SAT" or "UNSAT"
    seconds: float
    variables: int
    clauses: int
    network: Network | None  # the network found (SAT only)

    def line(self) -> str:
        t = ", ".join(f"rank {r} by {d}" for r, d in sorted(self.targets.items()))
        return f"m={self.m} depth={self.depth} ({t}): {self.status} in {self.seconds:.1f} s ({self.variables} vars, {self.clauses} clauses)"


def _require_pysat():
    try:
        from pysat.solvers import Cadical153
    except ImportError:
        raise ValueError("the SAT search needs python-sat: pip install 'netgen-networks[search]' (or pip install python-sat)") from None
    return Cadical153


def _inputs(m: int, ranks) -> list[tuple[int, ...]]:
    """0-1 inputs (as tuples of the wires holding 1) with r and r + 1 ones."""
    counts = sorted({c for r in ranks for c in (r, r + 1) if c <= m})
    return [ones for c in counts for ones in itertools.combinations(range(m), c)]


def solve(m: int, targets: dict[int, int], depth: int | None = None) -> SatResult:
    """Decide whether a depth-``depth`` network (default: the largest target
    layer) on ``m`` wires meets ``targets`` (rank r on wire r after layer
    targets[r], then untouched)."""
    solver_cls = _require_pysat()
    if m < 2 or not targets or any(not 0 <= r < m or d < 1 for r, d in targets.items()):
        raise ValueError(f"need m >= 2 and targets rank -> layer with 0 <= rank < m, layer >= 1; got m={m}, {targets}")
    depth = max(targets.values()) if depth is None else depth
    t0 = time.perf_counter()
    top = [0]

    def new():
        top[0] += 1
        return top[0]

    clauses: list[list[int]] = []
    pairs = list(itertools.combinations(range(m), 2))
    edge = []  # edge[t][(a, b)] = var for "max to a, min to b" in layer t
    for t in range(depth):
        layer = {}
        for i, j in pairs:
            layer[(i, j)] = new()
            layer[(j, i)] = new()
        edge.append(layer)
        for w in range(m):  # each wire in at most one comparator
            inc = [v for (a, b), v in layer.items() if w in (a, b)]
            clauses += [[-x, -y] for x, y in itertools.combinations(inc, 2)]
    # first layer: (0,1), (2,3), ... max to the even wire, a prefix of them
    first = [edge[0][(2 * i, 2 * i + 1)] for i in range(m // 2)]
    clauses += [[-v] for key, v in edge[0].items() if v not in first]
    clauses += [[-first[i], first[i - 1]] for i in range(1, len(first))]
    # a target's wire is left alone after its layer
    for r, d in targets.items():
        for t in range(d, depth):
            clauses += [[-v] for (a, b), v in edge[t].items() if r in (a, b)]
    used = [{w: new() for w in range(m)} for _ in range(depth)]
    for t in range(depth):
        for w in range(m):
            inc = [v for (a, b), v in edge[t].items() if w in (a, b)]
            clauses.append([-used[t][w]] + inc)
            clauses += [[-v, used[t][w]] for v in inc]
    for ones in _inputs(m, targets):
        val = [1 if w in ones else -1 for w in range(m)]  # constant literals stand for True/False
        truth = new()
        clauses.append([truth])
        cur = [truth if x > 0 else -truth for x in val]
        for t in range(depth):
            nxt = [new() for _ in range(m)]
            for w in range(m):
                u, x, y = used[t][w], cur[w], nxt[w]
                clauses += [[u, -x, y], [u, x, -y]]
            for (a, b), e in edge[t].items():
                xa, xb, ya, yb = cur[a], cur[b], nxt[a], nxt[b]
                clauses += [[-e, -xa, ya], [-e, -xb, ya], [-e, xa, xb, -ya]]
                clauses += [[-e, -xa, -xb, yb], [-e, xa, -yb], [-e, xb, -yb]]
            cur = nxt
            for r, d in targets.items():
                if d == t + 1:
                    clauses.append([cur[r]] if len(ones) > r else [-cur[r]])
    with solver_cls(bootstrap_with=clauses) as s:
        sat = s.solve()
        model = s.get_model() if sat else None
    net = None
    if sat:
        true = {v for v in model if v > 0}
        layers = [[(a, b) for (a, b), v in edge[t].items() if v in true] for t in range(depth)]
        net = Network.from_layers(m, layers, sorted(targets), {"kind": "sat-select", "n": m, "k": len(targets)})
    return SatResult(m, depth, dict(targets), "SAT" if sat else "UNSAT", time.perf_counter() - t0, top[0], len(clauses), net)
