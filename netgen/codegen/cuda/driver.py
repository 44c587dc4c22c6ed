"""What the device and its CUDA driver allow a generated ``cuda`` module's
launches: the opt-in shared memory a kernel may ask for, the driver's answer
to that request, threads per block, the driver version, the simulator's
``cuda.syncwarp``.

Real code, copied into generated modules by source extraction
(:data:`STATE` with :func:`netgen.codegen.runtime.statements`, :data:`PARTS`
with :func:`netgen.codegen.runtime.assemble`); the launcher
(:mod:`.launch`) and the cubin loader (:mod:`.cubin`) call it. It reads
what the cuda emitter writes (:data:`READS`: ``THREADS``, ``BIG_THREADS``,
``SHARED_LIMIT``); the stand-ins below only let this file import, lint and
be tested on its own.

* **Shared memory.** A kernel's static and dynamic shared memory together
  must fit the device's opt-in limit (:func:`_dynamic_limit`); above 48 KB a
  kernel must opt in (:func:`_opt_in`), and a refusal is a
  :class:`LaunchConfigError`, never a reason to compile another way.
* **Block size.** Where shared memory leaves few blocks per SM, or the
  grid has no more blocks than the device has SMs, blocks get more threads
  (:func:`_block`, :func:`_sm_count`).
* **Devices.** The first launch checks that torch sees a GPU and that the
  driver runs CUDA 13 code (:func:`_require_cuda`, :data:`MIN_DRIVER`).
* **Simulator.** Under the CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``) the
  simulator gets a ``cuda.syncwarp`` (a barrier among a warp's threads).
"""

from __future__ import annotations

import logging
import os
import sys
import time

import numpy as np
import torch

# ---- what the emitter writes (stand-ins here, not copied into modules) ----
#: the module globals the copied code reads and neither defines nor imports
READS = ("THREADS", "BIG_THREADS", "SHARED_LIMIT")
THREADS = 256
BIG_THREADS = 1024
SHARED_LIMIT = 227 * 1024


# ---------------------------------------------------------------- state (copied)
#: Numba's CUDA simulator (NUMBA_ENABLE_CUDASIM, read as numba reads it, without importing numba)
SIMULATED = bool(sys.modules["numba"].config.ENABLE_CUDASIM) if "numba" in sys.modules else (
    os.environ.get("NUMBA_ENABLE_CUDASIM", "0").strip() not in ("", "0"))
LOG = logging.getLogger("netgen")
#: shared memory per SM (bytes; Hopper): how many blocks of a launch fit an SM (see _block)
SM_SHARED = 228 * 1024
#: the oldest CUDA driver API the kernels load on (cubins and PTX of CUDA 13.0: driver R580 or newer)
MIN_DRIVER = 13000
_CHECKED: list = []  # [True] once a CUDA device was found
_SMS: dict = {}  # device index -> multiprocessors (_sm_count)
#: the switch interval a simulator process runs with (see _prepare_simulator)
SIM_SWITCH_INTERVAL = 1e-4


# ---------------------------------------------------------------- functions (copied)
class LaunchConfigError(RuntimeError):
    """The driver refused a kernel's launch configuration (shared memory,
    threads): a netgen bug or an unsupported device, reported as itself
    rather than hidden behind a fallback that would fail the same way."""


def _sim_syncwarp(self, mask=0xFFFFFFFF):
    """The simulator has no ``cuda.syncwarp``: a barrier among the threads
    of one warp of one block (the kernels call it from warp 0 only)."""
    import threading

    th = threading.current_thread()
    nthreads = int(np.prod(th._manager._block_dim))
    warp = th.thread_id // 32
    key = (id(th._manager), tuple(th.blockIdx), warp)
    fake = type(self)
    with fake._netgen_warp_lock:
        bar = fake._netgen_warp_barriers.get(key)
        if bar is None:
            bar = fake._netgen_warp_barriers[key] = threading.Barrier(min(32, nthreads - 32 * warp))
    bar.wait()


def _prepare_simulator():
    """Give the simulator's ``cuda`` module :func:`_sim_syncwarp` where it
    lacks ``syncwarp``, and lower the interpreter's switch interval to
    :data:`SIM_SWITCH_INTERVAL` where it is still Python's default (no-op on
    a GPU): the simulator runs each CUDA thread as a Python thread that
    waits at every barrier, and at the default 5 ms a launch spent most of
    its time waiting for the GIL (0.1 ms: a small sorter's group kernels
    9.5 -> 1.7 CPU-s)."""
    if not SIMULATED:
        return
    import threading

    if sys.getswitchinterval() == 0.005:
        sys.setswitchinterval(SIM_SWITCH_INTERVAL)

    from numba.cuda.simulator.kernelapi import FakeCUDAModule

    if not hasattr(FakeCUDAModule, "syncwarp"):
        FakeCUDAModule._netgen_warp_lock = threading.Lock()
        FakeCUDAModule._netgen_warp_barriers = {}
        FakeCUDAModule.syncwarp = _sim_syncwarp


def _shared_limit(device):
    """The opt-in shared memory per block of ``device`` (bytes): what a
    block's static and dynamic shared memory together may use."""
    if SIMULATED:
        return SHARED_LIMIT
    props = torch.cuda.get_device_properties(device)
    return int(getattr(props, "shared_memory_per_block_optin", 48 * 1024))


