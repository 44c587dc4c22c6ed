"""Hardware counters of the (5, 10450) rows and column kernels on a GPU
(Nsight Compute), beside the model's estimates: the second GPU call of
issue 29, after ``gpu_check.sh``, so that item 3 is steered by what the
kernels do on the card rather than by the model's calibration c (the
model's issue time is 1.6x its instruction count: where that factor comes
from is what these counters say).

    python3 benchmarks/gpu_profile.py [--modules gpu-modules] [--out DIR] [--B 500 4096]
    python3 benchmarks/gpu_profile.py --dry-run                     # no GPU: the ncu command
    python3 benchmarks/gpu_profile.py --parse FILE.csv [--model FILE.json]   # the table again

On the GPU machine it runs itself (``--workload``: the prebuilt ``topk5``
module of ``gpu_check.sh --prepare`` loaded, one warm-up, then between
``cudaProfilerStart`` and ``Stop`` one rows fwd+bwd and one column
fwd+bwd per batch size) under ``ncu --clock-control none`` (the card's
clocks left alone) with the metrics of :data:`METRICS`, exports the report
(``$OUT/gpu_profile.ncu-rep``: it comes back with the run), reads it back
as CSV and prints, per kernel and B: its duration, the warp-instructions a
row issued against the model's count (``gpu_model.py --json``, written by
``--prepare`` into the modules folder), the issue slots used, the warps
resident, DRAM and L2 throughput and the largest stall reasons (warps
stalled per issued instruction). ncu that cannot read the counters (some
machines cannot: ``.library/device/KINDS.md``) is reported with its own
words and exit status 1.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: the counters read per kernel (Nsight Compute metric names, sm_70 and later)
BASE_METRICS = (
    "gpu__time_duration.sum",
    "launch__grid_size",
    "launch__block_size",
    "launch__registers_per_thread",
    "smsp__inst_executed.sum",
    "smsp__issue_active.avg.pct_of_peak_sustained_active",
    "sm__warps_active.avg.pct_of_peak_sustained_active",
    "dram__bytes_read.sum",
    "dram__bytes_write.sum",
    "lts__t_bytes.sum",
)
#: why warps did not issue (each: warps stalled for that reason per issued instruction)
STALLS = ("barrier", "branch_resolving", "dispatch_stall", "drain", "imc_miss", "lg_throttle", "long_scoreboard",
          "math_pipe_throttle", "membar", "mio_throttle", "misc", "no_instruction", "not_selected", "selected",
          "short_scoreboard", "sleeping", "tex_throttle", "wait")
STALL_METRIC = "smsp__average_warps_issue_stalled_{}_per_issue_active.ratio"
METRICS = BASE_METRICS + tuple(STALL_METRIC.format(r) for r in STALLS)
#: netgen's rows and column kernels by their function names (numba mangles them into the symbol:
#: "...11_fwd_f32_s..."; not a lane kernel's "_grp_fwd_f32_s")
KERNEL = re.compile(r"(?:^|[^A-Za-z])_(fwd_col|bwd_col|fwd|bwd)_f(32|64)_([sg])")
NCU_FILTER = "regex:(^|[^A-Za-z])_(fwd|bwd)(_col)?_f(32|64)_[sg]"


def ncu_command(ncu: str, stem: Path, modules: Path, batch: list[int], metrics=METRICS) -> list[str]:
    """The profiling run: this script's workload under ncu, the report exported to ``stem``.ncu-rep."""
    return [ncu, "--clock-control", "none", "--profile-from-start", "off", "--target-processes", "all",
            "--kernel-name", NCU_FILTER, "--metrics", ",".join(metrics), "--export", str(stem),
            "--force-overwrite", sys.executable, str(Path(__file__).resolve()), "--workload", "--modules",
            str(modules), "--B", *map(str, batch)]


