"""Layer-building helpers: ready-made training objects over a proved netgen
network. :func:`topk_loss` builds a :class:`netgen.relax.loss.TopKCrossEntropyLoss`
over a generated layer of a network from :func:`netgen.compiler.build` (the
construction pruned, cleaned, scheduled and proved, the same network
``netgen build --network KIND`` writes)."""

from __future__ import annotations

from typing import Sequence

__all__ = ["topk_loss"]


def topk_loss(num_classes: int, p_k: Sequence[float], m: int | None = None, kind: str = "splitter",
              distribution: str | None = None, steepness: float | str | None = None, art_lambda: float = 0.25,
              mode: str = "mix", reduction: str = "mean", target: str = "auto",
              device=None, *, max_size: int | None = None, max_seconds: float | None = None, blur: float | None = None):
    """Build a :class:`~netgen.relax.loss.TopKCrossEntropyLoss` over a netgen
    layer for a ``kind`` network with K = len(p_k) outputs on ``num_classes``
    wires, or on ``m`` wires with top-m preselection (the layer then has
    n = m); relaxation defaults from :func:`default_relaxation`. The network
    comes from :func:`netgen.compiler.build` (passes run, proved; a network
    with a counterexample is refused); ``max_size`` bounds its size like
    ``netgen build --max-size``, and ``max_seconds`` its estimated build time
    like ``--max-seconds`` (default 60 CPU seconds). The loss checks that scores have
    ``num_classes`` columns.

    ``target``: ``"auto"`` (default) runs the fastest target for the scores'
    device (cuda on a GPU with numba-cuda, numba on CPU, torch otherwise;
    see :mod:`netgen.codegen.auto`), choosing on the first call per device
    and logging the choice (``loss.layer.targets`` shows it); or one of
    ``"torch"``, ``"numba"``, ``"cuda"``. ``device``: build the layer for
    that device now (do so before ``torch.compile`` or CUDA-graph capture).

    ``steepness="auto"``: chosen from the (preselected) scores, detached, so
    that the layer's blur (:func:`netgen.blur`) is ``blur`` (any number in
    (0, 1); default 0.75 in training, the value measured to train as well as
    the best swept steepness): on the first 4 training calls, then fixed,
    as a swept steepness (``loss.layer.auto_steepness`` holds the value, a
    buffer in the state_dict; docs/relaxations.md section 8)."""
    from .codegen.auto import AutoLayer, check_target
    from .compiler import build
    from .network import check_n, size_limit
    from .relax.distributions import Relaxation, default_relaxation
    from .relax.loss import TopKCrossEntropyLoss, check_p_k
    from .relax.steepness import is_auto, optional_blur

    check_target(target)
    optional_blur(blur)
    auto = is_auto(steepness)
    try:
        num_classes = check_n(num_classes)
    except ValueError as e:
        raise ValueError(f"num_classes: {e}") from None
    K = len(check_p_k(p_k))
    if m is not None:
        if isinstance(m, bool) or not isinstance(m, int):
            raise ValueError(f"m must be an integer, got {m!r}")
        if not K <= m <= num_classes:
            raise ValueError(f"m = {m} must lie in K..num_classes = {K}..{num_classes} "
                             f"(the layer has n = m wires and K = len(p_k) = {K} outputs)")
    elif K > num_classes:
        raise ValueError(f"len(p_k) = {K} is more than num_classes = {num_classes}")
    n = num_classes if m is None else m
    with size_limit(max_size):
        compiled = build(n, K, kind, max_seconds=max_seconds)
    report = compiled.report
    if report is not None and report.status == "counterexample":  # pragma: no cover - constructions are proved
        raise RuntimeError(f"netgen: the {kind} network for n = {n}, k = {K} is wrong: {report}")
    net = compiled.network
    r = default_relaxation(net, distribution)
    r = Relaxation(r.distribution, r.steepness if steepness is None or auto else steepness, art_lambda)
    layer = AutoLayer(net, r, target, device, steepness="auto" if auto else None, blur=blur)
    return TopKCrossEntropyLoss(layer, p_k, m=m, mode=mode, reduction=reduction, num_classes=num_classes)