def _dynamic_limit(optin, static):
    """The most dynamic shared memory (bytes) a kernel holding ``static``
    bytes of static shared memory may ask for on a device whose opt-in
    limit is ``optin``. The driver's rule is dynamic + static <= opt-in
    (a request for the whole opt-in is refused with
    CUDA_ERROR_INVALID_VALUE); SHARED_LIMIT caps it further."""
    return max(0, min(SHARED_LIMIT, int(optin) - int(static)))


def _opt_in(set_attribute, handle, device_index, dynamic, static, name):
    """Allow kernel ``handle`` ``dynamic`` bytes of dynamic shared memory
    (above 48 KB - static a kernel must opt in). ``set_attribute(attr,
    value, handle, device)`` is the driver's ``cuKernelSetAttribute``; a
    refusal raises :class:`LaunchConfigError` naming the numbers (it is
    not a reason to compile the kernel another way)."""
    if dynamic + static <= 48 * 1024:
        return
    from cuda.bindings import driver as drv

    attr = drv.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
    try:  # cuda.bindings returns (error,); numba-cuda's wrapper raises CudaAPIError
        got = set_attribute(attr, dynamic, handle, device_index)
        err = int(got[0]) if isinstance(got, tuple) else 0
    except Exception as e:  # noqa: BLE001 - reported below as what it is
        err = e
    if err != 0:
        raise LaunchConfigError(
            f"the CUDA driver refused {dynamic} bytes of dynamic shared memory for kernel {name} on device "
            f"{device_index} ({static} bytes static; {err}): dynamic + static must fit the device's opt-in limit")


def _block(variant, shared_bytes, limit=1024, regs=32, blocks=0, sms=0):
    """Threads per block: where shared memory limits an SM to few blocks
    (the rows with P: one; the column: two), or where the grid's ``blocks``
    are no more than the device's ``sms`` multiprocessors (each block then
    has an SM to itself), blocks get more threads so an SM keeps ~2048
    threads' worth of warps to hide latencies: 2048 / blocks per SM, at
    most BIG_THREADS and the compiled kernel's limit, at least THREADS, and
    no more than the SM's 65,536 registers allow for that many blocks
    (``regs`` per thread). ``sms`` 0: not known (the grid is not looked
    at)."""
    if variant != "shared":
        return THREADS
    per_sm = 1 if 0 < blocks <= sms else max(1, SM_SHARED // (shared_bytes + 1024))
    regs = -(-max(1, int(regs)) // 8) * 8  # registers are allocated 8 per thread at a time
    nt = min(BIG_THREADS, int(limit), 2048 // per_sm, 65536 // regs // per_sm) // 32 * 32
    return max(THREADS, nt)


def _sm_count(device_index):
    """The multiprocessors of device ``device_index`` (asked once; 0 where
    torch does not say)."""
    n = _SMS.get(device_index)
    if n is None:
        props = torch.cuda.get_device_properties(device_index)
        n = _SMS[device_index] = int(getattr(props, "multi_processor_count", 0) or 0)
    return n


def _require_cuda(x):
    """x must be a CUDA tensor and torch must see a GPU (any tensor under
    the simulator). Costs no synchronisation. The first call checks the
    driver (numba-cuda is not imported: kernels load from cubins where
    they can)."""
    if SIMULATED:
        return
    if not _CHECKED:
        t0 = time.perf_counter()
        if not torch.cuda.is_available():
            raise RuntimeError(
                "this netgen module (target cuda) needs a CUDA device, and none is available here "
                "(torch.cuda.is_available() = False); build with --target numba or --target torch for CPU")
        _check_driver()
        _CHECKED.append(True)
        LOG.debug("netgen cuda: device and driver checked in %.1f ms", 1e3 * (time.perf_counter() - t0))
    if x.device.type != "cuda":
        raise ValueError(f"the cuda target needs CUDA tensors; got a tensor on {x.device}")


def _check_driver():
    """RuntimeError naming the driver's CUDA version where it is older than
    MIN_DRIVER (the kernels are CUDA 13 cubins and PTX)."""
    try:
        from cuda.bindings import driver as drv

        err, version = drv.cuDriverGetVersion()
    except Exception:  # noqa: BLE001 - no binding to ask: numba-cuda will say what is missing
        return
    if int(err) == 0 and int(version) < MIN_DRIVER:
        need, have = f"{MIN_DRIVER // 1000}.{MIN_DRIVER % 1000 // 10}", f"{version // 1000}.{version % 1000 // 10}"
        raise RuntimeError(
            f"this netgen module (target cuda) needs an NVIDIA driver for CUDA {need} or newer (R580+); this driver "
            f"supports CUDA {have}: update the driver, or build with --target torch")


_prepare_simulator()

#: the module-level statements a generated module copies (after PARTS; in file order)
STATE = ("SIMULATED", "LOG", "SM_SHARED", "MIN_DRIVER", "_CHECKED", "_SMS", "SIM_SWITCH_INTERVAL", "_prepare_simulator")
#: the functions a generated module copies, in order
PARTS = (LaunchConfigError, _sim_syncwarp, _prepare_simulator, _shared_limit, _dynamic_limit, _opt_in, _block,
         _sm_count, _require_cuda, _check_driver)
