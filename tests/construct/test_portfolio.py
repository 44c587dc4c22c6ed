"""The portfolio default (``netgen build`` without --network): every cheap
candidate built and proved, the best by the objective kept, large ones that
cannot win skipped before they are built."""

import pytest
from click.testing import CliRunner

from netgen import io
from netgen.cli import main
from netgen import portfolio
from netgen import compiler
from netgen.compiler import build_network, compile_network
from netgen.portfolio import choose


def _key(net, objective):
    return (net.depth, net.size) if objective == "depth" else (net.size, net.depth)


@pytest.mark.parametrize("objective", ["depth", "size"])
@pytest.mark.parametrize("n, k", [(16, 8), (16, 5), (32, 4), (12, 12), (9, 1), (100, 4)])
def test_winner_is_the_best_of_the_proved_candidates(n, k, objective):
    compiled, cands = choose(n, k, objective)
    built = [c for c in cands if c.compiled is not None]
    assert compiled is min(built, key=lambda c: _key(c.network, objective)).compiled
    for c in built:
        assert c.compiled.report.status == "proved", c.describe()
    assert compiled.network.construction["passes"] == ["prune", "clean", "schedule"]
    # and it is at least as good as each named construction built on its own
    for kind in sorted({c.kind for c in cands}):  # every construction the registry proposes at (n, k)
        other = compile_network(build_network(n, k, kind, objective), verify=False).network
        assert _key(compiled.network, objective) <= _key(other, objective), kind


def test_16_8_is_shallower_than_the_splitter_and_the_selection_networks():
    net = compiler.compile(16, 8).network
    assert net.depth <= 9 and net.construction["kind"] == "best"
    r = CliRunner().invoke(main, ["build", "--n", "16", "--k", "8"])
    assert r.exit_code == 0
    assert io.loads(r.stdout).depth <= 9
    log = r.stderr
    for label in ("best (SorterHunter, pruned)", "splitter: depth 11", "oddeven selection: depth 10"):
        assert label in log, log


def test_large_candidates_that_cannot_win_are_not_built(monkeypatch):
    built = []
    real = portfolio.candidates

    def spy(n, k, objective):
        cands = real(n, k, objective)
        for c in cands:
            c.make = (lambda make, label: lambda: built.append(label) or make())(c.make, c.label)
        return cands

    monkeypatch.setattr(portfolio, "candidates", spy)
    compiled, cands = choose(3000, 2)
    assert compiled.network.construction["kind"] == "splitter"
    skipped = [c for c in cands if c.skipped]
    assert {c.label for c in skipped} >= {"bitonic sorter, pruned", "oddeven selection"}
    for c in skipped:
        assert c.label not in built and c.compiled is None and "depth formula" in c.skipped
        assert c.est_depth > portfolio.SLACK * compiled.network.depth
    assert built[0] == "splitter"


def test_objective_size_prefers_fewer_comparators():
    d, s = compiler.compile(16, 8, objective="depth").network, compiler.compile(16, 8, objective="size").network
    assert d.depth < s.depth and s.size < d.size


def test_bad_objective_is_refused_for_every_kind():
    for kind in (None, "splitter", "best"):
        with pytest.raises(ValueError, match="objective"):
            build_network(16, 5, kind, objective="speed")


def test_construct_without_kind_returns_the_portfolio_winner():
    net = build_network(16, 8)
    assert (net.depth, net.size) == (9, 56) and net.construction["kind"] == "best"
    assert net.construction["passes"] == ["prune", "clean", "schedule"]


def test_sorters_above_64_wires_sample_only_the_winner():
    # no complete method exists there: sampling every candidate would only cost time
    compiled, cands = choose(70, None)
    built = [c for c in cands if c.compiled is not None]
    assert len(built) == 3 and compiled.report.status == "sampled"
    assert [c.compiled.report is None for c in built].count(True) == 2
    assert compiled is min(built, key=lambda c: _key(c.network, "depth")).compiled


def test_no_surviving_candidate_is_an_internal_error_not_bad_input(monkeypatch):
    from netgen.compiled import Compiled
    from netgen.verify.report import Report

    def everything_wrong(net, passes=None, verify=True):
        return Compiled(net, [], Report("counterexample", "test", 0.0, counterexample=[0] * net.n))

    monkeypatch.setattr(portfolio, "compile_network", everything_wrong)
    with pytest.raises(portfolio.PortfolioError, match="no candidate network for n = 12, k = 3") as e:
        choose(12, 3)
    assert not isinstance(e.value, ValueError)


def test_candidate_lines_carry_each_step_time():
    lines = []
    compiled, cands = choose(16, 5, log=lines.append)
    built = [c for c in cands if c.compiled is not None]
    for c in built:
        steps = c.compiled.steps()
        assert steps.startswith("construct ") and "prune" in steps and "clean" in steps and steps.endswith(
            f"verify {c.compiled.verify_seconds:.2f}")
        # measured once each, one after the other
        assert c.compiled.seconds <= c.seconds + 1e-6
    assert len(lines) == len(cands)


def test_old_and_new_names():
    from netgen import construct as construct_pkg

    assert construct_pkg.build is construct_pkg.construct and compiler.build is compiler.compile
    assert compiler.compile(16, 5, "splitter").network == compile_network(construct_pkg.construct("splitter", 16, 5)).network


def test_unknown_pass_is_refused_before_anything_is_built(monkeypatch):
    monkeypatch.setattr(portfolio, "candidates", lambda *a: pytest.fail("built before checking the passes"))
    for call in (lambda: choose(100, 3, passes=("prune", "fold")),
                 lambda: compiler.compile(100, 3, "splitter", passes=("fold",))):
        with pytest.raises(ValueError, match="unknown pass 'fold'"):
            call()
