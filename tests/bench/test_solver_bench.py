"""The placement benchmark runs end to end (its quick mode), so it cannot rot unnoticed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench" / "solver_bench.py"


def test_quick_benchmark_writes_a_report(tmp_path: Path) -> None:
    out = tmp_path / "benchmarks.md"
    # Sections after the generated ones (the server's dated cost runs) survive a rewrite.
    out.write_text("## Reading the numbers\n\n- old\n\n## Server cost: dated runs\n\nkept\n")
    result = subprocess.run(
        [sys.executable, str(BENCH), "--quick", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    report = out.read_text()
    assert "## 1. Solve time and gap against size" in report
    assert "## 1b. Planned rounds at scale" in report
    for policy in ("cpsat", "first-fit", "proportional", "greedy"):
        assert f"| {policy} |" in report
    assert "Kalos" in report
    assert "CP-SAT against the best baseline" in report
    assert "## 3. Policies over time: trace replay by simulation" in report
    assert "Pollux workload-1" in report
    assert "gang-two-regions.yaml" in report
    assert "| backfill |" in report
    assert "Over every gang-heavy fleet and seed (minimum)" in report
    assert "No regression for small jobs" in report
    assert report.endswith("\n\n## Server cost: dated runs\n\nkept\n")
    assert "- old" not in report
