"""The console benchmark runs end to end at a tiny size, so it cannot rot unnoticed: every page
it times must draw (a page that never does fails the run)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench" / "console_bench.py"
SMALL = ["--clusters", "3", "--nodes", "40", "--jobs", "30", "--loads", "1"]


def test_a_tiny_fleet_is_seeded_and_every_page_timed() -> None:
    result = subprocess.run(
        [sys.executable, str(BENCH), *SMALL],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=BENCH.parent,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "seeded 3 clusters x 40 nodes" in result.stdout
    for page in ("overview", "jobs", "jobs search", "clusters", "cluster c001", "history"):
        assert f"\n  {page}" in result.stdout, result.stdout
