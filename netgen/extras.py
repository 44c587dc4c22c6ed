"""Optional dependencies: one place that names the extra to install.

``require(module, what)`` imports ``module`` or raises :class:`MissingExtra`
(a ValueError, so the CLI prints it as one line with exit code 2) saying
which ``pip install "netgen-networks[...]"`` provides it. ``hint_for`` maps a
ModuleNotFoundError raised deeper down to the same message.
"""

from __future__ import annotations

import importlib

#: top-level module -> the pyproject extra that installs it
EXTRAS = {
    "matplotlib": "render",
    "graphviz": "render",
    "numba_cuda": "cuda",
    "torch": "torch",
    "scipy": "bench",
    "sklearn": "examples",
}


class MissingExtra(ValueError):
    """An optional dependency is not installed."""


def message(module: str, what: str, extra: str | None = None) -> str:
    root = module.split(".")[0]
    extra = extra or EXTRAS.get(root)
    install = f'pip install "netgen-networks[{extra}]"' if extra else f"pip install {root}"
    return f"{what} needs {root}, which is not installed: {install}"


def require(module: str, what: str, extra: str | None = None):
    """Import and return ``module``; MissingExtra naming the extra (default
    from :data:`EXTRAS`) if absent."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise MissingExtra(message(module, what, extra)) from None


def hint_for(error: ImportError) -> str | None:
    """The one-line message for an ImportError of a known optional module,
    or None when it is not one of netgen's extras."""
    name = getattr(error, "name", None) or ""
    if name.split(".")[0] not in EXTRAS:
        return None
    return message(name, "this command")
