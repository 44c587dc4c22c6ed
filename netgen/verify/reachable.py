"""The exact reachable-state method (docs/design.md section 5).

A 0-1 input with m <= k ones is a set of m *tokens*. Instead of running every
input, keep, for each *cluster* of wires already connected by comparators,
the set of token configurations that can reach it (a cluster's inputs are
independent of the other clusters', so the global set is the product of the
clusters' sets, restricted to <= k tokens in all). Layer by layer:

* clusters joined by the layer's comparators are merged: every combination of
  one state per part with <= k tokens in total;
* the layer's comparators move tokens (a token on the min wire b moves to the
  max wire a when a is empty); states are deduplicated;
* a non-output wire after its last comparator must never hold a token: a
  state with one is a counterexample (each state carries the input it came
  from, so the witness replays);
* at the end every state with m tokens must occupy exactly outputs[0..m-1].

This is sound and complete (it enumerates the exact image of the relevant
inputs), and tells which comparators ever swap (``Report.fires``). Two
representations: a uint64 bitmask per state for n <= 64 (any k, sorters
included) and sorted token positions for larger n with small k. When the
state count passes ``max_states`` the method does not apply and
:class:`TooManyStates` (a ValueError) is raised.
"""

from __future__ import annotations

import heapq
import math
import time

import numpy as np

from ..network import Network
from ._reach_masks import mask_finish
from ._reach_masks import mask_step as merge_masks
from ._reach_tokens import token_step
from .report import Report

METHOD = "reachable states"
DEFAULT_MAX_STATES = 1 << 22  # ~100 MB of states; Dobbelaere's sorters need < 2.5e5
DEFAULT_MAX_WORK = 1 << 32  # combinations tried in one merge
MAX_TOKENS = 16  # k limit of the token representation (n > 64)
# n <= 64: when a merge would combine more than FINISH_MIN state pairs and
# testing the product of all clusters' states through all remaining
# comparators (bit-sliced, 64 per word) costs at most FINISH_BUDGET word
# operations, finish that way instead of materialising the merged states.
FINISH_MIN = 1 << 20
FINISH_BUDGET = 4 * 10**9  # about a few seconds on 2 cores


class TooManyStates(ValueError):
    """The reachable-state method does not apply: the state sets grow past
    the limit (use exhaustive testing or sampling instead)."""


def analyze(
    net: Network,
    *,
    max_states: int = DEFAULT_MAX_STATES,
    max_work: int = DEFAULT_MAX_WORK,
    progress=None,
    representation: str = "auto",
) -> Report:
    """Prove ``net`` (sorter or top-k selection) by reachable states, or find a
    counterexample. Raises :class:`TooManyStates` when the state sets exceed
    ``max_states`` (or one merge would try more than ``max_work``
    combinations). ``progress(done, size, states)`` is called now and then.
    ``representation``: "masks" (n <= 64), "tokens" (k <= 16) or "auto"."""
    t0 = time.perf_counter()
    if representation not in ("auto", "masks", "tokens"):
        raise ValueError(f"unknown state representation {representation!r} (auto, masks or tokens)")
    if representation == "masks" and net.n > 64:
        raise ValueError(f"the bitmask representation needs n <= 64, got n={net.n}")
    if representation == "masks" or (representation == "auto" and net.n <= 64):
        backend = _Masks(net.n, net.k, max_states)
    else:
        if net.k > MAX_TOKENS:
            raise TooManyStates(
                f"the reachable-state method handles n > 64 only for k <= {MAX_TOKENS} (this network has "
                f"n={net.n}, k={net.k})"
            )
        backend = _Tokens(net.n, net.k, max_states)
    status, cex, fires, checked = _run(net, backend, max_work, progress)
    seconds = time.perf_counter() - t0
    if status == "counterexample":
        return Report("counterexample", METHOD, seconds, checked, cex, None)
    return Report("proved", METHOD, seconds, checked, None, fires,
                  detail=f"largest state set {backend.largest}" + (", finished bit-sliced" if backend.finished else ""))


def last_use(net: Network) -> np.ndarray:
    """Layer of each wire's last comparator (-1 for an untouched wire)."""
    last = np.full(net.n, -1, dtype=np.int64)
    lay = net.layer_of()
    c = net.comparators
    np.maximum.at(last, c[:, 0], lay)
    np.maximum.at(last, c[:, 1], lay)
    return last


