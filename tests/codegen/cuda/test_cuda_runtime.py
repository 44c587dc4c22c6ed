"""The cuda target's host runtime (netgen.codegen.cuda.driver, packing,
launch, batch, cuda_ops, cuda_layer) tested as the ordinary code it is, without a GPU and
without the simulator: the kernel-argument packing against every kernel's
argument kinds, its cache, block sizing, batch chunks, variants, the
steepness cache and the label checks; and the assembly of a generated
module from these files (each name once, state copied by statement)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from netgen.codegen.cuda.kernels import KERNEL_ARGS
from netgen.codegen import TARGETS
from netgen.codegen.cuda.emit import runtime_source
from netgen.codegen.literals import GeneratedSourceError, Namespace, top_level_definitions
from netgen.codegen.cuda import batch as cuda_batch
from netgen.codegen.cuda import driver as cuda_driver
from netgen.codegen.cuda import launch as cuda_launch
from netgen.codegen.cuda import layer as cuda_layer
from netgen.codegen.cuda import ops as cuda_ops
from netgen.codegen.cuda import packing as cuda_packing
from netgen.codegen.runtime import statements
from netgen.codegen.runtime.common import check_labels
from netgen.codegen.runtime.layer import LayerBase
from netgen.construct import build

def emit(net, r=None, **options):
    """The cuda module's source for these emit options (CudaOptions fields)."""
    return TARGETS["cuda"].emit(net, r, options)


TORCH_OF = {"w1": torch.uint16, "u1": torch.uint32, "i1": torch.int64, "b1": torch.int32}


@pytest.fixture
def packing(monkeypatch):
    """cuda_packing with a generated module's kernel argument kinds."""
    monkeypatch.setattr(cuda_packing, "KERNEL_ARGS", dict(KERNEL_ARGS))
    monkeypatch.setattr(cuda_packing, "WIRE_DTYPE", np.dtype(np.uint16))
    monkeypatch.setattr(cuda_launch, "_RECORDS", {})
    return cuda_packing


