"""Prefetch end to end: a real Global (REST, gRPC, the scheduling loop, the database) and two
simulated member clusters. A job whose data's cluster is busy for an hour, and whose other
cluster frees in half an hour, has its data copied there while it waits (no GPUs held): the
copy sent to that cluster's agent, which copies for its bytes over the reserved bandwidth and
reports its end; the data's locality gains the cluster, and the job then starts there (once it
has room) without staging. A restart of the Global in the middle of the copy loses nothing of it."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx

from core_agent.simulated.cluster import SimulatedCluster
from tests.agents import run_agent
from tests.conftest import ADMIN_TOKEN
from tests.core_agent.data_federation import SPEC, corpus_in_west, join_east_and_west, reader
from tests.core_agent.federation import Federation, federation, settings_for
from tests.factories import create_cluster, eventually
from tests.server_process import free_port
from volcano_global.app import create_app
from volcano_global.cli.data import staging_rows


async def busy_west_then_east(fed: Federation, short: str) -> None:
    """A job of the whole of west, where corpus is, for an hour, then one of the whole of
    east for `short`: both Running."""
    await fed.reach(await reader(fed, "hog", "1h"), "Running")
    await fed.reach(await reader(fed, "short", short, reads=False), "Running")


async def staging(api: httpx.AsyncClient) -> list[dict[str, Any]]:
    return list((await api.get("/api/v1/staging")).json()["copies"])


async def test_a_waiting_jobs_data_is_prefetched_and_it_then_starts_there_without_staging(
    database_url: str,
) -> None:
    async with federation(database_url) as fed:
        # 100 GiB at 100 Gbps: 8.6 s simulated, under 1 s here
        await join_east_and_west(fed, time_scale=0.1)
        await busy_west_then_east(fed, "30m")

        uid = await reader(fed, "train", "20s")
        started = await fed.event(uid, "PrefetchStarted")
        assert started.startswith("copying corpus (100 GiB) from west to east at 100 Gbps")
        await fed.event(uid, "PrefetchEnded")
        source = (await fed.api.get("/api/v1/datasources/corpus")).json()
        assert source["clusters"] == ["west", "east"]
        links = (await fed.api.get("/api/v1/links")).json()["items"]
        assert links[0]["reservedGbps"] == 0  # the copy's bandwidth returned
        assert (await fed.job(uid))["state"] == "Pending"  # no room anywhere yet

        # east's room comes once the copy is over, not at a time the copy must beat: the short
        # job's end, 12 s after its start at this scale, may come before a loaded machine's
        # round prefetched (the job then stages) or before the copy ends.
        short = (await fed.api.get("/api/v1/jobs", params={"name": "short"})).json()["items"]
        assert (await fed.api.post(f"/api/v1/jobs/{short[0]['uid']}/cancel")).status_code == 200
        job = await fed.reach(uid, "Running")
        assert [s["cluster"] for s in job["placement"]["shares"]] == ["east"]
        assert "StagingStarted" not in await fed.reasons(uid)  # its data was there
        await fed.reach(uid, "Succeeded")


async def test_a_global_restarted_in_the_middle_of_a_copy_loses_nothing_of_it(
    database_url: str,
) -> None:
    settings = settings_for(database_url, agents={"shutdown_grace_s": 0.1})
    settings = settings.model_copy(update={"grpc_port": free_port()})  # the same after restart
    target = f"127.0.0.1:{settings.grpc_port}"
    clusters = {n: SimulatedCluster.from_spec(n, SPEC) for n in ("east", "west")}
    for cluster in clusters.values():
        cluster.time_scale = 0.5  # the copy: 8.6 s simulated, 4.3 s here
    stop = asyncio.Event()
    tasks = []
    try:
        first = create_app(settings)
        async with first.router.lifespan_context(first), _rest(first) as api:
            for name, cluster in clusters.items():
                token = (await create_cluster(api, name))["agentToken"]
                tasks.append(run_agent(name, cluster, target=target, token=token, stop=stop))
            fed = Federation(first, api)
            await corpus_in_west(fed)
            await busy_west_then_east(fed, "30m")
            uid = await reader(fed, "train", "20s")
            await eventually(lambda: _phase(api, "Copying"))
            # `vglobal get staging` shows it where it shows shares' staging.
            (row,) = staging_rows((await api.get("/api/v1/staging")).json())
            assert {k: row[k] for k in ("kind", "job", "data", "from", "to", "gbps")} == {
                "kind": "prefetch",
                "job": "ml/train",
                "data": "corpus",
                "from": "west",
                "to": "east",
                "gbps": 100.0,
            }
        second = create_app(settings)
        async with second.router.lifespan_context(second), _rest(second) as api:
            fed = Federation(second, api)
            await fed.event(uid, "PrefetchEnded")
            source = (await api.get("/api/v1/datasources/corpus")).json()
            assert source["clusters"] == ["west", "east"]
            assert (await api.get(f"/api/v1/jobs/{uid}")).json()["state"] == "Pending"
            assert await staging(api) == []  # ended: no longer listed
            links = (await api.get("/api/v1/links")).json()["items"]
            assert links[0]["reservedGbps"] == 0
    finally:
        stop.set()
        await asyncio.gather(*tasks)


async def _phase(api: httpx.AsyncClient, state: str) -> bool:
    return [c["state"] for c in await staging(api)] == [state]


def _rest(app: Any) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app),
        base_url="http://t",
        headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
    )


async def test_cancelling_the_job_stops_its_copy_in_the_member_cluster(database_url: str) -> None:
    async with federation(database_url) as fed:
        clusters = await join_east_and_west(fed, time_scale=1.0)  # the copy takes 8.6 s
        await busy_west_then_east(fed, "30m")
        uid = await reader(fed, "train", "20s")
        await eventually(lambda: _phase(fed.api, "Copying"))

        assert (await fed.api.post(f"/api/v1/jobs/{uid}/cancel")).status_code == 200

        async def stopped() -> bool:
            found = (await fed.api.get(f"/api/v1/jobs/{uid}/data")).json()["copies"]
            return [c["state"] for c in found] == ["Stopped"]

        await eventually(stopped)
        (copy_id,) = clusters["east"].copies
        assert clusters["east"].copies[copy_id][0].phase.value == "Stopped"  # its agent stopped it
        source = (await fed.api.get("/api/v1/datasources/corpus")).json()
        assert source["clusters"] == ["west"]  # nothing arrived
        links = (await fed.api.get("/api/v1/links")).json()["items"]
        assert links[0]["reservedGbps"] == 0
