"""`netgen build` and `netgen table` from the command line."""

import json
import subprocess
import sys

import numpy as np
import pytest
from click.testing import CliRunner

from netgen import io, portfolio
from netgen.cli import main
from netgen.construct import KINDS, REGISTRY


def run(*args):
    return CliRunner().invoke(main, list(args))


def test_build_json_to_file_writes_a_proved_network(tmp_path):
    out = tmp_path / "net.json"
    r = run("build", "--n", "16", "--k", "5", "--network", "splitter", "-o", str(out))
    assert r.exit_code == 0, r.output
    net = io.load(out)
    assert (net.n, net.k) == (16, 5)
    assert net.construction["kind"] == "splitter"
    assert net.construction["verified"].startswith("proved")
    x = np.random.default_rng(0).normal(size=(200, 16))
    assert np.array_equal(net.select(x), -np.sort(-x, axis=1)[:, :5])


def test_build_json_to_stdout_is_only_the_network():
    r = CliRunner().invoke(main, ["build", "--n", "8", "--k", "2"])
    assert r.exit_code == 0
    net = io.loads(r.stdout)
    assert (net.n, net.k) == (8, 2)


@pytest.mark.parametrize("n, k", [(12, 3), (12, None), (100, 3)])
def test_default_is_the_portfolio_best_by_depth(n, k):
    nk = ["--n", str(n)] + ([] if k is None else ["--k", str(k)])
    r = CliRunner().invoke(main, ["build", *nk])
    assert r.exit_code == 0, r.output
    chosen = io.loads(r.stdout)
    assert chosen.construction["verified"].startswith("proved") or n > 64
    assert "candidate" in r.stderr and "portfolio chose" in r.stderr
    kinds = sorted({c.kind for c in portfolio.candidates(n, n if k is None else k, portfolio.DEFAULT_OBJECTIVE)})
    for kind in kinds:
        other = io.loads(CliRunner().invoke(main, ["build", *nk, "--network", kind, "--no-verify"]).stdout)
        assert (chosen.depth, chosen.size) <= (other.depth, other.size), kind


@pytest.mark.parametrize("kind", [kind for kind in KINDS if not REGISTRY[kind].needs_k])
def test_sorter_kinds_with_k_below_n_select(kind):
    net = io.loads(CliRunner().invoke(main, ["build", "--n", "13", "--k", "4", "--network", kind]).stdout)
    x = np.random.default_rng(1).normal(size=(300, 13))
    assert np.array_equal(net.select(x), -np.sort(-x, axis=1)[:, :4])


@pytest.mark.parametrize(
    "args, message",
    [
        (["--n", "0"], "n must be >= 1"),
        (["--n", "5", "--k", "0"], "k must be >= 1"),
        (["--n", "5", "--k", "6"], "k must be <= n"),
        (["--n", "5", "--network", "heap"], "heap"),
        (["--k", "3"], "give --n"),
        (["--n", "100000000", "--network", "transposition"], "too large"),
    ],
)
def test_bad_input_is_one_line_exit_2_and_writes_nothing(tmp_path, args, message):
    out = tmp_path / "x.json"
    r = run("build", *args, "-o", str(out))
    assert r.exit_code == 2, r.output
    assert message in r.output
    assert len(r.output.strip().splitlines()) == 1
    assert "Traceback" not in r.output
    assert not out.exists()


def test_build_from_file_keeps_comparators(tmp_path):
    src = tmp_path / "layers.txt"
    src.write_text("[(0,1),(2,3)]\n[(0,2),(1,3)]\n[(1,2)]\n")
    r = CliRunner().invoke(main, ["build", "--from", str(src)])
    assert r.exit_code == 0, r.output
    net = io.loads(r.stdout)
    assert net.size == 5 and net.depth == 3


def test_build_from_a_wrong_network_fails_with_exit_1(tmp_path):
    src = tmp_path / "bad.txt"
    src.write_text("[(0,1),(2,3)]\n[(0,2),(1,3)]\n")  # the final comparator is missing
    out = tmp_path / "out.json"
    r = CliRunner().invoke(main, ["build", "--from", str(src), "-o", str(out)])
    assert r.exit_code == 1
    assert not out.exists()


