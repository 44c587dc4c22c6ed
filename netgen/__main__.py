"""``python -m netgen``: the ``netgen`` command (see :mod:`netgen.cli`)."""

from .cli import main

main(prog_name="netgen")
