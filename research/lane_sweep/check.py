"""Check the lane-sweep prototype (kernels.py) in Numba's CUDA simulator
against netgen's reference executor (netgen/relax/reference.py).

    NUMBA_ENABLE_CUDASIM=1 python research/lane_sweep/check.py

For each case (a network, B, the lanes m or d, the lanes per block G, the
float type): the swap probabilities p of every comparator come from a
values sweep in torch with the reference's ``swap_prob`` (its values are
checked against ``reference.forward``'s first); then

* back sweep: Y = W P against ``W @ P`` with P from ``reference.forward``;
  its backward's dL/dp (summed over lane groups), pushed to dL/dx through
  p(x) by autograd, and dL/dW against autograd of ``(Gy * (W @ P)).sum()``;
* forward sweep: Y = P V, dL/dx, dL/dV likewise.

float64 within 1e-12, float32 within 2e-5 (relative to the largest entry).
Prints one line per case and exits 1 on any mismatch.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

if os.environ.get("NUMBA_ENABLE_CUDASIM") != "1":
    sys.exit("research/lane_sweep/check.py runs in the simulator: NUMBA_ENABLE_CUDASIM=1 before numba is imported")
# the simulator's threads wait for the GIL at every barrier: 0.1 ms instead of Python's 5 ms switch interval
# (as netgen's generated cuda modules do under the simulator: netgen/codegen/cuda/driver.py)
sys.setswitchinterval(1e-4)

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from kernels import make  # noqa: E402
from netgen.construct import build  # noqa: E402
from netgen.relax import reference  # noqa: E402
from netgen.relax.distributions import default_relaxation  # noqa: E402

KERNELS = {ft: make(ft) for ft in ("float32", "float64")}
THREADS = 32


def tables(net):
    comps = np.asarray(net.comparators, dtype=np.int64).reshape(-1, 2)
    return (comps[:, 0].astype(np.uint32), comps[:, 1].astype(np.uint32),
            np.asarray(net.layer_offsets, dtype=np.uint32), np.asarray(net.outputs, dtype=np.uint32))


def swap_probs(net, x, r):
    """p of every comparator (comparator order: layer by layer, as
    ``net.comparators``) and the soft values, by the reference's mixing."""
    v, ps = x, []
    for lay in range(net.depth):
        c = torch.from_numpy(net.layer(lay).astype("int64"))
        a, b = c[:, 0], c[:, 1]
        p = reference.swap_prob(v[..., a] - v[..., b], r)
        va, vb = v[..., a], v[..., b]
        v = v.index_copy(-1, a, torch.lerp(vb, va, p)).index_copy(-1, b, torch.lerp(va, vb, p))
        ps.append(p)
    return torch.cat(ps, -1), v[..., list(net.outputs)]


def run(kern, B, groups, G, n, ft, *args):
    if B == 0 or groups == 0:
        return
    isz = 4 if ft == "float32" else 8
    kern[(B, groups), THREADS, 0, G * n * isz](*args)


def case(net, B, lanes, G, ft, seed=0):
    r = default_relaxation(net)
    n, k, S = net.n, net.k, net.size
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(B, n, generator=gen, dtype=torch.float64, requires_grad=True)
    p, vals = swap_probs(net, x, r)
    ref_vals, P = reference.forward(net, x, r)
    assert torch.allclose(vals, ref_vals, rtol=0, atol=1e-12), "p extraction disagrees with the reference"
    npt = np.float32 if ft == "float32" else np.float64
    tol = 2e-5 if ft == "float32" else 1e-12
    wa, wb, offs, outs = tables(net)
    ph = p.detach().numpy().astype(npt)
    groups = -(-lanes // G)
    K = KERNELS[ft]
    errs = {}

    def err(got, want):
        want = want.detach().numpy()
        scale = max(1.0, float(np.abs(want).max(initial=0.0)))
        return float(np.abs(got.astype(np.float64) - want).max(initial=0.0)) / scale

    # back sweep: Y = W P
    W = torch.randn(B, lanes, k, generator=gen, dtype=torch.float64, requires_grad=True)
    Y = np.zeros((B, lanes, n), npt)
    D = np.zeros((B, lanes, S), npt)
    run(K["back_fwd"], B, groups, G, n, ft, W.detach().numpy().astype(npt), ph, wa, wb, offs, outs, G, Y, D, True)
    errs["W P"] = err(Y, W @ P)
    Gy = torch.randn(B, lanes, n, generator=gen, dtype=torch.float64)
    gpart = np.zeros((B, groups, S), npt)
    dW = np.zeros((B, lanes, k), npt)
    run(K["back_bwd"], B, groups, G, n, ft, Gy.numpy().astype(npt), ph, wa, wb, offs, outs, G, D, gpart, dW)
    dx_ref, dW_ref = torch.autograd.grad((Gy * (W @ P)).sum(), (x, W), retain_graph=True)
    gp = torch.from_numpy(gpart.sum(1).astype(np.float64))
    (dx,) = torch.autograd.grad(p, x, gp, retain_graph=True)
    errs["back dL/dx"] = err(dx.numpy(), dx_ref)
    errs["dL/dW"] = err(dW, dW_ref)
    # forward sweep: Y = P V
    V = torch.randn(B, n, lanes, generator=gen, dtype=torch.float64, requires_grad=True)
    Y = np.zeros((B, k, lanes), npt)
    D = np.zeros((B, lanes, S), npt)
    run(K["fwd_fwd"], B, groups, G, n, ft, V.detach().numpy().astype(npt), ph, wa, wb, offs, outs, G, Y, D, True)
    errs["P V"] = err(Y, P @ V)
    Gy = torch.randn(B, k, lanes, generator=gen, dtype=torch.float64)
    gpart = np.zeros((B, groups, S), npt)
    dV = np.zeros((B, n, lanes), npt)
    run(K["fwd_bwd"], B, groups, G, n, ft, Gy.numpy().astype(npt), ph, wa, wb, offs, outs, G, D, gpart, dV)
    dx_ref, dV_ref = torch.autograd.grad((Gy * (P @ V)).sum(), (x, V), retain_graph=True)
    gp = torch.from_numpy(gpart.sum(1).astype(np.float64))
    (dx,) = torch.autograd.grad(p, x, gp)
    errs["fwd dL/dx"] = err(dx.numpy(), dx_ref)
    errs["dL/dV"] = err(dV, dV_ref)
    return errs, tol


CASES = (
    # (kind, n, k, B, lanes, G): odd n, k = 1, k = n (a sorter), B = 1, B = 0, groups of 1, 2 and all lanes
    ("splitter", 11, 3, 2, 3, 2),
    ("splitter", 9, 1, 1, 1, 1),
    ("oddeven", 7, 7, 2, 7, 3),
    ("splitter", 13, 4, 0, 4, 4),
    ("bitonic", 8, 8, 1, 5, 5),
    ("oddeven", 70, 70, 1, 2, 1),  # layers of 35 comparators, wider than the 32 threads of a block
)


def main() -> int:
    bad = 0
    for kind, n, k, B, lanes, G in CASES:
        net = build(kind, n, k)
        for ft in ("float64", "float32"):
            errs, tol = case(net, B, lanes, G, ft)
            worst = max(errs.values())
            ok = worst <= tol
            bad += not ok
            print(f"{'ok ' if ok else 'BAD'} {kind} n={n} k={k} size={net.size} B={B} lanes={lanes} G={G} {ft}: "
                  + ", ".join(f"{name} {e:.1e}" for name, e in errs.items()) + f" (tolerance {tol:.0e})", flush=True)
    print(f"{len(CASES) * 2 - bad} passed, {bad} failed")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
