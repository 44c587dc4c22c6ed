"""The comparator-network IR: one immutable value that every pass, verifier,
relaxation and code generator reads.

Conventions (docs/design.md section 2):

* wires are 0..n-1; a comparator ``(a, b)`` leaves the max on ``a`` and the
  min on ``b`` (no assumption ``a < b``);
* rank 0 is the largest value; ``outputs[r]`` is the wire holding rank r
  after the last layer (``k = len(outputs)``, ``k = n`` for a sorter);
* a layer is a set of comparators on pairwise distinct wires.

Storage is compact: all comparators in one ``(size, 2)`` int32 array in
execution order and a ``(depth + 1,)`` array of layer offsets (CSR style), so a
network with 10^6 comparators costs ~8 MB and builds in milliseconds.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

import numpy as np

from .schedule import asap_levels as asap_layers  # noqa: F401 - the one ASAP implementation, under its old name
from .schedule import pack

# Refuse networks whose comparator arrays alone would not fit comfortably in
# memory (and whose wires could not be indexed by int32).
MAX_WIRES = 1 << 24
MAX_COMPARATORS = 1 << 28

#: Default work budget of constructions and file readers: comparators plus
#: wires a network may have before it is built or parsed. Raise it with
#: ``max_size=`` (Python) or ``--max-size`` (CLI); see docs/security.md.
DEFAULT_MAX_SIZE = 10_000_000


class SizeLimitError(ValueError):
    """A request whose estimated size is over the budget (a ValueError, so
    the CLI prints it as one line with exit code 2)."""


_MAX_SIZE: contextvars.ContextVar[int] = contextvars.ContextVar("netgen_max_size", default=DEFAULT_MAX_SIZE)


@contextlib.contextmanager
def size_limit(max_size: int | None):
    """Within the block, ``max_size=None`` means ``max_size`` (None: keep the
    current limit). The CLI's ``--max-size`` works through this."""
    token = _MAX_SIZE.set(check_max_size(max_size))
    try:
        yield
    finally:
        _MAX_SIZE.reset(token)


def check_max_size(max_size: Any) -> int:
    """Validate a ``max_size`` budget (None: the current limit,
    :data:`DEFAULT_MAX_SIZE` unless :func:`size_limit` raised it)."""
    if max_size is None:
        return _MAX_SIZE.get()
    if isinstance(max_size, bool) or not isinstance(max_size, (int, np.integer)) or max_size < 1:
        raise ValueError(f"max_size must be a positive integer, got {max_size!r}")
    return int(max_size)


def check_budget(what: str, estimate: int, max_size: int | None = None) -> None:
    """Refuse, before anything is allocated, a network estimated at more than
    ``max_size`` comparators plus wires; the message names the estimate and
    how to raise the limit."""
    limit = check_max_size(max_size)
    if estimate > limit:
        raise SizeLimitError(
            f"{what} would need ~{estimate:,} comparators and wires: too large (limit {limit:,}; "
            f"raise it with --max-size N, in Python max_size=N)"
        )


def _frozen(a: np.ndarray) -> np.ndarray:
    a.setflags(write=False)
    return a


