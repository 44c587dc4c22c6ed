"""Ahead-of-time kernels of a generated ``cuda`` module: load cubins (or
PTX) straight through ``cuda.core`` instead of compiling with numba-cuda.

Real code, copied into every generated cuda module by source extraction
(:data:`PARTS`, :func:`netgen.codegen.runtime.assemble`), so a module keeps
working without netgen installed. The launcher's ``_handle`` asks
:func:`cubin_kernel` first and compiles with numba-cuda only when it returns
None; after such a compile it calls :func:`cubin_save`.

**Where the files are.** Beside the module file ``<stem>.py``, in the folder
``<stem>.cubins/``:

* ``<kernel>.<tag>.json``: ``{"format", "kernel", "entry" (the mangled
  name of the PTX ``.entry``, what ``ObjectCode.get_kernel`` is asked
  for), "params" (the entry's parameter types), "ptx_cc", "ptx", ...}``;
* ``<kernel>.<tag>.sm_XY.cubin``: machine code for one architecture;
* ``<kernel>.<tag>.ptx``: PTX for ``ptx_cc`` (the driver JITs it for any
  device at or above it).

``<tag>`` is the first 16 hex digits of the sha256 of the module file's
bytes, so files of another build (a module rebuilt in place, e.g. with
``--no-compile``) are never loaded. ``netgen build --target cuda`` writes
the folder next to the module it writes (cubins for
:data:`netgen.codegen.cuda.cubins.ARCHS` and PTX for compute 7.5).
Modules built in memory (compat, ``topk_loss``, ``target="auto"``) live in
netgen's cache as content-addressed files ``_netgen_<name>_<sha[:12]>.py``;
for those (and only those: the loader never writes into a user's folder)
the first process compiles with numba-cuda as before and saves the cubin
numba linked for its device, so later processes load it. Files are written
once (temporary file, then a hard link: concurrent writers never expose a
partial file).

**Which file.** For a device of compute capability (X, Y): the cubin for
``sm_XY`` (or ``sm_XYa``, what numba-cuda compiles for X >= 9), else the
cubin of the highest lower minor of the same major (machine code runs on
later minors of its major), else the PTX where ``ptx_cc <= (X, Y)``, else
None: numba-cuda compiles, and the ``netgen`` logger says why.

Before a handle is returned the entry's parameter list is checked against
the launcher's packing (``_abi``) of example arguments of each kind (one
64-bit word per array field, one byte per flag); a mismatch logs a warning
and falls back to numba-cuda. ``NETGEN_CUDA_CUBINS=0`` turns the loader off.

The stand-ins below (the kernel tables) only let this file import and lint on its own.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
import time

import torch

from .driver import LOG, LaunchConfigError, _dynamic_limit, _opt_in, _shared_limit
from .packing import WIRE_DTYPE, _abi

# ---- what the generated module defines (stand-ins here, not copied) ----
#: the module globals the copied code reads and neither defines nor imports:
#: the emitter's kernel tables (the launcher's pieces come from driver.py and
#: packing.py, pasted beside this file)
READS = ("KERNELS", "KERNEL_ARGS")
KERNELS: dict = {}
KERNEL_ARGS: dict = {}


# ---------------------------------------------------------------- copied parts
CUBIN_FORMAT = "netgen-cubin/1"
_CUBIN = {}  # "source": (folder, tag, writable); (kernel name, tag) -> metadata or None; "codes": loaded objects


def cubin_names(kernel, tag, arch=None):
    """File names of kernel ``kernel``'s files for a module whose tag is
    ``tag``: the ``.json`` metadata (arch None), else the cubin for
    ``arch`` (``"sm_90"``); the PTX is ``<kernel>.<tag>.ptx``."""
    return f"{kernel}.{tag}.json" if arch is None else f"{kernel}.{tag}.{arch}.cubin"


def cubin_source(path):
    """(folder, tag, writable) for the module file ``path``: its ``.cubins``
    folder, the first 16 hex digits of the sha256 of its bytes, and whether
    it is a content-addressed copy in netgen's cache (its name ends in
    ``_<sha[:12]>``), the only kind the loader writes cubins for."""
    with open(path, "rb") as fh:
        sha = hashlib.sha256(fh.read()).hexdigest()
    stem = os.path.splitext(os.path.abspath(path))[0]
    return stem + ".cubins", sha[:16], os.path.basename(stem).endswith("_" + sha[:12])


def cubin_pick(folder, kernel, tag, meta, cc):
    """("cubin" | "ptx", path) to load kernel ``kernel`` from on a device of
    compute capability ``cc``, or None (see the module notes)."""
    major, minor = int(cc[0]), int(cc[1])
    for m in range(minor, -1, -1):
        for arch in (f"sm_{major}{m}", f"sm_{major}{m}a") if m == minor else (f"sm_{major}{m}",):
            p = os.path.join(folder, cubin_names(kernel, tag, arch))
            if os.path.isfile(p):
                return "cubin", p
    ptx, ptx_cc = meta.get("ptx"), meta.get("ptx_cc")
    if isinstance(ptx, str) and ptx == os.path.basename(ptx) and ptx_cc and tuple(ptx_cc) <= (major, minor):
        p = os.path.join(folder, ptx)
        if os.path.isfile(p):
            return "ptx", p
    return None


def _cubin_meta(kernel):
    """This module's metadata of ``kernel`` (dict) and its folder, or None."""
    src = _CUBIN.get("source")
    if src is None:
        f = globals().get("__file__")
        try:
            src = cubin_source(f) if f and os.path.isfile(f) else (None, None, False)
        except OSError:
            src = (None, None, False)
        _CUBIN["source"] = src
    folder, tag, _ = src
    if folder is None:
        return None
    key = (kernel, tag)
    if key not in _CUBIN:
        meta = None
        try:
            with open(os.path.join(folder, cubin_names(kernel, tag)), encoding="utf-8") as fh:
                meta = json.load(fh)
            if not (isinstance(meta, dict) and meta.get("format") == CUBIN_FORMAT and meta.get("kernel") == kernel
                    and isinstance(meta.get("entry"), str) and isinstance(meta.get("params"), list)):
                LOG.warning("netgen: ignoring %s (not %s metadata of %s)", cubin_names(kernel, tag), CUBIN_FORMAT,
                            kernel)
                meta = None
        except FileNotFoundError:
            meta = None
        except (OSError, ValueError) as e:
            LOG.warning("netgen: ignoring %s (%s)", cubin_names(kernel, tag), e)
            meta = None
        _CUBIN[key] = meta
    return None if _CUBIN[key] is None else (_CUBIN[key], folder, tag)


