"""Replicas end to end: a real Global (REST, gRPC, the scheduling loop, the database) and two
simulated member clusters in two regions. Corpus, in west, is read by two jobs lately: the
round copies it ahead of demand into east (a replica, for no job, in the replica namespace),
east's agent copies it over the reserved bandwidth and reports its end, and east holds it."""

from __future__ import annotations

from typing import Any

import httpx

from core_agent.simulated.cluster import SimulatedCluster
from tests.core_agent.data_federation import SPEC, corpus_in_west, reader
from tests.core_agent.federation import federation
from tests.factories import create_cluster, eventually
from volcano_global.cli.data import staging_rows

REPLICAS = {"data": {"replicate_readers": 2, "cross_region_margin": 100.0}}


async def copies(api: httpx.AsyncClient) -> list[dict[str, Any]]:
    return list((await api.get("/api/v1/staging")).json()["copies"])


async def test_a_dataset_read_by_two_jobs_is_replicated_into_the_other_region(
    database_url: str,
) -> None:
    async with federation(database_url, scheduling=REPLICAS) as fed:
        for name, region in (("east", "us-east"), ("west", "eu-west")):
            made = await create_cluster(fed.api, name, labels={"region": region})
            fed.tokens[name] = made["agentToken"]
            cluster = SimulatedCluster.from_spec(name, SPEC)
            cluster.time_scale = 0.5  # 100 GiB at 100 Gbps: 8.6 s simulated, 4.3 s here
            await fed.join(name, cluster)
        await corpus_in_west(fed)
        # Both clusters busy for 10 h: the second reader waits for west (its own copy would
        # leave the region); two readers lately make the corpus popular.
        await fed.reach(await reader(fed, "hog", "10h"), "Running")
        await fed.reach(await reader(fed, "other", "10h", reads=False), "Running")
        waiting = await reader(fed, "train", "1h")

        async def copying() -> bool:
            return [c["state"] for c in await copies(fed.api)] == ["Copying"]

        await eventually(copying)
        (row,) = staging_rows((await fed.api.get("/api/v1/staging")).json())
        assert {k: row[k] for k in ("kind", "job", "data", "from", "to", "gbps")} == {
            "kind": "replica",
            "job": "-",
            "data": "corpus",
            "from": "west",
            "to": "east",
            "gbps": 100.0,
        }
        (copy,) = await copies(fed.api)
        assert (copy["jobUid"], copy["namespace"]) == (None, "volcano-global-data")

        async def held_in_east() -> bool:
            found = (await fed.api.get("/api/v1/datasources/corpus")).json()
            return bool(found["clusters"] == ["west", "east"])

        await eventually(held_in_east)
        assert await copies(fed.api) == []  # ended: no longer listed
        links = (await fed.api.get("/api/v1/links")).json()["items"]
        assert links[0]["reservedGbps"] == 0
        events = (await fed.api.get("/api/v1/clusters/east/events")).json()["items"]
        assert {"ReplicaStarted", "ReplicaEnded"} <= {e["reason"] for e in events}
        assert (await fed.job(waiting))["state"] == "Pending"  # no room anywhere yet
