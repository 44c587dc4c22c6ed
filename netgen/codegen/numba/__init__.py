"""The ``numba`` target: a module of ``@njit`` CPU kernels.

* :mod:`.emit`: the emitter (literals, engine constants, the rendered swap
  functions), build time;
* :mod:`.vector`, :mod:`.engine`, :mod:`.kernels`, :mod:`.host`,
  :mod:`.layer`: the runtime copied into every module (vector helpers, the
  P engine, the kernels, pool and threads, autograd and ``Layer``).
"""
