"""``netgen bench`` end to end on a tiny grid: files written, timeouts and
unavailable methods recorded, bad arguments exit 2."""

import csv
import json
import sys

import pytest
from click.testing import CliRunner

from netgen.bench import grid as bgrid
from netgen.bench import methods as bmethods
from netgen.bench.runner import run_one
from netgen.cli import main


def invoke(*args):
    return CliRunner().invoke(main, ["bench", *args])


def test_tiny_grid_writes_json_csv_and_plots(tmp_path):
    out = tmp_path / "b"
    r = invoke("--methods", "lapsum_topk,softsort,smooth_topk", "--reference", "softsort",
               "--batch", "4", "--n", "8,16", "--k", "2", "--repeats", "2", "--warmup", "0", "-o", str(out))
    assert r.exit_code == 0, r.output
    doc = json.loads((out / "results.json").read_text())
    rows = doc["results"]
    assert {(x["method"], x["n"]) for x in rows} == {(m, n) for m in ("lapsum_topk", "softsort", "smooth_topk") for n in (8, 16)}
    assert all(x["status"] == "ok" for x in rows), rows
    for x in rows:
        assert x["t_fwd_ms"] > 0 and x["t_fwdbwd_ms"] > 0 and x["saved_mb"] > 0
        if x["method"] == "softsort":
            assert x["ratio_fwdbwd"] == pytest.approx(1.0)
            assert 0 <= x["err_P"] <= 1 and x["err_values"] >= 0
        else:
            assert x["ratio_fwdbwd"] == pytest.approx(x["t_fwdbwd_ms"] / next(
                y["t_fwdbwd_ms"] for y in rows if y["method"] == "softsort" and y["n"] == x["n"]))
    assert next(x for x in rows if x["method"] == "smooth_topk")["err_P"] is None
    with open(out / "results.csv") as f:
        csv_rows = list(csv.DictReader(f))
    assert len(csv_rows) == len(rows) and csv_rows[0]["status"] == "ok"
    for png in ("time_fwd.png", "time_fwdbwd.png", "memory.png", "saved.png", "error.png"):
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # stdout carries the result table
    assert "softsort" in r.stdout and "reference: softsort" in r.stdout


def test_forced_timeout_is_recorded(tmp_path):
    out = tmp_path / "t"
    r = invoke("--methods", "softsort", "--reference", "softsort", "--batch", "2", "--n", "8", "--k", "1",
               "--timeout", "0.05", "--subprocess", "--no-plots", "-o", str(out))
    assert r.exit_code == 0, r.output
    (row,) = json.loads((out / "results.json").read_text())["results"]
    assert row["status"] == "timeout" and "0.05" in row["reason"]
    # forked worker: Sinkhorn sort cannot finish warm-up and timing in 10 ms
    g = bgrid.Grid(batch=(4,), n=(64,), k=(5,), timeout_s=0.01)
    assert run_one("sinkhorn_sort", 4, 64, 5, g, isolation="fork")["status"] == "timeout"


def test_unavailable_method_is_skipped_with_reason(monkeypatch):
    g = bgrid.Grid(batch=(2,), n=(8,), k=(2,), timeout_s=60, repeats=1, warmup=0)
    monkeypatch.setitem(sys.modules, "netgen.codegen", None)  # as if codegen were not written yet
    row = run_one("netgen-torch", 2, 8, 2, g, isolation="fork")
    assert row["status"] == "skipped" and "cannot import netgen.codegen" in row["reason"]


def test_grid_limits_are_recorded():
    cfgs = bgrid.DEFAULT.configs(["difftopk", "lapsum"])
    big = [c for c in cfgs if c[0] == "difftopk" and c[2] > 256]
    assert big and all(c[4] and "n <= 256" in c[4] for c in big)
    assert all(c[4] is None for c in cfgs if c[0] == "lapsum")
    assert "netgen-numba" in bmethods.all_names() and "lapsum" in bmethods.all_names()


