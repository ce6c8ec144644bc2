"""Replicas of popular datasets on the server (issue 33; SQLite and Postgres): a dataset read
by enough jobs lately gets one copy ahead of demand into the region that holds none - a
`data_copies` row of no job, purpose `replica`, in the replica namespace, its bandwidth
reserved - and no second while it runs; success makes the destination a holder, failure
returns the bandwidth and backs off."""

from __future__ import annotations

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import update

from tests.data_rounds import clusters_of, rows
from tests.replica_support import (
    cluster_events,
    held,
    read_by,
    replicas,
    replicating,
    report_on,
    two_regions,
)
from volcano_global.db.engine import transaction
from volcano_global.db.models import Cluster, CopyState
from volcano_global.rpc.copies import CopyCause, CopyPhase
from volcano_global.services.data.copies import REPLICA_NAMESPACE
from volcano_global.services.data.sources import add_locality
from volcano_global.services.dispatch.supervision import supervise
from volcano_global.settings import Settings
from volcano_global.simulation.options import SimOptions


async def test_a_dataset_read_by_enough_jobs_gets_one_replica_in_the_other_region(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    waiting = await two_regions(app, api)
    (copy,) = await replicas(app)
    assert (copy.source_cluster.name, copy.destination_cluster.name) == ("gpu-a", "gpu-b")
    assert (copy.data_source, copy.bytes, copy.gbps) == ("corpus-v3", 2**40, 100.0)
    assert (copy.job_id, copy.job_uid, copy.namespace) == (None, None, "volcano-global-data")
    assert (copy.state, copy.item["destination"]) == (CopyState.PENDING, "/data/corpus-v3/")
    links = await held(api)
    assert links == {"gpu-a-gpu-b": 100.0, "gpu-a-gpu-c": 0.0, "gpu-b-gpu-c": 0.0}
    events = await cluster_events(api, "gpu-b")
    assert any(
        e["reason"] == "ReplicaStarted"
        and "corpus-v3 (1 TiB) from gpu-a to gpu-b at 100 Gbps ahead of demand" in e["message"]
        for e in events
    )

    assert (await app.state.scheduler.run_once()).result.placed == []
    assert len(await replicas(app)) == 1  # on its way: no second one, into gpu-c or gpu-b
    assert all(v <= 150.0 for v in (await held(api)).values())

    await report_on(app, copy, CopyPhase.COPYING)
    await report_on(app, copy, CopyPhase.SUCCEEDED)
    (copy,) = await replicas(app)
    assert copy.state is CopyState.SUCCEEDED
    assert (await held(api))["gpu-a-gpu-b"] == 0.0
    source = (await api.get("/api/v1/datasources/corpus-v3")).json()
    assert source["clusters"] == ["gpu-a", "gpu-b"]
    assert any(e["reason"] == "ReplicaEnded" for e in await cluster_events(api, "gpu-b"))
    # The reader waiting for gpu-a finds its data in us-east now: it starts there, unstaged.
    assert (await app.state.scheduler.run_once()).result.placed == [waiting]
    assert await clusters_of(api, waiting) == ["gpu-b"]
    shares, _ = await rows(app, api, waiting)
    assert [s.staging for s in shares] == [None]
    assert len(await replicas(app)) == 1  # us-east holds it: no other


async def test_too_few_readers_make_no_replica(app: FastAPI, api: httpx.AsyncClient) -> None:
    await two_regions(app, api)  # three readers: a replica into gpu-b
    replicating(app, readers=5)
    (copy,) = await replicas(app)
    await report_on(app, copy, CopyPhase.FAILED, "staging Job failed", CopyCause.DESTINATION)
    await read_by(api, "fourth")  # four readers lately, fewer than five
    assert (await app.state.scheduler.run_once()).result.placed == []
    assert len(await replicas(app)) == 1


async def test_a_failed_replica_returns_its_bandwidth_and_is_not_tried_again_there(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    await two_regions(app, api)
    (copy,) = await replicas(app)
    await report_on(app, copy, CopyPhase.FAILED, "staging Job failed: ImagePullBackOff")
    (copy,) = await replicas(app)
    assert (copy.state, copy.reason) == (CopyState.FAILED, "staging Job failed: ImagePullBackOff")
    assert (await held(api))["gpu-a-gpu-b"] == 0.0
    assert any(
        e["reason"] == "ReplicaFailed" and e["type"] == "Warning"
        for e in await cluster_events(api, "gpu-b")
    )
    for _ in range(2):  # the next rounds: into the region's next cluster, once
        assert (await app.state.scheduler.run_once()).result.placed == []
    first, second = await replicas(app)
    assert (first.id, second.destination_cluster.name) == (copy.id, "gpu-c")
    assert second.state is CopyState.PENDING


async def test_replicas_turned_off_make_no_more(app: FastAPI, api: httpx.AsyncClient) -> None:
    await two_regions(app, api)
    app.state.scheduler.settings.scheduling.data.replicate_readers = 0
    (copy,) = await replicas(app)
    await report_on(app, copy, CopyPhase.FAILED, "failed")
    await app.state.scheduler.run_once()
    assert len(await replicas(app)) == 1


def test_the_replica_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    """Replicas are off unless asked for; their namespace is checked when the server starts,
    with the field named."""
    data = Settings().scheduling.data
    assert (data.replicate_readers, data.reads_window_s, data.replica_namespace) == (
        0,
        SimOptions().reads_window_s,  # the simulator's
        REPLICA_NAMESPACE,  # the commit's default, and deploy/base/replicas'
    )
    monkeypatch.setenv("VGLOBAL_SCHEDULING__DATA__REPLICATE_READERS", "3")
    assert Settings().scheduling.data.replicate_readers == 3
    for bad, said in (
        ("kube-data", "system namespace"),
        ("Data_Copies", "DNS-1123 label"),
        ("volcano-global-agent", "agents. own namespace"),
    ):
        monkeypatch.setenv("VGLOBAL_SCHEDULING__DATA__REPLICA_NAMESPACE", bad)
        with pytest.raises(ValueError, match=rf"scheduling.data.replica_namespace .*{said}"):
            Settings()


async def test_a_replica_is_shown_to_admins_only(app: FastAPI, api: httpx.AsyncClient) -> None:
    await two_regions(app, api)
    assert (await api.post("/api/v1/queues", json={"name": "llm", "weight": 1})).status_code == 201
    issued = await api.post(
        "/api/v1/tokens", json={"name": "team llm", "role": "queue-user", "queues": ["llm"]}
    )
    other = {"Authorization": f"Bearer {issued.json()['token']}"}
    assert (await api.get("/api/v1/staging", headers=other)).json()["copies"] == []
    (shown,) = (await api.get("/api/v1/staging")).json()["copies"]
    assert (shown["purpose"], shown["jobUid"], shown["cluster"]) == ("replica", None, "gpu-b")


async def test_a_replica_whose_data_got_there_by_other_means_is_stopped(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    await two_regions(app, api)
    async with transaction(app.state.sessions) as session:
        await add_locality(session, source="corpus-v3", cluster="gpu-b")
    async with transaction(app.state.sessions) as session:
        await supervise(session, default_timeout_s=600)
    (copy,) = await replicas(app)
    assert (copy.state, copy.reason) == (CopyState.STOPPING, "data already in gpu-b")
    assert (await held(api))["gpu-a-gpu-b"] == 0.0
    assert any(
        e["reason"] == "ReplicaStopped" and "already in gpu-b" in e["message"]
        for e in await cluster_events(api, "gpu-b")
    )


async def test_no_replica_goes_to_a_cluster_whose_agent_cannot_run_one(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    await two_regions(app, api)
    (copy,) = await replicas(app)
    await report_on(app, copy, CopyPhase.STOPPED)  # ended, and not by a failure
    async with transaction(app.state.sessions) as session:
        await session.execute(
            update(Cluster).where(Cluster.name == "gpu-b").values(runs_copies=False)
        )
    assert (await app.state.scheduler.run_once()).result.placed == []
    _, again = await replicas(app)
    assert again.destination_cluster.name == "gpu-c"


async def test_a_deleted_data_sources_running_replica_is_stopped(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    await two_regions(app, api)
    assert (await api.delete("/api/v1/datasources/corpus-v3")).status_code == 204
    (copy,) = await replicas(app)
    assert (copy.state, copy.reason) == (CopyState.STOPPING, "its DataSource corpus-v3 was deleted")
    assert (await held(api))["gpu-a-gpu-b"] == 0.0
    assert any(e["reason"] == "ReplicaStopped" for e in await cluster_events(api, "gpu-b"))
    assert (await api.delete("/api/v1/datasources/corpus-v3")).status_code == 404
