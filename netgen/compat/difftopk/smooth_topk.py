"""``difftopk.smooth_topk``: the smooth top-k SVM losses and their public
helpers (see :mod:`netgen.compat.smooth`; the internals of difftopk's
hand-written backward are named but raise NotImplementedError when
called)."""

import itertools  # noqa: F401  (public names of the published module)
import math  # noqa: F401
import operator  # noqa: F401
from functools import reduce  # noqa: F401
from numbers import Number  # noqa: F401

import torch  # noqa: F401
import torch.autograd as ag  # noqa: F401

from ..smooth import (  # noqa: F401  (the names difftopk's backward uses: named, not provided)
    LogSumExp,
    LogSumExp_F,
    LogTensor,
    Multiplication,
    SmoothHardTopKLoss,
    SmoothTopKLoss,
    Topk_Hard_SVM,
    Topk_Smooth_SVM,
    approximation,
    d_logS_d_expX,
    delta,
    detect_large,
    divide_and_conquer,
    log,
    log1mexp,
    recursion,
    split,
)

__all__ = ["SmoothTopKLoss", "SmoothHardTopKLoss", "Topk_Smooth_SVM", "Topk_Hard_SVM", "detect_large", "split",
           "delta", "log1mexp", "LogSumExp"]
