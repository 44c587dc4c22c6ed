"""netgen bench runs the network `netgen build` would choose (the
portfolio), names it, has a sorting grid, and skips a configuration whose
memory estimate exceeds the budget instead of attempting it; `netgen table`
in parallel gives the serial result."""

import json

import numpy as np
import pytest
from click.testing import CliRunner

from netgen.bench import grid as bgrid
from netgen.bench.networks import dense_bytes, describe, plan_nnz, portfolio_network
from netgen.bench.runner import run_one
from netgen.cli import main
from netgen.compiler import build


def nnz_by_matrix(net):
    """(comparator, rank) pairs by sweeping a boolean k x n support matrix."""
    R = np.zeros((net.k, net.n), dtype=bool)
    R[np.arange(net.k), list(net.outputs)] = True
    total = 0
    for a, b in net.comparators[::-1]:
        col = R[:, a] | R[:, b]
        R[:, a] = R[:, b] = col
        total += int(col.sum())
    return total


@pytest.mark.parametrize("n,k", [(16, 5), (24, 24), (64, 3), (100, 7)])
def test_plan_nnz(n, k):
    net = build(n, k, verify=False).network
    assert plan_nnz(net) == nnz_by_matrix(net)


def test_portfolio_network_is_netgen_builds_choice(tmp_path):
    path, net = portfolio_network(24, 24, tmp_path)
    ref = build(24, 24).network
    # the bench skips the proof (verify=False), so only the proof's record differs
    assert ref.construction["verified"].startswith("proved")
    ref = ref.with_(construction={key: v for key, v in ref.construction.items() if key != "verified"})
    assert net == ref
    from netgen.io import load

    assert load(path) == ref


def bench(*args):
    return CliRunner().invoke(main, ["bench", *args])


def test_bench_names_and_runs_the_portfolio_network(tmp_path):
    out = tmp_path / "b"
    r = bench("--methods", "netgen-torch", "--n", "24", "--k", "3", "--batch", "2", "--repeats", "1", "--warmup", "0",
              "--no-plots", "--cache-dir", str(tmp_path / "cache"), "-o", str(out))
    assert r.exit_code == 0, r.output
    want = describe(build(24, 3).network)
    assert f"# n=24 k=3: netgen runs the network `netgen build --n 24 --k 3` chooses: {want}" in r.stdout
    doc = json.loads((out / "results.json").read_text())
    rows = doc["results"]  # netgen-torch, and netgen-torch@default-threads on the same network
    assert [row["method"] for row in rows] == ["netgen-torch", "netgen-torch@default-threads"]
    assert all(row["status"] == "ok" and row["network"] == want for row in rows), rows
    assert doc["networks"] == {"n=24 k=3": want}


def test_sorting_grid(tmp_path):
    r = bench("--sorting", "--methods", "softsort,netgen-torch", "--n", "8,12", "--batch", "2", "--repeats", "1",
              "--warmup", "0", "--no-plots", "--no-default-threads", "--cache-dir", str(tmp_path / "cache"), "-o", str(tmp_path / "s"))
    assert r.exit_code == 0, r.output
    rows = json.loads((tmp_path / "s" / "results.json").read_text())["results"]
    assert sorted((x["method"], x["n"], x["k"]) for x in rows) == sorted(
        (m, n, n) for m in ("softsort", "netgen-torch") for n in (8, 12))
    assert all(x["status"] == "ok" for x in rows), rows
    assert bench("--sorting", "--k", "3").exit_code == 2
    assert bench("--sorting", "--quick").exit_code == 2
    assert bgrid.SORTING.pairs() == [(32, 32), (256, 256), (1024, 1024)]


def test_memory_guard_skips_with_the_estimate():
    g = bgrid.Grid(batch=(32,), n=(64,), k=(5,), timeout_s=120.0, repeats=1, warmup=0)
    row = run_one("softsort", 32, 64, 5, g, memory_budget=1)
    assert row["status"] == "skipped" and row["reason"].startswith("memory: B=32 needs ~"), row
    assert row["mem_estimate_mb"] > 0
    # with room it runs, and the estimate is recorded
    ok = run_one("softsort", 32, 64, 5, g, memory_budget=2**34)
    assert ok["status"] == "ok" and ok["mem_estimate_mb"] > 0


def test_dense_baselines_are_estimated_before_construction():
    # diffsort at n = k = 1024, B = 64: ~55 layers of 1024 x 1024 float32 per row
    est = dense_bytes("diffsort", 64, 1024, 1024)
    assert 10 * 2**30 < est < 100 * 2**30
    assert dense_bytes("softsort", 64, 1024, 1024) is None
    g = bgrid.Grid(batch=(64,), n=(1024,), k=(1024,), timeout_s=60.0, repeats=1, warmup=0, limits={})
    row = run_one("diffsort", 64, 1024, 1024, g, memory_budget=8 * 2**30)
    assert row["status"] == "skipped" and "dense diffsort" in row["reason"] and "GiB" in row["reason"], row


def test_table_in_parallel_equals_serial():
    from netgen.cli.table import run_table

    assert run_table((16,), True, max_workers=2) == run_table((16,), True, max_workers=1)
    assert run_table((1024,), False, max_workers=2) == run_table((1024,), False, max_workers=1)


def _table_stderr(tty: bool) -> str:
    import os
    import subprocess
    import sys
    from pathlib import Path

    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    cmd = [sys.executable, "-m", "netgen.cli", "table", "--n", "16", "--no-clean", "--jobs", "1"]
    if not tty:
        return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300).stderr
    import pty

    import fcntl
    import struct
    import termios

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))  # a 100-column terminal
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=slave, env=env)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 4096)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    proc.wait(timeout=300)
    os.close(master)
    return b"".join(chunks).decode(errors="replace")


def test_progress_bar_on_a_terminal_only():
    assert "netgen table" not in _table_stderr(tty=False)  # quiet in a pipe
    assert "netgen table" in _table_stderr(tty=True)  # a tqdm bar on a terminal
