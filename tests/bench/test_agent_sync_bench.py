"""The agent sync benchmark runs end to end at a tiny size, so it cannot rot unnoticed: with two
workers on Postgres it counts every server process (the supervisor, both workers) in the
Global's memory and CPU; without Postgres, two workers are refused with the reason."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.conftest import create_postgres_database, drop_postgres_database

BENCH = Path(__file__).resolve().parents[2] / "bench" / "agent_sync_bench.py"
TINY = ["--clusters", "3", "--nodes", "50", "--seconds", "1", "--batch", "10"]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(BENCH), *TINY, *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=BENCH.parent,
    )


@pytest.fixture
async def fresh_postgres(fresh_database_name: str) -> AsyncIterator[str]:
    yield await create_postgres_database(fresh_database_name)
    await drop_postgres_database(fresh_database_name)


def test_two_workers_on_postgres_count_every_server_process(fresh_postgres: str) -> None:
    result = _run("--workers", "2", "--database-url", fresh_postgres)
    assert result.returncode == 0, result.stderr[-3000:]
    found = re.search(r"Global \(2 worker\(s\), (\d+) processes\)", result.stdout)
    assert found is not None, result.stdout
    assert int(found.group(1)) >= 3, result.stdout  # the supervisor and two workers at least
    assert "sum of each process's peak" in result.stdout
    assert "postgres" in result.stdout.splitlines()[-1]


def test_two_workers_need_postgres() -> None:
    result = _run("--workers", "2")
    assert result.returncode == 2
    assert "--workers > 1 needs Postgres" in result.stderr
