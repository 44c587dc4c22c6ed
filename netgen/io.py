"""Reading and writing networks (docs/design.md section 3).

* ``netgen-network/1`` JSON: written canonically (one layer per line), so
  JSON -> Network -> JSON is byte-identical; readers recompute ``stats`` and
  reject a file whose stats disagree.
* Dobbelaere's sorter JSON ``{"N", "L", "D", "nw"}``: pairs ``[i, j]`` put the
  min on i and the max on j, i.e. netgen comparator ``(j, i)``, outputs
  ``n-1, ..., 0``; packed ASAP and checked against L and D.
* Layer text, one layer per line: ``[(0,2),(1,3)]`` with the same min-first
  convention as Dobbelaere.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from pathlib import Path
from typing import Any, Callable

import numpy as np

from .network import Network

FORMAT = "netgen-network/1"


# ------------------------------------------------------------------- writing
def to_dict(net: Network) -> dict[str, Any]:
    """The network as a dict in the interchange format."""
    return {
        "format": FORMAT,
        "n": net.n,
        "outputs": list(net.outputs),
        "layers": [layer.tolist() for layer in net.layers],
        "construction": dict(net.construction),
        "stats": net.stats(),
    }


def dumps(net: Network) -> str:
    """Canonical JSON text: header fields on their own lines, one layer per
    line. Deterministic for a given network."""
    flat = net.comparators.reshape(-1)
    pairs = np.char.add(
        np.char.add("[", flat[0::2].astype(str)),
        np.char.add(", ", np.char.add(flat[1::2].astype(str), "]")),
    ) if net.size else np.zeros(0, dtype=str)
    off = net.layer_offsets
    layer_lines = ["    [" + ", ".join(pairs[off[l] : off[l + 1]].tolist()) + "]" for l in range(net.depth)]
    layers = "[\n" + ",\n".join(layer_lines) + "\n  ]" if layer_lines else "[]"
    return (
        "{\n"
        f'  "format": "{FORMAT}",\n'
        f'  "n": {net.n},\n'
        f'  "outputs": {json.dumps(list(net.outputs))},\n'
        f'  "layers": {layers},\n'
        f'  "construction": {json.dumps(net.construction)},\n'
        f'  "stats": {json.dumps(net.stats())}\n'
        "}\n"
    )


def atomic_write(path: str | os.PathLike, write: Callable[[str], None]) -> None:
    """Call ``write(tmp)`` to fill a temporary file beside ``path``, then
    rename it into place, so readers never see a half-written file. The file
    gets the usual mode (0666 less the umask), not mkstemp's 0600."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp" + path.suffix)
    os.close(fd)
    try:
        write(tmp)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    """Write ``text`` (UTF-8, ``\\n`` line ends) to ``path`` atomically."""
    atomic_write(path, lambda tmp: Path(tmp).write_text(text, encoding="utf-8", newline="\n"))


def save(net: Network, path: str | os.PathLike) -> None:
    atomic_write_text(path, dumps(net))


# ------------------------------------------------------------------- reading
def from_dict(d: Any, *, source: str = "input") -> Network:
    """Accept a netgen dict or a Dobbelaere dict."""
    if not isinstance(d, dict):
        raise ValueError(f"{source}: expected a JSON object, got {type(d).__name__}")
    if "nw" in d and "N" in d:
        return _from_dobbelaere(d, source)
    if d.get("format") != FORMAT:
        raise ValueError(
            f"{source}: unknown format {d.get('format')!r} (expected {FORMAT!r} or Dobbelaere's {{N, L, D, nw}})"
        )
    for key in ("n", "outputs", "layers"):
        if key not in d:
            raise ValueError(f"{source}: missing field {key!r}")
    n = d["n"]
    if isinstance(n, bool) or not isinstance(n, int):
        raise ValueError(f"{source}: n must be an integer, got {n!r}")
    layers = d["layers"]
    if not isinstance(layers, list) or not all(isinstance(l, list) for l in layers):
        raise ValueError(f"{source}: layers must be a list of lists of [a, b] pairs")
    try:
        sizes = [len(l) for l in layers]
        flat = [c for l in layers for c in l]
        comps = np.asarray(flat, dtype=np.int64).reshape(len(flat), 2) if flat else np.zeros((0, 2), np.int64)
        if flat and (not all(isinstance(c, list) and len(c) == 2 for c in flat)):
            raise ValueError
    except (ValueError, TypeError):
        raise ValueError(f"{source}: every comparator must be a pair of integer wires [a, b]") from None
    outputs = d["outputs"]
    if not isinstance(outputs, list) or not all(isinstance(w, int) and not isinstance(w, bool) for w in outputs):
        raise ValueError(f"{source}: outputs must be a list of integer wires")
    construction = d.get("construction", {})
    if not isinstance(construction, dict):
        raise ValueError(f"{source}: construction must be an object")
    offsets = np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)])
    try:
        net = Network.from_arrays(n, comps, offsets, outputs, construction)
    except ValueError as e:
        raise ValueError(f"{source}: {e}") from None
    stats = d.get("stats")
    if stats is not None:
        if not isinstance(stats, dict):
            raise ValueError(f"{source}: stats must be an object")
        for key, value in net.stats().items():
            if key in stats and stats[key] != value:
                raise ValueError(f"{source}: stats say {key} = {stats[key]!r} but the layers give {value}")
    return net