@dataclass(frozen=True, eq=False)
class Network:
    """An immutable comparator network.

    Build one with :meth:`Network.from_layers` (lists of ``(a, b)`` pairs per
    layer) or :meth:`Network.from_arrays` (compact arrays); both validate.
    """

    n: int
    comparators: np.ndarray  # (size, 2) int32, execution order, max -> [:, 0]
    layer_offsets: np.ndarray  # (depth + 1,) int64, layer l = comparators[o[l]:o[l+1]]
    outputs: tuple[int, ...]
    construction: dict[str, Any] = field(default_factory=dict)

    # ------------------------------------------------------------------ build
    @classmethod
    def from_arrays(
        cls,
        n: int,
        comparators: np.ndarray,
        layer_offsets: np.ndarray,
        outputs: Sequence[int] | None = None,
        construction: dict[str, Any] | None = None,
        *,
        validate: bool = True,
        copy: bool = True,
    ) -> "Network":
        """Wrap compact arrays. ``outputs`` defaults to ``range(n)`` (a sorter
        whose rank r lands on wire r). ``copy=False`` keeps a C-contiguous
        int32 ``(size, 2)`` ``comparators`` array itself, made read-only
        (large networks: no int64 copy on the way; :meth:`with_` passes its
        own frozen arrays this way)."""
        n = check_n(n)
        if _is_compact(comparators):  # int32 pairs: checked as they are, no int64 copy
            comps = comparators if not copy else np.array(comparators)
        else:
            comps = np.ascontiguousarray(wire_pairs(comparators))
        offs = np.ascontiguousarray(np.asarray(layer_offsets, dtype=np.int64).reshape(-1))  # internal bookkeeping
        outs = tuple(range(n)) if outputs is None else tuple(output_wires(outputs).tolist())
        if validate:
            _validate(n, comps, offs, outs)
        net = cls(
            n=n,
            comparators=_frozen(comps.astype(np.int32, copy=False)),
            layer_offsets=_frozen(offs),
            outputs=outs,
            construction=dict(construction or {}),
        )
        return net

    @classmethod
    def from_layers(
        cls,
        n: int,
        layers: Iterable[Iterable[Sequence[int]]],
        outputs: Sequence[int] | None = None,
        construction: dict[str, Any] | None = None,
    ) -> "Network":
        """Build from nested lists: ``layers[l]`` is a list of ``(a, b)``."""
        chunks = []
        offsets = [0]
        for layer in layers:
            arr = wire_pairs(list(layer))
            chunks.append(arr)
            offsets.append(offsets[-1] + len(arr))
        comps = np.concatenate(chunks) if chunks else np.zeros((0, 2), np.int64)
        return cls.from_arrays(n, comps, np.asarray(offsets), outputs, construction)

    @classmethod
    def from_comparators(
        cls,
        n: int,
        comparators: Iterable[Sequence[int]] | np.ndarray,
        outputs: Sequence[int] | None = None,
        construction: dict[str, Any] | None = None,
    ) -> "Network":
        """Build from a flat comparator sequence in execution order, packed
        as soon as possible into layers (ASAP)."""
        comps = wire_pairs(comparators if isinstance(comparators, np.ndarray) else list(comparators))
        n = check_n(n)
        _check_range(n, comps)
        packed = pack(n, comps)
        return cls.from_arrays(n, packed.comparators, packed.layer_offsets, outputs, construction)

    # ------------------------------------------------------------- properties
    @property
    def k(self) -> int:
        return len(self.outputs)

    @property
    def size(self) -> int:
        return int(self.comparators.shape[0])

    @property
    def depth(self) -> int:
        return int(self.layer_offsets.shape[0] - 1)

    @property
    def is_sorter(self) -> bool:
        return self.k == self.n

    def layer(self, l: int) -> np.ndarray:
        """Comparators of layer ``l`` as a read-only ``(m, 2)`` int32 array."""
        o = self.layer_offsets
        return self.comparators[o[l] : o[l + 1]]

    @property
    def layers(self) -> list[np.ndarray]:
        return [self.layer(l) for l in range(self.depth)]

    def layer_sizes(self) -> list[int]:
        return np.diff(self.layer_offsets).astype(int).tolist()

    def layer_of(self) -> np.ndarray:
        """Layer index of each comparator, shape ``(size,)``."""
        return np.repeat(np.arange(self.depth), np.diff(self.layer_offsets))

    def with_(self, **changes: Any) -> "Network":
        """A copy with some fields replaced (validated again)."""
        fields = dict(
            n=self.n,
            comparators=self.comparators,
            layer_offsets=self.layer_offsets,
            outputs=self.outputs,
            construction=self.construction,
        )
        fields.update(changes)
        # this network's frozen arrays are shared, not copied; a new comparators array is copied as usual
        return Network.from_arrays(**fields, copy=fields["comparators"] is not self.comparators)

    def with_comparators(self, keep: np.ndarray, **changes: Any) -> "Network":
        """Keep only comparators where the boolean mask ``keep`` is true,
        leaving each in its layer and dropping layers that become empty."""
        keep = np.asarray(keep, dtype=bool)
        layer = self.layer_of()[keep]
        _, counts = np.unique(layer, return_counts=True)
        offsets = np.concatenate([[0], np.cumsum(counts)])
        return self.with_(comparators=self.comparators[keep], layer_offsets=offsets, **changes)

    # ------------------------------------------------------------------ stats
    def stats(self) -> dict[str, int]:
        return {"depth": self.depth, "size": self.size}

    def key(self) -> str:
        """Content key: a hash of n, layers, outputs and construction. Two
        networks with equal keys are the same network."""
        h = hashlib.sha256()
        h.update(f"netgen-network/1 n={self.n} outputs={list(self.outputs)}".encode())
        h.update(np.ascontiguousarray(self.layer_offsets, dtype="<i8").tobytes())
        h.update(np.ascontiguousarray(self.comparators, dtype="<i4").tobytes())
        h.update(json.dumps(self.construction, sort_keys=True).encode())
        return h.hexdigest()[:16]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Network):
            return NotImplemented
        return (
            self.n == other.n
            and self.outputs == other.outputs
            and np.array_equal(self.layer_offsets, other.layer_offsets)
            and np.array_equal(self.comparators, other.comparators)
            and self.construction == other.construction
        )

    def __hash__(self) -> int:
        return hash(self.key())

    def __repr__(self) -> str:
        from .text import MAX_SHOWN, printable

        kind = printable(repr(self.construction.get("kind", "custom")), MAX_SHOWN)  # a file's string: escaped, cut
        return f"Network(kind={kind}, n={self.n}, k={self.k}, depth={self.depth}, size={self.size})"

    # ---------------------------------------------------------------- execute
    def apply(self, x: np.ndarray) -> np.ndarray:
        """Run the exact network on ``x`` of shape ``(..., n)`` (any ordered
        dtype); returns all n wires after the last layer."""
        v = np.array(x, copy=True)
        if v.shape[-1] != self.n:
            raise ValueError(f"input has {v.shape[-1]} wires, network has n={self.n}")
        for l in range(self.depth):
            c = self.layer(l)
            a, b = c[:, 0], c[:, 1]
            va, vb = v[..., a], v[..., b]
            v[..., a] = np.maximum(va, vb)
            v[..., b] = np.minimum(va, vb)
        return v

    def select(self, x: np.ndarray) -> np.ndarray:
        """The network's top-k (or sorted, descending) values, ``(..., k)``."""
        return self.apply(x)[..., list(self.outputs)]

    # --------------------------------------------------------------- networkx
    def to_networkx(self):
        """The comparator DAG: node i is comparator i (attributes ``a``, ``b``,
        ``layer``); an edge i -> j carries wire w when j is the next comparator
        on w after i. Nodes ``("in", w)`` / ``("out", w)`` mark the ends of
        each wire; ``("out", w)`` has attribute ``rank`` for output wires."""
        import networkx as nx

        g = nx.DiGraph(n=self.n, k=self.k)
        rank = {w: r for r, w in enumerate(self.outputs)}
        last: list[Any] = [("in", w) for w in range(self.n)]
        for w in range(self.n):
            g.add_node(("in", w), wire=w)
        layer_of = self.layer_of()
        for i, (a, b) in enumerate(self.comparators.tolist()):
            g.add_node(i, a=a, b=b, layer=int(layer_of[i]))
            for w in (a, b):
                g.add_edge(last[w], i, wire=w)
                last[w] = i
        for w in range(self.n):
            g.add_node(("out", w), wire=w, **({"rank": rank[w]} if w in rank else {}))
            g.add_edge(last[w], ("out", w), wire=w)
        return g


