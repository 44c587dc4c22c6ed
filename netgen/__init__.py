"""netgen: a compiler for sorting and top-k selection networks.

construct -> passes -> verify -> relax -> codegen -> generated/<module>
"""

from .network import Network
from .io import load as load_network, save as save_network, dumps, loads

__version__ = "0.1.0"

from .codegen.cache import install_finder as _install_finder

_install_finder()  # pickled generated layers find their modules in netgen's cache (netgen.codegen.cache)


def load(path):
    """Import a generated layer module (see :func:`netgen.codegen.cache.load`)."""
    from .codegen.cache import load as _load

    return _load(path)


def __getattr__(name: str):
    # torch-heavy names are imported on first use: ``import netgen`` stays cheap
    if name == "topk_loss":
        from .layers import topk_loss

        return topk_loss
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["Network", "load_network", "save_network", "dumps", "loads", "__version__", "load", "topk_loss"]