def _cubin_params(name):
    """PTX parameter types of the launcher's packing of kernel ``name``'s arguments."""
    wire = torch.int16 if WIRE_DTYPE.itemsize == 2 else torch.int32  # (only the width matters)
    examples = {
        "f1": torch.empty(1), "f2": torch.empty(1, 1), "w1": torch.empty(1, dtype=wire),
        "u1": torch.empty(1, dtype=torch.int32), "i1": torch.empty(1, dtype=torch.int64),
        "b1": torch.empty(1, dtype=torch.int32), "bool": True,
    }
    return ["u8" if isinstance(v, bool) else "u64" for v in _abi([examples[k] for k in KERNEL_ARGS[name]])]


def _cubin_attr(attrs, name, default):
    v = getattr(attrs, name, None)
    v = v() if callable(v) else v  # cuda.core < 1.0 had methods
    return int(v or default)


def cubin_kernel(device_index, dtype, name, variant, cc=None):
    """(cuda.core kernel handle, (max threads per block, registers, dynamic
    shared memory it may ask for)) of
    kernel ``(dtype, name, variant)`` loaded from this module's cubins or
    PTX for device ``device_index`` (compute capability ``cc``, default
    the device's), with the device's dynamic shared memory allowed for
    shared variants; None where there is none usable (then the caller
    compiles with numba-cuda, as before)."""
    if os.environ.get("NETGEN_CUDA_CUBINS", "1") == "0":
        return None
    kernel = KERNELS[(dtype, name, variant)].py_func.__name__
    found = _cubin_meta(kernel)
    if found is None:
        if not _CUBIN.get("said"):
            _CUBIN["said"] = True
            LOG.info("netgen: no cubins beside this module for %s; numba-cuda compiles its kernels", kernel)
        return None
    meta, folder, tag = found
    cc = tuple(torch.cuda.get_device_capability(device_index)) if cc is None else tuple(cc)
    pick = cubin_pick(folder, kernel, tag, meta, cc)
    if pick is None:
        LOG.info("netgen: no cubin for sm_%d%d and no PTX at or below it for %s; numba-cuda compiles it",
                 cc[0], cc[1], kernel)
        return None
    if meta["params"] != _cubin_params(name):
        LOG.warning("netgen: %s's entry takes %s, the launcher packs %s; numba-cuda compiles it instead",
                    pick[1], meta["params"], _cubin_params(name))
        return None
    t0 = time.perf_counter()
    try:
        from cuda.core import ObjectCode

        with open(pick[1], "rb") as fh:
            data = fh.read()
        code = (ObjectCode.from_cubin if pick[0] == "cubin" else ObjectCode.from_ptx)(data, name=kernel)
        kern = code.get_kernel(meta["entry"])
        _CUBIN.setdefault("codes", []).append(code)  # keep the loaded library alive
        attrs = kern.attributes
        try:
            attrs = attrs[device_index]
        except TypeError:  # cuda.core < 1.0: not per device
            pass
        static = _cubin_attr(attrs, "shared_size_bytes", 0)
        dynamic = _dynamic_limit(_shared_limit(device_index), static) if variant == "shared" else 0
        limits = (_cubin_attr(attrs, "max_threads_per_block", 1024), _cubin_attr(attrs, "num_regs", 32), dynamic)
        if dynamic:
            from cuda.bindings import driver as _drv

            _opt_in(_drv.cuKernelSetAttribute, kern.handle, device_index, dynamic, static, kernel)
    except LaunchConfigError:
        raise  # the driver refused a launch setting: numba-cuda's kernel would be refused the same way
    except Exception as e:  # noqa: BLE001 - any failure: compile as before, and say why
        LOG.warning("netgen: loading %s failed (%s: %s); numba-cuda compiles it instead", pick[1], type(e).__name__, e)
        return None
    LOG.debug("netgen: %s loaded from %s (%s, %d bytes) in %.1f ms", kernel, pick[1], pick[0], len(data),
              1e3 * (time.perf_counter() - t0))
    return kern, limits


