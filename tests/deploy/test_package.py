"""The wheel the image installs carries what an installed server needs: the migrations, the
generated gRPC stubs, the console's static files and the agent's data."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_wheel_contains_migrations_stubs_and_data(tmp_path: Path) -> None:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--no-deps",
            "--wheel-dir",
            str(tmp_path),
            str(REPO),
        ],
        check=True,
    )
    (wheel,) = tmp_path.glob("volcano_global-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for required in (
        "volcano_global/app.py",
        "volcano_global/migrations/env.py",
        "volcano_global/migrations/script.py.mako",
        "volcano_global/migrations/versions/0001_initial_schema.py",
        "volcano_global/migrations/versions/0002_inventory_sequence.py",
        "volcano_global/migrations/versions/0003_dispatch_outbox.py",
        "volcano_global/migrations/versions/0004_gang_supervision.py",
        "volcano_global/migrations/versions/0005_scheduling_rounds.py",
        "volcano_global/console/static/index.html",
        "volcano_global/console/static/app.js",
        "volcano_global/console/static/dom.js",
        "volcano_global/console/static/data.js",
        "volcano_global/console/static/style.css",
        "volcano_global/rpc/v1/agent_pb2.py",
        "volcano_global/rpc/v1/agent_pb2.pyi",
        "volcano_global/solver/cpsat.py",
        "volcano_global/clusterspec/data/lingjun_2023_topo.csv",
        "core_agent/kubernetes/source.py",
    ):
        assert required in names, required
    assert not any(n.startswith("tests/") for n in names)
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    assert (
        "vglobal = volcano_global.cli.main:run"
        in zipfile.ZipFile(wheel).read(entry_points).decode()
    )