def workload(modules: Path, batch: list[int]) -> int:
    """One warm-up (the module and its cubins loaded, first launches), then
    the profiled region: per B one rows fwd+bwd (values and P, dL/dx from a
    random dL/dP) and one column fwd+bwd."""
    import torch

    from gpu_steps import kernel_steps, netgen_load

    if not torch.cuda.is_available():
        print("gpu_profile.py: no CUDA GPU here", file=sys.stderr)
        return 2
    try:
        mod = netgen_load(modules / "topk5.py")
    except FileNotFoundError as e:
        print(f"gpu_profile.py: {e}", file=sys.stderr)
        return 2
    gen = torch.Generator().manual_seed(0)
    steps = [step for B in batch for step in kernel_steps(mod, B, torch.device("cuda"), gen)]

    def run():
        for step in steps:
            step()

    run()
    torch.cuda.synchronize()
    torch.cuda.profiler.start()
    run()
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()
    return 0


def _number(text: str):
    """ncu's CSV number (thousands separators allowed), or None."""
    try:
        return float(text.replace(",", ""))
    except (AttributeError, ValueError):
        return None


def read_csv(text: str) -> list[dict]:
    """netgen's kernels in ncu's raw CSV (``--csv --page raw``): one dict a
    launch with its kernel, variant, float type, B (the grid: one block a
    row) and every metric read as a number; the units row and other
    kernels are left out."""
    lines = [ln for ln in text.splitlines() if ln.startswith('"')]  # ncu's own messages are not quoted
    out = []
    for row in csv.DictReader(io.StringIO("\n".join(lines))):
        m = KERNEL.search(row.get("Kernel Name") or row.get("Function Name") or "")
        if not m or not (row.get("ID") or "").strip():
            continue
        rec = {"kernel": m.group(1), "float": f"f{m.group(2)}", "variant": m.group(3)}
        rec.update({key: _number(v) for key, v in row.items() if key in METRICS})
        grid = rec.get("launch__grid_size")
        if grid is None:  # the Grid Size column: "(500, 1, 1)"
            g = re.match(r"\(?\s*([\d,]+)", row.get("Grid Size") or "")
            grid = _number(g.group(1)) if g else None
        rec["B"] = int(grid) if grid else None
        out.append(rec)
    return out


def _model_rows(path: Path | None) -> dict:
    if not path or not path.exists():
        return {}
    data = json.loads(path.read_text())
    return {(r["kernel"], r["B"]): r for r in data.get("rows", []) if r.get("kernels") == "new"}


def _fmt(v, spec=".3f"):
    return "-" if v is None else format(v, spec)


def _per_ns(nbytes, ns):
    """GB/s of ``nbytes`` moved in ``ns`` nanoseconds (bytes / ns), or None."""
    return nbytes / ns if nbytes and ns else None