# ----------------------------------------------------------------- backends
class _Masks:
    """n <= 64: states are uint64 bitmasks (``(states, origins)``)."""

    largest = 0
    finished = False

    def __init__(self, n, k, max_states):
        self.n, self.k, self.max_states = n, k, max_states
        self.empty = (np.zeros(1, np.uint64), np.zeros(1, np.uint64), [1])

    def single(self, w):
        s = np.array([0, 1 << w] if self.k >= 1 else [0], dtype=np.uint64)
        return (s, s.copy(), [1, 1] if self.k < self.n else None)

    def _hist(self, states):
        if self.k >= self.n:
            return None  # sorter: every combination counts
        pc = np.unpackbits(states.view(np.uint8).reshape(-1, 8), axis=1).sum(axis=1)
        return np.bincount(pc, minlength=self.k + 1).tolist()

    def size(self, d):
        return len(d[0])

    def step(self, A, B, la, lb, fired, dead_wires):
        dead = 0
        for w in dead_wires:
            dead |= 1 << int(w)
        s, o, bad, ok = merge_masks(A[0], A[1], B[0], B[1], self.k, la, lb, fired, np.uint64(dead), self.max_states)
        if not ok:
            return None, None
        return (s, o, self._hist(s)), (None if bad < 0 else self.input_of(o[bad]))

    def input_of(self, origin):
        return [(int(origin) >> w) & 1 for w in range(self.n)]

    def finish(self, parts, la, lb, outputs, fired):
        """Test every combination of the parts' states through the comparators."""
        parts = sorted(parts, key=lambda d: len(d[0]))  # the largest varies fastest
        st = np.concatenate([d[0] for d in parts])
        og = np.concatenate([d[1] for d in parts])
        offs = np.concatenate([[0], np.cumsum([len(d[0]) for d in parts])]).astype(np.int64)
        is_out = np.zeros(self.n, dtype=np.bool_)
        is_out[list(outputs)] = True
        o, found = mask_finish(st, og, offs, self.n, self.k, la, lb, np.asarray(outputs, dtype=np.int64), is_out, fired)
        return self.input_of(o) if found else None

    def any_token(self, d):
        j = np.flatnonzero(d[0] != 0)
        return None if len(j) == 0 else self.input_of(d[1][j[0]])

    def final(self, d, outputs):
        one = np.uint64(1)
        prefix = np.zeros(self.k + 1, dtype=np.uint64)
        for m in range(1, self.k + 1):
            prefix[m] = prefix[m - 1] | (one << np.uint64(outputs[m - 1]))
        counts = np.unpackbits(d[0].view(np.uint8).reshape(-1, 8), axis=1).sum(axis=1)
        bad = np.flatnonzero(d[0] != prefix[counts])
        return None if len(bad) == 0 else self.input_of(d[1][bad[0]])


class _Tokens:
    """Any n, small k: states are sorted token-wire lists ``(pos, org, cnt)``."""

    largest = 0
    finished = False

    def __init__(self, n, k, max_states):
        self.n, self.k, self.max_states = n, k, max_states
        self.seen = np.full(n, -1, dtype=np.int64)
        self.dead = np.zeros(n, dtype=np.bool_)
        z = np.full((1, k), -1, dtype=np.int32)
        self.empty = (z, z.copy(), np.zeros(1, np.int32), [1])

    def single(self, w):
        if not hasattr(self, "_singles"):  # one allocation for all wires; kernels never write inputs
            self._singles = np.full((self.n, 2, self.k), -1, dtype=np.int32)
            self._singles[:, 1, 0] = np.arange(self.n)
            self._cnt01 = np.array([0, 1], dtype=np.int32)
        p = self._singles[w]
        return (p, p, self._cnt01, [1, 1])

    def size(self, d):
        return len(d[2])

    def step(self, A, B, la, lb, fired, dead_wires):
        self.dead[dead_wires] = True
        pos, org, cnt, bad, ok = token_step(
            A[0], A[1], A[2], B[0], B[1], B[2], self.k, la, lb, self.seen, fired, self.dead, self.max_states
        )
        self.dead[dead_wires] = False
        if not ok:
            return None, None
        hist = np.bincount(cnt, minlength=self.k + 1).tolist()
        return (pos, org, cnt, hist), (None if bad < 0 else self.input_of(org[bad], cnt[bad]))

    def input_of(self, org, m):
        x = [0] * self.n
        for w in org[:m].tolist():
            x[w] = 1
        return x

    def any_token(self, d):
        j = np.flatnonzero(d[2] > 0)
        return None if len(j) == 0 else self.input_of(d[1][j[0]], d[2][j[0]])

    def final(self, d, outputs):
        pos, org, cnt, _ = d
        for i in range(len(cnt)):
            m = int(cnt[i])
            if pos[i, :m].tolist() != sorted(outputs[:m]):
                return self.input_of(org[i], m)
        return None


