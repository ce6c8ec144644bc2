"""Prefetch while waiting on the server (issue 33; SQLite and Postgres): a job waiting for a
busy cluster that holds its data has the data copied, without GPUs, to the cluster expected
to have room for it sooner - a `data_copies` row with its link bandwidth reserved - and then
starts there without staging. The copy's ends: success puts the data there and returns the
bandwidth, failure returns it and requeues nothing, the job's cancel stops it."""

from __future__ import annotations

import asyncio
import uuid

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import delete, select, update

from tests.data_documents import data_source, data_source_claim
from tests.data_rounds import apply, clusters_of, corpus, job, put_inventory, reader, rows
from tests.factories import create_cluster, job_document, split_annotations, submit
from tests.prefetch_support import copies, prefetching, report, reserved
from volcano_global.db.engine import transaction
from volcano_global.db.models import (
    Cluster,
    ClusterState,
    CopyState,
    DataCopy,
    LinkReservation,
)
from volcano_global.rpc.copies import CopyCause, CopyPhase
from volcano_global.services.data import source_uris
from volcano_global.services.data.copies import copying as running_copies
from volcano_global.services.data.copies import to_send
from volcano_global.services.data.sources import add_locality
from volcano_global.services.dispatch.supervision import supervise
from volcano_global.services.scheduling import prefetch


