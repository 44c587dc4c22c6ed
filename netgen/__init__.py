"""netgen: a compiler for sorting and top-k selection networks.

construct -> passes -> verify -> relax -> codegen -> generated/<module>

The front door: the names a user needs, each with one meaning::

    import netgen
    compiled = netgen.compile(10450, 5)            # portfolio, passes, proof
    r = netgen.default_relaxation(compiled.network)
    path = netgen.write_module("torch", compiled.network, r)
    layer = netgen.load(path).Layer()
    loss_fn = netgen.topk_loss(1000, [0.5, 0, 0, 0, 0.5], m=16)

``import netgen`` stays cheap (no torch, no numba): everything but the IR
and its file formats is imported on first use (:data:`_LAZY`; a name that
is also a subpackage, such as ``verify`` or ``construct``, stays the
subpackage: ``netgen.verify.verify``, ``netgen.construct.construct``). The
operators (``soft_sort``, ``soft_rank``, ``soft_topk``, ``topk_mask``,
their ``nn.Module`` forms and the ranking losses, :mod:`netgen.ops`) are
here too.
"""

from typing import TYPE_CHECKING

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


#: public name -> (module, attribute), imported on first use
_LAZY = {
    # build a network: construct, passes, proof
    "compile": ("netgen.compiler", "compile"),
    "compile_network": ("netgen.compiler", "compile_network"),
    "build_network": ("netgen.compiler", "build_network"),
    "Compiled": ("netgen.compiled", "Compiled"),
    # relax it
    "Relaxation": ("netgen.relax.distributions", "Relaxation"),
    "default_relaxation": ("netgen.relax.distributions", "default_relaxation"),
    "DISTRIBUTIONS": ("netgen.relax.distributions", "DISTRIBUTIONS"),
    # generate, write and load a layer module
    "TARGETS": ("netgen.codegen", "TARGETS"),
    "emit": ("netgen.codegen", "emit"),
    "write_module": ("netgen.codegen", "write_module"),
    "load": ("netgen.codegen.cache", "load"),
    # layers and losses in a model
    "AutoLayer": ("netgen.codegen.auto", "AutoLayer"),
    "topk_loss": ("netgen.layers", "topk_loss"),
    "TopKCrossEntropyLoss": ("netgen.relax.loss", "TopKCrossEntropyLoss"),
    # the operators: functions, nn.Module forms, ranking losses (netgen.ops)
    "soft_sort": ("netgen.ops", "soft_sort"),
    "soft_rank": ("netgen.ops", "soft_rank"),
    "soft_topk": ("netgen.ops", "soft_topk"),
    "topk_mask": ("netgen.ops", "topk_mask"),
    "SoftSort": ("netgen.ops", "SoftSort"),
    "SoftRank": ("netgen.ops", "SoftRank"),
    "SoftTopK": ("netgen.ops", "SoftTopK"),
    "TopKMask": ("netgen.ops", "TopKMask"),
    "SpearmanLoss": ("netgen.ops", "SpearmanLoss"),
    "MultiLabelTopKLoss": ("netgen.ops", "MultiLabelTopKLoss"),
    "blur": ("netgen.relax.blur", "blur"),
}


if TYPE_CHECKING:  # pragma: no cover - what _LAZY resolves to, for readers and type checkers
    from .codegen import TARGETS, emit, write_module
    from .codegen.auto import AutoLayer
    from .codegen.cache import load
    from .compiled import Compiled
    from .compiler import build_network, compile, compile_network
    from .layers import topk_loss
    from .relax.distributions import DISTRIBUTIONS, Relaxation, default_relaxation
    from .ops import (MultiLabelTopKLoss, SoftRank, SoftSort, SoftTopK, SpearmanLoss, TopKMask, soft_rank, soft_sort,
                      soft_topk, topk_mask)
    from .relax.blur import blur
    from .relax.loss import TopKCrossEntropyLoss


def __getattr__(name: str):
    # torch-heavy names are imported on first use: ``import netgen`` stays cheap
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        value = getattr(importlib.import_module(module), attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_LAZY))


__all__ = ["Network", "load_network", "save_network", "dumps", "loads", "__version__", *_LAZY]
