"""Pure Network -> Network passes: cone pruning, never-firing cleanup, ASAP
scheduling, and a pipeline that records what each changed."""

from .clean import remove_never_swapping
from .pipeline import PASSES, PassRecord, optimize
from .prune import prune
from .schedule import asap

__all__ = ["prune", "remove_never_swapping", "asap", "optimize", "PassRecord", "PASSES"]
