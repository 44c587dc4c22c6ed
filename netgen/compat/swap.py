"""The import swap: :func:`install` puts netgen.compat's mirrors of diffsort
0.2.0 and difftopk 0.2.0 in ``sys.modules`` under the published names, so
that every import path of the published packages (``import difftopk``,
``from difftopk.losses import TopKCrossEntropyLoss``, ``from
diffsort.functional import sort``, ``import difftopk.smooth_topk as st``,
unpickling a checkpoint that names ``difftopk.difftopk.DiffTopkNet``)
resolves to netgen, whether or not the published packages are installed.

Call it before the script imports them. Where a published package was
imported already, its module objects are replaced in ``sys.modules`` (with
a warning): names the script took from it before the swap stay the
published ones. :func:`uninstall` puts back what was there."""

from __future__ import annotations

import importlib
import sys
import warnings

__all__ = ["install", "uninstall", "PUBLISHED_MODULES"]

#: every module of the published packages, by package
PUBLISHED_MODULES = {
    "diffsort": ("diffsort", "diffsort.diffsort", "diffsort.functional", "diffsort.networks"),
    "difftopk": ("difftopk", "difftopk.difftopk", "difftopk.functional", "difftopk.losses", "difftopk.networks",
                 "difftopk.neuralsort", "difftopk.smooth_topk", "difftopk.softsort"),
}

_SAVED: dict = {}  # published name -> what sys.modules held before install (None: nothing)


def _mirror(name: str):
    return importlib.import_module(f"{__package__}.{name}")


def install(packages=("diffsort", "difftopk")) -> None:
    """Make ``import diffsort`` / ``import difftopk`` and every submodule
    import of them give netgen.compat's mirrors (see the module docstring).
    ``packages``: the packages to swap (both by default)."""
    if isinstance(packages, str):
        packages = (packages,)
    unknown = [p for p in packages if p not in PUBLISHED_MODULES]
    if unknown:
        raise ValueError(f"unknown package(s) {unknown}; choose from {', '.join(PUBLISHED_MODULES)}")
    replaced = []
    for pkg in packages:
        for name in PUBLISHED_MODULES[pkg]:
            mine = _mirror(name)
            held = sys.modules.get(name)
            if held is mine:
                continue
            if held is not None:
                replaced.append(name)
            _SAVED.setdefault(name, held)
            sys.modules[name] = mine
    if replaced:
        warnings.warn(f"netgen.compat.install(): {', '.join(replaced)} had been imported already and now name "
                      "netgen.compat's mirrors; objects taken from the published modules before the swap stay the "
                      "published ones (call install() before importing them)", UserWarning, stacklevel=2)


def uninstall() -> None:
    """Undo :func:`install`: the published names give what they gave before."""
    for name, held in _SAVED.items():
        if held is None:
            sys.modules.pop(name, None)
        else:
            sys.modules[name] = held
    _SAVED.clear()
