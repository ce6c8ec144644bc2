"""A minute of chaos on Postgres (`tests/faults/chaos.py`): replicas, the scheduling leader and
agents SIGKILLed, every database connection cut, agent streams reset or stalled, while jobs
arrive every ~1.5 s. Serial: it starts six processes and needs the machine's cores to itself
to keep its timings (a heartbeat timeout, a settle time) meaningful. The long run and its
figures: `bench/chaos_soak.py`, docs/chaos.md."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from tests.conftest import create_postgres_database, drop_postgres_database
from tests.faults.chaos import FAULTS, SoakConfig, soak


@pytest.mark.serial
@pytest.mark.timeout(600)
async def test_a_minute_of_chaos_loses_nothing_and_keeps_the_books(tmp_path: Path) -> None:
    name = f"chaos_{uuid.uuid4().hex[:8]}"
    url = await create_postgres_database(name)
    try:
        figures = await soak(url, tmp_path, SoakConfig(seconds=60, seed=1))
    finally:
        await drop_postgres_database(name)
    report = figures.report()
    print(json.dumps(report, indent=2))
    assert set(report["faults injected"]) == set(FAULTS), report  # every kind at least once
    assert report["jobs accepted"] >= 20 and report["documents refused"] >= 1, report
    assert report["lost jobs"] == 0 and report["invented jobs"] == 0, report
    assert report["refused documents stored"] == 0, report
    assert report["5xx (503 aside)"] == 0, report
    assert report["samples over capacity"] == 0, report
    assert report['false "started together"'] == 0, report
    assert report["jobs stuck"] == 0, report
    assert report["agent returns whose books were never right"] == 0, report
