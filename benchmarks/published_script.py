"""Run diffsort's own training script (``experiments/main.py`` of
github.com/Felix-Petersen/diffsort: multi-digit ranking, BCE on the soft
permutation matrix) unchanged, once with the published ``diffsort`` package
and once with ``netgen.compat.diffsort`` in its place.

Nothing of theirs is copied into netgen: the script, ``models.py`` and
``utils.py`` are read from a checkout (``--repo``, e.g. the one the project's
``fetch`` tool makes) into a temporary folder. Two stand-ins, both outside
their files:

* ``datasets.dataset.MultiDigitSplits``: multi-digit MNIST needs a download;
  here the same task is built from sklearn's 8x8 digits (upsampled to
  28x28, 4 digits side by side, ``num_compare`` numbers per sample);
* ``diffsort``: ``sys.modules["diffsort"]`` is ``netgen.compat.diffsort`` for
  ``--impl netgen`` (the only difference between the two runs).

Time per step: the time between consecutive training batches (their
``utils.load_n`` wrapped), evaluation steps left out, median. Final metric:
their "final test" accuracies (acc_em5: the 5 numbers ranked exactly).

    python benchmarks/published_script.py --repo DIR --impl published
    python benchmarks/published_script.py --repo DIR --impl netgen
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repo", required=True, help="a checkout (or bare git dir) of Felix-Petersen/diffsort")
    ap.add_argument("--impl", choices=["published", "netgen"], required=True)
    ap.add_argument("--args", default="-n 5 -b 20 -i 300 -e 100 --device cpu -s 10 -x cauchy",
                    help="arguments of their main.py")
    a = ap.parse_args()

    import torch

    torch.set_num_threads(1)
    work = tempfile.mkdtemp(prefix="diffsort-exp-")
    for f in ("main.py", "models.py", "utils.py"):
        if os.path.isdir(os.path.join(a.repo, "experiments")):
            src = open(os.path.join(a.repo, "experiments", f)).read()
        else:  # a bare mirror
            src = subprocess.run(["git", "--git-dir", a.repo, "show", f"HEAD:experiments/{f}"], check=True,
                                 capture_output=True, text=True).stdout
        with open(os.path.join(work, f), "w") as fh:
            fh.write(src)
    sys.path.insert(0, work)
    pkg, mod = digits_splits_module()
    sys.modules["datasets"], sys.modules["datasets.dataset"] = pkg, mod
    if a.impl == "netgen":
        import netgen.compat.diffsort

        sys.modules["diffsort"] = netgen.compat.diffsort
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
