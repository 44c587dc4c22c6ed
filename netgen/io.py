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
import stat
import tempfile
from pathlib import Path
from typing import Any, Callable

import numpy as np

from .network import (MAX_WIRES, Network, SizeLimitError, check_budget, check_max_size, check_n, wire_array,
                      wire_pairs)

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
#: a file may hold at most this many bytes per unit of the size budget
#: (comparators plus wires; ``max_size``), and never less than MIN_FILE_BYTES
BYTES_PER_ELEMENT = 32
MIN_FILE_BYTES = 1 << 20
#: deepest nesting of JSON objects/lists accepted in a construction record
MAX_NESTING = 32
#: a construction record is metadata (netgen writes 40-200 bytes), but every
#: generated module carries it as a literal: a 4.9 MB record took 1.4 GB and
#: 7 s to build for numba. It counts against the size limit as one unit per
#: RECORD_BYTES_PER_UNIT bytes (of its JSON, estimated) and is refused past
#: MAX_RECORD_BYTES whatever the limit
RECORD_BYTES_PER_UNIT = 8
MAX_RECORD_BYTES = 1 << 16


def file_limit(max_size: int | None = None) -> int:
    """The largest network file (bytes) read under the size budget ``max_size``."""
    return max(MIN_FILE_BYTES, BYTES_PER_ELEMENT * check_max_size(max_size))


def _too_big(source: str, nbytes: int, max_size: int | None) -> ValueError:
    return SizeLimitError(
        f"{source}: {nbytes:,} bytes: too large (limit {file_limit(max_size):,} bytes, "
        f"{BYTES_PER_ELEMENT} per unit of the size limit {check_max_size(max_size):,}; "
        "raise it with --max-size N, in Python max_size=N)"
    )


def _strict_constant(name: str):
    raise ValueError(f"{name} is not a number netgen accepts (JSON has no NaN or Infinity)")


def record_units(value: Any, source: str, what: str = "construction") -> int:
    """Units of the size limit a construction record counts as: its JSON
    size (estimated while walking it, without recursion) over
    RECORD_BYTES_PER_UNIT. ValueError past MAX_NESTING levels or
    MAX_RECORD_BYTES (the walk stops there)."""
    nbytes, stack = 0, [(value, 0)]
    while stack:
        v, depth = stack.pop()
        if depth > MAX_NESTING:
            raise ValueError(f"{source}: {what} is nested more than {MAX_NESTING} levels deep")
        if isinstance(v, dict):
            nbytes += 2 + 4 * len(v) + sum(len(k) for k in v if isinstance(k, str))
            stack.extend((x, depth + 1) for x in v.values())
        elif isinstance(v, list):
            nbytes += 2 + 2 * len(v)
            stack.extend((x, depth + 1) for x in v)
        elif isinstance(v, str):
            nbytes += len(v) + 2
        else:
            nbytes += 8
        if nbytes > MAX_RECORD_BYTES:
            raise SizeLimitError(f"{source}: the {what} record is over {MAX_RECORD_BYTES:,} bytes: too large "
                                 "for metadata (netgen's own records are under 1 KB; every generated module "
                                 "carries it)")
    return -(-nbytes // RECORD_BYTES_PER_UNIT)


def from_dict(d: Any, *, source: str = "input", max_size: int | None = None) -> Network:
    """Accept a netgen dict or a Dobbelaere dict. Wires must be JSON
    integers (no booleans, floats or strings); the network's comparators
    plus wires must not exceed ``max_size`` (default
    :data:`netgen.network.DEFAULT_MAX_SIZE`)."""
    if not isinstance(d, dict):
        raise ValueError(f"{source}: expected a JSON object, got {type(d).__name__}")
    if "nw" in d and "N" in d:
        both = sorted(key for key in ("format", "n", "layers", "outputs") if key in d)
        if both:
            raise ValueError(f"{source}: ambiguous: Dobbelaere's fields N and nw beside netgen's "
                             f"{', '.join(both)}; a file holds one network in one format")
        return _from_dobbelaere(d, source, max_size)
    fmt = d.get("format")
    if fmt != FORMAT:
        shown = fmt if isinstance(fmt, (str, int, float, type(None))) else type(fmt).__name__
        raise ValueError(
            f"{source}: unknown format {_short(shown)} (expected {FORMAT!r} or Dobbelaere's {{N, L, D, nw}})"
        )
    for key in ("n", "outputs", "layers"):
        if key not in d:
            raise ValueError(f"{source}: missing field {key!r}")
    n = _check_n(d["n"], "n", source)
    layers = d["layers"]
    if not isinstance(layers, list) or not all(isinstance(l, list) for l in layers):
        raise ValueError(f"{source}: layers must be a list of lists of [a, b] pairs")
    sizes = [len(l) for l in layers]
    construction = d.get("construction", {})
    if not isinstance(construction, dict):
        raise ValueError(f"{source}: construction must be an object")
    record = record_units(construction, source)
    check_budget(f"{source}: n = {n} with {sum(sizes):,} comparators"
                 + (f" and a construction record of ~{record * RECORD_BYTES_PER_UNIT:,} bytes" if record > 64 else ""),
                 sum(sizes) + n + record, max_size)
    flat = [c for l in layers for c in l]
    comps = _pairs(flat, source, "every comparator must be a pair of integer wires [a, b]")
    outputs = d["outputs"]
    if not isinstance(outputs, list):
        raise ValueError(f"{source}: outputs must be a list of integer wires")
    try:
        outs = wire_array(outputs, "outputs").reshape(-1) if outputs else outputs
    except ValueError as e:
        raise ValueError(f"{source}: {e}") from None
    if len(outputs) and np.ndim(outputs) != 1:
        raise ValueError(f"{source}: outputs must be a list of integer wires")
    offsets = np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)])
    try:
        net = Network.from_arrays(n, comps, offsets, outs, construction)
    except ValueError as e:
        raise ValueError(f"{source}: {e}") from None
    stats = d.get("stats")
    if stats is not None:
        if not isinstance(stats, dict):
            raise ValueError(f"{source}: stats must be an object")
        for key, value in net.stats().items():
            if key in stats and (type(stats[key]) is not int or stats[key] != value):
                raise ValueError(f"{source}: stats say {key} = {_short(stats[key])} but the layers give {value}")
    return net


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _check_n(n: Any, name: str, source: str) -> int:
    if isinstance(n, bool) or not isinstance(n, int):
        raise ValueError(f"{source}: {name} must be an integer, got {_short(n)}")
    try:
        return check_n(n)
    except ValueError as e:
        raise ValueError(f"{source}: {name}: {e}") from None


