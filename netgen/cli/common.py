"""Shared CLI helpers: error handling, output channels, output-path checks,
the size limit (``--max-size``) and text escaping for terminal output."""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import threading
import time
from pathlib import Path

import click


class InternalError(click.ClickException):
    """A netgen bug, reported in one line with exit code 1."""

    exit_code = 1

    def show(self, file=None):
        click.echo(f"netgen: internal error: {self.format_message()}", err=True)


class BadInput(click.ClickException):
    """A one-line message on stderr and exit code 2."""

    exit_code = 2

    def show(self, file=None):
        click.echo(f"netgen: error: {escape(self.format_message())}", err=True)


def handle_errors(fn):
    """Turn ValueError (and MemoryError, RecursionError, an OS error on a
    path, and a missing optional dependency) raised by the library into a
    one-line message with exit code 2 instead of a traceback; a generated
    module that fails its compile check (a netgen bug) is one line with
    exit code 1."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except ValueError as e:
            raise BadInput(str(e)) from None
        except ImportError as e:
            from ..extras import hint_for

            hint = hint_for(e)
            if hint is None:
                raise
            raise BadInput(hint) from None
        except MemoryError:
            raise BadInput("out of memory: the requested network is too large for this machine") from None
        except RecursionError:
            raise BadInput("input nested too deeply") from None
        except OSError as e:
            where = f"{e.filename}: " if e.filename else ""
            raise BadInput(f"{where}{e.strerror or e}") from None
        except RuntimeError as e:
            from ..codegen.literals import GeneratedSourceError

            if not isinstance(e, GeneratedSourceError):
                raise
            raise InternalError(str(e)) from None

    return wrapper


# ------------------------------------------------------------------ output
def log(msg: str) -> None:
    """Progress and log lines go to stderr, never stdout; a live tqdm bar is
    cleared first and drawn again below the line."""
    from tqdm import tqdm

    with tqdm.external_write_mode(file=sys.stderr):
        click.echo(msg, err=True)


def _stderr_tty() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


def _screen() -> dict:
    """tqdm's ``ncols`` / ``nrows`` where the terminal cannot tell them. A
    pseudo-terminal whose size was never set (``script`` run from a pipe,
    many CI runners) reports 0 x 0; tqdm turns that into -1 x -1 and then
    draws nothing at all: its bar at position 0 is "below" the last row.
    Then use ``$COLUMNS`` / ``$LINES`` or 80 x 24; otherwise let tqdm ask."""
    try:
        size = os.get_terminal_size(sys.stderr.fileno())
    except (AttributeError, ValueError, OSError):
        return {}
    out = {}
    for key, env, have, default in (("ncols", "COLUMNS", size.columns, 80), ("nrows", "LINES", size.lines, 24)):
        if have <= 0:
            try:
                out[key] = max(2, int(os.environ.get(env, default)))
            except ValueError:
                out[key] = default
    return out


def progress(iterable=None, total=None, desc=None, **kwargs):
    """A tqdm bar on stderr (silent when stderr is not a terminal)."""
    from tqdm import tqdm

    for key, value in _screen().items():
        kwargs.setdefault(key, value)
    return tqdm(iterable, total=total, desc=desc, file=sys.stderr, leave=False, disable=None, **kwargs)


_ELAPSED = "{desc} [{elapsed}{postfix}]"  # no step count known (yet)
_STEPS = "{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}{postfix}]"


class _Bar:
    """The live bar of :func:`busy` (a tqdm bar, or nothing in a pipe)."""

    def __init__(self, bar, delay: float = 0.0):
        self.bar, self.delay, self.shown = bar, delay, False
        self.t0 = time.monotonic()

    def step(self, done: int, total: int, what: str = "") -> None:
        """``done`` of ``total`` steps are finished; ``what`` is running."""
        if self.bar is None:
            return
        with self.bar.get_lock():
            self.bar.total = total
            self.bar.bar_format = _STEPS
            self.bar.n = done
            self.bar.set_postfix_str(what, refresh=False)
        self._draw()

    def _draw(self) -> None:
        if time.monotonic() - self.t0 >= self.delay:
            self.bar.refresh()  # draws even between updates (update() alone would wait for the next step)
            self.shown = True

    def __call__(self, done: int, total: int, what: str = "") -> None:
        self.step(done, total, what)


_CURRENT: list = []  # the innermost live bar of busy() (for commands that report steps)


def current_bar():
    """The bar of the enclosing :func:`busy` block (``.step(done, total,
    what)``; does nothing in a pipe), or None outside one."""
    return _CURRENT[-1] if _CURRENT else None


@contextlib.contextmanager
def busy(desc: str = "netgen", delay: float = 2.0):
    """While the block runs, show a tqdm bar on stderr when it is a terminal
    (after ``delay`` seconds; nothing in a pipe): the elapsed time, redrawn
    every second even while one long step runs (tqdm itself redraws only on
    an update), and the steps done when the command reports them
    (:func:`current_bar`). A long build is never silent.
    ``$NETGEN_PROGRESS_DELAY`` (seconds) overrides ``delay``."""
    try:
        delay = float(os.environ.get("NETGEN_PROGRESS_DELAY", delay))
    except ValueError:
        pass
    if not _stderr_tty():
        _CURRENT.append(_Bar(None))
        try:
            yield _CURRENT[-1]
        finally:
            _CURRENT.pop()
        return
    bar = progress(total=None, desc=desc, delay=delay, mininterval=0.5, bar_format=_ELAPSED)
    live = _Bar(bar, delay)
    live.shown = delay <= 0  # tqdm drew it already
    stop = threading.Event()

    def beat():
        while not stop.wait(1.0):
            live._draw()

    thread = threading.Thread(target=beat, name="netgen-progress", daemon=True)
    _CURRENT.append(live)
    thread.start()
    try:
        yield live
    finally:
        stop.set()
        thread.join()
        _CURRENT.pop()
        if live.shown:
            bar.clear()  # close() alone erases only bars that update() drew
        bar.close()


def escape(text: object) -> str:
    """``text`` with control characters (terminal escape sequences, newlines,
    NUL, DEL, C1 controls, bidirectional overrides) and lone surrogates shown
    as Python escapes, so a string from a network file prints as one inert
    line (:func:`netgen.text.printable`)."""
    from ..text import printable

    return printable(text)


# ------------------------------------------------------------ size limit
def max_size_option(fn):
    """Add ``--max-size N`` (comparators plus wires a construction or an
    input file may have; default 10 million) and run the command under that
    limit (:func:`netgen.network.size_limit`), showing the elapsed time on a
    terminal while it works."""
    from ..network import DEFAULT_MAX_SIZE

    @functools.wraps(fn)
    def wrapper(*args, max_size=None, **kwargs):
        from ..network import size_limit

        ctx = click.get_current_context(silent=True)
        name = f"netgen {ctx.info_name}" if ctx is not None and ctx.info_name else "netgen"
        with size_limit(max_size), busy(name):
            return fn(*args, **kwargs)

    return click.option(
        "--max-size", "max_size", type=click.IntRange(min=1), default=None,
        help=f"Refuse networks (built or read) estimated above this many comparators plus wires "
             f"(default {DEFAULT_MAX_SIZE:,}); see docs/security.md.",
    )(wrapper)


# ------------------------------------------------------------ output paths
def check_output(path: str | os.PathLike | None, *, folder: bool) -> None:
    """Refuse, before any work, an output path that cannot be written:
    ``folder`` True (code targets) wants a folder (existing or creatable),
    False (a file) wants a path that is not a folder; every existing
    ancestor must be a writable folder. None or "-" (stdout) passes."""
    if path is None or (not folder and os.fspath(path) == "-"):
        return
    p = Path(path)
    if folder and p.exists() and not p.is_dir():
        raise BadInput(f"-o {escape(p)}: is a file, but this target writes a folder (give a folder name)")
    if not folder and p.is_dir():
        raise BadInput(f"-o {escape(p)}: is a folder, but this target writes a file (give a file name)")
    probe = p if folder else p.parent
    probe = probe if str(probe) else Path(".")
    while not probe.exists():
        probe = probe.parent
    if not probe.is_dir():
        raise BadInput(f"-o {escape(p)}: {escape(probe)} is a file, not a folder")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise BadInput(f"-o {escape(p)}: folder {escape(probe)} is not writable")
    if not folder and p.exists() and not os.access(p, os.W_OK):
        raise BadInput(f"-o {escape(p)}: file is not writable")
