"""difftopk's smooth top-k SVM losses (Berrada et al., ICLR 2018):
``SmoothTopKLoss``, ``SmoothHardTopKLoss``, their per-sample functions
``Topk_Smooth_SVM`` / ``Topk_Hard_SVM`` (the modules' ``fn_smooth`` /
``fn_hard``) and the public helpers of ``difftopk.smooth_topk``
(``detect_large``, ``split``, ``delta``, ``log1mexp``, ``LogSumExp``),
with difftopk's arguments and values.

The values come from netgen's log-space recurrence
(:mod:`netgen.relax.baselines.smooth_topk`) and the gradient from autograd
(difftopk's hand-written backward is wrong for k = 1). The pieces of that
hand-written backward (``LogTensor``, ``log``, ``Multiplication``,
``divide_and_conquer``, ``recursion``, ``approximation``,
``d_logS_d_expX``, ``LogSumExp_F``) are named, so every import of
``difftopk.smooth_topk`` resolves, but not provided: calling one raises
NotImplementedError saying so (:data:`NOT_PROVIDED`)."""

from __future__ import annotations

import math

import torch

def _smooth(x, y, k, tau, alpha=1.0):
    from ..relax.baselines.smooth_topk import smooth_topk_loss

    return smooth_topk_loss(x, y, k, tau=tau, alpha=alpha, reduction="none")


def _hard(x, y, k, alpha=1.0):
    """Top-k hinge: max(0, mean of the best k others + alpha - mean of y and the best k-1 others)."""
    B, n = x.shape
    others = torch.arange(n, device=x.device).unsqueeze(0) != y.unsqueeze(1)
    rest = x[others].reshape(B, n - 1)
    best = (rest + alpha).topk(k, dim=1).values.mean(1)
    with_y = (rest.topk(k - 1, dim=1).values.sum(1) + x.gather(1, y.unsqueeze(1)).squeeze(1)) / k
    return torch.clamp(best - with_y, min=0)


class Topk_Hard_SVM:
    """difftopk's ``Topk_Hard_SVM(labels, k, alpha)``: ``fn(x, y)`` -> the
    top-k hinge loss per sample (``labels``: the classes, ``arange(n)``).
    A picklable object where difftopk returns a closure."""

    def __init__(self, labels, k, alpha=1.0):
        self.labels, self.k, self.alpha = labels, k, alpha

    def __call__(self, x, y):
        return _hard(x, torch.as_tensor(y, device=x.device).long(), self.k, self.alpha)


class Topk_Smooth_SVM:
    """difftopk's ``Topk_Smooth_SVM(labels, k, tau, alpha)``: ``fn(x, y)``
    -> the smooth top-k SVM loss per sample (netgen's log-space
    recurrence, autograd backward)."""

    def __init__(self, labels, k, tau, alpha=1.0):
        self.labels, self.k, self.tau, self.alpha = labels, k, tau, alpha

    def __call__(self, x, y):
        return _smooth(x, torch.as_tensor(y, device=x.device).long(), self.k, self.tau, self.alpha)


def _check_scores(x, y, num_classes, k):
    if not isinstance(x, torch.Tensor) or x.dim() != 2 or x.shape[1] != num_classes:
        raise ValueError(f"x must be a (batch, {num_classes}) tensor, got {getattr(x, 'shape', None)}")
    if not 1 <= k < num_classes:
        raise ValueError(f"k must lie in 1..{num_classes - 1}, got {k}")
    return torch.as_tensor(y, device=x.device).long()


class SmoothTopKLoss(torch.nn.Module):
    """Smooth top-k SVM loss (temperature ``tau``, margin 1), batch mean;
    ``fn_smooth`` as in difftopk."""

    def __init__(self, num_classes, k, tau=1, device="cpu"):
        super().__init__()
        self.num_classes, self.k, self.tau = num_classes, k, tau
        self.labels = torch.arange(num_classes).to(device)
        self.fn_smooth = Topk_Smooth_SVM(self.labels, k, tau, 1)

    def forward(self, x, y):
        y = _check_scores(x, y, self.num_classes, self.k)
        return self.fn_smooth(x, y).sum() / x.size(0)

    def __getstate__(self):
        return _without_fns(self)

    def __setstate__(self, state):
        super().__setstate__(state)
        self.fn_smooth = Topk_Smooth_SVM(self.labels, self.k, self.tau, 1)


class SmoothHardTopKLoss(torch.nn.Module):
    """The smooth loss, switching per sample to the top-k hinge where the
    k-th and (k+1)-th scores are far apart (gap >= k tau log 1000);
    ``fn_smooth`` / ``fn_hard`` as in difftopk."""

    def __init__(self, num_classes, k, tau=1, device="cpu"):
        super().__init__()
        self.num_classes, self.k, self.tau = num_classes, k, tau
        self.thresh = 1e3
        self.labels = torch.arange(num_classes).to(device)
        self.fn_hard = Topk_Hard_SVM(self.labels, k, 1)
        self.fn_smooth = Topk_Smooth_SVM(self.labels, k, tau, 1)

    def forward(self, x, y):
        y = _check_scores(x, y, self.num_classes, self.k)
        smooth, hard = detect_large(x, self.k, self.tau, self.thresh)
        loss = x.new_zeros(())
        if smooth.any():
            loss = loss + self.fn_smooth(x[smooth], y[smooth]).sum() / x.size(0)
        if hard.any():
            loss = loss + self.fn_hard(x[hard], y[hard]).sum() / x.size(0)
        return loss

    def __getstate__(self):
        return _without_fns(self)

    def __setstate__(self, state):
        super().__setstate__(state)
        self.fn_hard = Topk_Hard_SVM(self.labels, self.k, 1)
        self.fn_smooth = Topk_Smooth_SVM(self.labels, self.k, self.tau, 1)


