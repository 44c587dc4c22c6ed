"""The cuda target's build step: write the module only after its kernels
compiled (PTX, and cubins where an assembler is found), so an interrupted or
failed check never leaves an unchecked module in the output folder. The
kernels go beside the module, in ``<stem>.cubins/``
(:mod:`netgen.codegen.cuda.cubins`), so its first call compiles nothing.

``netgen build --target cuda`` and :func:`netgen.codegen.write_module` both
run it (``--no-compile`` / ``build=False`` skip it)."""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

from ..target import BuildError, BuildIncomplete


def build(source: str, path: Path, *, required: bool = False, log=None, progress=None) -> Path:
    """Write the cuda module ``source`` to ``path`` after its compile check:
    the source goes to a private ``netgen_cuda_*`` scratch folder first,
    :func:`netgen.codegen.cuda.compile_check.compile_check` runs on it, the kernels
    are installed beside ``path`` and only then is the module copied
    (atomically) into place. A compile failure: :class:`BuildError`,
    nothing written. No assembler for the cubins: one log line saying the
    check was partly skipped and how to get it, module written, unless
    ``required``: :class:`BuildIncomplete`, nothing written. Ctrl-C or
    SIGTERM: scratch removed, workers gone, nothing written. ``log`` gets
    one line per step; ``progress(done, total, what)`` follows the compile
    (PTX per kernel, then each architecture's cubins)."""
    from .compile import terminate_raises

    with terminate_raises():
        return _build(source, Path(path), required, log or (lambda line: None), progress)


def _build(source, path, required, log, progress=None) -> Path:
    from ...io import atomic_write
    from .compile import _ptxas
    from .cubins import PTX_CC, build_archs, install, write_folder
    from .compile_check import compile_check

    scratch = Path(tempfile.mkdtemp(prefix="netgen_cuda_"))
    try:
        tmp = scratch / path.name
        tmp.write_text(source, encoding="utf-8", newline="\n")
        log("compiling the cuda module's kernels ...")
        t = time.perf_counter()
        try:  # PTX for compute 7.5, assembled for sm_80 ... sm_120: kept beside the module
            info = compile_check(tmp, cc=PTX_CC, archs=build_archs(_ptxas()), out_dir=scratch / "kernels",
                                 progress=progress)
        except RuntimeError as e:
            raise BuildError(f"{e}\nnothing written") from None
        if info["skipped"]:
            if required:
                raise BuildIncomplete(f"the compile check was required: {info['summary']}; nothing written")
            log(f"compile check partly skipped (PTX compiled, no cubin): {info['summary']}")
        else:
            log(f"compile check passed in {time.perf_counter() - t:.2f} s: {info['summary']}")
        if info["kernels"]:  # first (a visible module has its kernels), under the names the module looks for
            got = write_folder(info, tmp, scratch / "cubins")
            path.parent.mkdir(parents=True, exist_ok=True)
            where = install(scratch / "cubins", path)
            log(f"kernels for {', '.join(got['archs']) or 'no arch'} (+ PTX for compute "
                f"{PTX_CC[0]}.{PTX_CC[1]}) in {where}")
        atomic_write(path, lambda dst: shutil.copyfile(tmp, dst))
        return path
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
