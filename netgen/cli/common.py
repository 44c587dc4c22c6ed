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
_BARS: list = []  # live status lines (cleared before a log line)


def log(msg: str) -> None:
    """Progress and log lines go to stderr, never stdout."""
    bars = list(_BARS)
    for bar in bars:
        bar.lock.acquire()
    try:
        for bar in bars:
            bar.clear(locked=True)
        click.echo(msg, err=True)
    finally:
        for bar in bars:
            bar.lock.release()


def progress(iterable=None, total=None, desc=None, **kwargs):
    """A tqdm bar on stderr (silent when stderr is not a terminal and the
    work is short)."""
    from tqdm import tqdm

    return tqdm(iterable, total=total, desc=desc, file=sys.stderr, leave=False, disable=None, **kwargs)


class _Busy:
    """One status line on stderr (a terminal): ``desc (elapsed)``, redrawn
    every second after ``delay`` seconds; :func:`log` clears it first."""

    def __init__(self, desc: str, delay: float):
        self.desc, self.delay, self.shown = desc, delay, False
        self.t0 = time.monotonic()
        self.lock = threading.Lock()

    def draw(self) -> None:
        with self.lock:
            elapsed = time.monotonic() - self.t0
            if elapsed >= self.delay:
                sys.stderr.write(f"\r{self.desc} ({int(elapsed) // 60:02d}:{int(elapsed) % 60:02d})\x1b[K")
                sys.stderr.flush()
                self.shown = True

    def clear(self, locked: bool = False) -> None:
        if not locked:
            with self.lock:
                return self.clear(locked=True)
        if self.shown:
            sys.stderr.write("\r\x1b[K")
            sys.stderr.flush()
            self.shown = False


@contextlib.contextmanager
def busy(desc: str = "netgen: working", delay: float = 2.0):
    """While the block runs, show the elapsed time on stderr when it is a
    terminal (after ``delay`` seconds; nothing in a pipe), so a long build
    is never silent."""
    try:
        tty = sys.stderr.isatty()
    except (AttributeError, ValueError):
        tty = False
    if not tty:
        yield
        return
    bar = _Busy(desc, delay)
    stop = threading.Event()

    def beat():
        while not stop.wait(1.0):
            bar.draw()

    thread = threading.Thread(target=beat, name="netgen-busy", daemon=True)
    _BARS.append(bar)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        _BARS.remove(bar)
        bar.clear()


def escape(text: object) -> str:
    """``text`` with control characters (terminal escape sequences, newlines,
    NUL, DEL, C1 controls, bidirectional overrides) and lone surrogates shown
    as Python escapes, so a string from a network file prints as one inert
    line."""
    text = str(text)
    if text.isprintable():
        return text
    out = []
    for ch in text:
        if ch.isprintable() or ch == " ":
            out.append(ch)
        else:
            out.append(repr(ch)[1:-1] if ch not in "'\"" else ch)
    return "".join(out)


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

        with size_limit(max_size), busy():
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
