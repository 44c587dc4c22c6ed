"""The cuda target's kernels as objects (netgen/codegen/cuda/kernels.py),
without a GPU or the simulator: what a generated module says about its
kernels (``KERNEL_ARGS``, function names and signatures, the ``KERNELS``
table) is derived from the objects; rendering is deterministic, complete
(no template markers left) and depends on k and the float type as
documented (ranks unrolled for k <= UNROLL_RANKS, fast math for float32
only). The simulator (test_cuda_sim.py, test_contract.py) runs both rank
forms: k = 1, 5, 8 unrolled, k = 13 looped."""

from __future__ import annotations

import ast
import re

import numpy as np
import pytest

from netgen.codegen import TARGETS
from netgen.codegen.cuda.kernels import FASTMATH, KERNEL_ARGS, KERNELS, MIN_ROWS, UNROLL_RANKS, emitted, kernels_source
from netgen.codegen.swap_code import swap_code
from netgen.construct import build
from netgen.relax.distributions import default_relaxation


def emit(net, r=None, **options):
    """The cuda module's source for these emit options (CudaOptions fields)."""
    return TARGETS["cuda"].emit(net, r, options)


def _functions(source: str) -> dict[str, ast.FunctionDef]:
    return {f.name: f for f in ast.parse(source).body if isinstance(f, ast.FunctionDef)}


def _swaps(net):
    r = default_relaxation(net)
    return {ft: swap_code(r, 0, ft, steepness="s") for ft in FASTMATH}


def test_module_kernel_facts_come_from_the_objects():
    net = build("splitter", 40, 5)
    mod = emit(net, default_relaxation(net))
    tree = ast.parse(mod)
    consts = {t.targets[0].id: t.value for t in tree.body if isinstance(t, ast.Assign)
              and isinstance(t.targets[0], ast.Name)}
    # the rows and column kernels, vals_bwd and the lane kernels (W P, P V: Round 8)
    held = emitted(False)
    assert [k.name for k in held[:len(KERNELS)]] == [k.name for k in KERNELS]
    assert {k.name for k in held[len(KERNELS):]} == {"vals_bwd", "wp_fwd", "wp_bwd", "pv_fwd", "pv_bwd"}
    assert ast.literal_eval(consts["KERNEL_ARGS"]) == {k.name: k.kinds for k in held}
    assert {k: v for k, v in ast.literal_eval(consts["KERNEL_ARGS"]).items() if k in KERNEL_ARGS} == KERNEL_ARGS
    funcs = _functions(mod)
    table = {(ast.unparse(key.elts[0]), ast.literal_eval(key.elts[1]), ast.literal_eval(key.elts[2])): val.id
             for key, val in zip(consts["KERNELS"].keys, consts["KERNELS"].values)}
    assert len(table) == 36  # 9 kernels x 2 float types x 2 variants (n = 40 fits any shared limit)
    for kern in held:
        for ft in FASTMATH:
            for variant in ("global", "shared"):
                name = kern.function_name(ft, variant)
                assert table[(f"np.dtype(np.{ft})", kern.name, variant)] == name
                assert [a.arg for a in funcs[name].args.args] == [a for a, _ in kern.args]
                deco = ast.unparse(funcs[name].decorator_list[0])
                assert deco == ("cuda.jit(fastmath=True)" if FASTMATH[ft] else "cuda.jit"), (name, deco)


def test_shared_variant_only_where_the_rows_fit():
    net = build("splitter", 1000, 5)
    # 1000 float64 = 8000 bytes: one row fits 12,000 bytes, two do not
    _, src, table = kernels_source(net.n, net.k, 12_000, _swaps(net))
    funcs = _functions(src)
    for kern in KERNELS:
        for ft, size in (("float32", 4), ("float64", 8)):
            fits = kern.rows * net.n * size <= 12_000
            assert (kern.function_name(ft, "shared") in funcs) == fits, (kern.name, ft)
            assert kern.function_name(ft, "global") in funcs
    assert MIN_ROWS == {"fwd": 1, "bwd": 1, "fwd_col": 2, "bwd_col": 2}
    assert table.count("'shared')") == sum(1 for f in funcs if f.endswith("_s"))