@pytest.mark.parametrize("args, msg", [
    (["--methods", "nope"], "unknown method"),
    (["--methods", "softsort", "--reference", "lapsum"], "--reference"),
    (["--n", "abc"], "--n must be"),
    (["--k", "0"], "--k must"),
    (["--timeout", "-1"], "--timeout"),
    (["--temperature", "softsort"], "METHOD=VALUE"),
    (["--methods", "softsort", "--reference", "softsort", "--n", "2", "--k", "3"], "grid is empty"),
])
def test_bad_arguments_exit_2(tmp_path, args, msg):
    r = invoke(*args, "-o", str(tmp_path / "x"))
    assert r.exit_code == 2, r.output
    assert msg in r.output and len(r.output.strip().splitlines()) == 1


def test_existing_results_are_not_overwritten_without_force(tmp_path):
    out = tmp_path / "b"
    args = ("--methods", "softsort", "--batch", "2", "--n", "8", "--k", "2", "--repeats", "1", "--warmup", "0",
            "--no-plots", "-o", str(out))
    assert invoke(*args).exit_code == 0
    first = (out / "results.json").read_text()
    r = invoke(*args)
    assert r.exit_code == 2 and len(r.output.strip().splitlines()) == 1, r.output
    assert "already holds results (results.json, results.csv)" in r.output and "--force" in r.output
    assert (out / "results.json").read_text() == first
    r = invoke(*args, "--force")
    assert r.exit_code == 0, r.output
    assert (out / "results.json").read_text() != first


def test_partial_results_are_written_as_they_come(tmp_path):
    from netgen.bench.runner import run_grid

    seen = []

    def report(row, done, total):
        doc = json.loads((tmp_path / "results.json").read_text())
        seen.append((done, total, doc["complete"], len(doc["results"]), row["method"]))

    g = bgrid.Grid(batch=(2,), n=(8, 12), k=(2,), timeout_s=60, repeats=1, warmup=0)
    run_grid(g, ["softsort", "lapsum_topk"], tmp_path, plots=False, report=report)
    assert seen == [(1, 4, False, 1, "softsort"), (2, 4, False, 2, "lapsum_topk"), (3, 4, False, 3, "softsort"),
                    (4, 4, True, 4, "lapsum_topk")]
    assert not list(tmp_path.glob(".*.tmp"))


def test_default_thread_rows(tmp_path):
    out = tmp_path / "d"
    r = invoke("--methods", "netgen-torch", "--batch", "2", "--n", "8", "--k", "2", "--repeats", "1",
               "--warmup", "0", "--threads", "1", "--no-plots", "-o", str(out))
    assert r.exit_code == 0, r.output
    doc = json.loads((out / "results.json").read_text())
    rows = {x["method"]: x for x in doc["results"]}
    assert set(rows) == {"netgen-torch", "netgen-torch@default-threads"}
    assert all(x["status"] == "ok" for x in rows.values()), rows
    assert rows["netgen-torch"]["threads"] == 1
    assert rows["netgen-torch@default-threads"]["threads"] >= 1 and doc["machine"]["default_threads"]["cpus"] >= 1
    assert "[2/2] netgen-torch@default-threads B=2 n=8 k=2: ok" in r.stderr
    r = invoke("--methods", "netgen-torch", "--batch", "2", "--n", "8", "--k", "2", "--repeats", "1",
               "--warmup", "0", "--no-default-threads", "--no-plots", "-o", str(tmp_path / "e"))
    assert r.exit_code == 0, r.output
    assert [x["method"] for x in json.loads((tmp_path / "e" / "results.json").read_text())["results"]] == ["netgen-torch"]
    # any method by name
    r = invoke("--methods", "softsort@default-threads", "--batch", "2", "--n", "8", "--k", "2", "--repeats", "1",
               "--warmup", "0", "--no-plots", "-o", str(tmp_path / "f"))
    assert r.exit_code == 0, r.output