def cubin_ready(device, dtype):
    """Whether every kernel of ``dtype`` (numpy) loads from cubins or PTX
    on ``device`` (a torch device), as far as the files tell."""
    if os.environ.get("NETGEN_CUDA_CUBINS", "1") == "0":
        return False
    idx = device.index if device.index is not None else torch.cuda.current_device()
    cc = tuple(torch.cuda.get_device_capability(idx))
    for (dt, _, _), kern in KERNELS.items():
        if dt != dtype:
            continue
        found = _cubin_meta(kern.py_func.__name__)
        if found is None or cubin_pick(found[1], kern.py_func.__name__, found[2], found[0], cc) is None:
            return False
    return True


def _cubin_write_once(path, data):
    """Create ``path`` with ``data`` unless it exists; never expose a partial file."""
    if os.path.exists(path):
        return
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-", suffix=".part")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        try:
            os.link(tmp, path)  # fails if a concurrent writer got there first: keep theirs
        except FileExistsError:
            pass
        except OSError:  # no hard links on this file system
            if not os.path.exists(path):
                os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def cubin_save(dtype, name, variant, compiled):
    """After numba-cuda compiled kernel ``(dtype, name, variant)`` for the
    current device (``compiled``: what ``Dispatcher.compile`` returned),
    save the cubin it linked, for a module in netgen's cache only (see the
    module notes). Best effort: returns the cubin's path, or None."""
    kernel = KERNELS[(dtype, name, variant)].py_func.__name__
    _cubin_meta(kernel)  # sets _CUBIN["source"]
    folder, tag, writable = _CUBIN["source"]
    if not writable or os.environ.get("NETGEN_CUDA_CUBINS", "1") == "0":
        return None
    try:
        lib = compiled._codelibrary
        if getattr(lib, "_setup_functions", None):  # needs numba's module set-up: not loadable alone
            return None
        ptx = lib.get_asm_str()
        cubin = lib.get_cubin()
        cubin = bytes(getattr(cubin, "code", cubin))
        arch = re.search(r"^\s*\.target\s+(sm_\w+)", ptx, re.M).group(1)
        entry = re.findall(r"^\s*\.(?:visible\s+)?\.entry\s+([A-Za-z_$][\w$]*)", ptx, re.M)
        body = re.search(r"\.entry\s+\S+\s*\((.*?)\)", ptx, re.S)
        if len(entry) != 1 or body is None or cubin[:4] != b"\x7fELF":
            return None
        meta = {"format": CUBIN_FORMAT, "kernel": kernel, "entry": entry[0],
                "params": re.findall(r"\.param\s+\.(\w+)", body.group(1)), "ptx": None, "ptx_cc": None,
                "by": "numba-cuda at first use"}
        os.makedirs(folder, exist_ok=True)
        path = os.path.join(folder, cubin_names(kernel, tag, arch))
        _cubin_write_once(path, cubin)
        _cubin_write_once(os.path.join(folder, cubin_names(kernel, tag)), json.dumps(meta, indent=1).encode())
    except Exception as e:  # noqa: BLE001 - a cache that cannot be written only costs the next process a compile
        LOG.info("netgen: could not save %s's cubin (%s: %s)", kernel, type(e).__name__, e)
        return None
    _CUBIN.pop((kernel, tag), None)
    return path


#: module-level state a generated module copies (netgen.codegen.runtime.statements)
STATE = ("CUBIN_FORMAT", "_CUBIN")
PARTS = (cubin_names, cubin_source, cubin_pick, _cubin_meta, _cubin_params, _cubin_attr, cubin_kernel, cubin_ready,
         _cubin_write_once, cubin_save)
