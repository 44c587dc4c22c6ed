"""The ``torch`` target: a self-contained PyTorch module (needs only torch).

* :mod:`.emit`: the emitter (constants, the compressed index table, the
  rendered ``_swap``), build time;
* :mod:`.layer`, :mod:`.engine`: the runtime copied into every module (the
  sweeps as autograd Functions, ``Layer``; the P engine).
"""
