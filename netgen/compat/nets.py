"""``DiffSortNet`` / ``DiffTopkNet``: diffsort's and difftopk's modules over
a netgen-generated layer (see :mod:`netgen.compat` for orientation and
differences).

Attributes are live, as in the originals: ``steepness``, ``distribution``,
``art_lambda``, ``interpolation_type`` (and ``art_epsilon``) are read at
every call. The steepness goes to the generated layer's run-time steepness
(no recompilation; a number, numpy scalar, 0-d tensor or ``nn.Parameter``,
which then learns); a new distribution / ``art_lambda`` selects another
generated module (built once, then from netgen's cache).

netgen's extension: ``steepness="auto"`` with ``blur=`` (default: 0.75
calibrating in training, 0.1 otherwise): chosen from the inputs (detached)
so that the relaxation's blur (:func:`netgen.blur`) is ``blur``, by the
submodule ``auto_steepness`` (the first 4 training calls, then fixed; eval
mode uses the value as it is; in the state_dict; docs/relaxations.md
section 8)."""

from __future__ import annotations

import math

import torch

from ..relax.distributions import DIFFTOPK_ART_EPSILON, DISTRIBUTIONS, Relaxation
from .networks import from_matrices, from_plain, get_sorting_network, netgen_network, original_network, to_plain
from ..relax.steepness import AutoSteepness, estimate_steepness, is_auto, optional_blur, plain_state, restore_state
from .run import call, check_steepness, finite_rows

#: the steepness baked into modules whose steepness is a run-time argument
#: (one module serves every steepness)
CANONICAL_STEEPNESS = 10.0


def resolve_distribution(distribution, interpolation_type) -> str:
    if interpolation_type is not None:
        if distribution is not None and distribution not in ("cauchy", interpolation_type):
            raise ValueError(
                f"two different distributions were set (distribution={distribution!r}, "
                f"interpolation_type={interpolation_type!r}); interpolation_type is a deprecated alias"
            )
        return interpolation_type
    return "cauchy" if distribution is None else distribution


def relaxation_for(distribution, art_lambda, art_epsilon, steepness=CANONICAL_STEEPNESS) -> Relaxation:
    """The Relaxation of published-style arguments. ``distribution=None``
    means cauchy; ``art_lambda`` matters (and is checked) only for
    ``logistic_phi`` (elsewhere, None included, it is ignored)."""
    dist = "cauchy" if distribution is None else distribution
    if dist not in DISTRIBUTIONS:
        raise ValueError(f"unknown distribution {dist!r}; choose one of {', '.join(DISTRIBUTIONS)}")
    if dist == "logistic_phi":
        if art_lambda is None or isinstance(art_lambda, bool):
            raise ValueError(f"distribution 'logistic_phi' needs a number art_lambda in [0, 1), got {art_lambda!r}")
        lam = float(art_lambda)
    else:
        lam = 0.25  # unused by every other distribution
    if isinstance(art_epsilon, bool) or not isinstance(art_epsilon, (int, float)) or not math.isfinite(art_epsilon):
        raise ValueError(f"art_epsilon must be a finite number, got {art_epsilon!r}")
    return Relaxation(dist, steepness, lam, float(art_epsilon))


