"""benchmarks/gpu_check.sh and its python parts, without a GPU: the shell
syntax, the table of a dry run, the GPU tests' count read from pytest's
output, gpu_host.py's last line (kernels faked, a small network), and a
rehearsal of every measuring step on the CPU (gpu_check.py --rehearse)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ENV = dict(os.environ, PYTHONPATH=str(ROOT))


def test_shell_scripts_parse():
    for name in ("gpu_check.sh", "gpu_session.sh"):
        subprocess.run(["bash", "-n", str(ROOT / "benchmarks" / name)], check=True)
        text = (ROOT / "benchmarks" / name).read_text()
        assert not re.search(r"(^|[\s;(])python\s", text, re.M), f"{name} calls python, the GPU image has python3"


def test_dry_run_table_and_test_count(tmp_path):
    """The shell script's dry run (as on a CPU machine): the plan, then the
    table with every figure of issue 29 and a line per operator of issue
    31, the GPU tests' failures and gpu_host.py's line read from the files
    the measuring run leaves in $OUT."""
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    (out_dir / "gpu_tests.txt").write_text("FF.F\n2 failed, 11 passed, 1 error in 80.0s\n")
    (out_dir / "gpu_host.txt").write_text("host ms per fwd+bwd: rows 0.056 column 0.123 values 0.039\n")
    env = dict(ENV, OUT=str(out_dir), GPU_MODULES=str(tmp_path / "none"))
    proc = subprocess.run(["bash", str(ROOT / "benchmarks" / "gpu_check.sh"), "--dry-run"], capture_output=True,
                          text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = proc.stdout
    assert "dry run: no GPU used" in out and "topk5 missing" in out
    assert "plan (" in out and "sorting 4096 -> sort4096_ratio, sort4096_mem" in out
    rows = [line for line in out.splitlines() if line.startswith("| ") and "---" not in line]
    assert rows[0] == "| figure | measured | target | ok |"
    assert len(rows) == 1 + 27
    assert "| GPU tests (-m gpu): failed | 3 | 0 | NO |" in rows
    assert "| rows kernels ms, B = 4096 | - | <= 4.0 | - |" in rows
    assert "| host ms per rows fwd+bwd, launch stubbed (gpu_host.py) | 0.056 | <= 0.10 | yes |" in rows
    assert "| host ms per column fwd+bwd, launch stubbed (gpu_host.py) | 0.123 | <= 0.10 | NO |" in rows
    for op in ("soft_rank", "soft_sort", "soft_topk", "topk_mask"):
        assert any(r.startswith(f"| {op} fwd+bwd ms") and "(auto)" in r for r in rows), op
    assert any("lane kernels' device time" in r and "Round 8 estimate" in r for r in rows)


def _gpu_check():
    """benchmarks/gpu_check.py as a module (its FIGURES, STEPS, STEP_FUNCS)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("gpu_check", ROOT / "benchmarks" / "gpu_check.py")
    gc = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gc)
    return gc


def test_every_figure_has_a_step():
    """Each figure but the three read from files is filled by one measuring step."""
    gc = _gpu_check()
    keys = [k for k, *_ in gc.FIGURES]
    stepped = [k for _, ks in gc.STEPS for k in ks]
    assert sorted(stepped + ["gpu_tests", "host_stub_rows", "host_stub_column"]) == sorted(keys)
    assert set(gc.STEP_FUNCS) == {name for name, _ in gc.STEPS}


@pytest.mark.slow
def test_rehearsal_runs_every_step_without_an_error():
    """``gpu_check.py --rehearse`` runs every measuring step on the CPU
    (small sizes, torch-target modules): each figure a step fills gets a
    value, none an error or a skip, and the ok column says ``rehearsal``,
    never yes/NO. (It found the operators step weighting soft_topk's (B, k)
    values with a (B, n) tensor: an error row on every GPU run.)"""
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gpu_check.py"), "--rehearse", "--budget", "400",
                           "--step-limit", "180"], capture_output=True, text=True, env=ENV, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    assert "REHEARSAL on the CPU" in out
    rows = {}
    for line in out.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| ") and len(cells) == 4 and cells[0] != "figure":
            rows[cells[0]] = cells[1:]
    gc = _gpu_check()
    stepped = {k for _, ks in gc.STEPS for k in ks}
    assert len(rows) == len(gc.FIGURES)
    for key, figure, _, _ in gc.FIGURES:
        measured, _, ok = rows[figure.strip()]
        if key not in stepped:  # read from the GPU run's files: none here
            assert measured == "-", (figure, measured)
        elif key == "op_soft_rank_ratio" and measured == "torchsort not installed":
            continue
        else:
            assert re.fullmatch(r"\d+(\.\d+)?( \(\w+\))?", measured), (figure, measured, proc.stderr[-2000:])
            assert ok in ("rehearsal", ""), (figure, ok)
    assert "yes" not in {ok for _, _, ok in rows.values()} and "NO" not in {ok for _, _, ok in rows.values()}


def test_gpu_host_last_line():
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gpu_host.py"), "--n", "24", "--k", "3",
                          "--reps", "2", "--calls", "5"], capture_output=True, text=True, env=ENV, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    last = out.stdout.strip().splitlines()[-1]
    assert re.fullmatch(r"host ms per fwd\+bwd: rows \d+\.\d{3} column \d+\.\d{3} values \d+\.\d{3}", last), last


@pytest.mark.slow
def test_gpu_host_stays_near_its_floor():
    """Issue 29 item 2 (host time per eager fwd+bwd of the (5, 10450)
    layer, launch stubbed, <= 0.10 ms) is a benchmark's figure, and
    machines differ ~5x (0.063 ms on an AMD EPYC Zen 5, 0.21 on a 2.6 GHz
    Xeon VM): what a test can hold on any machine is the figure against
    the floor measured beside it in the same process (one
    torch.autograd.Function that only allocates, the same backward call):
    rows and column within 4x of it: 1.7x / 1.5x measured on the Xeon;
    on the EPYC Round 6's floors (0.024 / 0.018 ms) against today's 0.063
    / 0.039 make ~2.6x / ~2.2x. A regression guard: the layer's own Python
    (beyond the floor) growing ~2x (EPYC) to ~4x (Xeon) fails it."""
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gpu_host.py"), "--reps", "5", "--calls", "100"],
                         capture_output=True, text=True, env=ENV, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    text = out.stdout
    m = re.fullmatch(r"host ms per fwd\+bwd: rows (\S+) column (\S+) values (\S+)", text.strip().splitlines()[-1])
    assert m, text[-500:]
    floor = dict(re.findall(r"floor (rows|column) .*?: [\d.]+ ms wall, ([\d.]+) ms CPU per call", text))
    assert set(floor) == {"rows", "column"}, text[-800:]
    for path, got in (("rows", float(m.group(1))), ("column", float(m.group(2)))):
        assert got <= 4.0 * float(floor[path]), (path, got, floor[path], text[-800:])
