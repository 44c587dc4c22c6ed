"""Numba's kernel ABI packed from torch tensors, for a generated ``cuda``
module's launches: an array is ``meminfo, parent, size, itemsize, data,
*shape, *strides`` (:func:`_abi`), packed once per argument shapes with only
the data pointers rewritten per launch (:func:`_slots`, :func:`_fill`); the
kernels' argument types for numba-cuda (:func:`_numba_types`) and the wire
dtype.

Real code, copied into generated modules by source extraction
(:data:`STATE` with :func:`netgen.codegen.runtime.statements`, :data:`PARTS`
with :func:`netgen.codegen.runtime.assemble`). It reads the argument kinds
the cuda emitter writes (:data:`READS`: ``KERNEL_ARGS``; a stand-in below
lets this file import on its own) and the network's size
(:mod:`netgen.codegen.runtime.tables`).

**Simulator.** Under the CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``) the
launcher unpacks the packed words back into arrays (pointers, shapes,
strides: :func:`_sim_unpack`), so the packing is tested there.
"""

from __future__ import annotations

import numpy as np
import torch

from ..runtime.tables import _N

# ---- what the emitter writes (stand-ins here, not copied into modules) ----
#: the module globals the copied code reads and neither defines nor imports
READS = ("KERNEL_ARGS",)
KERNEL_ARGS: dict = {}


# ---------------------------------------------------------------- state (copied)
#: wires (and rank bounds) as uint16 where n < 65,536, else uint32; offsets
#: uint32: unsigned indices, so the kernels do no negative-index wraparound
WIRE_DTYPE = np.dtype(np.uint16) if _N < 65536 else np.dtype(np.uint32)


# ---------------------------------------------------------------- functions (copied)
def _numba_types(dtype):
    """kernel name -> its Numba argument types in ``dtype`` (from the
    argument kinds of ``KERNEL_ARGS``)."""
    from numba import types

    ft = types.float64 if dtype == np.float64 else types.float32
    wt = types.uint16 if WIRE_DTYPE == np.uint16 else types.uint32
    kinds = {
        "f1": types.Array(ft, 1, "C"), "f2": types.Array(ft, 2, "C"), "w1": types.Array(wt, 1, "C"),
        "u1": types.Array(types.uint32, 1, "C"), "i1": types.Array(types.int64, 1, "C"),
        "b1": types.Array(types.int32, 1, "C"), "bool": types.boolean,
    }
    return {name: tuple(kinds[a] for a in args) for name, args in KERNEL_ARGS.items()}


def _abi(args):
    """Numba's kernel ABI for ``args``: an array is meminfo, parent, size,
    itemsize, data pointer, shape, strides (bytes; C-contiguous)."""
    out = []
    for a in args:
        if isinstance(a, torch.Tensor):
            isz = a.element_size()
            strides = []
            step = isz
            for s in reversed(a.shape):
                strides.append(step)
                step *= s
            out += [0, 0, a.numel(), isz, a.data_ptr(), *a.shape, *reversed(strides)]
        else:
            out.append(a)
    return out


def _shape_key(args):
    """What fixes ``_abi(args)`` but the data pointers: each tensor's shape
    and dtype, each other argument itself."""
    return tuple((tuple(a.shape), a.dtype) if isinstance(a, torch.Tensor) else (type(a), a) for a in args)


def _slots(args):
    """(word, argument index) of each tensor argument's data pointer in ``_abi(args)``."""
    slots, pos = [], 0
    for j, a in enumerate(args):
        if isinstance(a, torch.Tensor):
            slots.append((pos + 4, j))
            pos += 5 + 2 * a.dim()
        else:
            pos += 1
    return slots


def _fill(words, slots, args):
    """``words`` (``_abi`` of arguments of the same shapes and flags as
    ``args``; ``slots`` their :func:`_slots`) with the data pointers of
    ``args``: what a launch record's packing becomes for this launch."""
    words = words.copy()
    for pos, j in slots:
        words[pos] = args[j].data_ptr()
    return words


def _sim_unpack(name, dt, words):
    """Simulator only: the arrays a GPU kernel would see from the packed
    words (so the packing is checked without a GPU); ValueError where the
    words do not fit the kernel's argument kinds."""
    import ctypes

    npdt = {"w1": WIRE_DTYPE, "u1": np.dtype(np.uint32), "i1": np.dtype(np.int64), "b1": np.dtype(np.int32)}
    out, pos = [], 0
    for kind in KERNEL_ARGS[name]:
        if kind == "bool":
            out.append(bool(words[pos]))
            pos += 1
            continue
        ndim = int(kind[1])
        size, isz, ptr = words[pos + 2], words[pos + 3], words[pos + 4]
        shape = tuple(int(v) for v in words[pos + 5:pos + 5 + ndim])
        strides = tuple(int(v) for v in words[pos + 5 + ndim:pos + 5 + 2 * ndim])
        pos += 5 + 2 * ndim
        adt = dt if kind[0] == "f" else npdt[kind]
        if isz != adt.itemsize:
            raise ValueError(f"{name}: packed itemsize {isz} for a {adt} array")
        if min(shape, default=1) == 0:
            out.append(np.empty(shape, adt))
            continue
        extent = isz + sum((sh - 1) * st for sh, st in zip(shape, strides))
        if min(strides, default=0) < 0 or extent > size * isz:
            raise ValueError(f"{name}: packed array (shape {shape}, strides {strides}) exceeds its {size} elements")
        buf = (ctypes.c_char * extent).from_address(ptr)
        out.append(np.ndarray(shape, adt, buffer=buf, strides=strides))
    if pos != len(words):
        raise ValueError(f"{name}: {len(words)} packed words, the kernel takes {pos}")
    return out


def _np_dtype(t):
    """The kernels' numpy float type for tensor ``t`` (float64, else float32)."""
    return np.dtype(np.float64) if t.dtype == torch.float64 else np.dtype(np.float32)


#: the module-level statements a generated module copies (after PARTS; in file order)
STATE = ("WIRE_DTYPE",)
#: the functions a generated module copies, in order
PARTS = (_numba_types, _abi, _shape_key, _slots, _fill, _sim_unpack, _np_dtype)
