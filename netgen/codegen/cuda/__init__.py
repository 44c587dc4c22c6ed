"""The ``cuda`` target: a module of Numba CUDA kernels launched through
``torch.library`` custom ops.

* build time: :mod:`.emit` (the emitter and the compile check),
  :mod:`.kernels` and :mod:`.sweeps` (the kernel sources), :mod:`.compile`
  (the compile worker: PTX and cubins), :mod:`.cubins` (the kernels' folder
  beside a module), :mod:`.build` (the build step: a module is written only
  after its kernels compiled);
* the runtime copied into every module: :mod:`.launch` (tables, variants,
  argument packing, launches), :mod:`.cubin` (the ahead-of-time kernel
  loader), :mod:`.ops` (custom ops and autograd), :mod:`.layer` (the launch
  self-check, ``Layer``).
"""
