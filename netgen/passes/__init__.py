"""Pure Network -> Network passes: cone pruning, never-firing cleanup, ASAP
scheduling, in a ``{name: pass}`` registry (:data:`PASSES`) and a pipeline
that records, as fields, what each changed."""

from .clean import remove_never_swapping
from .pipeline import DEFAULT_PASSES, PASSES, Pass, PassRecord, check_passes, optimize
from .prune import prune
from .schedule import asap

__all__ = ["prune", "remove_never_swapping", "asap", "optimize", "Pass", "PassRecord", "PASSES", "DEFAULT_PASSES",
           "check_passes"]