def example_args(kinds, dtype, B=3, seed=0):
    """One argument per kind (the scratch included), each a distinct tensor
    of a different shape, filled with distinct numbers."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for j, kind in enumerate(kinds):
        if kind == "bool":
            out.append(bool(j % 2))
        elif kind[0] == "f":
            shape = (B, 5 + j) if kind == "f2" else (4 + j,)
            out.append(torch.randn(shape, generator=g, dtype=dtype))
        else:
            out.append(torch.randint(0, 1000, (6 + j,), generator=g).to(TORCH_OF[kind]))
    return out


@pytest.mark.parametrize("name", sorted(KERNEL_ARGS))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_packing_round_trips_every_kernels_arguments(packing, name, dtype):
    """Packed words, read back as the kernel would see them, are the very
    arrays (same memory, shapes, dtypes) and flags passed in."""
    args = example_args(KERNEL_ARGS[name], dtype)
    npdt = np.dtype(np.float64) if dtype == torch.float64 else np.dtype(np.float32)
    seen = packing._sim_unpack(name, npdt, packing._fill(packing._abi(args), packing._slots(args), args))
    assert len(seen) == len(args)
    for a, s in zip(args, seen):
        if isinstance(a, torch.Tensor):
            assert s.shape == tuple(a.shape) and s.dtype == a.numpy().dtype
            assert s.ctypes.data == a.data_ptr() and np.array_equal(s, a.numpy())
        else:
            assert s is a


def test_packing_is_numbas_abi(packing):
    t = torch.zeros(2, 3, dtype=torch.float64)
    assert packing._abi([t, True, 7]) == [0, 0, 6, 8, t.data_ptr(), 2, 3, 24, 8, True, 7]


def test_launch_record_words_refill_only_the_pointers(packing):
    """A launch record packs once per argument shapes; a later launch with
    the same shapes only rewrites the data pointers (``_slots``), giving
    exactly a fresh packing of its own arguments."""
    kinds = KERNEL_ARGS["fwd_col"]
    first = example_args(kinds, torch.float32, seed=1)
    second = example_args(kinds, torch.float32, seed=2)  # same shapes, other memory
    words, slots = packing._abi(first), packing._slots(first)
    assert packing._shape_key(first) == packing._shape_key(second)
    assert packing._fill(words, slots, second) == packing._abi(second) != words
    assert words == packing._abi(first)  # the record's words are not changed in place
    assert [words[p] for p, _ in slots] == [a.data_ptr() for a in first if isinstance(a, torch.Tensor)]
    third = example_args(kinds, torch.float32, B=5)
    assert packing._shape_key(third) != packing._shape_key(first)


def test_batch_plans_are_bounded(packing, monkeypatch):
    """Many batch sizes never grow the launcher's caches without bound:
    past RECORDS_MAX entries they start over (rebuilt as needed)."""
    monkeypatch.setattr(cuda_launch, "SIMULATED", True)
    monkeypatch.setattr(cuda_batch, "RECORDS_MAX", 3)
    monkeypatch.setattr(cuda_batch, "_PLANS", {})
    like = torch.zeros(1, dtype=torch.float32)
    plans = [cuda_batch._batch("fwd", like, B, 1) for B in range(1, 9)]
    assert plans == [[(0, B)] for B in range(1, 9)]
    assert 1 <= len(cuda_batch._PLANS) <= 3


def test_group_geometry_is_bounded(monkeypatch):
    """The lane-group kernels' geometry, one entry per batch size, starts
    over past GEO_MAX entries (a new B per call never grows it without end)."""
    from netgen.codegen.cuda import group_ops

    monkeypatch.setattr(group_ops, "GEO_MAX", 3)
    monkeypatch.setattr(group_ops, "_GEO", {})
    monkeypatch.setattr(group_ops, "_group_lanes", lambda device, dt: 4)
    monkeypatch.setattr(group_ops, "LANES", 10)
    monkeypatch.setattr(group_ops, "_SPANS", {})
    got = [group_ops._geo(torch.device("cpu"), np.dtype(np.float32), B) for B in range(1, 9)]
    assert [(G, groups, geo.tolist()) for G, groups, geo, _ in got] == [(4, 3, [4, 3, 3 * B]) for B in range(1, 9)]
    assert 1 <= len(group_ops._GEO) <= 3
    # the span table depends on G only: computed and uploaded once, (groups x layers x 2) uint32
    assert len(group_ops._SPANS) == 1 and all(spn is got[0][3] for *_, spn in got)
    assert got[0][3].dtype == torch.uint32 and got[0][3].numel() == 3 * (len(group_ops._OFFSETS) - 1) * 2


def test_group_choice_is_worked_out_once_per_device_and_dtype(monkeypatch):
    """Whether the rows with P run as lane groups is decided on a layer's
    first call per (device, dtype), not by every call's fwd and bwd (issue
    29's host cost): the kernels' shared room it reads is asked once."""
    from netgen.codegen.cuda import group_ops

    f32, f64 = np.dtype(np.float32), np.dtype(np.float64)
    asked = []
    monkeypatch.setattr(group_ops, "_GROUP_LANES", {})
    monkeypatch.setattr(group_ops, "KERNELS", {(f32, "grp_fwd", "shared"): None, (f64, "grp_fwd", "shared"): None})
    monkeypatch.setattr(group_ops, "_variant", lambda device, dt, name, rows: asked.append(dt) or "global")
    monkeypatch.setattr(group_ops, "_shared_room", lambda device, dt, names: 10 * group_ops._N * dt.itemsize)
    cpu = torch.device("cpu")
    for _ in range(3):
        assert group_ops._use_groups(cpu, f32) and group_ops._use_groups(cpu, f64)
    assert group_ops._group_lanes(cpu, f32) == min(10, group_ops.GROUP_CAP, group_ops.LANES)
    assert asked == [f32, f64]
    # a module without group kernels never picks them, and asks nothing
    monkeypatch.setattr(group_ops, "_GROUP_LANES", {})
    monkeypatch.setattr(group_ops, "KERNELS", {})
    assert not group_ops._use_groups(cpu, f32) and asked == [f32, f64]


def test_unpack_refuses_words_that_do_not_fit_the_kernel(packing):
    args = example_args(KERNEL_ARGS["bwd_col"], torch.float32)
    f32 = np.dtype(np.float32)
    with pytest.raises(ValueError, match="packed words"):
        packing._sim_unpack("bwd_col", f32, packing._abi(args) + [0])
    with pytest.raises(ValueError, match="itemsize"):
        packing._sim_unpack("bwd_col", np.dtype(np.float64), packing._abi(args))
    words = packing._abi(args)
    words[6] *= 2  # the first array's (a vector's) stride doubled: past its elements
    with pytest.raises(ValueError, match="exceeds"):
        packing._sim_unpack("bwd_col", f32, words)


def test_block_size(monkeypatch):
    L = cuda_driver
    monkeypatch.setattr(L, "THREADS", 256)
    monkeypatch.setattr(L, "BIG_THREADS", 1024)
    monkeypatch.setattr(L, "SM_SHARED", 228 * 1024)
    assert L._block("global", 0) == 256
    assert L._block("shared", 209_000) == 1024  # one block per SM: 32 warps
    assert L._block("shared", 209_000, regs=72) == 896  # 65,536 registers / 72 a thread, in whole warps
    assert L._block("shared", 209_000, limit=640) == 640  # the compiled kernel's limit
    assert L._block("shared", 100_000) == 1024  # two blocks per SM: 2048 / 2
    assert L._block("shared", 60_000) == 672  # three blocks per SM: 2048 // 3 = 682, in whole warps
    assert L._block("shared", 2_000) == 256  # many blocks per SM: THREADS
    # a grid of no more blocks than SMs: each block has an SM to itself (issue 29, docs/cuda-rounds7-8.md, Round 8)
    assert L._block("shared", 2_000, blocks=64, sms=132) == 1024
    assert L._block("shared", 2_000, blocks=132, sms=132) == 1024
    assert L._block("shared", 2_000, regs=72, blocks=64, sms=132) == 896
    assert L._block("shared", 2_000, blocks=133, sms=132) == 256  # more blocks than SMs: as before
    assert L._block("shared", 2_000, blocks=64) == 256  # SM count not known: as before
    assert L._block("global", 0, blocks=1, sms=132) == 256  # the global variant keeps THREADS
    monkeypatch.setattr(L, "BIG_THREADS", 512)
    assert L._block("shared", 209_000) == 512


def test_chunks(monkeypatch):
    monkeypatch.setattr(cuda_batch, "WORKSPACE", 1000)
    assert cuda_batch._chunks(7, 0) == [(0, 7)]  # no scratch: one launch
    assert cuda_batch._chunks(7, 300) == [(0, 3), (3, 6), (6, 7)]
    assert cuda_batch._chunks(3, 5000) == [(0, 1), (1, 2), (2, 3)]  # a row past the budget still runs
    assert cuda_batch._chunks(0, 300) == []
    assert cuda_batch._chunks(5, 100) == [(0, 5)]


def test_variant_by_what_a_launch_needs(monkeypatch):
    f32, f64 = np.dtype(np.float32), np.dtype(np.float64)
    monkeypatch.setattr(cuda_launch, "SIMULATED", True)
    monkeypatch.setattr(cuda_launch, "SHARED_LIMIT", 1000)
    monkeypatch.setattr(cuda_launch, "_N", 50)
    monkeypatch.setattr(cuda_launch, "KERNELS", {(f32, "fwd", "shared"): None, (f32, "fwd", "global"): None})
    assert cuda_launch._variant("cpu", f32, "fwd", 5) == "shared"  # 1000 bytes: just fits
    assert cuda_launch._variant("cpu", f32, "fwd", 6) == "global"
    assert cuda_launch._variant("cpu", f32, "fwd", 1) == "shared"
    assert cuda_launch._variant("cpu", f64, "fwd", 1) == "global"  # no shared variant emitted


def test_steepness_tensor_cached_per_device_and_dtype():
    like = torch.zeros(2, 3)
    cuda_layer._STEEP.clear()
    a = cuda_layer._steepness(2.5, like)
    assert a.shape == (1,) and a.dtype == torch.float32 and float(a) == 2.5
    assert cuda_layer._steepness(np.float64(2.5), like) is a  # same value: nothing uploaded
    b = cuda_layer._steepness(3.0, like)
    assert b is not a and float(b) == 3.0
    c = cuda_layer._steepness(3.0, like.double())
    assert c.dtype == torch.float64 and cuda_layer._steepness(3.0, like) is b
    p = torch.nn.Parameter(torch.tensor(4.0, dtype=torch.float64))
    t = cuda_layer._steepness(LayerBase.steepness_value(p), like)  # the Layer base's value of a Parameter
    assert t.requires_grad and t.dtype == torch.float32 and t.shape == (1,)
    t.sum().backward()
    assert p.grad is not None  # the gradient reaches the Parameter


def test_labels_as_the_cuda_layer_checks_them():
    """The shared check's wording; the range is left to the kernels (a NaN
    row, no host synchronisation), so nothing reads y's values here."""
    y, mask = check_labels([[1, 2], [3, 0]], (2, 2), 5, torch.device("cpu"), None)
    assert y.dtype == torch.int64 and y.tolist() == [1, 2, 3, 0] and mask is None
    assert check_labels(torch.tensor(9, dtype=torch.int32), (), 5, torch.device("cpu"), None)[0].tolist() == [9]
    with pytest.raises(ValueError, match="y must hold integer indices"):
        check_labels(torch.tensor([0.5]), (1,), 5, torch.device("cpu"), None)
    with pytest.raises(ValueError, match=r"y must have shape \(3,\)"):
        check_labels(torch.tensor([0, 1]), (3,), 5, torch.device("cpu"), None)
    assert check_labels(torch.tensor([0]), (1,), 5, torch.device("meta"), None)[0].device.type == "meta"


