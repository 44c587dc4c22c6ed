"""The time budget (issue 19, "bounded work, refused early"): a build whose
estimated time is past the limit is refused before anything is built, in
one line naming the estimate and ``--max-seconds`` (exit 2); builds under
it run; ``--max-seconds`` and ``max_seconds=`` move the limit both ways."""

from __future__ import annotations

import time

import pytest
from click.testing import CliRunner

from netgen import compiler, io
from netgen.cli import main
from netgen.estimate import DEFAULT_MAX_SECONDS, TimeLimitError, build_seconds, time_limit
from netgen.construct import construct


def run(*args):
    t = time.perf_counter()
    r = CliRunner().invoke(main, [str(a) for a in args])
    r.seconds = time.perf_counter() - t
    return r


def one_line_error(r, *words):
    assert r.exit_code == 2, (r.exit_code, r.output)
    err = r.stderr.strip().splitlines()[-1]  # after the log lines of the steps before (e.g. "read ...")
    assert err.startswith("netgen: error:") and "\n" not in err and "Traceback" not in r.output, err
    for w in words:
        assert w in err, err
    return err


@pytest.mark.parametrize("args", [
    ["--n", "65536", "--k", "16"],  # ran for minutes and took 7.5 GB before (reachable states at k = 16)
    ["--n", "1024", "--k", "16", "--network", "splitter"],
    ["--n", "65536", "--k", "12"],
])
def test_slow_builds_are_refused_quickly(tmp_path, args):
    assert build_seconds(int(args[1]), int(args[3]), args[5] if len(args) > 4 else None).seconds > DEFAULT_MAX_SECONDS
    r = run("build", *args, "-o", tmp_path / "net.json")
    err = one_line_error(r, "estimated at", "CPU", "--max-seconds", "max_seconds=", "limit 60 s")
    assert "proof" in err  # names where the time would go
    assert r.seconds < 10  # refused before building (the build itself takes minutes)
    assert not (tmp_path / "net.json").exists()


def test_builds_under_the_limit_run(tmp_path):
    assert build_seconds(40, 3).seconds < DEFAULT_MAX_SECONDS
    r = run("build", "--n", "40", "--k", "3", "-o", tmp_path / "net.json")
    assert r.exit_code == 0, r.output
    assert io.load(tmp_path / "net.json").construction["verified"].startswith("proved")


def test_max_seconds_moves_the_limit(tmp_path):
    est = build_seconds(40, 3).seconds
    one_line_error(run("build", "--n", "40", "--k", "3", "--max-seconds", est / 2, "-o", tmp_path / "a.json"),
                   "estimated at", f"limit {est / 2:.1f} s")
    r = run("build", "--n", "40", "--k", "3", "--max-seconds", est * 2, "-o", tmp_path / "b.json")
    assert r.exit_code == 0, r.output
    for bad in ("0", "-1", "x"):
        r = run("build", "--n", "40", "--k", "3", "--max-seconds", bad)
        assert r.exit_code == 2 and "--max-seconds" in r.output


def test_from_file_is_estimated_from_the_network(tmp_path):
    f = tmp_path / "n.json"
    io.save(construct("splitter", 40, 3), f)
    r = run("build", "--from", f, "--max-seconds", "0.001", "-o", tmp_path / "out.json")
    one_line_error(r, "estimated at", str(f), "--max-seconds", "limit 0.001 s")
    assert "Traceback" not in r.output and not (tmp_path / "out.json").exists()
    assert run("build", "--from", f, "-o", tmp_path / "out.json").exit_code == 0


def test_python_keyword_and_context():
    t = time.perf_counter()
    with pytest.raises(TimeLimitError, match="max_seconds="):
        compiler.compile(65536, 16)
    assert time.perf_counter() - t < 5
    with pytest.raises(TimeLimitError, match="limit 0.5 s"):
        compiler.compile(40, 3, max_seconds=0.5)
    with time_limit(0.5), pytest.raises(TimeLimitError):
        compiler.compile(40, 3)
    assert compiler.compile(40, 3, max_seconds=1000).report.status == "proved"
    for bad in (0, -1.0, True, "60", float("nan")):
        with pytest.raises(ValueError, match="max_seconds"):
            compiler.compile(40, 3, max_seconds=bad)


def test_topk_loss_takes_max_seconds():
    from netgen.layers import topk_loss

    with pytest.raises(TimeLimitError, match="estimated at"):
        topk_loss(1000, [0.5, 0.3, 0.2], max_seconds=0.01)


def test_size_refusal_still_comes_first():
    r = run("build", "--n", "16777216", "--k", "1", "--network", "bitonic")
    one_line_error(r, "too large", "--max-size")


def test_verify_refuses_a_proof_estimated_past_the_limit(tmp_path):
    f = tmp_path / "s.json"
    io.save(construct("splitter", 1024, 16), f)  # its reachable-state proof runs for minutes
    r = run("verify", f)
    one_line_error(r, "verifying", "estimated at", "--max-seconds")
    assert r.seconds < 10
    r = run("verify", f, "--method", "sample", "--samples", "200")  # sampling is cheap: not refused
    assert r.exit_code == 1 and "sampled 200 inputs" in r.stdout, r.output
    small = tmp_path / "small.json"
    io.save(construct("splitter", 40, 3), small)
    assert run("verify", small).exit_code == 0
    one_line_error(run("verify", small, "--max-seconds", "0.01"), "verifying", "limit 0.01 s")
