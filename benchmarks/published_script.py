"""Run the published packages' own training scripts unchanged, once with
the published package and once with ``netgen.compat.install()`` in its place
(the only difference between the two runs):

* ``--package diffsort``: diffsort's ``experiments/main.py``
  (github.com/Felix-Petersen/diffsort: multi-digit ranking, BCE on the soft
  permutation matrix);
* ``--package difftopk``: difftopk's ``experiments/train_imagenet.py``
  (github.com/Felix-Petersen/difftopk: a linear classifier on fixed
  embeddings trained with ``TopKCrossEntropyLoss``).

Nothing of theirs is copied into netgen: the scripts (and diffsort's
``models.py`` / ``utils.py``) are read from a checkout or bare mirror
(``--repo``, e.g. the one the project's ``fetch`` tool makes) into a
temporary folder. Stand-ins, all outside their files:

* diffsort's ``datasets.dataset.MultiDigitSplits``: multi-digit MNIST needs a
  download; here the same task is built from sklearn's 8x8 digits
  (upsampled to 28x28, 4 digits side by side, ``num_compare`` numbers per
  sample);
* difftopk's embedding file (``-d``; ImageNet embeddings need a download):
  100 Gaussian classes in 64 dimensions (seeded; 60,000 train points of
  which their script keeps 50,000 for validation, 10,000 test points);
* the published difftopk's sparse executor needs ``torch_sparse`` (not
  installed here): its ``spmm`` is :class:`netgen.bench.difftopk_sparse.SpmmShim`.

Time per step: the time between consecutive training batches (diffsort:
their ``utils.load_n`` wrapped; difftopk: consecutive calls of the loss,
which also records each step's loss), evaluation steps left out, median.
Final metric: diffsort's "final test" accuracies (acc_em5: the 5 numbers
ranked exactly); difftopk's last "Test: Top-1 | Top-5" line.
``--losses FILE`` writes difftopk's per-step losses (JSON) to compare two
runs step by step (``--compare A B``); ``--rounding-control`` runs the same
with every embedding times (1 + 2^-23): how far float32 rounding alone moves
a run (difftopk's top-m preselection is discrete, so rounding can change
which classes enter the loss and runs part).

    python benchmarks/published_script.py --repo DIR --impl published
    python benchmarks/published_script.py --repo DIR --impl netgen
    python benchmarks/published_script.py --package difftopk --repo DIR --impl netgen --losses n.json \
        --args "--method splitter_selection --p_k .2 .2 .2 .2 .2 --m 16 --distribution logistic_phi \
                --inverse_temperature 1 --art_lambda .5 --nloglr 2.5 --n_epochs 15 --eval_freq 100"
    python benchmarks/published_script.py --compare p.json n.json
"""

from __future__ import annotations

import argparse
import io
import json
import os
import runpy
import statistics
import subprocess
import sys
import tempfile
import time
import types
import contextlib


def digits_splits_module():
    import numpy as np
    import torch
    from sklearn.datasets import load_digits
    from torch.utils.data import DataLoader, Dataset

    d = load_digits()
    imgs = torch.nn.functional.interpolate(torch.tensor(d.images, dtype=torch.float32).unsqueeze(1) / 16.0,
                                           size=(28, 28), mode="bilinear", align_corners=False)
    labels = torch.tensor(d.target)
    perm = torch.randperm(len(labels), generator=torch.Generator().manual_seed(0))
    parts = {"train": perm[:1300], "valid": perm[1300:1550], "test": perm[1550:]}

    class Digits(Dataset):
        """num_compare 4-digit numbers per item: images (num_compare, 1, 28, 112), values (num_compare,)."""

        def __init__(self, idx, num_compare, seed, length):
            self.idx, self.m, self.length = idx, num_compare, length
            self.g = np.random.default_rng(seed)

        def __len__(self):
            return self.length

        def __getitem__(self, i):
            pick = self.idx[torch.from_numpy(self.g.integers(0, len(self.idx), (self.m, 4)))]
            image = torch.cat([imgs[pick[:, j]] for j in range(4)], dim=-1)
            value = sum(labels[pick[:, j]].float() * 10.0 ** (3 - j) for j in range(4))
            return image, value

    class MultiDigitSplits:
        def __init__(self, dataset, num_digits=4, num_compare=None, seed=0, deterministic_data_loader=True):
            self.sets = {k: Digits(v, num_compare, seed + i, 20000 if k == "train" else 400)
                         for i, (k, v) in enumerate(parts.items())}

        def get_train_loader(self, batch_size, **kw):
            return DataLoader(self.sets["train"], batch_size=batch_size, shuffle=True, **kw)

        def get_valid_loader(self, batch_size, **kw):
            return DataLoader(self.sets["valid"], batch_size=batch_size, shuffle=False, **kw)

        def get_test_loader(self, batch_size, **kw):
            return DataLoader(self.sets["test"], batch_size=batch_size, shuffle=False, **kw)

    pkg = types.ModuleType("datasets")
    pkg.__path__ = []
    mod = types.ModuleType("datasets.dataset")
    mod.MultiDigitSplits = MultiDigitSplits
    pkg.dataset = mod
    return pkg, mod