def _from_dobbelaere(d: dict, source: str) -> Network:
    n, nw = d["N"], d["nw"]
    if isinstance(n, bool) or not isinstance(n, int):
        raise ValueError(f"{source}: N must be an integer, got {n!r}")
    try:
        pairs = np.asarray(nw, dtype=np.int64).reshape(len(nw), 2) if nw else np.zeros((0, 2), np.int64)
    except (ValueError, TypeError):
        raise ValueError(f"{source}: nw must be a list of [i, j] pairs") from None
    try:
        net = Network.from_comparators(
            n,
            pairs[:, ::-1],  # min -> i, max -> j  ==  netgen (j, i)
            outputs=list(range(n - 1, -1, -1)),
            construction={"kind": "dobbelaere", "n": n},
        )
    except ValueError as e:
        raise ValueError(f"{source}: {e}") from None
    for key, value in (("L", net.size), ("D", net.depth)):
        if key in d and d[key] != value:
            raise ValueError(f"{source}: {key} = {d[key]!r} but the comparators give {value}")
    return net


_PAIR = re.compile(r"\(\s*(-?\d+)\s*,\s*(-?\d+)\s*\)")


def from_layer_text(text: str, *, source: str = "input") -> Network:
    """One layer per line, ``[(i,j),(k,l)]``, min on the first wire. n is the
    largest wire + 1; outputs ``n-1, ..., 0``; layers kept as written."""
    layers = []
    for lineno, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        rest = _PAIR.sub("", line).replace(",", "").strip()
        if rest not in ("[]", ""):
            raise ValueError(f"{source}: line {lineno} is not a layer of (i,j) pairs: {line[:60]!r}")
        pairs = [(int(j), int(i)) for i, j in _PAIR.findall(line)]
        if pairs:
            layers.append(pairs)
    if not layers:
        raise ValueError(f"{source}: no comparators found")
    n = 1 + max(max(p) for layer in layers for p in layer)
    try:
        return Network.from_layers(n, layers, outputs=list(range(n - 1, -1, -1)), construction={"kind": "layers", "n": n})
    except ValueError as e:
        raise ValueError(f"{source}: {e}") from None


def loads(text: str, *, source: str = "input") -> Network:
    """Parse any accepted format from text."""
    stripped = text.lstrip()
    if stripped.startswith("{"):
        try:
            d = json.loads(text)
        except json.JSONDecodeError as e:
            raise ValueError(f"{source}: not valid JSON ({e.msg} at line {e.lineno})") from None
        return from_dict(d, source=source)
    if stripped.startswith("["):
        return from_layer_text(text, source=source)
    raise ValueError(f"{source}: not a network file (expected netgen JSON, Dobbelaere JSON or layer text)")


def load(path: str | os.PathLike) -> Network:
    """Read a network file in any accepted format; ValueError names the problem."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ValueError(f"{p}: no such file") from None
    except IsADirectoryError:
        raise ValueError(f"{p}: is a directory, not a network file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ValueError(f"{p}: cannot read ({e})") from None
    return loads(text, source=str(p))