def _without_fns(module):
    """A loss's pickled state: ``fn_smooth`` / ``fn_hard`` are rebuilt on
    load (so ``weights_only=True`` loading needs only the loss class)."""
    return {k: v for k, v in module.__dict__.items() if k not in ("fn_smooth", "fn_hard")}


def detect_large(x, k, tau, thresh):
    """difftopk's ``detect_large``: boolean masks ``(smooth, hard)`` of the
    samples whose k-th and (k+1)-th largest scores are closer / at least
    ``k tau log(thresh)`` apart."""
    top = x.detach().topk(k + 1, dim=1).values
    hard = (top[:, k - 1] - top[:, k]) >= k * tau * math.log(thresh)
    return ~hard, hard


def split(x, y, labels):
    """difftopk's ``split``: ``(x_1, x_2)``, the scores of the other classes
    (B, n-1) and of the true class (B,)."""
    mask = labels.to(x.device).unsqueeze(0) != torch.as_tensor(y, device=x.device).unsqueeze(1)
    return x[mask].view(x.size(0), -1), x.gather(1, torch.as_tensor(y, device=x.device).long()[:, None]).view(-1)


def delta(y, labels, alpha=None):
    """difftopk's ``delta``: the 0-1 loss matrix ``[y_i != labels_j]``
    (float), times ``alpha`` when given."""
    d = torch.ne(y[:, None], labels[None, :]).float()
    return d if alpha is None else alpha * d


def log1mexp(U, eps=1e-3):
    """``log(1 - exp(U))`` for U <= 0, stably: ``log(-expm1(U))`` near 0,
    ``log1p(-exp(U))`` below -log 2 (``eps`` is accepted for difftopk's
    signature; this form needs no switch-over point)."""
    return torch.where(U > -math.log(2.0), torch.log(-torch.expm1(U)), torch.log1p(-torch.exp(U)))


class LogSumExp(torch.nn.Module):
    """difftopk's ``LogSumExp(k)``: for x (B, n), the (2, B) matrix of
    ``log e_{k-1}(exp x)`` and ``log e_k(exp x)`` (elementary symmetric
    polynomials of the exponentials), by netgen's log-space recurrence;
    ``p`` and ``thresh`` (difftopk's backward's approximation order and
    switch) are accepted and unused (autograd gives the gradient)."""

    def __init__(self, k, p=None, thresh=1e-5):
        super().__init__()
        self.k = k
        self.p = int(1 + 0.2 * k) if p is None else p
        self.thresh = thresh

    def forward(self, x):
        from ..relax.baselines.smooth_topk import log_esp

        return log_esp(x, self.k)[..., self.k - 1:self.k + 1].transpose(0, 1)


class NotProvided:
    """A name of the published package that netgen.compat names but does
    not provide (an internal of difftopk's hand-written backward): calling
    it raises NotImplementedError saying so."""

    def __init__(self, name: str):
        self.__name__ = self.__qualname__ = name.rsplit(".", 1)[-1]
        self.published_name = name

    def __call__(self, *args, **kwargs):
        raise NotImplementedError(
            f"netgen.compat does not provide {self.published_name}: it is an internal of difftopk's hand-written "
            "smooth top-k backward; netgen computes the loss by a log-space recurrence with autograd's "
            "gradient (netgen.relax.baselines.smooth_topk). Use SmoothTopKLoss / SmoothHardTopKLoss, "
            "Topk_Smooth_SVM / Topk_Hard_SVM or LogSumExp, or the published difftopk itself")

    def __repr__(self):
        return f"<{self.published_name}: not provided by netgen.compat>"


#: difftopk.smooth_topk's names netgen.compat names but does not provide
NOT_PROVIDED = ("log", "LogTensor", "divide_and_conquer", "recursion", "approximation", "d_logS_d_expX",
                "Multiplication", "LogSumExp_F")

log = NotProvided("difftopk.smooth_topk.log")
LogTensor = NotProvided("difftopk.smooth_topk.LogTensor")
divide_and_conquer = NotProvided("difftopk.smooth_topk.divide_and_conquer")
recursion = NotProvided("difftopk.smooth_topk.recursion")
approximation = NotProvided("difftopk.smooth_topk.approximation")
d_logS_d_expX = NotProvided("difftopk.smooth_topk.d_logS_d_expX")
Multiplication = NotProvided("difftopk.smooth_topk.Multiplication")
LogSumExp_F = NotProvided("difftopk.smooth_topk.LogSumExp_F")