def table(recs: list[dict], model: dict) -> list[str]:
    """The final table: a line per launch, measured beside the model."""
    lines = ["| kernel | B | ms | model ms | warp-instr / row | model | issue % | warps % | DRAM GB/s | L2 GB/s | "
             "stalls per issue (largest three) |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in recs:
        B = r["B"]
        ns = r.get("gpu__time_duration.sum")
        ms = ns / 1e6 if ns is not None else None
        m = model.get((r["kernel"], B), {})
        inst = r.get("smsp__inst_executed.sum")
        per_row = inst / B if inst is not None and B else None
        dram = (r.get("dram__bytes_read.sum") or 0) + (r.get("dram__bytes_write.sum") or 0)
        l2 = r.get("lts__t_bytes.sum")
        stalls = sorted(((r.get(STALL_METRIC.format(s)) or 0.0, s) for s in STALLS), reverse=True)[:3]
        lines.append(f"| {r['kernel']}_{r['float']}_{r['variant']} | {B} | {_fmt(ms)} | "
                     f"{_fmt(m.get('estimate_ms', [None])[0])} | {_fmt(per_row, '.0f')} | "
                     f"{_fmt(m.get('warp_instr_per_row'), '.0f')} | "
                     f"{_fmt(r.get('smsp__issue_active.avg.pct_of_peak_sustained_active'), '.1f')} | "
                     f"{_fmt(r.get('sm__warps_active.avg.pct_of_peak_sustained_active'), '.1f')} | "
                     f"{_fmt(_per_ns(dram, ns), '.0f')} | {_fmt(_per_ns(l2, ns), '.0f')} | "
                     + ", ".join(f"{s} {v:.2f}" for v, s in stalls if v > 0) + " |")
    return lines


def profile(args) -> int:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    ncu = shutil.which("ncu") or next((str(p) for p in Path("/opt/nvidia").glob("nsight-compute/*/ncu")), None)
    if not ncu:
        print("gpu_profile.py: ncu (Nsight Compute) not found on this machine", file=sys.stderr)
        return 2
    stem = out / "gpu_profile"
    metrics = METRICS
    for attempt in (1, 2):
        cmd = ncu_command(ncu, stem, Path(args.modules), args.B, metrics)
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
        except subprocess.TimeoutExpired:
            print(f"gpu_profile.py: the profiled run passed {args.timeout:.0f} s (--timeout); its log is gone with "
                  f"it: rerun with fewer --B", file=sys.stderr)
            return 1
        (out / f"gpu_profile_ncu_{attempt}.log").write_text(proc.stdout + proc.stderr)
        errors = [ln for ln in (proc.stdout + proc.stderr).splitlines() if "==ERROR==" in ln]
        if proc.returncode == 0 and not errors:
            break
        if attempt == 1 and any("metric" in ln.lower() for ln in errors):
            metrics = BASE_METRICS  # a stall metric this ncu does not know: the rest still tell a lot
            continue
        print("gpu_profile.py: ncu failed (exit %d):\n%s" % (proc.returncode, "\n".join(
            errors or (proc.stdout + proc.stderr).strip().splitlines()[-12:])), file=sys.stderr)
        return 1
    try:
        rep = subprocess.run([ncu, "--import", f"{stem}.ncu-rep", "--csv", "--page", "raw", "--print-units", "base"],
                             capture_output=True, text=True, timeout=args.timeout)
    except subprocess.TimeoutExpired:
        print(f"gpu_profile.py: reading the report back passed {args.timeout:.0f} s; it is {stem}.ncu-rep",
              file=sys.stderr)
        return 1
    (out / "gpu_profile.csv").write_text(rep.stdout)
    return show(rep.stdout, Path(args.modules) / "model.json")


def show(text: str, model_path: Path | None) -> int:
    recs = read_csv(text)
    if not recs:
        print("gpu_profile.py: no netgen kernel in ncu's report", file=sys.stderr)
        return 1
    model = _model_rows(model_path)
    print(f"model: {model_path if model else 'none (gpu_check.sh --prepare writes model.json)'}; every 'model' "
          "figure is an ESTIMATE, every other figure measured by ncu on this card")
    print("\n".join(table(recs, model)))
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--modules", default=os.environ.get("GPU_MODULES", "gpu-modules"))
    ap.add_argument("--out", default=os.environ.get("OUT", "gpu-out"), help="where the report, CSV and logs go "
                    "(default: $OUT, else gpu-out)")
    ap.add_argument("--B", type=int, nargs="+", default=[500, 4096])
    ap.add_argument("--timeout", type=float, default=150.0, help="seconds for the profiled run")
    ap.add_argument("--workload", action="store_true", help="the kernels ncu profiles (run by ncu)")
    ap.add_argument("--dry-run", action="store_true", help="print the ncu command; no GPU used")
    ap.add_argument("--parse", default=None, help="an ncu raw CSV to make the table from")
    ap.add_argument("--model", default=None, help="gpu_model.py --json output (default: the modules' model.json)")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    if args.workload:
        return workload(Path(args.modules), args.B)
    if args.parse:
        model = Path(args.model) if args.model else Path(args.modules) / "model.json"
        return show(Path(args.parse).read_text(), model)
    if args.dry_run:
        cmd = ncu_command("ncu", Path(args.out) / "gpu_profile", Path(args.modules), args.B)
        print("dry run: no GPU used; the profiled run:\n" + " ".join(cmd))
        print(f"metrics: {len(METRICS)} ({len(STALLS)} stall reasons); kernels: {NCU_FILTER}")
        return 0
    return profile(args)


if __name__ == "__main__":
    sys.exit(main())
