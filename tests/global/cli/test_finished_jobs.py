"""Where a finished job ran and for how long (issue 37 item 5), read as a user reads it: the
real `vglobal jobs` against a real server whose simulated cluster runs the job to the end."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from core_agent.simulated.cluster import ClusterSpec
from tests.agents import scheduling_server
from tests.factories import eventually, job_document, to_yaml
from tests.server_process import ServerProcess

SPEC = ClusterSpec.model_validate({"nodeGroups": [{"count": 2, "gpusPerNode": 8}]})


@pytest.fixture
async def east(tmp_path: Path) -> AsyncIterator[ServerProcess]:
    """A scheduling server with one simulated cluster, `east`, streaming to it."""
    async with scheduling_server(tmp_path, "east", SPEC) as server:
        yield server


async def test_a_finished_job_shows_its_clusters_and_duration(
    east: ServerProcess, tmp_path: Path
) -> None:
    path = tmp_path / "short.yaml"
    path.write_text(to_yaml(job_document("short", replicas=1, runningEstimate="2s")))
    assert (await asyncio.to_thread(east.cli, "submit", "-f", str(path))).returncode == 0

    async def succeeded() -> bool:
        shown = await asyncio.to_thread(east.cli, "get", "ml/short")
        return "Succeeded" in shown.stdout

    await eventually(succeeded)
    listed = await asyncio.to_thread(east.cli, "jobs")
    header, row = listed.stdout.strip().splitlines()
    cells = dict(zip(header.split(), row.split(), strict=False))
    assert cells["STATE"] == "Succeeded"
    assert cells["CLUSTERS"] == "east"  # kept after the run ended
    assert cells["DURATION"] in {"1s", "2s", "3s"}  # a 2 s run, as the Global saw it start and end
    on_east = await asyncio.to_thread(east.cli, "jobs", "--cluster", "east")
    assert "short" in on_east.stdout
    elsewhere = await asyncio.to_thread(east.cli, "jobs", "--cluster", "west")
    assert "short" not in elsewhere.stdout