# ---------------------------------------------------------------------------
_INT_TYPES = (int, np.integer)


def _is_compact(a: Any) -> bool:
    """A C-contiguous (m, 2) int32 array: what the IR stores."""
    return (isinstance(a, np.ndarray) and a.dtype == np.int32 and a.ndim == 2 and a.shape[1] == 2
            and a.flags.c_contiguous)


def wire_array(values: Any, what: str = "wires") -> np.ndarray:
    """``values`` (an integer array, or nested lists of integers) as an int64
    array. No coercion: booleans, floats (1.9 or 1.0), strings ("1") and
    integers outside int64 are a ValueError naming the first bad value."""
    if isinstance(values, np.ndarray):
        if values.size == 0:
            return values.astype(np.int64)
        if values.dtype.kind not in "iu":
            raise ValueError(f"{what} must be integers, got an array of {values.dtype}")
        if values.dtype.kind == "u" and values.size and int(values.max()) > np.iinfo(np.int64).max:
            raise ValueError(f"{what} must fit in 64 bits, got {int(values.max())}")
        return values.astype(np.int64, copy=False)
    try:
        obj = np.asarray(values, dtype=object)
    except ValueError:
        raise ValueError(f"{what} must be a rectangular list of integers") from None
    flat = obj.reshape(-1).tolist()
    types = set(map(type, flat))
    if not all(t is not bool and issubclass(t, _INT_TYPES) for t in types):
        bad = next(v for v in flat if isinstance(v, (bool, np.bool_)) or not isinstance(v, _INT_TYPES))
        raise ValueError(f"{what} must be integers, got {bad!r} ({type(bad).__name__})")
    try:
        return np.asarray(flat, dtype=np.int64).reshape(obj.shape)
    except OverflowError:
        bad = next(v for v in flat if not -(1 << 63) <= v < (1 << 63))
        raise ValueError(f"{what} must fit in 64 bits, got {bad}") from None


