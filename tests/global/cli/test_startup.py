"""The `vglobal` client commands start without importing the server's heavy dependencies: each
call of a client command (and each of CI's hundred) would otherwise pay seconds of imports."""

from __future__ import annotations

import subprocess
import sys

HEAVY = ("ortools", "matplotlib", "kubernetes_asyncio", "sqlalchemy", "grpc")


def test_the_cli_imports_no_solver_plotting_kubernetes_or_database_library() -> None:
    probe = (
        "import sys\n"
        "import volcano_global.cli.main\n"
        f"print(' '.join(m for m in {HEAVY!r} if m in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120
    )
    assert out.stdout.split() == []
