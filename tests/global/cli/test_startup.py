"""The `vglobal` client commands start without importing the server's heavy dependencies: each
call of a client command (and each of CI's hundred) would otherwise pay seconds of imports."""

from __future__ import annotations

import os
import subprocess
import sys

HEAVY = ("ortools", "matplotlib", "kubernetes_asyncio", "sqlalchemy", "grpc")
# Ours, ~0.5 s of the 0.8 s a command took: only `plan` and `simulate` need them.
OURS = ("volcano_global.simulation", "volcano_global.solver", "volcano_global.sdk")


def test_the_cli_imports_no_solver_plotting_kubernetes_or_database_library() -> None:
    probe = (
        "import sys\n"
        "import volcano_global.cli.main\n"
        f"print(' '.join(m for m in {(*HEAVY, *OURS)!r} if m in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120
    )
    assert out.stdout.split() == []


def test_simulate_is_listed_and_runs_though_imported_late() -> None:
    listed = subprocess.run(
        [sys.executable, "-m", "volcano_global.cli.main", "--help"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert "simulate" in listed.stdout and "What-if: replay a job trace" in listed.stdout
    own = subprocess.run(
        [sys.executable, "-m", "volcano_global.cli.main", "simulate", "--help"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert own.returncode == 0 and "--preemption-cap" in own.stdout
