"""`vglobal describe` and `vglobal get` in kubectl's words, read as a user reads them: the real
CLI against a real scheduling server whose simulated cluster runs the job."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from core_agent.simulated.cluster import ClusterSpec
from tests.agents import scheduling_server
from tests.factories import eventually, job_document, to_yaml
from tests.server_process import ServerProcess

SPEC = ClusterSpec.model_validate(
    {
        "nodeGroups": [{"count": 16, "gpusPerNode": 8}],
        "topology": {"tiers": [{"name": "tor", "size": 4}, {"name": "spine", "size": 2}]},
    }
)


@pytest.fixture
async def east(tmp_path: Path) -> AsyncIterator[ServerProcess]:
    """A scheduling server with `east` (a simulated cluster with two spines over four ToRs,
    streaming) and `west` (registered, no agent), linked at 100 Gbps."""
    async with scheduling_server(tmp_path, "east", SPEC) as server:
        with server.admin() as api:
            assert api.post("/api/v1/clusters", json={"name": "west"}).status_code == 201
            link = {"clusterA": "east", "clusterB": "west", "capacityGbps": 100, "latencyMs": 5}
            assert api.post("/api/v1/links", json=link).status_code == 201
        yield server


async def cli(server: ServerProcess, *args: str) -> str:
    done = await asyncio.to_thread(server.cli, *args)
    assert done.returncode == 0, done.stderr
    return done.stdout


def fields(text: str) -> dict[str, str]:
    """`Key:   value` lines as kubectl describe prints them."""
    found = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and line[:1].isalpha():  # table rows and headers start with a space
            found[key] = value.strip()
    return found


async def test_describe_tells_a_running_job_and_its_cluster(
    east: ServerProcess, tmp_path: Path
) -> None:
    path = tmp_path / "long.yaml"
    path.write_text(to_yaml(job_document("long", replicas=2, gpus=8, runningEstimate="1h")))
    await cli(east, "submit", "-f", str(path))

    async def running() -> bool:
        return "Running" in await cli(east, "get", "ml/long")

    await eventually(running)

    job = await cli(east, "describe", "job", "ml/long")
    told = fields(job)
    assert (
        told["Name"] == "long" and told["Namespace"] == "ml" and told["State"].startswith("Running")
    )
    assert told["Gang"].startswith("2 pods (") and "16 GPUs" in told["Gang"]
    assert told["Placement"].startswith("generation 1")
    share = next(line for line in job.splitlines() if line.split()[:1] == ["east"])
    assert share.split()[1:3] == ["2", "16"] and "Running" in share  # pods, GPUs, phase
    assert "Why pending" not in told  # a running job has no pending reason to tell
    reasons = job.split("Events:")[1]
    assert "Submitted" in reasons and "Placed" in reasons

    cluster = await cli(east, "describe", "cluster", "east")
    told = fields(cluster)
    assert told["State"] == "Ready" and told["Nodes"] == "16 ready of 16"
    assert told["Inventory"].startswith("generation ")
    top = cluster.split("Topology")[1].split("Links:")[0]
    assert len([line for line in top.splitlines() if "spine" in line]) == 2  # the top tier only
    assert "tor-" not in top
    links = cluster.split("Links:")[1].split("Events")[0]
    assert "west" in links and "100" in links
    assert "Registered" in cluster.split("Events")[1]

    as_json = json.loads(await cli(east, "describe", "vcjob", "long", "-o", "json"))
    assert as_json["job"]["state"] == "Running" and as_json["events"]


async def test_get_takes_kubectls_words_for_the_fleet(east: ServerProcess) -> None:
    clusters = await cli(east, "get", "clusters")
    assert "east" in clusters and "west" in clusters
    one = await cli(east, "get", "cluster", "west", "-o", "json")
    assert json.loads(one)["name"] == "west"
    assert "east" in await cli(east, "get", "links", "west")
    assert "system-node-critical" in await cli(east, "get", "pc")
    queue = json.loads(await cli(east, "get", "queue", "default", "-o", "json"))
    assert queue["name"] == "default"

    missing = await asyncio.to_thread(east.cli, "get", "links", "nowhere")
    assert missing.returncode == 1 and "404 Not Found" in missing.stderr
    watched = await asyncio.to_thread(east.cli, "get", "clusters", "-w")
    assert watched.returncode == 1 and "-w follows the list of jobs or of queues" in watched.stderr
    source = await asyncio.to_thread(east.cli, "get", "datasources", "corpus")
    assert source.returncode == 1 and "404 Not Found" in source.stderr  # not "no job named"
    wrong = await asyncio.to_thread(east.cli, "describe", "node", "n1")
    assert wrong.returncode == 1
    assert "cannot describe 'node': expected job, cluster or queue" in wrong.stderr
