"""benchmarks/gpu_profile.py without a GPU: the ncu command of a dry run,
the table made from a CSV in the shape of ncu's raw page (with the
model's estimates beside), and the workload's refusal without a GPU."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "gpu_profile.py"
ENV = dict(os.environ, PYTHONPATH=str(ROOT))

STALL = "smsp__average_warps_issue_stalled_{}_per_issue_active.ratio"
COLUMNS = ["ID", "Process ID", "Kernel Name", "gpu__time_duration.sum", "launch__grid_size", "smsp__inst_executed.sum",
           "smsp__issue_active.avg.pct_of_peak_sustained_active", "sm__warps_active.avg.pct_of_peak_sustained_active",
           "dram__bytes_read.sum", "dram__bytes_write.sum", "lts__t_bytes.sum", STALL.format("barrier"),
           STALL.format("long_scoreboard"), STALL.format("wait"), STALL.format("short_scoreboard")]


def _row(*cells):
    return ",".join(f'"{c}"' for c in cells)


def _csv():
    mangled = "cudapy::module::_{}_f32_s[abi:v1](Array<float, 2, C, mutable, aligned>)"
    return "\n".join([
        "==PROF== Connected to process 123",  # ncu's own lines are not CSV
        _row(*COLUMNS),
        _row("", "", "", "nsecond", "", "inst", "%", "%", "byte", "byte", "byte", "", "", "", ""),
        _row("0", "123", "void at::native::reduce_kernel<512, 1>(...)", "5,000", "64", "1,000", "50", "50", "0", "0",
             "0", "0", "0", "0", "0"),
        # 2.5 ms, 500 rows, 2,000,000 warp-instructions per row, 3 GB of DRAM in all
        _row("1", "123", mangled.format("fwd"), "2,500,000", "500", "1,000,000,000", "61.5", "48.2",
             "1,000,000,000", "2,000,000,000", "4,000,000,000", "0.9", "0.3", "1.4", "0.1"),
        _row("2", "123", mangled.format("fwd_col"), "800,000", "500", "250,000,000", "70.0", "90.0", "100", "100",
             "800,000", "0.2", "0.05", "0.6", "0.7"),
        _row("3", "123", "cudapy::module::_grp_fwd_f32_s(Array<float>)", "1", "8", "1", "1", "1", "1", "1", "1",
             "1", "1", "1", "1"),
    ])


def test_dry_run_prints_the_ncu_command(tmp_path):
    proc = subprocess.run([sys.executable, str(SCRIPT), "--dry-run", "--modules", str(tmp_path)], capture_output=True,
                          text=True, env=dict(ENV, OUT=str(tmp_path / "out")), timeout=60)
    assert proc.returncode == 0, proc.stderr
    cmd = proc.stdout.splitlines()[1]
    assert cmd.startswith("ncu --clock-control none --profile-from-start off ")  # the card's clocks left alone
    assert f"--export {tmp_path / 'out' / 'gpu_profile'} " in cmd and "--workload" in cmd and "--B 500 4096" in cmd
    metrics = cmd.split("--metrics ")[1].split()[0].split(",")
    assert "smsp__inst_executed.sum" in metrics and STALL.format("long_scoreboard") in metrics
    assert len(metrics) == len(set(metrics)) == 10 + 18


def test_table_from_ncu_csv_beside_the_model(tmp_path):
    (tmp_path / "profile.csv").write_text(_csv())
    rows = [{"kernels": "new", "kernel": "fwd", "B": 500, "estimate_ms": [2.0, 2.1], "warp_instr_per_row": 1.5e6},
            {"kernels": "old", "kernel": "fwd", "B": 500, "estimate_ms": [9.0, 9.0], "warp_instr_per_row": 1.0}]
    (tmp_path / "model.json").write_text(json.dumps({"rows": rows}))
    proc = subprocess.run([sys.executable, str(SCRIPT), "--parse", str(tmp_path / "profile.csv"), "--model",
                           str(tmp_path / "model.json")], capture_output=True, text=True, env=ENV, timeout=60)
    assert proc.returncode == 0, proc.stderr
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("| ") and "---" not in ln]
    assert lines[0].startswith("| kernel | B | ms | model ms | warp-instr / row | model |")
    # the torch kernel and the lane kernel left out; the model's "new" row beside the fwd, none for fwd_col
    assert lines[1:] == [
        "| fwd_f32_s | 500 | 2.500 | 2.000 | 2000000 | 1500000 | 61.5 | 48.2 | 1200 | 1600 | "
        "wait 1.40, barrier 0.90, long_scoreboard 0.30 |",
        "| fwd_col_f32_s | 500 | 0.800 | - | 500000 | - | 70.0 | 90.0 | 0 | 1 | "
        "short_scoreboard 0.70, wait 0.60, barrier 0.20 |",
    ]
    assert "ESTIMATE" in proc.stdout


def test_no_netgen_kernel_is_an_error(tmp_path):
    (tmp_path / "profile.csv").write_text(_row(*COLUMNS) + "\n")
    proc = subprocess.run([sys.executable, str(SCRIPT), "--parse", str(tmp_path / "profile.csv")],
                          capture_output=True, text=True, env=ENV, timeout=60)
    assert proc.returncode == 1 and "no netgen kernel" in proc.stderr


def test_workload_refuses_without_a_gpu(tmp_path):
    proc = subprocess.run([sys.executable, str(SCRIPT), "--workload", "--modules", str(tmp_path)],
                          capture_output=True, text=True, env=dict(ENV, CUDA_VISIBLE_DEVICES=""), timeout=120)
    assert proc.returncode == 2 and "no CUDA GPU" in proc.stderr


FAKE_NCU = r'''#!/usr/bin/env python3
import os, sys, time
args = sys.argv[1:]
with open(os.environ["FAKE_NCU_LOG"], "a") as f:
    f.write(" ".join(args) + "\n")
if "--import" in args:
    sys.stdout.write(open(os.environ["FAKE_NCU_CSV"]).read())
    sys.exit(0)
mode = os.environ["FAKE_NCU"]
if mode == "sleep":
    time.sleep(30)
if mode == "nocounters":
    print("==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU Performance Counters")
    sys.exit(1)
if mode == "metric" and "long_scoreboard" in " ".join(args):
    print("==ERROR== Failed to find metric smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio")
    sys.exit(1)
sys.exit(0)
'''


def _profile_with_fake_ncu(tmp_path, mode, *extra):
    """The measuring run with a stand-in ``ncu`` first on PATH: it logs its
    arguments, prints the CSV for ``--import`` and otherwise acts as ``mode``
    says (ok, sleep, nocounters, metric: refuses the stall metrics)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "ncu").write_text(FAKE_NCU)
    (bin_dir / "ncu").chmod(0o755)
    (tmp_path / "profile.csv").write_text(_csv())
    env = dict(ENV, PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}", OUT=str(tmp_path / "out"), FAKE_NCU=mode,
               FAKE_NCU_LOG=str(tmp_path / "ncu.log"), FAKE_NCU_CSV=str(tmp_path / "profile.csv"))
    proc = subprocess.run([sys.executable, str(SCRIPT), "--modules", str(tmp_path), *extra], capture_output=True,
                          text=True, env=env, timeout=120)
    calls = (tmp_path / "ncu.log").read_text().splitlines() if (tmp_path / "ncu.log").exists() else []
    return proc, calls


