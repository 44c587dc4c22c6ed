"""The ``cuda`` target: a module of Numba CUDA kernels launched through
``torch.library`` custom ops.

* build time: :mod:`.emit` (the emitter and the compile check),
  :mod:`.kernels`, :mod:`.sweeps` and :mod:`.updates` (the kernel sources), :mod:`.compile`
  (the compile worker: PTX and cubins), :mod:`.cubins` (the kernels' folder
  beside a module), :mod:`.build` (the build step: a module is written only
  after its kernels compiled);
* the runtime copied into every module: :mod:`.driver` (driver rules,
  block size, device checks), :mod:`.packing` (Numba's kernel ABI),
  :mod:`.launch` (tables, variants, kernel handles, launches), :mod:`.batch`
  (batch chunks), :mod:`.cubin` (the ahead-of-time kernel
  loader), :mod:`.ops` (custom ops and autograd), :mod:`.layer` (the launch
  self-check, ``Layer``).

All lanes of a row's P sweep run in one thread block, so its plan's group is
all lanes.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import target as _target
from ..plan import Budget
from ..target import BuildStep, EmitOptions, Target, TestMode

__all__ = ["TARGET", "CudaOptions"]

#: the most dynamic shared memory a block may ask for: 227 KB, Hopper's
#: opt-in limit (the launcher also caps it by the device's own limit)
SHARED_LIMIT = 227 * 1024
THREADS = 256
#: threads per block where a block's shared memory leaves one block per SM
#: (the rows with P at k n floats): 32 warps hide the latencies of one row
BIG_THREADS = 1024


@dataclass(frozen=True)
class CudaOptions(EmitOptions):
    """The cuda target's knobs: the plan's overrides and

    * ``threads``: the block size, a multiple of 32 from 32 to 1024 (tests
      use 32 or 64 so that layers are wider than the block);
    * ``big_threads``: the largest block size of launches whose shared
      memory leaves few blocks per SM (default 1024: the rows with P run one
      block of 1024 threads per SM);
    * ``shared_limit``: the most dynamic shared memory (bytes) a block may
      ask for; a kernel whose smallest wire-array use (n floats, 2 n for the
      column) fits gets a shared-memory variant besides its global-scratch
      one (the launcher picks per launch from what that launch needs and
      the device's limit);
    * ``lane_groups``: whether the module holds the lane-group kernels
      (netgen/codegen/cuda/groups.py), which run the rows with P spread
      over blocks of G lanes where a row's P sweep does not fit one block:
      None (default) in modules whose P sweep runs forward (the sorters)
      and in modules swept back whose k n floats (float64) pass 63 KiB
      (the rows' **rank groups**, for GPUs with less shared memory than
      k n floats: A100, L4, T4; :func:`.kernels.default_groups`), True
      always, False never;
    * ``d_layout``: where the rows kernels keep the sweep's differences D
      (:func:`.layout.d_slots`): "windows" (a warp's comparators keep a
      lane as 32 consecutive floats: coalesced), "csr" (a comparator's
      lanes side by side, the plan's nnz floats), or None (default):
      windows where they cost at most 1.1 x the CSR's floats
      (:func:`.layout.d_stride`: the top-k layers), else the CSR.
    """

    threads: int = THREADS
    big_threads: int = BIG_THREADS
    shared_limit: int = SHARED_LIMIT
    lane_groups: bool | None = None
    d_layout: str | None = None

    def __post_init__(self):
        super().__post_init__()
        for name in ("threads", "big_threads"):
            v = getattr(self, name)
            if isinstance(v, bool) or not hasattr(v, "__index__") or v % 32 or not 32 <= v <= 1024:
                raise ValueError(f"{name} must be a multiple of 32 from 32 to 1024, got {v!r}")
        v = self.shared_limit
        if isinstance(v, bool) or not hasattr(v, "__index__") or v < 0:
            raise ValueError(f"shared_limit must be an integer >= 0, got {v!r}")
        if not (self.lane_groups is None or isinstance(self.lane_groups, bool)):
            raise ValueError(f"lane_groups must be None, True or False, got {self.lane_groups!r}")
        if self.d_layout not in (None, "windows", "csr"):
            raise ValueError(f"d_layout must be None, 'windows' or 'csr', got {self.d_layout!r}")


# What the rows path keeps for its backward besides d and p (B x size each):
# the P sweep's row differences D (B x nnz) where nnz <= 4 k n (top-k
# networks: 2.6 k n for the (5, 10450) splitter as built, 2.2 k n after
# compile_network); otherwise (sorting) the backward recomputes the sweep
# into a scratch D, the batch in chunks that fit a working budget
# (docs/cuda-kernels.md).
BUDGET = Budget(save_per_kn=4, save_floats=0)


def _emit(net, r, plan, options) -> str:
    from .emit import emit

    return emit(net, r, plan, options)


def _build(source, path, *, required=False, log=None, progress=None):
    from .build import build

    return build(source, path, required=required, log=log, progress=progress)


def _available() -> str | None:
    """Why the cuda target cannot run here (None: it can): numba-cuda not
    installed, no device torch sees, or none the driver gives numba-cuda's
    binding (:func:`_driver_device`)."""
    if not (_target.has("numba_cuda") or _target.has("numba.cuda")):
        return 'numba-cuda is not installed (pip install "netgen-networks[cuda]")'
    import torch

    if not torch.cuda.is_available():
        return "torch sees no CUDA device"
    return _driver_device()


def _driver_device() -> str | None:
    """What numba-cuda's ``cuda.is_available()`` asks (the driver
    initialises and has a device) asked through ``cuda.bindings``, the
    binding numba-cuda and the launcher use, so that ``target="auto"``
    does not import numba to decide (~0.3 s of a first call, which loads
    the kernels from cubins without numba: issue 29 item 6). Where
    cuda.bindings is missing, numba-cuda answers."""
    try:
        from cuda.bindings import driver as drv
    except ImportError:
        from .compile import numpy_compat

        numpy_compat()
        from numba import cuda

        return None if cuda.is_available() else "numba-cuda sees no usable CUDA device (driver)"
    try:
        (err,) = drv.cuInit(0)
        err2, count = drv.cuDeviceGetCount()
    except Exception as e:  # noqa: BLE001 - no driver library, a binding that does not load it: said as is
        return f"the CUDA driver does not load through cuda.bindings ({type(e).__name__}: {e})"
    if int(err) != 0 or int(err2) != 0 or int(count) < 1:
        return f"the CUDA driver sees no usable device through cuda.bindings (cuInit {err}, devices {count})"
    return None


TARGET = Target(
    name="cuda",
    summary="a module of Numba CUDA kernels (one block per batch row) behind torch.library custom ops",
    requires=("torch", "numba_cuda"),
    devices=("cuda",),
    preference=20,
    lanes=True,  # the Layer's _back/_fwd: the lane kernels (lane_ops.py), torch ops past LANE_KERNEL_MAX lanes
    needs="numba-cuda",
    available=_available,
    options=CudaOptions,
    budget=BUDGET,
    # numba-cuda is left out of the cache's tag, as before issue 30 (a new tag
    # would orphan the modules pickled layers name): the kernels it compiles
    # are checked against the launcher's packing when loaded (cubin.py)
    toolchain=("numba", "torch"),
    emitter=_emit,
    build=BuildStep("compile every kernel to PTX and cubins (ptxas) and keep them beside the module, "
                    "so its first call compiles nothing", _build),
    # the simulator runs every thread of a block as a Python thread: small blocks (same kernels);
    # the launch self-check (tested on its own in tests/codegen/cuda/test_cuda_sim.py) is skipped: in
    # the simulator it ran every path twice per module, most of the contract's time
    test=TestMode(simulator=True, options={"threads": 32}, nan_rows=True, env={"NETGEN_CUDA_SELFCHECK": "0"}),
)
