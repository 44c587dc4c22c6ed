"""A generated netgen layer under torch DistributedDataParallel (gloo, 2 CPU
processes): the all-reduced gradients equal the single-process full-batch
gradients at every step, and the replicas stay identical."""

from __future__ import annotations

import os

import pytest
import torch
import torch.distributed as dist

pytestmark = pytest.mark.timeout(180)

WORLD = 2
STEPS = 3
SETS_PER_RANK = 4
N, K, FEATURES = 8, 3, 6


class Ranker(torch.nn.Module):
    """Scores each element with a small MLP, then the generated layer."""

    def __init__(self, layer: torch.nn.Module):
        super().__init__()
        self.score = torch.nn.Sequential(torch.nn.Linear(FEATURES, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
        self.layer = layer

    def forward(self, feats):
        values, P = self.layer(self.score(feats).squeeze(-1))
        return values, P


def make_model(path: str) -> Ranker:
    import netgen

    torch.manual_seed(0)
    return Ranker(netgen.load(path).Layer()).double()


def data():
    """Global batch: (WORLD * SETS_PER_RANK, N, FEATURES) features and the
    top-K targets Q (sets, K, N) of a hidden linear score."""
    g = torch.Generator().manual_seed(1)
    feats = torch.randn(WORLD * SETS_PER_RANK * STEPS, N, FEATURES, generator=g, dtype=torch.float64)
    truth = feats @ torch.linspace(-1, 1, FEATURES, dtype=torch.float64)
    order = torch.argsort(truth, -1, descending=True)[..., :K]
    Q = torch.nn.functional.one_hot(order, N).to(torch.float64)
    return feats.view(STEPS, WORLD * SETS_PER_RANK, N, FEATURES), Q.view(STEPS, WORLD * SETS_PER_RANK, K, N)


def loss_fn(values, P, Q):
    return torch.nn.functional.binary_cross_entropy(P.clamp(1e-9, 1 - 1e-9), Q) + 1e-2 * values.square().mean()


def train(model, batches, Qs, rank=None):
    """SGD steps; returns the gradients seen at each step (after any
    all-reduce) and the final parameters."""
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    grads = []
    for feats, Q in zip(batches, Qs):
        if rank is not None:
            sl = slice(rank * SETS_PER_RANK, (rank + 1) * SETS_PER_RANK)
            feats, Q = feats[sl], Q[sl]
        opt.zero_grad()
        values, P = model(feats)
        loss_fn(values, P, Q).backward()
        grads.append([p.grad.detach().clone() for p in model.parameters()])
        opt.step()
    return grads, [p.detach().clone() for p in model.parameters()]


def _worker(rank: int, store: str, path: str, out_dir: str) -> None:
    torch.set_num_threads(1)
    # rendezvous through a file, not a TCP port picked in advance: another
    # process (a parallel test worker) could take that port before rank 0
    # binds it, and gloo then aborts the worker
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=WORLD)
    try:
        model = torch.nn.parallel.DistributedDataParallel(make_model(path))
        batches, Qs = data()
        grads, params = train(model, batches, Qs, rank)
        torch.save({"grads": grads, "params": params}, os.path.join(out_dir, f"rank{rank}.pt"))
    finally:
        dist.destroy_process_group()


@pytest.fixture(scope="module")
def layer_path(tmp_path_factory):
    from netgen.codegen import write_module
    from netgen.compiler import build_network, compile_network
    from netgen.relax.distributions import default_relaxation

    net = compile_network(build_network(N, K, "splitter"), verify=False).network
    return str(write_module("torch", net, default_relaxation(net), out_dir=tmp_path_factory.mktemp("gen")))


@pytest.mark.skipif(not (dist.is_available() and dist.is_gloo_available()), reason="torch without gloo")
def test_ddp_gradients_equal_single_process(layer_path, tmp_path):
    import torch.multiprocessing as mp

    mp.spawn(_worker, args=(str(tmp_path / "rendezvous"), layer_path, str(tmp_path)), nprocs=WORLD, join=True)
    ranks = [torch.load(tmp_path / f"rank{r}.pt") for r in range(WORLD)]

    batches, Qs = data()
    ref_grads, ref_params = train(make_model(layer_path), batches, Qs)  # full batch, one process

    for step in range(STEPS):
        for r in ranks:
            for g, ref in zip(r["grads"][step], ref_grads[step]):
                torch.testing.assert_close(g, ref, rtol=1e-10, atol=1e-12)
    for r in ranks:
        for p, ref in zip(r["params"], ref_params):
            torch.testing.assert_close(p, ref, rtol=1e-10, atol=1e-12)
    # the test can fail: a single shard's gradient differs from the full batch
    shard_grads, _ = train(make_model(layer_path), batches, Qs, rank=0)
    assert any(not torch.allclose(g, ref) for g, ref in zip(shard_grads[0], ref_grads[0]))