def test_profile_run_then_report_read_back(tmp_path):
    proc, calls = _profile_with_fake_ncu(tmp_path, "ok")
    assert proc.returncode == 0, proc.stderr
    assert len(calls) == 2 and "--workload" in calls[0] and calls[1].startswith("--import ")
    assert "--csv --page raw --print-units base" in calls[1]
    assert "| fwd_f32_s | 500 | 2.500 |" in proc.stdout
    assert (tmp_path / "out" / "gpu_profile.csv").read_text() == _csv()


def test_profile_retries_without_the_stall_metrics_an_ncu_does_not_know(tmp_path):
    proc, calls = _profile_with_fake_ncu(tmp_path, "metric")
    assert proc.returncode == 0, proc.stderr
    assert len(calls) == 3 and "long_scoreboard" in calls[0] and "stalled" not in calls[1]
    assert "smsp__inst_executed.sum" in calls[1] and "| fwd_col_f32_s | 500 |" in proc.stdout


def test_profile_says_why_ncu_failed(tmp_path):
    proc, calls = _profile_with_fake_ncu(tmp_path, "nocounters")
    assert proc.returncode == 1 and len(calls) == 1
    assert "ncu failed (exit 1)" in proc.stderr and "ERR_NVGPUCTRPERM" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_profile_run_past_its_time(tmp_path):
    proc, _ = _profile_with_fake_ncu(tmp_path, "sleep", "--timeout", "1")
    assert proc.returncode == 1 and "passed 1 s" in proc.stderr and "Traceback" not in proc.stderr
