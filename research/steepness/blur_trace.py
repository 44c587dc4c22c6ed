"""The blur along training at a fixed steepness, on the sorting example
(examples/digits_sorting.py, n = 5): where ``steepness="auto"`` would
calibrate, and whether the blur the loss sees depends on s.

    python research/steepness/blur_trace.py --steepness 10 40 100 --seed 0

For each s it trains the example's CNN with the example's loss and prints,
at a few steps, the scores' spread (mean row standard deviation), the
steepness auto would estimate at blur 0.75 from that batch, and the blur
of P at s, at the default s (2 x depth) and at s = 40 (from the reference
executor in float64), then the example's held-out accuracy. Findings in
docs/relaxations.md section 8: after the first steps the blur follows the
same path whatever s is (the model scales its scores to s), so a blur
target cannot tell these steepness values apart.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples"))

import digits_sorting as ds  # noqa: E402

from netgen.relax import reference  # noqa: E402
from netgen.relax.blur import blur  # noqa: E402
from netgen.relax.distributions import default_relaxation  # noqa: E402
from netgen.relax.steepness import estimate_steepness  # noqa: E402

STEPS = (1, 5, 10, 25, 50, 100, 200, 400, 800, 1500)


def blur_at(net, r, x, s: float) -> float:
    _, P = reference.forward(net, x.double(), r, steepness=torch.tensor(float(s), dtype=torch.float64))
    return float(blur(P, x.argsort(-1, descending=True)))


def trace(s: float, seed: int, n: int, out_dir: str) -> None:
    train_pool, test_pool = ds.split_digits(seed)
    layer, _, net = ds.netgen_layer(n, "oddeven", out_dir, steepness=s)
    r = default_relaxation(net)
    default = float(r.steepness)
    torch.manual_seed(seed)
    model = ds.CNN()
    opt = torch.optim.Adam(model.parameters(), lr=10 ** -2.5)
    gen = torch.Generator().manual_seed(seed)
    print(f"s = {s:g} (default {default:g}), seed {seed}")
    print("| step | spread | auto's s at blur 0.75 | blur at s | blur at default | blur at 40 |")
    print("|---|---|---|---|---|---|")
    for step in range(1, max(STEPS) + 1):
        imgs, values = train_pool.sample(ds.sets_per_step(n, None), n, gen)
        x = model(imgs)
        if step in STEPS:
            xd = x.detach()
            est = estimate_steepness(net, r, xd, 0.75).steepness
            print(f"| {step} | {float(xd.std(-1).mean()):.3g} | {est:.3g} | {blur_at(net, r, xd, s):.3f} | "
                  f"{blur_at(net, r, xd, default):.3f} | {blur_at(net, r, xd, 40):.3f} |", flush=True)
        _, P = layer(x)
        loss = ds.sorting_loss(P, ds.permutation_targets(values))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    exact, per_element = ds.evaluate(model, test_pool, n, 500, seed)
    print(f"held-out exact match {100 * exact:.1f}%, per element {100 * per_element:.1f}%\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steepness", type=float, nargs="+", default=[10.0, 40.0, 100.0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--n", type=int, default=5)
    ap.add_argument("--out-dir", default="generated")
    a = ap.parse_args()
    torch.set_num_threads(1)
    for s in a.steepness:
        trace(s, a.seed, a.n, a.out_dir)


if __name__ == "__main__":
    main()
