"""A job runs across simulated member clusters end to end: submitted, placed (split over two
clusters), dispatched over the agent streams, Running only when every share runs, Succeeded
when every share has finished, and its GPUs free again."""

from __future__ import annotations

import asyncio

import httpx
from fastapi import FastAPI

from core_agent.client import AgentClient
from core_agent.simulated.cluster import ClusterSpec, SimulatedCluster
from tests.conftest import ADMIN_TOKEN
from tests.factories import create_cluster, eventually, job_document
from volcano_global.settings import Settings

SPEC = ClusterSpec.model_validate(
    {
        "nodeGroups": [{"count": 8, "gpusPerNode": 8, "gpuModel": "H100"}],
        "topology": {"tiers": [{"name": "tor", "size": 4}]},
    }
)


def settings_for(database_url: str) -> Settings:
    return Settings(
        database_url=database_url,
        admin_token=ADMIN_TOKEN,
        grpc_port=0,
        agents={"heartbeat_interval_s": 1},
        scheduling={"interval_s": 0.3},
    )


async def test_a_split_job_runs_across_two_simulated_clusters(database_url: str) -> None:
    from volcano_global.app import create_app

    app: FastAPI = create_app(settings_for(database_url))
    async with app.router.lifespan_context(app):
        api = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app),
            base_url="http://t",
            headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
        )
        clusters, clients = {}, []
        stop = asyncio.Event()
        for name in ("east", "west"):
            token = (await create_cluster(api, name))["agentToken"]
            clusters[name] = SimulatedCluster.from_spec(name, SPEC)
            clusters[name].time_scale = 0.1
            clients.append(
                AgentClient(
                    cluster=name,
                    target=f"127.0.0.1:{app.state.grpc_port}",
                    token=token,
                    source=clusters[name],
                    coalesce_s=0.05,
                )
            )
        tasks = [asyncio.create_task(c.run(stop=stop)) for c in clients]
        try:
            await api.post(
                "/api/v1/links", json={"clusterA": "east", "clusterB": "west", "capacityGbps": 400}
            )

            async def ready() -> bool:
                items = (await api.get("/api/v1/clusters")).json()["items"]
                return all(c["state"] == "Ready" and c["inventoryGeneration"] > 0 for c in items)

            await eventually(ready)
            doc = job_document(
                "train", replicas=12, runningEstimate="20s"
            )  # 96 GPUs: more than one cluster's 64
            doc["metadata"]["annotations"] = {
                "global.volcano.sh/split": "auto",
                "global.volcano.sh/unit-pods": "4",
                "global.volcano.sh/crossing-gbps": "50",
            }
            uid = (await api.post("/api/v1/jobs", json=doc)).json()["uid"]

            async def state() -> str:
                return str((await api.get(f"/api/v1/jobs/{uid}")).json()["state"])

            await eventually(lambda: _is(state(), "Running"), within=20)
            job = (await api.get(f"/api/v1/jobs/{uid}")).json()
            assert sorted(s["cluster"] for s in job["placement"]["shares"]) == ["east", "west"]
            busy = sum(n.used_gpus for c in clusters.values() for n in c.nodes.values())
            assert busy == 96  # the pods are bound in the simulated clusters
            await eventually(lambda: _is(state(), "Succeeded"), within=20)
            reasons = [
                e["reason"] for e in (await api.get(f"/api/v1/jobs/{uid}/events")).json()["items"]
            ]
            assert reasons[:4] == ["Succeeded", "Running", "Dispatched", "Placed"]
            assert sum(n.used_gpus for c in clusters.values() for n in c.nodes.values()) == 0

            async def freed() -> bool:
                items = (await api.get("/api/v1/clusters")).json()["items"]
                return all(c["capacity"][0]["free"] == 64 for c in items)

            await eventually(freed)
            assert (await api.get("/api/v1/links")).json()["items"][0]["reservedGbps"] == 0
        finally:
            stop.set()
            await asyncio.gather(*tasks)
            await api.aclose()


async def _is(value, expected: str) -> bool:  # type: ignore[no-untyped-def]
    return await value == expected