def _pairs(flat: list, source: str, message: str) -> np.ndarray:
    """A list of [a, b] integer pairs as an (m, 2) int64 array."""
    if not flat:
        return np.zeros((0, 2), np.int64)
    if not all(type(c) is list and len(c) == 2 for c in flat):
        raise ValueError(f"{source}: {message}")
    try:
        return wire_pairs(flat, "wires")
    except ValueError as e:
        raise ValueError(f"{source}: {message}: {e}") from None


def _from_dobbelaere(d: dict, source: str, max_size: int | None = None) -> Network:
    n, nw = _check_n(d["N"], "N", source), d["nw"]
    if not isinstance(nw, list):
        raise ValueError(f"{source}: nw must be a list of [i, j] pairs")
    check_budget(f"{source}: N = {n} with {len(nw):,} comparators", len(nw) + n, max_size)
    pairs = _pairs(nw, source, "nw must be a list of [i, j] integer pairs")
    try:
        net = Network.from_comparators(
            n,
            pairs[:, ::-1],  # min -> i, max -> j  ==  netgen (j, i)
            outputs=np.arange(n - 1, -1, -1),
            construction={"kind": "dobbelaere", "n": n},
        )
    except ValueError as e:
        raise ValueError(f"{source}: {e}") from None
    for key, value in (("L", net.size), ("D", net.depth)):
        if key in d and (type(d[key]) is not int or d[key] != value):
            raise ValueError(f"{source}: {key} = {_short(d[key])} but the comparators give {value}")
    return net


_PAIR = re.compile(r"\((-?[0-9]+),(-?[0-9]+)\)", re.ASCII)
#: a layer line with its spaces and tabs removed: ``[]`` or ``[(i,j),(k,l),...]``
_LINE = re.compile(r"\[(?:\(-?[0-9]+,-?[0-9]+\)(?:,\(-?[0-9]+,-?[0-9]+\))*)?\]", re.ASCII)
#: digits of the largest wire index netgen accepts (MAX_WIRES - 1 has 8)
_MAX_DIGITS = 9


def _text_lines(text: str):
    """``(line number, stripped line)`` of the non-blank, non-comment lines:
    split at ``\n`` (and ``\r\n``) only, so U+2028, form feeds and the
    other characters ``str.splitlines`` would split at stay inside a line
    (and are refused there)."""
    for lineno, line in enumerate(text.split("\n"), 1):
        line = line.strip(" \t\r")
        if line and not line.startswith("#"):
            yield lineno, line


