"""What a code-generation target is (docs/codegen.md, "Adding a target")."""

from __future__ import annotations

__all__ = ["BuildError", "BuildIncomplete"]


class BuildError(RuntimeError):
    """A target's build step failed (e.g. its kernels did not compile): a
    netgen bug or a broken toolchain; nothing was written."""


class BuildIncomplete(ValueError):
    """A target's build step could not run in full (e.g. no assembler for
    the cubins) and was required; nothing was written."""
