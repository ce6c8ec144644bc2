"""Two real Global processes on one Postgres: exactly one runs the scheduling loop; when it is
killed (-9), the other takes over and jobs keep being placed, each exactly once."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import ADMIN_TOKEN, create_postgres_database, drop_postgres_database
from tests.factories import inventory, job_document
from tests.server_process import ServerProcess

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


@pytest.fixture
def replicas(tmp_path: Path, fresh_database_name: str) -> Iterator[list[ServerProcess]]:
    url = asyncio.run(create_postgres_database(fresh_database_name))
    servers = [ServerProcess(url, tmp_path, scheduling=True) for _ in range(2)]
    try:
        for server in servers:
            server.start()
        yield servers
    finally:
        for server in servers:
            server.stop()
        asyncio.run(drop_postgres_database(fresh_database_name))


def leads(server: ServerProcess) -> bool:
    text = httpx.get(f"{server.url}/metrics", headers=ADMIN, timeout=5).text
    match = re.search(r"^vglobal_scheduler_leader ([0-9.]+)$", text, re.MULTILINE)
    return match is not None and float(match.group(1)) == 1.0


def rounds(server: ServerProcess) -> float:
    """The scheduling rounds the replica ran as the leader, idle or not."""
    text = httpx.get(f"{server.url}/metrics", headers=ADMIN, timeout=5).text
    found = re.findall(r"^vglobal_scheduling_rounds_total\{[^}]*\} ([0-9.]+)$", text, re.MULTILINE)
    return sum(float(n) for n in found)


def wait_for(check, within: float = 120.0):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        result = check()
        if result:
            return result
        time.sleep(0.1)
    raise AssertionError("condition not reached in time")


def test_one_replica_schedules_and_the_other_takes_over_when_it_dies(
    replicas: list[ServerProcess],
) -> None:
    api = httpx.Client(base_url=replicas[0].url, headers=ADMIN, timeout=10)
    token = api.post("/api/v1/clusters", json={"name": "gpu-east"}).json()["agentToken"]
    response = api.put(
        "/api/v1/clusters/gpu-east/inventory",
        json=inventory("gpu-east"),
        headers={"Authorization": f"Bearer {token}"},
    )
    assert response.status_code == 200, response.text

    def one_leader() -> ServerProcess | None:
        leading = [s for s in replicas if leads(s)]
        return leading[0] if len(leading) == 1 else None

    leader = wait_for(one_leader)
    follower = next(s for s in replicas if s is not leader)
    first = api.post("/api/v1/jobs", json=job_document("first", replicas=2)).json()["uid"]
    wait_for(lambda: api.get(f"/api/v1/jobs/{first}").json()["state"] == "Placed")
    before = rounds(leader)
    wait_for(lambda: rounds(leader) >= before + 3)  # several rounds later ...
    assert leads(leader)
    assert not leads(follower)  # ... still only one leader

    leader.kill()
    survivor = httpx.Client(base_url=follower.url, headers=ADMIN, timeout=10)
    wait_for(lambda: leads(follower))
    second = survivor.post("/api/v1/jobs", json=job_document("second", replicas=2)).json()["uid"]
    wait_for(lambda: survivor.get(f"/api/v1/jobs/{second}").json()["state"] == "Placed")
    for uid in (first, second):
        reasons = [e["reason"] for e in survivor.get(f"/api/v1/jobs/{uid}/events").json()["items"]]
        assert reasons.count("Placed") == 1  # placed once, by whichever replica led