class _Base(torch.nn.Module):
    def _setup(self, sorting_network_type, size, k, device, steepness, art_lambda, interpolation_type,
               distribution, art_epsilon, network, target, check_finite, blur=None):
        from ..codegen.auto import check_target

        check_target(target)
        if network not in ("difftopk", "netgen"):
            raise ValueError(f"network must be 'difftopk' or 'netgen', got {network!r}")
        optional_blur(blur)
        if is_auto(steepness):
            self.auto_steepness = AutoSteepness(blur)
        else:
            check_steepness(steepness)
        self.sorting_network_type = sorting_network_type
        self.size = int(size)
        self.device = device
        self.steepness = steepness
        self.art_lambda = art_lambda
        self.art_epsilon = art_epsilon
        self.distribution = resolve_distribution(distribution, interpolation_type)
        self.interpolation_type = interpolation_type
        self.check_finite = bool(check_finite)
        self._network_kind = network
        self._target = target
        self._matrices = None  # an assigned ``sorting_network`` (published format), else None
        self._custom = None  # its network as plain data (what a pickle holds)
        self._build(self._own_network())

    def _own_network(self):
        k = getattr(self, "k", None)
        if self._network_kind == "netgen":
            return netgen_network(self.sorting_network_type, self.size, k)
        return original_network(self.sorting_network_type, self.size, k)

    def _build(self, net, now: bool = True) -> None:
        """The AutoLayer for ``net``: not a submodule (``print(model)`` and
        ``state_dict()`` look like the published module's; it has no state).
        ``now``: build the layer for ``device`` at once (at construction; an
        unpickled module builds on its first call, on the device it gets)."""
        from ..codegen.auto import AutoLayer

        r = relaxation_for(self.distribution, self.art_lambda, self.art_epsilon)
        object.__setattr__(self, "_rkey", (r.distribution, r.art_lambda, r.art_epsilon))
        object.__setattr__(self, "_auto", AutoLayer(net, r, self._target, self.device if now else None))

    def __setattr__(self, name, value):
        # the deprecated alias stays an alias after construction too
        if name == "interpolation_type" and value is not None and "distribution" in self.__dict__:
            super().__setattr__("distribution", value)
        super().__setattr__(name, value)

    # ---------------------------------------------------------- pickling
    def __getstate__(self):
        """Plain data (no numpy, no netgen classes besides this one): the
        published constructor's arguments, netgen's extras and the module's
        state; the generated layer is rebuilt on load (from netgen's cache),
        so ``torch.load(..., weights_only=True)`` needs what published needs."""
        state = {k: v for k, v in self.__dict__.items() if k not in ("_auto", "_rkey", "_matrices")}
        return plain_state(state)

    def __setstate__(self, state):
        state = restore_state(dict(state))
        if "_network_kind" not in state:
            state = _older_state(type(self), state)
        super().__setstate__(state)
        self.__dict__.setdefault("check_finite", False)
        self._matrices = None
        self._build(self._own_network() if self._custom is None else from_plain(self._custom), now=False)

    # ---------------------------------------------------------- properties
    @property
    def layer(self):
        """The :class:`~netgen.codegen.auto.AutoLayer` computing this module."""
        return self._auto

    @property
    def network(self):
        """The netgen Network this module runs."""
        return self._auto.net

    @property
    def relaxation(self) -> Relaxation:
        """The relaxation the next call uses (its steepness: the current
        ``steepness`` when that is a plain positive number)."""
        r = self._sync()
        s = self.steepness
        if is_auto(s):  # the value "auto" chose last (the relaxation's until the first call)
            s = float(self.auto_steepness.steepness)
            s = r.steepness if math.isnan(s) else s
        if isinstance(s, torch.Tensor) or not 0 < float(s) < math.inf:
            return r
        return Relaxation(r.distribution, float(s), r.art_lambda, r.art_epsilon)

    def _sync(self) -> Relaxation:
        """Rebuild lazily after ``distribution`` / ``art_lambda`` /
        ``art_epsilon`` changed."""
        r = relaxation_for(self.distribution, self.art_lambda, self.art_epsilon)
        key = (r.distribution, r.art_lambda, r.art_epsilon)
        if key != self._rkey:
            self._auto.set_relaxation(r)
            object.__setattr__(self, "_rkey", key)
        return self._auto.relaxation

    def _check(self, x):
        if not isinstance(x, torch.Tensor):
            raise ValueError(f"expected a tensor, got {type(x).__name__}")
        if x.dim() < 1 or x.shape[-1] != self.size:
            raise ValueError(f"expected input of shape (..., {self.size}), got {tuple(x.shape)}")
        self._sync()

    def _steepness(self, x: torch.Tensor):
        """This call's steepness: as set, or "auto"'s choice on ``x``."""
        if not is_auto(self.steepness):
            return self.steepness
        if "auto_steepness" not in self._modules:  # "auto" assigned after construction
            self.auto_steepness = AutoSteepness()
        auto, net, r = self.auto_steepness, self._auto.net, self._auto.relaxation
        # the finite rows are read only on the calls that estimate (not a pass over x on every call)
        return auto(x, lambda t, b: estimate_steepness(net, r, finite_rows(t), b), r.steepness)

    def _layer(self, x: torch.Tensor):
        """The generated layer for ``x``'s device, with this module's steepness."""
        self._check(x)
        return self._auto.layer_for(x.device, self._steepness(x))

    def _run(self, x: torch.Tensor, y=None):
        """(values, P) in netgen's orientation, or the column P[..., :, y]
        (see :mod:`netgen.compat.run`: steepness shapes, non-finite rows,
        second order)."""
        self._check(x)
        return call(self._auto, x, self._steepness(x), y, self.check_finite)

    def forward(self, vectors: torch.Tensor):
        """Their orientation: ascending values and X = P.flip(-2).transpose(-1, -2)."""
        values, P = self._run(vectors)
        return values.flip(-1), P.flip(-2).transpose(-1, -2)

    @property
    def sorting_network(self):
        """The network in the published matrix format (built on access;
        netgen itself never uses these matrices). Assignable, as in the
        published modules: matrices of another network make this module run
        that network (read once into a netgen network)."""
        if self._matrices is not None:
            return self._matrices
        k = getattr(self, "k", None)
        if getattr(self, "sparse", False):
            return get_sorting_network("sparse_" + self.sorting_network_type, self.size, self.device, k)
        if self.sorting_network_type == "splitter_selection":
            raise ValueError("difftopk has splitter_selection only in sparse form (sparse=True)")
        return get_sorting_network(self.sorting_network_type, self.size, self.device)

    @sorting_network.setter
    def sorting_network(self, value):
        net = from_matrices(value, self.size, getattr(self, "k", None) or self.size)
        if [l.tolist() for l in net.layers] != [l.tolist() for l in self._auto.net.layers]:
            self._custom = to_plain(net)
            self._build(net)
        self._matrices = value


