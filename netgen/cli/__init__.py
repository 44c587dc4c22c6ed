"""The ``netgen`` command line. One module per command; this file only
assembles the group. Results go to stdout, progress and logs to stderr; bad
input is a one-line message and exit code 2."""

from __future__ import annotations

import importlib

import click

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


class _LazyGroup(click.Group):
    def invoke(self, ctx):
        # usage errors (bad option values, unknown commands) become one line, exit 2
        try:
            return super().invoke(ctx)
        except click.UsageError as e:
            raise BadInput(e.format_message()) from None

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
@click.version_option(package_name="netgen")
def main():
    """netgen: construct, prove, relax and compile sorting and top-k networks."""


if __name__ == "__main__":  # pragma: no cover
    main()