# ------------------------------------------------------------------- driver
def _run(net: Network, backend, max_work: int, progress):
    """Apply the comparators in an order that keeps state sets small: every
    comparator whose wires are already in one cluster (and whose earlier
    comparators are done) is applied at once; otherwise the ready comparator
    joining the two clusters with the fewest combined states merges them."""
    n, k = net.n, net.k
    outputs = list(net.outputs)
    is_out = np.zeros(n, dtype=bool)
    is_out[outputs] = True
    comps = net.comparators.tolist()
    size = len(comps)
    fires = np.zeros(size, dtype=bool)
    # per-wire comparator lists (execution order) and a cursor into each
    on_wire: list[list[int]] = [[] for _ in range(n)]
    for i, (a, b) in enumerate(comps):
        on_wire[a].append(i)
        on_wire[b].append(i)
    cur = [0] * n
    # where each comparator sits in its two wires' lists: it is ready when
    # both cursors point at it
    pos_a = [0] * size
    pos_b = [0] * size
    for w in range(n):
        for j, i in enumerate(on_wire[w]):
            if comps[i][0] == w:
                pos_a[i] = j
            else:
                pos_b[i] = j
    for w in range(n):  # an untouched non-output wire keeps a lone token
        if not on_wire[w] and not is_out[w] and k >= 1:
            return "counterexample", [int(i == w) for i in range(n)], None, 0
    parent = list(range(n))
    data = {w: backend.single(w) for w in range(n)}

    def find(x):
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    def is_ready(c):
        a, b = comps[c]
        return cur[a] == pos_a[c] and cur[b] == pos_b[c]

    heap: list[tuple[int, int]] = []
    ready_of: dict[int, set[int]] = {}  # cluster root -> ready comparators joining it to another

    def key(c):
        a, b = comps[c]
        return _pairs(data[find(a)], data[find(b)], k)

    def push_ready(c):
        a, b = comps[c]
        ra, rb = find(a), find(b)
        ready_of.setdefault(ra, set()).add(c)
        ready_of.setdefault(rb, set()).add(c)
        heapq.heappush(heap, (key(c), c))

    for c in range(size):
        if is_ready(c):
            push_ready(c)
    applied = np.zeros(size, dtype=bool)
    done = 0
    checked = 0
    last_report = time.perf_counter()
    while done < size:
        kc, c = heapq.heappop(heap)
        if applied[c]:
            continue
        kn = key(c)
        if kn > kc and heap and kn > heap[0][0]:
            heapq.heappush(heap, (kn, c))
            continue
        a, b = comps[c]
        ra, rb = find(a), find(b)
        if ra != rb and kn > max_work:
            raise TooManyStates(
                f"reachable-state method: a merge needs {kn:.3g} combinations (limit {max_work:.3g}; n={n}, k={k})"
            )
        if ra != rb and hasattr(backend, "finish") and kn > FINISH_MIN:
            sizes = [backend.size(d) for d in data.values()]
            rest = np.flatnonzero(~applied)
            if math.prod(sizes) / 64 * len(rest) <= FINISH_BUDGET:
                lst = net.comparators[rest].astype(np.int64)
                fired = np.zeros(len(rest), dtype=np.bool_)
                backend.finished = True
                cex = backend.finish(list(data.values()), np.ascontiguousarray(lst[:, 0]),
                                     np.ascontiguousarray(lst[:, 1]), outputs, fired)
                checked += math.prod(sizes)
                if cex is not None:
                    return "counterexample", cex, None, checked
                fires[rest] = fired
                return "proved", None, fires, checked
        # merge (or not) and collect the closure: comparators now applicable inside the cluster
        A = data.pop(ra)
        B = data.pop(rb) if rb != ra else backend.empty
        root = ra
        if rb != ra:
            if rb < ra:
                root = rb
            parent[ra] = parent[rb] = root
        # ready comparators joining A and B are in both sets and now inside the
        # cluster; the rest stay pending (small set merged into the large one)
        rest = ready_of.pop(ra, set())
        small = ready_of.pop(rb, set()) if rb != ra else set()
        if len(small) > len(rest):
            rest, small = small, rest
        rest.discard(c)
        order = []
        stack = [c]
        for y in small:
            if y in rest:
                rest.discard(y)
                stack.append(y)
            elif y != c and not applied[y]:
                rest.add(y)
        if rb == ra:  # a pending comparator that became internal through other merges
            stack.extend(y for y in list(rest) if find(comps[y][0]) == root and find(comps[y][1]) == root)
        while stack:
            x = stack.pop()
            if applied[x]:
                continue
            applied[x] = True
            order.append(x)
            for w in comps[x]:
                cw = cur[w] = cur[w] + 1
                ow = on_wire[w]
                if cw >= len(ow):
                    continue
                y = ow[cw]
                ya, yb = comps[y]
                if cur[ya] == pos_a[y] and cur[yb] == pos_b[y]:
                    if find(ya) == root and find(yb) == root:
                        stack.append(y)
                    elif y not in rest:
                        rest.add(y)
                        other = find(yb) if find(ya) == root else find(ya)
                        ready_of.setdefault(other, set()).add(y)
                        heapq.heappush(heap, (0, y))  # key refreshed when popped
        ready_of[root] = rest
        order_arr = np.asarray(order, dtype=np.int64)
        fired = np.zeros(len(order), dtype=np.bool_)
        dead_wires = sorted({w for x in order for w in comps[x] if cur[w] == len(on_wire[w]) and not is_out[w]})
        # push the combinations through one level of the closure at a time,
        # deduplicating in between (the product is large, the image small)
        level = _levels(order, comps)
        nlev = int(level.max()) + 1
        new = None
        for lv in range(nlev):
            sel = np.flatnonzero(level == lv)
            lst = net.comparators[order_arr[sel]].astype(np.int64)
            f = np.zeros(len(sel), dtype=np.bool_)
            new, cex = backend.step(
                A, B, np.ascontiguousarray(lst[:, 0]), np.ascontiguousarray(lst[:, 1]), f,
                np.asarray(dead_wires if lv == nlev - 1 else [], dtype=np.int64),
            )
            if new is None:
                raise TooManyStates(
                    f"reachable-state method: more than {backend.max_states} states in one cluster (n={n}, k={k})"
                )
            fired[sel] = f
            A, B = new, backend.empty
        fires[order_arr] = fired
        checked += backend.size(new)
        backend.largest = max(backend.largest, backend.size(new))
        done += len(order)
        if cex is not None:
            return "counterexample", cex, None, checked
        data[root] = new
        if progress is not None and time.perf_counter() - last_report > 0.5:
            last_report = time.perf_counter()
            progress(done, size, sum(backend.size(d) for d in data.values()))
    # final check: the live clusters are those holding outputs
    roots = sorted({find(w) for w in outputs})
    if len(roots) > 1:
        # a cluster without outputs[0] has a state with a token (from a
        # single-token input); with no tokens elsewhere it is wrong
        other = next(r for r in roots if r != find(outputs[0]))
        return "counterexample", backend.any_token(data[other]), None, checked
    cex = backend.final(data[roots[0]], outputs)
    if cex is not None:
        return "counterexample", cex, None, checked
    return "proved", None, fires, checked


def _levels(order: list[int], comps: list) -> np.ndarray:
    """ASAP level of each comparator of ``order`` counting only dependencies
    inside ``order``."""
    ready: dict[int, int] = {}
    out = np.empty(len(order), dtype=np.int64)
    for i, x in enumerate(order):
        a, b = comps[x]
        lv = max(ready.get(a, 0), ready.get(b, 0))
        out[i] = lv
        ready[a] = ready[b] = lv + 1
    return out


def _pairs(A, B, k: int) -> int:
    """How many combinations of a state of A with one of B have <= k tokens
    (the last element of a cluster's data is its token-count histogram, or
    None when every combination counts)."""
    ha, hb = A[-1], B[-1]
    if ha is None or hb is None:
        return len(A[0]) * len(B[0])
    cum, acc = [], 0
    for c in range(k + 1):
        acc += hb[c] if c < len(hb) else 0
        cum.append(acc)
    return sum(h * cum[k - c] for c, h in enumerate(ha) if c <= k)