def embeddings_file(path: str, rounding: bool = False) -> None:
    """difftopk's embedding file format: 100 Gaussian classes in 64
    dimensions, fixed seeds; ``rounding``: every embedding times
    (1 + 2^-23), a change at float32's rounding level (the control run)."""
    import torch

    g = torch.Generator().manual_seed(0)
    means = torch.randn(100, 64, generator=g)

    def points(n, seed):
        gg = torch.Generator().manual_seed(seed)
        y = torch.randint(0, 100, (n,), generator=gg)
        return means[y] + 1.5 * torch.randn(n, 64, generator=gg), y

    (xtr, ytr), (xte, yte) = points(60_000, 1), points(10_000, 2)
    if rounding:
        xtr, xte = xtr * (1 + 2.0**-23), xte * (1 + 2.0**-23)
    torch.save({"train_embeddings": xtr, "train_labels": ytr, "test_embeddings": xte, "test_labels": yte}, path)


def their_file(repo: str, path: str) -> str:
    if os.path.isdir(os.path.join(repo, os.path.dirname(path))):
        return open(os.path.join(repo, path)).read()
    return subprocess.run(["git", "--git-dir", repo, "show", f"HEAD:{path}"], check=True,  # a bare mirror
                          capture_output=True, text=True).stdout


def swap(impl: str) -> None:
    if impl == "netgen":
        import netgen.compat

        netgen.compat.install()


def run_difftopk(a) -> None:
    import torch

    work = tempfile.mkdtemp(prefix="difftopk-exp-")
    with open(os.path.join(work, "train_imagenet.py"), "w") as fh:
        fh.write(their_file(a.repo, "experiments/train_imagenet.py"))
    data = os.path.join(work, "embeddings.p")
    embeddings_file(data, a.rounding_control)
    swap(a.impl)
    with contextlib.redirect_stdout(io.StringIO()):  # the published difftopk prints at import
        import difftopk
    if a.impl == "published" and not difftopk.functional.SPARSE_INSTALLED:
        # torch_sparse is not installed here: its spmm by netgen's stand-in (scatter-add, autograd)
        from netgen.bench.difftopk_sparse import SpmmShim

        difftopk.functional.torch_sparse, difftopk.functional.SPARSE_INSTALLED = SpmmShim, True
    losses, stamps = [], []
    base = difftopk.TopKCrossEntropyLoss

    class Recorded(base):  # outside their file: records each step's loss and time
        def forward(self, outputs, labels):
            stamps.append(time.perf_counter())
            loss = base.forward(self, outputs, labels)
            losses.append(loss.item())
            return loss

    difftopk.TopKCrossEntropyLoss = Recorded
    sys.argv = ["train_imagenet.py", "-d", data, *a.args.split()]
    out = io.StringIO()
    t0 = time.perf_counter()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        runpy.run_path(os.path.join(work, "train_imagenet.py"), run_name="__main__")
    total = time.perf_counter() - t0
    evals = [l for l in out.getvalue().splitlines() if l.startswith("Test:")]
    freq = int(a.args.split("--eval_freq")[1].split()[0]) if "--eval_freq" in a.args else 100
    per_epoch = 10_000 // 500  # 60,000 points less their 50,000 for validation, batches of 500

    def evaluated_after(step):  # their loop evaluates at it == 0, every eval_freq-th and the last
        it = step % per_epoch
        return it == 0 or (it + 1) % freq == 0 or it == per_epoch - 1

    steps = [b - c for i, (b, c) in enumerate(zip(stamps[1:], stamps[:-1])) if not evaluated_after(i)]
    if a.losses:
        with open(a.losses, "w") as fh:
            json.dump(losses, fh)
    print(json.dumps({"impl": a.impl + (" (rounding control)" if a.rounding_control else ""),
                      "loss_class": base.__module__, "steps": len(losses),
                      "median_step_ms": 1e3 * statistics.median(steps), "total_s": total,
                      "final": evals[-1] if evals else None, "torch_threads": torch.get_num_threads()}))


