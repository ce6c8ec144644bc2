"""`vglobal demo`, the README's main command, runs end to end."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.factories import EXAMPLES


def test_demo_runs_agents_and_submits_every_example(tmp_path: Path) -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "volcano_global.cli.main",
            "demo",
            "--data-dir",
            str(tmp_path),
            "--examples",
            str(EXAMPLES),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout
    for cluster in ("gpu-east", "gpu-west", "gpu-central"):
        assert cluster in out
    assert "H100 2896/2896" in out  # the largest Lingjun aggregation block, 362 hosts x 8 GPUs
    assert "A100 4096/4096" in out and "L40S 128/128" in out  # the two YAML-specified clusters
    assert out.count("Ready") >= 3  # each cluster's own agent connected
    # The first scheduling round placed the jobs that can run; the heterogeneous HyperJob waits
    # with its reason.
    assert out.count("Placed") >= 4
    assert "llm/llama-70b-pretrain: 64 pods in" in out
    assert "parts on different GPU models" in out
    assert (tmp_path / "demo.db").exists()
