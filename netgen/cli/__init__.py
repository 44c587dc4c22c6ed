"""The ``netgen`` command line. One module per command; this file only
assembles the group. Results go to stdout, progress and logs to stderr; bad
input is a one-line message and exit code 2."""

from __future__ import annotations

import difflib
import importlib

import click

from .. import __version__
from .common import BadInput

# command name -> module under netgen.cli that defines ``command``
COMMANDS = {
    "build": "build",
    "verify": "verify",
    "show": "show",
    "table": "table",
    "render": "render",
    "bench": "bench",
    "cache": "cache",
}


_NO_ARGS = getattr(click.exceptions, "NoArgsIsHelpError", ())  # click >= 8.2


class _LazyGroup(click.Group):
    def make_context(self, info_name, args, parent=None, **extra):
        # usage errors of the group itself (an unknown option) become one line, exit 2
        try:
            return super().make_context(info_name, args, parent=parent, **extra)
        except _NO_ARGS:  # bare `netgen`: the help, as click prints it
            raise
        except click.UsageError as e:
            raise BadInput(e.format_message()) from None

    def invoke(self, ctx):
        # usage errors (bad option values, unknown commands) become one line, exit 2
        try:
            return super().invoke(ctx)
        except click.UsageError as e:
            raise BadInput(e.format_message()) from None

    def resolve_command(self, ctx, args):
        name = args[0] if args else ""
        if args and not name.startswith("-") and self.get_command(ctx, name) is None:
            close = difflib.get_close_matches(name, self.list_commands(ctx), n=2, cutoff=0.6)
            hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
            raise click.UsageError(f"no such command {name!r}{hint} (commands: {', '.join(self.list_commands(ctx))})")
        return super().resolve_command(ctx, args)

    def list_commands(self, ctx):
        return sorted(name for name, mod in COMMANDS.items() if _exists(mod))

    def get_command(self, ctx, name):
        mod = COMMANDS.get(name)
        if mod is None or not _exists(mod):
            return None
        return importlib.import_module(f"netgen.cli.{mod}").command


def _exists(mod: str) -> bool:
    return importlib.util.find_spec(f"netgen.cli.{mod}") is not None


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "-V", "--version", prog_name="netgen",
                      message="%(prog)s %(version)s (distribution netgen-networks)")
def main():
    """netgen: construct, prove, relax and compile sorting and top-k networks."""


if __name__ == "__main__":  # pragma: no cover
    main()