def _older_state(cls, state: dict) -> dict:
    """The state of a module pickled by an earlier netgen (the AutoLayer a
    submodule) or by the published package (after
    :func:`netgen.compat.install`, its class names lead here), in this
    netgen's form."""
    auto = state.get("_modules", {}).pop("layer", None)
    if auto is not None:  # an earlier netgen
        state.pop("network", None)
        state.update(_network_kind="difftopk", _target=auto.target, _custom=to_plain(auto.net))
        return state
    # the published DiffSortNet / DiffTopkNet: their arguments and the matrices
    matrices = state.pop("sorting_network")
    state.setdefault("distribution", "cauchy")
    state.setdefault("interpolation_type", None)
    state.update(device=str(matrices[0][0].device) if matrices else "cpu", art_epsilon=DIFFTOPK_ART_EPSILON,
                 _network_kind="difftopk", _target="auto", _custom=None)
    k = state.get("k")
    own = original_network(state["sorting_network_type"], state["size"], k)
    net = from_matrices(matrices, state["size"], k or state["size"])
    if [l.tolist() for l in net.layers] != [l.tolist() for l in own.layers]:
        state["_custom"] = to_plain(net)
    return state


class DiffSortNet(_Base):
    """diffsort.DiffSortNet's arguments and outputs: ``forward(x)`` returns
    ``(x sorted ascending (soft), X)`` with ``X`` ``(..., n, n)`` and
    ``X[..., c, j] = P[..., n-1-j, c]`` (see :mod:`netgen.compat`)."""

    def __init__(
        self,
        sorting_network_type: str,
        size: int,
        device: str = "cpu",
        steepness: float = 10.0,
        art_lambda: float = 0.25,
        interpolation_type: str = None,
        distribution: str = "cauchy",
        *,
        art_epsilon: float = DIFFTOPK_ART_EPSILON,
        network: str = "difftopk",
        target: str = "auto",
        check_finite: bool = False,
        blur: float | None = None,
    ):
        super().__init__()
        self._setup(sorting_network_type, size, None, device, steepness, art_lambda, interpolation_type,
                    distribution, art_epsilon, network, target, check_finite, blur)


class DiffTopkNet(_Base):
    """difftopk.DiffTopkNet's arguments and outputs: ``forward(x)`` returns
    ``(values ascending, X)`` with ``X`` ``(..., n, k)`` and
    ``X[..., c, j] = P[..., k-1-j, c]`` (difftopk returns None for values)."""

    def __init__(
        self,
        sorting_network_type: str,
        size: int,
        k: int,
        sparse: bool = False,
        device: str = "cpu",
        steepness: float = 10.0,
        art_lambda: float = 0.25,
        interpolation_type: str = None,
        distribution: str = "cauchy",
        *,
        art_epsilon: float = DIFFTOPK_ART_EPSILON,
        network: str = "difftopk",
        target: str = "auto",
        check_finite: bool = False,
        blur: float | None = None,
    ):
        super().__init__()
        self.k = int(k)
        self.sparse = sparse
        self._setup(sorting_network_type, size, k, device, steepness, art_lambda, interpolation_type,
                    distribution, art_epsilon, network, target, check_finite, blur)
