"""Runtime code of generated modules, as real modules.

The fixed part of a generated module (argument checks, the sweeps and their
written backward, ``hard``, ``Layer``) lives in these files, where it is
imported, linted and tested like any other code. An emitter copies the
pieces a module needs with :func:`assemble` (``inspect.getsource``), so the
generated file still needs nothing but torch; the emitter itself writes only
what varies: constants, tables and the rendered swap function.

* :mod:`.common`: pieces any target can use (checks with one wording, the
  steepness rule, the second-order and torch.func refusals, ``hard``).
* :mod:`.torch_layer`: the torch target's sweeps and ``Layer``.
"""

from __future__ import annotations

import inspect
import textwrap

from ..literals import Namespace

__all__ = ["assemble"]


def assemble(parts, names: Namespace) -> str:
    """Source of ``parts`` (functions and classes, in order), separated by
    two blank lines; each top-level name is claimed in ``names``, so a name
    defined twice in a module is refused while assembling."""
    chunks = []
    for obj in parts:
        names.define(obj.__name__)
        chunks.append(textwrap.dedent(inspect.getsource(obj)).strip("\n"))
    return "\n\n\n".join(chunks)
