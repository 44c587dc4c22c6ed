"""tools/records/records.py end to end on the smallest cells: one command with
a budget writes proved networks and an index, a rerun skips finished cells,
and the page is rendered from the data."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _run(*args):
    return subprocess.run([sys.executable, str(ROOT / "tools" / "records" / "records.py"), *args],
                          capture_output=True, text=True, timeout=600)


def test_records_run_is_resumable(tmp_path):
    pytest.importorskip("pysat")
    out, docs = tmp_path / "rec", tmp_path / "records.md"
    common = ["--budget", "120", "--n-max", "4", "--out", str(out), "--docs", str(docs)]
    p = _run(*common, "--set-n-max", "4")
    assert p.returncode == 0, p.stderr
    idx = json.loads((out / "index.json").read_text())
    assert set(idx["cells"]) == {"2,1", "3,1", "3,2", "4,1", "4,2", "4,3"}
    for c in idx["cells"].values():
        assert c["optimal_depth"] and (out / c["depth"]["file"]).is_file() and (out / c["set"]["file"]).is_file()
        assert c["depth"]["proof"].startswith("proved")
    assert idx["cells"]["4,2"]["depth_lb"]["source"] == "sat"
    assert "| 4 | 2 | 3 (5) **opt** | 3 (sat)" in docs.read_text()
    again = _run(*common)
    assert again.returncode == 0 and "cell n=" not in again.stdout and "6 cells done before" in again.stdout


def test_records_run_needs_a_budget(tmp_path):
    p = _run("--out", str(tmp_path))
    assert p.returncode == 2 and "--budget" in p.stderr
