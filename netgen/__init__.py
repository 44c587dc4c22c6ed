"""netgen: a compiler for sorting and top-k selection networks.

construct -> passes -> verify -> relax -> codegen -> generated/<module>
"""

from .network import Network
from .io import load as load_network, save as save_network, dumps, loads

__version__ = "0.1.0"

from .codegen.cache import install_finder as _install_finder

_install_finder()  # pickled generated layers find their modules in netgen's cache (netgen.codegen.cache)


def _check_ngsolve() -> None:
    """Warn when NGSolve's mesher, which also imports as ``netgen``, was
    installed into this package's folder (see netgen_networks.py)."""
    try:
        from netgen_networks import ADVICE, ngsolve_files
    except ImportError:  # pragma: no cover - the launcher module is not on the path
        return
    import os

    found = ngsolve_files(os.path.dirname(os.path.abspath(__file__)))
    if found:
        import warnings

        warnings.warn(f"NGSolve's mesher (netgen-mesher) shares this package's folder ({', '.join(found)}): both "
                      f"import as netgen and overwrite each other's files; {ADVICE}", stacklevel=2)


_check_ngsolve()


def load(path):
    """Import a generated layer module (see :func:`netgen.codegen.loader.load`)."""
    from .codegen.loader import load as _load

    return _load(path)


__all__ = ["Network", "load_network", "save_network", "dumps", "loads", "__version__", "load"]
