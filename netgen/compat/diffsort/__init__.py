"""diffsort 0.2.0, module for module: ``netgen.compat.diffsort`` stands for
``diffsort`` and its submodules ``diffsort.diffsort``,
``diffsort.functional`` and ``diffsort.networks`` stand for theirs, each
with every public name of the published module (netgen's
implementations). :func:`netgen.compat.install` puts them in
``sys.modules`` under the published names."""

from . import diffsort, functional, networks
from .diffsort import DiffSortNet
from .functional import sort
from .networks import bitonic_network, get_sorting_network, odd_even_network

__all__ = ["DiffSortNet", "sort", "bitonic_network", "odd_even_network", "get_sorting_network"]
