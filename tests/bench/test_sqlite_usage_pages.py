"""The SQLite usage-UPDATE benchmark runs end to end at a tiny size, so it cannot rot
unnoticed: it builds the `nodes` table from the model and reports both tables' cost and pages."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench" / "sqlite_usage_pages.py"


def test_it_reports_both_tables() -> None:
    tiny = ["--clusters", "3", "--nodes", "200", "--batch", "20", "--clusters-a-batch", "2"]
    result = subprocess.run(
        [sys.executable, str(BENCH), *tiny, "--batches", "2", "--repeat", "1", "--labels", "5"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=BENCH.parent,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert re.search(
        r"labels 5: CPU ms a 1,000 updates: nodes [\d.]+, narrow usages [\d.]+", result.stdout
    )
    pages = re.search(r"pages a cluster: nodes (\d+), narrow usages (\d+)", result.stdout)
    assert pages is not None, result.stdout
    assert int(pages[1]) > int(pages[2]) > 0  # labelled rows take more pages than usages