@pytest.mark.parametrize("kind,n,k", [("splitter", 40, 5), ("bitonic", 16, 16)])
def test_rendering_is_deterministic_and_complete(kind, n, k):
    net = build(kind, n, k)
    a = kernels_source(net.n, net.k, 227 * 1024, _swaps(net))
    b = kernels_source(net.n, net.k, 227 * 1024, _swaps(net))
    assert a == b
    src = a[1]
    assert "@@" not in src and "@" not in src.replace("@cuda.jit", "")
    for word in ("ZERO", "ONE", "NAN", "INF"):  # constants are locals, defined in every kernel
        assert src.count(f"    {word} = ") == 36  # 9 kernels x 2 float types x 2 variants
    assert f"k = np.uint32({k})" in src
    funcs = _functions(src)
    unrolled = k <= UNROLL_RANKS
    for name, f in funcs.items():
        body = ast.unparse(f)
        if name.startswith(("_fwd_f", "_bwd_f")):  # the rank sweeps
            assert ("while ia < ie" in body) != unrolled, name
            assert (f"r = np.uint32({k - 1})" in body) == unrolled, name
        assert "j // n" not in body, name  # no 64-bit division per element


def test_a_kernel_refuses_unknown_float_types_and_variants():
    with pytest.raises(ValueError):
        KERNELS[0].render("float16", "shared", "p = d", 5)
    with pytest.raises(ValueError):
        KERNELS[0].render("float32", "local", "p = d", 5)


def test_swap_code_runs_without_its_input_clamps_only_in_tame_rows():
    """Every kernel that runs the swap code holds it twice (updates.per_range):
    under ``if tame:`` without the clamps of d and z (no literal of the
    float's largest value there, though the derivatives keep theirs in the
    backward), under ``else:`` with them. The forwards decide tame from
    the bad-row check with the bound 2^-24 of the float's largest value and
    write the row's code; the backwards read it from ``bad[b]``."""
    from netgen.codegen.cuda.row_io import tame_bound
    from netgen.codegen.render import scalar_literal

    net = build("splitter", 40, 5)
    funcs = _functions(emit(net, default_relaxation(net)))
    for ft in FASTMATH:
        big = repr(float(np.finfo(ft).max))
        for name in ("fwd", "bwd", "fwd_col", "bwd_col"):
            f = funcs[f"_{name}_f{ft[-2:]}_s"]
            src = ast.unparse(f)
            branches = [node for node in ast.walk(f) if isinstance(node, ast.If)
                        and isinstance(node.test, ast.Name) and node.test.id == "tame"]
            per_gs = 2 if name.startswith("bwd") else 1  # the backwards: once per want_gs
            assert len(branches) == per_gs, (name, ft, len(branches))
            for node in branches:
                tame = "\n".join(ast.unparse(s) for s in node.body)
                clamped = "\n".join(ast.unparse(s) for s in node.orelse)
                assert "sw_" in tame and "sw_" in clamped, (name, ft)
                # the swap code's copies (two where the layer loop peels a first comparator)
                copies = len(re.findall(r"^\s*dp = ", clamped, re.M))
                assert copies >= 1 and len(re.findall(r"^\s*dp = ", tame, re.M)) == copies, (name, ft)
                # the clamps of d and of z: a min and a max each, per copy
                assert clamped.count(big) - tame.count(big) == 4 * copies, (name, ft)
            if name.startswith("fwd"):
                assert f"tame = max(s, spread) <= {scalar_literal(tame_bound(ft), ft)}" in src, (name, ft)
                assert "bad[b] = 1 if isbad else 0 if tame else 2" in src, (name, ft)
            else:
                assert "tame = bad[b] == 0" in src, (name, ft)


@pytest.mark.parametrize("kind,n,k,bounded", [
    ("splitter", 10450, 5, {"_fwd_f32_s", "_bwd_f32_s"}),  # 209 KB of P state in float32: one block per SM
    ("splitter", 5000, 5, {"_fwd_f64_s", "_bwd_f64_s"}),  # 100 KB in float32 (two blocks fit), 200 KB in float64
    ("splitter", 40, 5, set()),
    ("oddeven", 1024, 1024, set()),  # the state fits no block: lane groups
])
def test_launch_bounds_only_where_a_block_takes_an_sm(kind, n, k, bounded):
    """kernels.launch_bounds: the rows kernels' shared variants get (1024, 1)
    where their P state (lanes x n floats) fits the shared limit and passes
    half an SM (no second block fits on any GPU), and nothing else does (the
    values-only launches of other modules run many blocks per SM, where
    registers cost occupancy). The module's LAUNCH_BOUNDS says so; the
    compile check passes it to NVVM (test_cuda_ptx checks the PTX)."""
    net = build(kind, n, k)
    consts = {}
    for node in ast.parse(emit(net, default_relaxation(net))).body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "LAUNCH_BOUNDS":
            consts = ast.literal_eval(node.value)
    assert consts == {name: (1024, 1) for name in bounded}
