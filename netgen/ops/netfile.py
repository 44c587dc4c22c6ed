"""The operators' network cache files: a network as int32 arrays in an
uncompressed ``.npz`` with a small JSON header, read back without pickles
and within bounds.

A JSON network file of a sorter at n = 2^20 (100.7 million comparators) took
about 60 s and 8 GiB to write and read; this file is 0.8 GB of arrays read at
disk speed. Members (each a ``.npy`` of the zip):

* ``header``: uint8, the UTF-8 JSON ``{"format": FORMAT, "n", "k", "size",
  "depth", "status", "proof", "construction"}`` (at most :data:`MAX_HEADER`
  bytes);
* ``comparators``: ``<i4`` of shape (size, 2); ``layer_offsets``: ``<i8`` of
  shape (depth + 1,); ``outputs``: ``<i4`` of shape (k,).

Reading (:func:`read`) trusts nothing in the file: the member names, each
member's stored size (against what the header's numbers need, before
anything is allocated), each ``.npy`` header's dtype and shape (read with
numpy's header readers; no ``allow_pickle``, no object arrays), the zip
CRC of every member (read to its end), the numbers against the size budget
in force, and the network itself (:meth:`Network.from_arrays` validates
it). Anything off: ``None``, and the caller builds the network again. No
code is ever read from disk (docs/security.md).
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import numpy as np

from ..io import atomic_write, record_units
from ..network import MAX_COMPARATORS, MAX_WIRES, Network

__all__ = ["FORMAT", "MAX_HEADER", "read", "write"]

#: the header's "format" (a file of another format is rebuilt)
FORMAT = "netgen-network-npz/1"
#: the largest header member accepted, in bytes
MAX_HEADER = 1 << 16
_CHUNK = 1 << 24
_NPY_SLACK = 4096  # a .npy header is at most a few hundred bytes
_MEMBERS = {"header.npy", "comparators.npy", "layer_offsets.npy", "outputs.npy"}


def write(path: str | Path, net: Network, status: str, proof: str) -> None:
    """Write ``net`` with its check's ``status`` and ``proof`` atomically
    (a temporary file beside ``path``, renamed into place)."""
    header = json.dumps({"format": FORMAT, "n": net.n, "k": net.k, "size": net.size, "depth": net.depth,
                         "status": status, "proof": proof, "construction": net.construction}).encode()
    if len(header) > MAX_HEADER:
        raise ValueError(f"network header of {len(header)} bytes is too large for a cache file")

    def fill(tmp: str) -> None:
        with open(tmp, "wb") as f:
            np.savez(f, header=np.frombuffer(header, dtype=np.uint8),
                     comparators=np.ascontiguousarray(net.comparators, dtype="<i4"),
                     layer_offsets=np.ascontiguousarray(net.layer_offsets, dtype="<i8"),
                     outputs=np.asarray(net.outputs, dtype="<i4"))

    atomic_write(path, fill)


def _npy_header(f, name: str) -> tuple:
    """(shape, fortran order, dtype) from the ``.npy`` header at ``f``
    (numpy's readers: no pickles); ValueError for another format."""
    version = np.lib.format.read_magic(f)
    if version == (1, 0):
        return np.lib.format.read_array_header_1_0(f)
    if version == (2, 0):
        return np.lib.format.read_array_header_2_0(f)
    raise ValueError(f"{name}: .npy format {version}")


def _member(z: zipfile.ZipFile, name: str, dtype: str, shape: tuple[int, ...] | None,
            max_items: int = 0) -> np.ndarray:
    """Member ``name`` as an array of exactly ``dtype`` and ``shape`` (None:
    1-d of at most ``max_items`` items, as its header says); ValueError
    otherwise, before the data is allocated when the sizes disagree."""
    info = z.getinfo(name)
    if info.compress_type != zipfile.ZIP_STORED:
        raise ValueError(f"{name}: compressed")
    with z.open(info) as f:
        got_shape, fortran, got_dtype = _npy_header(f, name)
        if shape is None:
            if len(got_shape) != 1 or not 0 <= got_shape[0] <= max_items:
                raise ValueError(f"{name}: shape {got_shape}, expected at most {max_items} items")
            shape = tuple(got_shape)
        nbytes = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
        if not nbytes <= info.file_size <= nbytes + _NPY_SLACK:
            raise ValueError(f"{name}: {info.file_size} bytes stored for {nbytes}")
        if fortran or got_dtype != np.dtype(dtype) or tuple(got_shape) != tuple(shape):
            raise ValueError(f"{name}: {got_dtype} {got_shape}, expected {dtype} {shape}")
        out = np.empty(shape, dtype=dtype)
        view = memoryview(out.reshape(-1).view(np.uint8))
        done = 0
        while done < nbytes:
            got = f.readinto(view[done:done + _CHUNK])  # in pieces: readinto reads a bytes object that long
            if not got:
                raise ValueError(f"{name}: truncated")
            done += got
        if f.read(1):  # reading past the end also checks the member's CRC (zipfile.BadZipFile)
            raise ValueError(f"{name}: trailing data")
    return out


def read(path: str | Path, n: int, k: int, limit: int) -> tuple[Network, str, str] | None:
    """``(network, status, proof)`` from ``path`` when it holds a network
    on ``n`` wires with ``k`` outputs of at most ``limit`` comparators plus
    wires; None when the file is missing, damaged or of another format."""
    try:
        with zipfile.ZipFile(path) as z:
            if set(z.namelist()) != _MEMBERS:
                return None
            h = json.loads(_member(z, "header.npy", "|u1", None, MAX_HEADER).tobytes())
            if not isinstance(h, dict) or h.get("format") != FORMAT:
                return None
            size, depth = h["size"], h["depth"]
            if not all(type(v) is int for v in (h["n"], h["k"], size, depth)) or (h["n"], h["k"]) != (n, k):
                return None
            if not (0 < n <= MAX_WIRES and 0 <= size <= MAX_COMPARATORS and 0 <= depth <= size
                    and isinstance(h["construction"], dict)):
                return None
            if size + n + record_units(h["construction"], str(path)) > limit:  # as io counts a network file's
                return None
            comps = _member(z, "comparators.npy", "<i4", (size, 2))
            offs = _member(z, "layer_offsets.npy", "<i8", (depth + 1,))
            outs = _member(z, "outputs.npy", "<i4", (k,))
        net = Network.from_arrays(n, comps.astype(np.int32, copy=False), offs, outs, h["construction"], copy=False)
        return net, str(h["status"]), str(h["proof"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError, zipfile.BadZipFile,
            EOFError):
        return None