def test_gradients_are_once_differentiable():
    x = torch.randn(3, requires_grad=True)
    s = torch.ones(1, requires_grad=True)
    with torch.enable_grad():
        gx, gs = cuda_ops._once_differentiable(torch.ones(3), torch.ones(1), x, s)
    assert torch.equal(gx, torch.ones(3)) and gx.requires_grad
    with pytest.raises(RuntimeError, match="second-order gradients"):
        torch.autograd.grad(gx.sum(), x)
    with torch.no_grad():  # a plain backward: untouched
        g = torch.ones(3)
        assert cuda_ops._once_differentiable(g, None, x, s) == (g, None)


def test_statements_copy_state_with_its_comments_and_claim_names():
    names = Namespace()
    src = statements(cuda_driver, ("SM_SHARED", "_prepare_simulator", "_CHECKED"), names)
    assert src.startswith("#: shared memory per SM")
    assert "SM_SHARED = 228" in src and "_CHECKED: list = []" in src and src.rstrip().endswith("_prepare_simulator()")
    assert "SM_SHARED" in names and "_CHECKED" in names and "_prepare_simulator" not in names  # a call binds nothing
    with pytest.raises(GeneratedSourceError, match="twice"):
        statements(cuda_driver, ("SM_SHARED",), names)
    with pytest.raises(GeneratedSourceError, match="NO_SUCH"):
        statements(cuda_launch, ("NO_SUCH",), Namespace())


def test_generated_module_copies_the_runtime_once():
    """Every runtime part and state name is defined exactly once in a
    generated module, as the runtime file has it; the emitter adds the
    build's constants as literals."""
    import ast
    import inspect
    import textwrap

    src = emit(build("splitter", 16, 5), threads=64, shared_limit=1234)
    defined = [name for name, _ in top_level_definitions(ast.parse(src))]
    for module in (cuda_driver, cuda_packing, cuda_launch, cuda_batch, cuda_ops, cuda_layer):
        for part in module.PARTS:
            assert defined.count(part.__name__) == 1, part.__name__
            assert textwrap.dedent(inspect.getsource(part)).strip() in src
        for name in getattr(module, "STATE", ()):
            assert defined.count(name) == 1, name  # (_prepare_simulator: its def; the call binds nothing)
    assert "THREADS = 64" in src and "SHARED_LIMIT = 1234" in src and src.rstrip().endswith("_register()")
    with pytest.raises(GeneratedSourceError, match="'_launch' twice"):
        taken = Namespace()
        taken.define("_launch")
        runtime_source({"THREADS": 32}, taken)