def from_layer_text(text: str, *, source: str = "input", max_size: int | None = None) -> Network:
    """One layer per line, ``[(i,j),(k,l)]`` (spaces allowed, as Python's
    repr writes it: ``[(0, 1), (2, 3)]``), min on the first wire; lines
    starting with ``#`` are comments. Wires are ASCII digits; nothing else
    is accepted on a layer line (no empty item, no other bracket, no
    Unicode digit or line separator). n is the largest wire + 1; outputs
    ``n-1, ..., 0``; layers kept as written."""
    wires: list[int] = []
    offsets = [0]
    for lineno, line in _text_lines(text):
        compact = line.replace(" ", "").replace("\t", "")
        if not _LINE.fullmatch(compact):
            raise ValueError(f"{source}: line {lineno} is not a layer of (i,j) pairs: {_short(line)}")
        found = _PAIR.findall(compact)
        for i, j in found:
            for w in (i, j):
                if len(w.lstrip("-")) > _MAX_DIGITS:
                    raise ValueError(f"{source}: line {lineno}: wire {w[:20]}{'...' if len(w) > 20 else ''} "
                                     f"is too large (at most {MAX_WIRES - 1})")
        if found:
            wires.extend(int(w) for pair in found for w in pair[::-1])  # (max, min): netgen's order
            offsets.append(len(wires) // 2)
    if not wires:
        raise ValueError(f"{source}: no comparators found")
    comps = np.asarray(wires, dtype=np.int64).reshape(-1, 2)  # every wire has at most 9 digits
    n = 1 + int(comps.max())
    n = _check_n(n, "n (largest wire + 1)", source) if n >= 1 else n
    size = len(comps)
    check_budget(f"{source}: n = {n} with {size:,} comparators", size + max(n, 0), max_size)
    try:
        return Network.from_arrays(n, comps, np.asarray(offsets), outputs=np.arange(n - 1, -1, -1),
                                   construction={"kind": "layers", "n": n})
    except ValueError as e:
        raise ValueError(f"{source}: {e}") from None


def loads(text: str, *, source: str = "input", max_size: int | None = None) -> Network:
    """Parse any accepted format from text (at most :func:`file_limit`
    characters)."""
    if not isinstance(text, str):
        raise ValueError(f"{source}: expected text, got {type(text).__name__}")
    if len(text) > file_limit(max_size):
        raise _too_big(source, len(text), max_size)
    stripped = text.lstrip()
    first = next(_text_lines(text), (0, ""))[1]  # layer text may open with # comments
    if stripped.startswith("{"):
        try:
            d = json.loads(text, parse_constant=_strict_constant)
        except json.JSONDecodeError as e:
            raise ValueError(f"{source}: not valid JSON ({e.msg} at line {e.lineno})") from None
        except RecursionError:
            raise ValueError(f"{source}: not accepted: JSON nested too deeply") from None
        except ValueError as e:  # NaN/Infinity, integers with too many digits
            raise ValueError(f"{source}: not valid JSON ({e})") from None
        return from_dict(d, source=source, max_size=max_size)
    if stripped.startswith("[") or first.startswith("["):
        return from_layer_text(text, source=source, max_size=max_size)
    raise ValueError(f"{source}: not a network file (expected netgen JSON, Dobbelaere JSON or layer text)")


def read_limited(path: str | os.PathLike, *, max_size: int | None = None) -> bytes:
    """The bytes of a regular file of at most :func:`file_limit` bytes.
    FIFOs, devices, sockets and directories are refused before anything is
    read (opened non-blocking, so a FIFO without a writer cannot hang)."""
    p = Path(path)
    limit = file_limit(max_size)
    try:
        fd = os.open(p, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise ValueError(f"{p}: no such file") from None
    except IsADirectoryError:
        raise ValueError(f"{p}: is a directory, not a network file") from None
    except OSError as e:
        raise ValueError(f"{p}: cannot read ({e.strerror or e})") from None
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise ValueError(f"{p}: is a directory, not a network file")
        if not stat.S_ISREG(st.st_mode):
            raise ValueError(f"{p}: not a regular file ({_file_kind(st.st_mode)}); netgen reads network files only")
        if st.st_size > limit:
            raise _too_big(str(p), st.st_size, max_size)
        chunks, total = [], 0
        while total <= limit:
            chunk = os.read(fd, min(1 << 20, limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        if total > limit:  # the file grew while being read
            raise _too_big(str(p), total, max_size)
        return b"".join(chunks)
    except OSError as e:
        raise ValueError(f"{p}: cannot read ({e.strerror or e})") from None
    finally:
        os.close(fd)


def _file_kind(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a plain file"


def load(path: str | os.PathLike, *, max_size: int | None = None) -> Network:
    """Read a network file in any accepted format; ValueError names the
    problem. Only regular files of at most :func:`file_limit` bytes are read;
    ``max_size`` (comparators plus wires, default
    :data:`netgen.network.DEFAULT_MAX_SIZE`) bounds the network."""
    p = Path(path)
    data = read_limited(p, max_size=max_size)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(f"{p}: not UTF-8 text (byte {e.start})") from None
    return loads(text, source=str(p), max_size=max_size)
