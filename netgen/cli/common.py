"""Shared CLI helpers: error handling and output channels."""

from __future__ import annotations

import functools
import sys

import click


class BadInput(click.ClickException):
    """A one-line message on stderr and exit code 2."""

    exit_code = 2

    def show(self, file=None):
        click.echo(f"netgen: error: {self.format_message()}", err=True)


def handle_errors(fn):
    """Turn ValueError (and MemoryError, and a missing optional dependency)
    raised by the library into a one-line message with exit code 2 instead
    of a traceback."""

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

    return wrapper


def log(msg: str) -> None:
    """Progress and log lines go to stderr, never stdout."""
    click.echo(msg, err=True)


def progress(iterable=None, total=None, desc=None):
    """A tqdm bar on stderr (silent when stderr is not a terminal and the
    work is short)."""
    from tqdm import tqdm

    return tqdm(iterable, total=total, desc=desc, file=sys.stderr, leave=False, disable=None)
