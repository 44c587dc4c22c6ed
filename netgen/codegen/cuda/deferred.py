"""numba-cuda imported when a generated ``cuda`` module needs it, not when
the module is imported.

A cuda module's kernels are written as Numba kernels are (``@cuda.jit``
functions reading ``cuda.threadIdx``, ``numba.float32``), but on a GPU the
kernels load from the module's cubins through ``cuda.core``
(:mod:`netgen.codegen.cuda.cubin`) and numba-cuda is not needed. Importing
numba and numba-cuda costs ~0.33 s here (measured: AMD EPYC, warm file
cache) and, as an estimate, ~1 s on a GPU machine with a cold cache, a
third of issue 29's first-call budget. So the module's ``cuda`` starts as a
:class:`_DeferredCuda`, whose ``jit`` gives a :class:`_DeferredKernel`
holding the Python function (``py_func``: the cubin loader names files by
it) and its options. :func:`_numba` imports numba-cuda once, binds the
module's ``numba`` and ``cuda`` to the real modules (the kernel bodies read
them when Numba compiles or simulates them) and each deferred kernel to its
Numba dispatcher; any other use of a deferred kernel (``kernel[config]``,
``kernel.compile``, ``kernel.targetoptions``) calls :func:`_numba` and goes
to that dispatcher. Callers: numba-cuda compiling a kernel (no cubin for the
device), the simulator, ``NETGEN_CUDA_LAUNCH=numba``, the self-check's
reference run and the compile check.

Real code, copied into generated modules before their kernels by source
extraction (:data:`PARTS`, :data:`STATE`).
"""

from __future__ import annotations

import logging
import time

import numpy as np

# ---- what the generated module defines (stand-ins here, not copied) ----
#: the module globals the copied code reads and neither defines nor imports
READS = ("LOG", "LAUNCH_BOUNDS", "SIMULATED")
LOG = logging.getLogger("netgen")
LAUNCH_BOUNDS: dict = {}  # kernel function name -> (max threads per block, min blocks per SM)
SIMULATED = False


# ---------------------------------------------------------------- copied parts
class _DeferredKernel:
    """``@cuda.jit``'s result until numba-cuda is imported: the Python
    function and the decorator's arguments; everything else is the Numba
    dispatcher's, made by :func:`_numba` on first use."""

    def __init__(self, py_func, args, options):
        self.py_func, self.args, self.options, self.dispatcher = py_func, args, options, None

    def real(self):
        """The Numba dispatcher (numba-cuda imported on first use)."""
        if self.dispatcher is None:
            options = dict(self.options)
            bounds = LAUNCH_BOUNDS.get(self.py_func.__name__)
            if bounds is not None and not SIMULATED:  # as the compile check built the cubins (the simulator has none)
                options["launch_bounds"] = bounds
            self.dispatcher = _numba().jit(*self.args, **options)(self.py_func)
        return self.dispatcher

    def __getitem__(self, config):
        return self.real()[config]

    def __getattr__(self, name):  # only for what the instance lacks: the dispatcher's attributes
        if name.startswith("__") or name in ("py_func", "args", "options", "dispatcher"):
            raise AttributeError(name)
        return getattr(self.real(), name)


class _DeferredCuda:
    """Stands for ``numba.cuda`` in a cuda module until :func:`_numba`
    imports it: only ``@cuda.jit`` and ``@cuda.jit(...)``, as the kernels
    are decorated."""

    def jit(self, *args, **options):
        if len(args) == 1 and callable(args[0]) and not options:
            return _DeferredKernel(args[0], (), {})
        return lambda func: _DeferredKernel(func, args, options)

    def __getattr__(self, name):
        raise AttributeError(f"numba.cuda.{name}: numba-cuda is imported on first need (call _numba() first)")


def _numba():
    """Import numba and numba-cuda (once): bind this module's ``numba`` and
    ``cuda`` to them and every deferred kernel to its Numba dispatcher.
    Returns numba.cuda."""
    global numba, cuda
    if numba is not None:
        return cuda
    t0 = time.perf_counter()
    # numba-cuda 0.30.4 registers an overload of np.row_stack when it first
    # compiles a kernel; numpy 2.5 removed that alias of np.vstack.
    if not hasattr(np, "row_stack"):
        np.row_stack = np.vstack
    import numba as numba_module
    from numba import cuda as numba_cuda

    numba, cuda = numba_module, numba_cuda
    space = globals()
    for name, value in list(space.items()):
        if isinstance(value, _DeferredKernel):
            space[name] = value.real()  # (device functions too: a kernel's body reads them as globals)
    LOG.debug("netgen cuda: numba-cuda imported in %.1f ms", 1e3 * (time.perf_counter() - t0))
    return cuda


# ---------------------------------------------------------------- state (copied)
#: numba, once :func:`_numba` imported it
numba = None
#: numba.cuda, once :func:`_numba` imported it; until then only its ``jit`` decorator
cuda = _DeferredCuda()

#: what a generated module copies, in order
PARTS = (_DeferredKernel, _DeferredCuda, _numba)
STATE = ("numba", "cuda")