def test_console_script_runs():
    r = subprocess.run([sys.executable, "-m", "netgen.cli", "build", "--n", "4", "--k", "1"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["n"] == 4


def test_table_small_n_is_within_the_papers_depths():
    r = CliRunner().invoke(main, ["table", "--json", "--n", "16"])
    assert r.exit_code == 0, r.output
    cells = json.loads(r.stdout)["cells"]
    assert len(cells) == 3 + 8 * 4
    for c in cells:
        assert c["depth"] <= c["paper_depth"], c


@pytest.mark.parametrize(
    "option, message", [(["--steepness", "-1"], "steepness"), (["--distribution", "softplus"], "softplus")]
)
def test_bad_relaxation_options_exit_2_before_building(tmp_path, option, message):
    r = run("build", "--n", "20", "--k", "3", "--target", "torch", "-o", str(tmp_path), *option)
    assert r.exit_code == 2 and message in r.output
    assert list(tmp_path.iterdir()) == []


def test_build_torch_target_writes_an_importable_layer(tmp_path):
    import torch

    import netgen

    r = run("build", "--n", "12", "--k", "3", "--target", "torch", "-o", str(tmp_path))
    assert r.exit_code == 0, r.output
    (path,) = tmp_path.glob("*.py")
    assert f"netgen.load({str(path)!r})" in r.stdout
    layer = netgen.load(path).Layer()
    x = torch.randn(4, 12, dtype=torch.float64)
    values, P = layer(x)
    assert values.shape == (4, 3) and P.shape == (4, 3, 12)
    assert torch.equal(layer.hard(x)[0], torch.topk(x, 3).values)


def test_table_without_cleanup_matches_the_selection_formula():
    r = CliRunner().invoke(main, ["table", "--json", "--n", "1024", "--no-clean"])
    assert r.exit_code == 0, r.output
    for c in json.loads(r.stdout)["cells"]:
        assert c["depth"] <= c["paper_depth"], c
        if c["column"] == "sel":  # Wah-Chen depth before cleanup equals the paper's column
            assert c["depth"] == c["paper_depth"], c


def test_table_best_column_is_proved_and_no_worse_than_any_cell():
    r = CliRunner().invoke(main, ["table", "--json", "--n", "16"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    best = {c["k"]: c for c in doc["best"]}
    assert sorted(best) == list(range(1, 9)) + [16]
    for c in doc["cells"]:
        b = best[c["k"]]
        assert b["proof"].startswith("proved"), b
        assert b["depth"] <= c["depth"], (b, c)
    assert best[8]["depth"] == 9 < best[8]["paper_depth"] and best[8]["kind"] == "best"


def _times(log):
    """Seconds of every step line of a build log, and the total."""
    import re

    steps, total = [], None
    for line in log.splitlines():
        if line.startswith("done in"):
            total = float(re.search(r"done in ([0-9.]+) s", line).group(1))
        elif line.startswith("  candidate") and "skipped" not in line:
            steps.append(float(re.search(r"\(([0-9.]+) s: ", line).group(1)))
        elif re.search(r"(^constructed .* in |^read .* in |^  pass |^verify|^wrote JSON)", line):
            steps.append(float(re.findall(r"([0-9.]+) s\b", line)[0]))
    return steps, total


@pytest.mark.parametrize("args", [["--n", "40", "--k", "3"], ["--n", "70"],
                                  ["--n", "300", "--k", "4", "--network", "splitter"]])
def test_build_log_step_times_add_up_to_the_total(tmp_path, args):
    r = run("build", *args, "-o", str(tmp_path / "n.json"))
    assert r.exit_code == 0, r.output
    steps, total = _times(r.stderr)
    assert total is not None and len(steps) >= 2, r.stderr
    # each step is measured once, one after the other: never more than the total
    # (up to the rounding of each printed time), and little time goes unaccounted
    assert sum(steps) <= total + 0.005 * len(steps), r.stderr
    assert total - sum(steps) <= 0.1 + 0.1 * total, r.stderr


def test_build_log_prints_each_step_where_it_runs(tmp_path):
    r = run("build", "--n", "16", "--k", "5", "-o", str(tmp_path / "a.json"))
    lines = r.stderr.splitlines()
    chose = next(i for i, line in enumerate(lines) if line.startswith("portfolio chose"))
    # the portfolio's passes and proofs are inside its candidate lines, nothing is repeated after the choice
    assert not any(line.lstrip().startswith(("pass ", "verify")) for line in lines), r.stderr
    for line in lines[:chose]:
        if "skipped" not in line:
            assert "prune" in line and "clean" in line and "schedule" in line and "verify" in line, line
    r = run("build", "--n", "16", "--k", "5", "--network", "splitter", "-o", str(tmp_path / "b.json"))
    lines = [line.split()[0] for line in r.stderr.splitlines()]
    assert lines == ["constructed", "pass", "pass", "pass", "verify:", "wrote", "done"], r.stderr


def test_cli_choices_come_from_the_registries():
    from netgen.cli import build
    from netgen.codegen import TARGETS
    from netgen.construct import ALL_KINDS
    from netgen.passes import PASSES

    params = {p.name: p for p in build.command.params}
    assert tuple(params["kind"].type.choices) == ALL_KINDS
    assert tuple(params["only"].type.choices) == tuple(PASSES)
    assert tuple(params["target"].type.choices) == ("json", *TARGETS)


def test_build_with_chosen_passes_runs_only_those(tmp_path):
    out = tmp_path / "n.json"
    r = run("build", "--n", "20", "--k", "3", "--network", "transposition", "--pass", "schedule", "-o", str(out))
    assert r.exit_code == 0, r.output
    assert io.load(out).construction["passes"] == ["schedule"]
    assert [line for line in r.stderr.splitlines() if line.startswith("  pass")][0].startswith("  pass schedule")
    r = run("build", "--n", "20", "--k", "3", "--pass", "fold")
    assert r.exit_code == 2 and "fold" in r.output


def test_an_internal_portfolio_failure_is_exit_1_with_a_clear_message(monkeypatch, tmp_path):
    from netgen import portfolio
    from netgen.compiled import Compiled
    from netgen.verify.report import Report

    def everything_wrong(net, passes=None, verify=True):
        return Compiled(net, [], Report("counterexample", "test", 0.0, counterexample=[0] * net.n))

    monkeypatch.setattr(portfolio, "compile_network", everything_wrong)
    out = tmp_path / "n.json"
    r = run("build", "--n", "12", "--k", "3", "-o", str(out))
    assert r.exit_code == 1, r.output
    assert "netgen: internal error: no candidate network for n = 12, k = 3 passed verification" in r.stderr
    assert "Traceback" not in r.output and not out.exists()


def test_a_generated_module_that_does_not_compile_is_an_internal_error(tmp_path, monkeypatch):
    """A module that fails the compile-before-write check is a netgen bug:
    one line, exit 1, nothing written."""
    from netgen.codegen.torch import emit as torch_emit

    monkeypatch.setattr(torch_emit, "emit", lambda *args: "def broken(:\n")
    r = run("build", "--n", "8", "--k", "2", "--target", "torch", "-o", str(tmp_path / "out"))
    assert r.exit_code == 1, r.output
    lines = [l for l in r.output.splitlines() if "internal error" in l]
    assert len(lines) == 1 and "netgen bug" in lines[0], r.output
    assert "Traceback" not in r.output
    assert not list(tmp_path.rglob("*.py"))


@pytest.mark.parametrize("target", ["torch", "numba"])
@pytest.mark.parametrize("kind", ["splitter", None])
def test_cli_and_python_pipeline_write_the_same_module(tmp_path, target, kind):
    """docs/api.md's pipeline and `netgen build` write the same file (name,
    hash and bytes) for the same network: both record the proof in the
    network's construction (netgen.compiled.record_proof). Without a kind:
    the portfolio, netgen.compiler.compile."""
    from netgen.codegen import write_module
    from netgen.compiler import compile as compile_nk, compile_network, construct
    from netgen.relax.distributions import default_relaxation

    args = ["build", "--n", "40", "--k", "3", "--target", target, "-o", str(tmp_path / "cli")]
    r = run(*args, *(["--network", kind] if kind else []))
    assert r.exit_code == 0, r.output
    (cli,) = (tmp_path / "cli").glob("*.py")
    compiled = compile_network(construct(40, 3, kind)) if kind else compile_nk(40, 3)
    net = compiled.network
    assert net.construction["verified"].startswith("proved")
    api = write_module(target, net, default_relaxation(net), out_dir=tmp_path / "api")
    assert api.name == cli.name and api.read_bytes() == cli.read_bytes()
