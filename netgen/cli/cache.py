"""``netgen cache info`` / ``netgen cache clear``: netgen's on-disk cache of
compiled layers (see :mod:`netgen.codegen.cache`)."""

from __future__ import annotations

import click

from .common import handle_errors


@click.group("cache")
def command():
    """Show or clear the cache of compiled layers ($NETGEN_CACHE_DIR or the user cache dir)."""


@command.command("info")
def info():
    """Where the cache is, its version key, files and bytes."""
    from ..codegen.cache import info as _info

    d = _info()
    click.echo(f"root: {repr(d['root'])[1:-1]}")  # control characters escaped
    click.echo(f"versions: {d['versions']}\nfiles: {d['files']}\nbytes: {d['bytes']}")
    if d.get("refused"):
        click.echo(f"not used: it {d['refused']} (set NETGEN_CACHE_INSECURE=1 to use it anyway)")


@command.command("clear")
@handle_errors
def clear():
    """Delete every cached module and compiled kernel (all versions)."""
    from ..codegen.cache import clear as _clear, root

    click.echo(f"removed {_clear()} files from {repr(str(root()))[1:-1]}")