async def test_a_waiting_jobs_data_is_copied_where_room_comes_first_and_it_starts_there(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    uid, short = await prefetching(app, api)
    shown = await job(api, uid)
    assert shown["state"] == "Pending"
    assert "copying it to gpu-a meanwhile" in shown["pendingReason"]
    (copy,) = await copies(app)
    assert (copy.data_source, copy.bytes, copy.gbps) == ("corpus-v3", 2 * 2**40, 100.0)
    assert (copy.state, copy.job_id, copy.purpose) == (
        CopyState.PENDING,
        uuid.UUID(uid),
        "prefetch",
    )
    assert copy.item["destination"] == "/data/corpus-v3/"
    assert await reserved(api) == 100.0
    events = (await api.get(f"/api/v1/jobs/{uid}/events")).json()["items"]
    assert any(
        e["reason"] == "PrefetchStarted"
        and "corpus-v3 (2 TiB) from gpu-b to gpu-a at 100 Gbps" in e["message"]
        for e in events
    )

    assert (await app.state.scheduler.run_once()).result.placed == []
    assert len(await copies(app)) == 1  # one copy into one place, not one a round
    assert "corpus-v3 is being copied to gpu-a meanwhile" in (await job(api, uid))["pendingReason"]

    await report(app, copy, CopyPhase.COPYING)
    await report(app, copy, CopyPhase.SUCCEEDED)
    (copy,) = await copies(app)
    assert copy.state is CopyState.SUCCEEDED and copy.ended_at is not None
    assert await reserved(api) == 0
    source = (await api.get("/api/v1/datasources/corpus-v3")).json()
    assert source["clusters"] == ["gpu-b", "gpu-a"]

    assert (await api.post(f"/api/v1/jobs/{short}/cancel")).status_code == 200
    await put_inventory(api, "gpu-a")
    assert (await app.state.scheduler.run_once()).result.placed == [uid]
    assert await clusters_of(api, uid) == ["gpu-a"]
    shares, held = await rows(app, api, uid)
    assert [s.staging for s in shares] == [None]  # its data is there: no staging
    assert held == []


async def test_a_failed_copy_returns_its_bandwidth_and_requeues_nothing(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    uid, _ = await prefetching(app, api)
    (copy,) = await copies(app)
    await report(app, copy, CopyPhase.FAILED, "staging Job ml/x failed: BackoffLimitExceeded")
    (copy,) = await copies(app)
    assert (copy.state, copy.reason) == (
        CopyState.FAILED,
        "staging Job ml/x failed: BackoffLimitExceeded",
    )
    assert await reserved(api) == 0
    shown = await job(api, uid)
    assert shown["state"] == "Pending"
    events = (await api.get(f"/api/v1/jobs/{uid}/events")).json()["items"]
    assert any(e["reason"] == "PrefetchFailed" for e in events)
    source = (await api.get("/api/v1/datasources/corpus-v3")).json()
    assert source["clusters"] == ["gpu-b"]
    await report(app, copy, CopyPhase.SUCCEEDED)  # a late report changes nothing
    assert (await copies(app))[0].state is CopyState.FAILED


async def test_no_copy_goes_to_a_cluster_whose_agent_cannot_run_one(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    for name in ("gpu-a", "gpu-b"):
        await create_cluster(api, name)
    async with transaction(app.state.sessions) as session:
        await session.execute(
            update(Cluster).where(Cluster.name == "gpu-a").values(runs_copies=False)
        )
    uid, _ = await prefetching(app, api, created=True)
    assert await copies(app) == []
    assert "copying it to" not in (await job(api, uid))["pendingReason"]


async def test_cancelling_the_job_stops_its_copy(app: FastAPI, api: httpx.AsyncClient) -> None:
    uid, _ = await prefetching(app, api)
    assert (await api.post(f"/api/v1/jobs/{uid}/cancel")).status_code == 200
    (copy,) = await copies(app)
    assert copy.state is CopyState.STOPPING
    assert copy.reason.startswith("its job was cancelled")
    assert await reserved(api) == 0
    async with transaction(app.state.sessions) as session:
        held = await session.execute(
            select(LinkReservation).where(LinkReservation.copy_id.is_not(None))
        )
        assert list(held.scalars()) == []  # the copy's reservation is gone
    await report(app, copy, CopyPhase.STOPPED)
    assert (await copies(app))[0].state is CopyState.STOPPED


async def test_a_split_share_staging_and_a_prefetch_never_oversubscribe_the_links(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    """gpu-c holds the corpus and is busy for 10 h; `train` (96 GPUs) splits over gpu-a and
    gpu-b (50 Gbps between them) and stages into both (100 Gbps on each 150 Gbps link from
    gpu-c); `next` then waits for room (train's hour) and its data is prefetched over what is
    left of a link from gpu-c: 50 Gbps, the link full, never more."""
    for name in ("gpu-a", "gpu-b", "gpu-c"):
        await create_cluster(api, name)
        await put_inventory(api, name)
    for a, b, gbps in (("gpu-a", "gpu-b", 400), ("gpu-a", "gpu-c", 150), ("gpu-b", "gpu-c", 150)):
        link = {"clusterA": a, "clusterB": b, "capacityGbps": gbps}
        assert (await api.post("/api/v1/links", json=link)).status_code == 201
    await corpus(api, where="gpu-c")
    hog = await reader(api, "hog", estimate="10h")
    assert (await app.state.scheduler.run_once()).result.placed == [hog]
    await put_inventory(api, "gpu-c", used=8)
    await apply(api, data_source_claim("train-corpus", workload="train"))
    train = job_document("train", replicas=12, runningEstimate="1h")  # 96 GPUs: a split
    train["metadata"]["annotations"] = split_annotations(4, crossing_gbps=50)
    uid = (await submit(api, train)).json()["uid"]
    assert (await app.state.scheduler.run_once()).result.placed == [uid]
    assert await links(api) == {"gpu-a-gpu-b": 50.0, "gpu-a-gpu-c": 100.0, "gpu-b-gpu-c": 100.0}
    for name in ("gpu-a", "gpu-b"):
        await put_inventory(api, name, used=8)

    # `next` reads another corpus of gpu-c (the first is on its way to gpu-a and gpu-b already).
    await apply(api, data_source("corpus-v4", clusters=("gpu-c",), size="2Ti"))
    await apply(api, data_source_claim("next-corpus", source="corpus-v4", workload="next"))
    waiting = await reader(api, "next", estimate="30m", claim=False)
    for _ in range(2):  # and a second round adds nothing
        assert (await app.state.scheduler.run_once()).result.placed == []
    (copy,) = await copies(app)
    assert (copy.gbps, copy.source_cluster.name) == (50.0, "gpu-c")
    assert copy.job_id == uuid.UUID(waiting)
    held = await links(api)
    assert held[f"{copy.destination_cluster.name}-gpu-c"] == 150.0  # full, not over
    capacity = {"gpu-a-gpu-b": 400, "gpu-a-gpu-c": 150, "gpu-b-gpu-c": 150}
    assert all(held[k] <= capacity[k] for k in held)


async def links(api: httpx.AsyncClient) -> dict[str, float]:
    items = (await api.get("/api/v1/links")).json()["items"]
    return {f"{i['clusterA']}-{i['clusterB']}": i["reservedGbps"] for i in items}


async def test_a_copy_into_a_cluster_that_is_lost_fails_and_returns_its_bandwidth(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    uid, _ = await prefetching(app, api)
    async with transaction(app.state.sessions) as session:
        await session.execute(
            update(Cluster).where(Cluster.name == "gpu-a").values(state=ClusterState.NOT_READY)
        )
    async with transaction(app.state.sessions) as session:
        await supervise(session, default_timeout_s=600)
    (copy,) = await copies(app)
    assert (copy.state, copy.reason) == (CopyState.FAILED, "cluster gpu-a is NotReady")
    assert copy.cause is CopyCause.CLUSTER_LOST  # nothing of how copies into it fare
    assert await reserved(api) == 0
    assert (await job(api, uid))["state"] == "Pending"


async def test_a_copy_whose_data_got_there_by_other_means_is_stopped(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    # gpu-a's agent found corpus-v3 there (or another copy put it there) while the copy ran:
    # the copy held 100 Gbps and wrote over the data, until it ended. Now the next pass
    # stops it, and tells gpu-a's agent.
    uid, _ = await prefetching(app, api)
    async with transaction(app.state.sessions) as session:
        await supervise(session, default_timeout_s=600)  # nothing there yet: it runs on
    assert [c.state for c in await copies(app)] == [CopyState.PENDING]
    async with transaction(app.state.sessions) as session:
        await add_locality(session, source="corpus-v3", cluster="gpu-a")
    async with transaction(app.state.sessions) as session:
        await supervise(session, default_timeout_s=600)
    (copy,) = await copies(app)
    assert (copy.state, copy.reason) == (CopyState.STOPPING, "data already in gpu-a")
    assert await reserved(api) == 0
    async with transaction(app.state.sessions) as session:
        assert [c.id for c in await to_send(session, cluster_id=copy.destination_cluster_id)] == [
            copy.id
        ]
    events = (await api.get(f"/api/v1/jobs/{uid}/events")).json()["items"]
    assert any(
        e["reason"] == "PrefetchStopped" and "already in gpu-a" in e["message"] for e in events
    )


async def test_a_job_cancelled_while_the_round_commits_its_copy_keeps_no_copy_running(
    app: FastAPI, api: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The cancel comes after the commit read the job Pending, before it writes the copy: it
    # waits for the job's row (the commit locked it), then stops the copy. Unlocked
    # (Postgres), it committed first, found no copy to stop, and the copy ran for nobody.
    uid, _ = await prefetching(app, api)
    async with transaction(app.state.sessions) as session:  # the next round plans it again,
        await session.execute(delete(DataCopy))  # the job's reason unchanged (no row written)
    cancels: list[asyncio.Task[httpx.Response]] = []

    async def uris(*args: object, **kw: object) -> dict[str, str]:
        cancels.append(asyncio.create_task(api.post(f"/api/v1/jobs/{uid}/cancel")))
        await asyncio.sleep(0.5)
        return await source_uris(*args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(prefetch, "source_uris", uris)
    await app.state.scheduler.run_once()
    (cancel,) = cancels
    assert (await cancel).status_code == 200
    assert (await job(api, uid))["state"] == "Cancelled"
    (copy,) = await copies(app)
    assert copy.state is CopyState.STOPPING
    assert await reserved(api) == 0


async def test_a_checkpoints_copy_bars_no_other_jobs_checkpoint(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    # Every job's checkpoint is named `checkpoint`: one job's on its way to gpu-a is not data
    # another job's start or prefetch must wait for.
    await prefetching(app, api)
    async with transaction(app.state.sessions) as session:
        await session.execute(update(DataCopy).values(data_source="checkpoint"))
        assert await running_copies(session) == {}


async def test_deleting_a_cluster_stops_the_copies_from_it_and_tells_their_agents(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    # The copy runs from gpu-c (a cluster that never held a share: one that did cannot be
    # deleted) into gpu-a. Its row went with gpu-c (ON DELETE CASCADE): gpu-a's agent was
    # never told to stop. Now the deletion stops it (gpu-a's agent is sent the stop, an
    # event says why), and is refused until that agent says it stopped.
    uid, _ = await prefetching(app, api)
    await create_cluster(api, "gpu-c")
    async with transaction(app.state.sessions) as session:
        where = await session.scalar(select(Cluster.id).where(Cluster.name == "gpu-c"))
        await session.execute(update(DataCopy).values(source_cluster_id=where))
    refused = await api.delete("/api/v1/clusters/gpu-c")
    assert refused.status_code == 409, refused.text
    assert "corpus-v3 to gpu-a" in refused.json()["message"]
    (copy,) = await copies(app)
    assert (copy.state, copy.reason) == (CopyState.STOPPING, "cluster gpu-c is being deleted")
    assert await reserved(api) == 0
    async with transaction(app.state.sessions) as session:
        cluster = await session.scalar(select(Cluster.id).where(Cluster.name == "gpu-a"))
        assert cluster is not None
        assert [c.id for c in await to_send(session, cluster_id=cluster)] == [copy.id]
    events = (await api.get(f"/api/v1/jobs/{uid}/events")).json()["items"]
    assert any(e["reason"] == "PrefetchStopped" and "gpu-c" in e["message"] for e in events)
    await report(app, copy, CopyPhase.STOPPED)
    deleted = await api.delete("/api/v1/clusters/gpu-c")
    assert deleted.status_code == 204, deleted.text
    assert await copies(app) == []


async def test_a_refused_deletion_leaves_the_copies_into_the_cluster_running(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    # gpu-c is the source of one copy and the destination of another. The deletion is
    # refused while the first is being stopped; the second must run on as it was (its agent
    # still runs it, its bandwidth still reserved), not end Stopped with no one telling its
    # agent, and ends only with the deletion itself.
    await prefetching(app, api)
    await create_cluster(api, "gpu-c")
    async with transaction(app.state.sessions) as session:
        where = await session.scalar(select(Cluster.id).where(Cluster.name == "gpu-c"))
        first = await session.scalar(select(DataCopy))
        assert first is not None
        into = {c.key: getattr(first, c.key) for c in DataCopy.__table__.columns}
        into |= {"id": uuid.uuid4(), "destination_cluster_id": where}
        session.add(DataCopy(**into))
        await session.execute(
            update(DataCopy).where(DataCopy.id == first.id).values(source_cluster_id=where)
        )
    before = {c.id: c.state for c in await copies(app)}
    refused = await api.delete("/api/v1/clusters/gpu-c")
    assert refused.status_code == 409, refused.text
    after = {c.id: c for c in await copies(app)}
    assert after[into["id"]].state is before[into["id"]]
    assert after[first.id].state is CopyState.STOPPING
    await report(app, after[first.id], CopyPhase.STOPPED)
    assert (await api.delete("/api/v1/clusters/gpu-c")).status_code == 204
    assert await copies(app) == []


async def test_a_copy_made_for_no_job_is_shown_to_admins_only(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    await prefetching(app, api)
    async with transaction(app.state.sessions) as session:  # its job row deleted since
        await session.execute(update(DataCopy).values(job_id=None))
    assert (await api.post("/api/v1/queues", json={"name": "llm", "weight": 1})).status_code == 201
    issued = await api.post(
        "/api/v1/tokens", json={"name": "team llm", "role": "queue-user", "queues": ["llm"]}
    )
    other = {"Authorization": f"Bearer {issued.json()['token']}"}
    assert (await api.get("/api/v1/staging", headers=other)).json()["copies"] == []
    assert len((await api.get("/api/v1/staging")).json()["copies"]) == 1


async def test_a_link_held_by_a_copy_alone_is_not_deleted_and_says_why(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    await prefetching(app, api)
    refused = await api.delete("/api/v1/links/gpu-a/gpu-b")
    assert refused.status_code == 409, refused.text
    assert "copies in progress" in refused.json()["message"]
