"""``netgen build --target cuda``: write the module only after its kernels
compiled (PTX, and cubins where an assembler is found), so an interrupted or
failed check never leaves an unchecked module in the output folder. The
kernels go beside the module, in ``<stem>.cubins/``
(:mod:`netgen.codegen.cuda_cubins`), so its first call compiles nothing."""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

import click

from .common import BadInput, current_bar, escape, log


def write_checked_cuda(net, relax, out_dir: Path, name: str | None, *, required: bool = False) -> Path:
    """Emit the cuda module into a private ``netgen_cuda_*`` scratch folder,
    run :func:`netgen.codegen.cuda_target.compile_check` on it, and only then
    copy it (atomically) into ``out_dir``. A compile failure: exit 1, nothing
    written. No assembler for the cubins: one line saying the check was
    partly skipped and how to get it, module written (exit 0), unless
    ``required`` (``--compile-check``): exit 2, nothing written. Ctrl-C or
    SIGTERM: scratch removed, workers gone, nothing written."""
    from ..codegen import write_module
    from ..codegen._cuda_compile import terminate_raises
    from ..codegen.cuda_target import compile_check
    from ..io import atomic_write

    with terminate_raises():
        return _write_checked(net, relax, Path(out_dir), name, required, write_module, compile_check, atomic_write)


def _write_checked(net, relax, out_dir, name, required, write_module, compile_check, atomic_write) -> Path:
    scratch = Path(tempfile.mkdtemp(prefix="netgen_cuda_"))
    try:
        t = time.perf_counter()
        tmp = write_module("cuda", net, relax, out_dir=scratch, name=name)
        log(f"emitted cuda module in {time.perf_counter() - t:.2f} s; compiling its kernels ...")
        t = time.perf_counter()
        from ..codegen._cuda_compile import _ptxas
        from ..codegen.cuda_cubins import PTX_CC, build_archs, install, write_folder

        try:  # PTX for compute 7.5, assembled for sm_80 ... sm_120: kept beside the module
            info = compile_check(tmp, cc=PTX_CC, archs=build_archs(_ptxas()), out_dir=scratch / "kernels",
                                 progress=current_bar())  # the bar: PTX per kernel, then each arch's cubins
        except RuntimeError as e:
            click.echo(f"netgen: error: {e}\nnothing written (use --no-compile to keep an unchecked module)", err=True)
            raise SystemExit(1) from None
        if info["skipped"]:
            if required:
                raise BadInput(f"--compile-check: {info['summary']}; nothing written")
            log(f"compile check partly skipped (PTX compiled, no cubin): {escape(info['summary'])}")
        else:
            log(f"compile check passed in {time.perf_counter() - t:.2f} s: {escape(info['summary'])}")
        path = out_dir / tmp.name
        if info["kernels"]:  # first (a visible module has its kernels), under the names the module looks for
            got = write_folder(info, tmp, scratch / "cubins")
            out_dir.mkdir(parents=True, exist_ok=True)
            where = install(scratch / "cubins", path)
            log(f"kernels for {', '.join(got['archs']) or 'no arch'} (+ PTX for compute "
                f"{PTX_CC[0]}.{PTX_CC[1]}) in {escape(str(where))}")
        atomic_write(path, lambda dst: shutil.copyfile(tmp, dst))
        return path
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
