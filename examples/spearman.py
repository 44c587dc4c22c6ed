"""Learning to rank with a Spearman loss (torchsort's README use) on
scikit-learn's bundled diabetes data set (442 patients, 10 features,
disease progression after one year).

A linear model scores each patient; the loss is 1 - Spearman's rho between
the soft ranks of the scores in a minibatch and the ranks of the targets.
The same model, seed, data split, batches and optimiser are trained with
netgen's ``soft_rank`` and, when installed, with torchsort's ``soft_rank``
(l2), and the test set's Spearman correlation (scipy, exact ranks of the
whole test set) is printed for each.

    python examples/spearman.py                       # netgen and torchsort
    python examples/spearman.py --ops netgen --target reference
    python examples/spearman.py --seeds 0 1 2 3 4                    # five splits; the means
    PYTHONPATH=/tmp/netgen-baselines/site python examples/spearman.py   # torchsort from tools/build_baselines.sh

``--target``: the operators' backend (``auto``: the fastest registered
target with lane kernels, ``torch`` on a CPU today; ``reference`` is the
reference executor). Exact numbers move with floating-point details; the two methods
are compared side by side in one run.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass

import numpy as np
import torch


@dataclass
class Result:
    method: str
    test_spearman: float
    train_loss: float
    seconds: float


def data(seed: int = 0):
    """Standardised features and targets, a 75 / 25 train / test split."""
    from sklearn.datasets import load_diabetes

    X, y = load_diabetes(return_X_y=True)
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(y))
    cut = int(0.75 * len(y))
    tr, te = order[:cut], order[cut:]
    mu, sd = X[tr].mean(0), X[tr].std(0)
    X = (X - mu) / sd
    y = (y - y[tr].mean()) / y[tr].std()
    t = lambda a: torch.tensor(a, dtype=torch.float32)  # noqa: E731
    return t(X[tr]), t(y[tr]), t(X[te]), t(y[te])


def netgen_rank(target: str, steepness):
    from netgen.ops import soft_rank

    return lambda s: soft_rank(s, target=target, steepness=steepness)


def torchsort_rank(strength: float):
    import torchsort

    return lambda s: torchsort.soft_rank(s, regularization="l2", regularization_strength=strength)


def spearman_loss(rank, scores: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """1 - rho of soft ranks of ``scores`` (B,) and exact ranks of ``y``."""
    r = rank(scores.unsqueeze(0))[0]
    t = torch.argsort(torch.argsort(y)).to(r.dtype) + 1  # targets have no ties here: exact ranks
    r, t = r - r.mean(), t - t.mean()
    return 1 - (r * t).sum() / (r.norm() * t.norm())


def train(name: str, rank, steps: int, batch: int, lr: float, seed: int) -> Result:
    from scipy.stats import spearmanr

    Xtr, ytr, Xte, yte = data(seed)
    torch.manual_seed(seed)
    model = torch.nn.Linear(Xtr.shape[1], 1)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    g = torch.Generator().manual_seed(seed)
    t0 = time.perf_counter()
    losses = []
    for _ in range(steps):
        idx = torch.randperm(len(ytr), generator=g)[:batch]
        loss = spearman_loss(rank, model(Xtr[idx])[:, 0], ytr[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    seconds = time.perf_counter() - t0
    with torch.no_grad():
        rho = spearmanr(model(Xte)[:, 0].numpy(), yte.numpy()).statistic
    return Result(name, float(rho), float(np.mean(losses[-20:])), seconds)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ops", choices=["both", "netgen", "torchsort"], default="both")
    ap.add_argument("--target", default="auto", help="netgen's backend (target=): auto, reference, ...")
    ap.add_argument("--steepness", type=float, default=None, help="netgen's steepness (default: 2 x depth)")
    ap.add_argument("--strength", type=float, default=1.0, help="torchsort's regularization_strength")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0],
                    help="one run per seed (data split, initialisation, batches); the mean is printed too")
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    runs = []
    if a.ops in ("both", "netgen"):
        runs.append((f"netgen soft_rank (target={a.target})", netgen_rank(a.target, a.steepness)))
    if a.ops in ("both", "torchsort"):
        try:
            runs.append(("torchsort soft_rank (l2)", torchsort_rank(a.strength)))
        except ImportError:
            print("# torchsort is not installed: build it with tools/build_baselines.sh (skipped)")
    print(f"# diabetes (442 x 10), linear model, Spearman loss on minibatches of {a.batch}, {a.steps} Adam steps, "
          f"lr {a.lr}")
    print("| seed | method | test Spearman | train loss (last 20 steps) | training s |")
    print("|---|---|---|---|---|")
    results = []
    for seed in a.seeds:
        for name, rank in runs:
            r = train(name, rank, a.steps, a.batch, a.lr, seed)
            results.append(r)
            print(f"| {seed} | {r.method} | {r.test_spearman:.4f} | {r.train_loss:.4f} | {r.seconds:.1f} |", flush=True)
    means = {name: float(np.mean([r.test_spearman for r in results if r.method == name])) for name, _ in runs}
    if len(a.seeds) > 1:
        for name, m in means.items():
            print(f"mean test Spearman over {len(a.seeds)} seeds, {name}: {m:.4f}")
    if len(runs) == 2:
        first, second = (n for n, _ in runs)
        diffs = [x.test_spearman - y.test_spearman for x, y in zip(results[0::2], results[1::2])]
        print(f"difference netgen - torchsort: mean {np.mean(diffs):+.4f}, per seed "
              + ", ".join(f"{d:+.4f}" for d in diffs))
    return results


if __name__ == "__main__":
    main()