def wire_pairs(values: Any, what: str = "comparator wires") -> np.ndarray:
    """``values`` as an (m, 2) int64 array of comparators: a list of [a, b]
    pairs of integers (:func:`wire_array`) and nothing reshaped into one
    (``[[0], [1]]`` or a flat ``[0, 1, 2, 3]`` is a ValueError)."""
    arr = wire_array(values, what)
    if arr.size and (arr.ndim != 2 or arr.shape[1] != 2):
        raise ValueError(f"{what} must be a list of [a, b] pairs of integers, got an array of shape {arr.shape}")
    return arr.reshape(-1, 2)


def output_wires(values: Any, what: str = "output wires") -> np.ndarray:
    """``values`` as a 1-d int64 array of wires (no nested lists)."""
    arr = wire_array(values, what)
    if arr.size and arr.ndim != 1:
        raise ValueError(f"{what} must be a flat list of integer wires, got an array of shape {arr.shape}")
    return arr.reshape(-1)


def check_n(n: Any) -> int:
    """Validate a wire count; ValueError names the problem."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise ValueError(f"n must be an integer, got {n!r}")
    n = int(n)
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    if n > MAX_WIRES:
        shown = str(n) if n < 10 ** 20 else f"a {len(str(n))}-digit number"
        raise ValueError(f"n = {shown} is too large (at most {MAX_WIRES} wires)")
    return n


def _check_range(n: int, comps: np.ndarray) -> None:
    if comps.size == 0:
        return
    if len(comps) > MAX_COMPARATORS:
        raise ValueError(f"{len(comps)} comparators is too many (at most {MAX_COMPARATORS})")
    lo, hi = int(comps.min()), int(comps.max())
    if lo < 0 or hi >= n:
        bad = comps[(comps < 0).any(1) | (comps >= n).any(1)][0].tolist()
        raise ValueError(f"comparator {bad} uses a wire outside 0..{n - 1}")
    same = comps[:, 0] == comps[:, 1]
    if same.any():
        raise ValueError(f"comparator {comps[same][0].tolist()} compares a wire with itself")


def _validate(n: int, comps: np.ndarray, offs: np.ndarray, outs: tuple[int, ...]) -> None:
    _check_range(n, comps)
    if len(offs) < 1 or offs[0] != 0 or offs[-1] != len(comps) or (np.diff(offs) < 0).any():
        raise ValueError("layer offsets are inconsistent with the comparator list")
    if (np.diff(offs) == 0).any():
        raise ValueError(f"layer {int(np.argmax(np.diff(offs) == 0))} is empty")
    # wires within a layer must be distinct: layer by layer where the layers
    # are wide (a sorter: O(n) a layer, no copy of the comparators), else
    # sort (layer, wire) keys and look for repeats (O(size) int64 keys)
    if len(comps) and (len(offs) - 1) * n <= 4 * len(comps):
        for l in range(len(offs) - 1):
            c = comps[offs[l]:offs[l + 1]]
            seen = np.bincount(c.reshape(-1), minlength=n)
            if seen.max() > 1:
                raise ValueError(f"layer {l} uses wire {int(np.argmax(seen > 1))} twice")
    elif len(comps):
        layer = np.repeat(np.arange(len(offs) - 1), np.diff(offs))
        key = np.concatenate([layer * n + comps[:, 0], layer * n + comps[:, 1]])
        key.sort()
        dup = key[1:] == key[:-1]
        if dup.any():
            k0 = int(key[1:][dup][0])
            raise ValueError(f"layer {k0 // n} uses wire {k0 % n} twice")
    if len(outs) < 1:
        raise ValueError("a network needs at least one output wire")
    if len(outs) > n:
        raise ValueError(f"{len(outs)} outputs but only n={n} wires")
    if min(outs) < 0 or max(outs) >= n:
        raise ValueError(f"output wires must lie in 0..{n - 1}, got {list(outs)}")
    if len(set(outs)) != len(outs):
        raise ValueError(f"output wires must be distinct, got {list(outs)}")