def compare(a_path: str, b_path: str) -> None:
    la, lb = json.load(open(a_path)), json.load(open(b_path))
    diffs = [abs(x - y) for x, y in zip(la, lb)]
    print(json.dumps({"steps": min(len(la), len(lb)), "max_abs_loss_diff": max(diffs),
                      "first_loss": [la[0], lb[0]], "last_loss": [la[-1], lb[-1]]}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--package", choices=["diffsort", "difftopk"], default="diffsort")
    ap.add_argument("--repo", help="a checkout (or bare git dir) of Felix-Petersen/diffsort or difftopk")
    ap.add_argument("--impl", choices=["published", "netgen"])
    ap.add_argument("--args", default=None, help="arguments of their script")
    ap.add_argument("--losses", help="difftopk: write the per-step losses to this JSON file")
    ap.add_argument("--rounding-control", action="store_true",
                    help="difftopk: embeddings times (1 + 2^-23), to see how far rounding alone moves a run")
    ap.add_argument("--compare", nargs=2, metavar=("A", "B"), help="compare two --losses files")
    a = ap.parse_args()
    if a.compare:
        return compare(*a.compare)
    if not (a.repo and a.impl):
        ap.error("--repo and --impl are needed")

    import torch

    torch.set_num_threads(1)
    if a.package == "difftopk":
        a.args = a.args or ("--method splitter_selection --p_k .2 .2 .2 .2 .2 --m 16 --distribution logistic_phi "
                            "--inverse_temperature 1 --art_lambda .5 --nloglr 2.5 --n_epochs 15 --eval_freq 100")
        return run_difftopk(a)
    a.args = a.args or "-n 5 -b 20 -i 300 -e 100 --device cpu -s 10 -x cauchy"
    work = tempfile.mkdtemp(prefix="diffsort-exp-")
    for f in ("main.py", "models.py", "utils.py"):
        with open(os.path.join(work, f), "w") as fh:
            fh.write(their_file(a.repo, f"experiments/{f}"))
    sys.path.insert(0, work)
    pkg, mod = digits_splits_module()
    sys.modules["datasets"], sys.modules["datasets.dataset"] = pkg, mod
    swap(a.impl)
    import utils  # theirs: wrap load_n to time the steps

    stamps = []
    inner = utils.load_n

    def timed(loader, n):
        for item in inner(loader, n):
            stamps.append(time.perf_counter())
            yield item

    utils.load_n = timed
    sys.argv = ["main.py", *a.args.split()]
    out = io.StringIO()
    t0 = time.perf_counter()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        runpy.run_path(os.path.join(work, "main.py"), run_name="__main__")
    total = time.perf_counter() - t0
    text = out.getvalue()
    eval_freq = int(a.args.split("-e")[1].split()[0]) if "-e" in a.args else 1000
    steps = [b - c for i, (b, c) in enumerate(zip(stamps[1:], stamps[:-1]), 1) if i % eval_freq != 0]
    final = [l for l in text.splitlines() if l.startswith("final test")]
    print(json.dumps({"impl": a.impl, "sorter": sys.modules["diffsort"].DiffSortNet.__module__,
                      "module": sys.modules["diffsort"].__name__, "steps": len(stamps),
                      "median_step_ms": 1e3 * statistics.median(steps), "first_step_s": stamps[0] - t0 if stamps else None,
                      "total_s": total, "final": final[-1] if final else None,
                      "valid": [l for l in text.splitlines() if " valid " in l]}))


if __name__ == "__main__":
    main()
