"""Prefetch while waiting on the server (issue 33; SQLite and Postgres): a job waiting for a
busy cluster that holds its data has the data copied, without GPUs, to the cluster expected
to have room for it sooner - a `data_copies` row with its link bandwidth reserved - and then
starts there without staging. The copy's ends: success puts the data there and returns the
bandwidth, failure returns it and requeues nothing, the job's cancel stops it."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Coroutine
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import delete, select, text, update

from tests.data_documents import data_source, data_source_claim
from tests.data_rounds import apply, clusters_of, corpus, job, put_inventory, reader, rows
from tests.factories import create_cluster, eventually, job_document, split_annotations, submit
from volcano_global.db.engine import transaction
from volcano_global.db.models import (
    Cluster,
    ClusterState,
    CopyState,
    DataCopy,
    Job,
    LinkReservation,
)
from volcano_global.errors import Conflict
from volcano_global.rpc.copies import CopyPhase, CopyStatus
from volcano_global.services.data import copies as copies_service
from volcano_global.services.data import copy_backoff, source_uris
from volcano_global.services.data.copies import apply_report, to_send
from volcano_global.services.data.copies import copying as running_copies
from volcano_global.services.data.sources import add_locality
from volcano_global.services.dispatch.supervision import supervise
from volcano_global.services.scheduling import prefetch

T = TypeVar("T")


async def reserved(api: httpx.AsyncClient) -> float:
    return float((await api.get("/api/v1/links")).json()["items"][0]["reservedGbps"])


async def copies(app: FastAPI) -> list[DataCopy]:
    async with transaction(app.state.sessions) as session:
        found = await session.execute(select(DataCopy).order_by(DataCopy.created_at))
        return list(found.scalars())


async def report(app: FastAPI, copy: DataCopy, phase: CopyPhase, message: str = "") -> None:
    """The destination's agent says where the copy stands."""
    async with transaction(app.state.sessions) as session:
        cluster = await session.scalar(select(Cluster.id).where(Cluster.name == "gpu-a"))
        assert cluster is not None
        await apply_report(
            session,
            cluster_id=cluster,
            status=CopyStatus(copy_id=str(copy.id), phase=phase, message=message),
        )


async def prefetching(
    app: FastAPI, api: httpx.AsyncClient, *, created: bool = False
) -> tuple[str, str]:
    """gpu-b holds corpus-v3 (2 TiB) and runs `hog` (it reads the corpus) for 10 more hours;
    gpu-a runs `short` (reads nothing) for 30 more minutes. `train` (64 GPUs, reads the
    corpus) fits in neither now. By hand: a holder has room in about 10 h; staging into gpu-a
    at 100 Gbps takes 2 TiB * 8 / 100 Gbps = 176 s, and gpu-a has room in about 30 min; so
    room and data are both in gpu-a in 30 min, sooner than 10 h: copy it there now."""
    for name in ("gpu-a", "gpu-b"):
        if not created:
            await create_cluster(api, name)
        await put_inventory(api, name)
    link = {"clusterA": "gpu-a", "clusterB": "gpu-b", "capacityGbps": 400}
    assert (await api.post("/api/v1/links", json=link)).status_code == 201
    await corpus(api)
    hog = await reader(api, "hog", estimate="10h")
    assert (await app.state.scheduler.run_once()).result.placed == [hog]
    short = await reader(api, "short", estimate="30m", claim=False)
    assert (await app.state.scheduler.run_once()).result.placed == [short]
    assert (await clusters_of(api, hog), await clusters_of(api, short)) == (["gpu-b"], ["gpu-a"])
    for name in ("gpu-a", "gpu-b"):  # their pods run: the agents' inventories say so
        await put_inventory(api, name, used=8)
    uid = await reader(api)
    assert (await app.state.scheduler.run_once()).result.placed == []
    return uid, short


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


async def ended_ago(app: FastAPI, seconds: float) -> None:
    """Every copy's end moved `seconds` further into the past (time passes)."""
    async with transaction(app.state.sessions) as session:
        for copy in (await session.execute(select(DataCopy))).scalars():
            if copy.ended_at is not None:
                copy.ended_at -= timedelta(seconds=seconds)


async def test_a_failed_copy_is_not_made_again_until_its_backoff_ends_which_grows(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    # A copy refused every time (a namespace the agent refuses) was made again every round:
    # 5 failures, 6 rows. Now: none into gpu-a for 5 min, then 10 min after the second.
    uid, _ = await prefetching(app, api)
    (copy,) = await copies(app)
    await report(app, copy, CopyPhase.FAILED, "refused: namespace kube-system")
    for _ in range(3):
        assert (await app.state.scheduler.run_once()).result.placed == []
    assert len(await copies(app)) == 1
    assert "copying it to" not in (await job(api, uid))["pendingReason"]
    await ended_ago(app, 301)
    await app.state.scheduler.run_once()
    first, second = await copies(app)
    assert second.state is CopyState.PENDING and second.destination_cluster_id == (
        first.destination_cluster_id
    )
    await report(app, second, CopyPhase.FAILED, "refused: namespace kube-system")
    await ended_ago(app, 301)  # the second failure's backoff is 10 min
    await app.state.scheduler.run_once()
    assert len(await copies(app)) == 2
    await ended_ago(app, 601)
    await app.state.scheduler.run_once()
    assert len(await copies(app)) == 3


async def failed_before(app: FastAPI, copy: DataCopy, count: int) -> None:
    """`count` more failed copies into the copy's destination, for no job (other jobs'),
    2 min apart (each its own incident)."""
    await failed_into(app, copy, [(120.0 * (i + 1), f"ImagePullBackOff {i}") for i in range(count)])


async def failed_into(
    app: FastAPI, copy: DataCopy, failures: list[tuple[float, str]], *, same_job: bool = False
) -> None:
    """Failed copies into the copy's destination (seconds before its end, reason), for no
    job (each another deleted job's: in its own namespace) or, `same_job`, for its job."""
    async with transaction(app.state.sessions) as session:
        row = await session.get(DataCopy, copy.id)
        assert row is not None and row.ended_at is not None
        for ago, why in failures:
            clone = {c.key: getattr(row, c.key) for c in DataCopy.__table__.columns}
            clone |= {"id": uuid.uuid4(), "reason": why, "state": CopyState.FAILED}
            if not same_job:
                clone |= {"job_id": None, "namespace": f"team-{uuid.uuid4().hex[:8]}"}
            clone["ended_at"] = row.ended_at - timedelta(seconds=ago)
            session.add(DataCopy(**clone))


async def broken(app: FastAPI) -> copy_backoff.Broken:
    async with transaction(app.state.sessions) as session:
        return await copy_backoff.broken_destinations(session, now=datetime.now(UTC))


async def test_a_cluster_whose_copies_keep_failing_gets_none_for_any_job_for_a_while(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    # Copies into gpu-a failed three times in a row, for three jobs: a fourth job's data is
    # not copied there (it was: one failed copy per waiting job), and its reason says why;
    # after the backoff one copy tries again (the probe), and while it runs no other goes.
    await prefetching(app, api)
    (copy,) = await copies(app)
    await report(app, copy, CopyPhase.FAILED, "ErrImagePull")
    await failed_before(app, copy, 2)
    other = await reader(api, "other")
    await app.state.scheduler.run_once()
    assert len(await copies(app)) == 3
    reason = (await job(api, other))["pendingReason"]
    assert "not copying it to gpu-a meanwhile: copies into it failed 3 times in a row" in reason
    assert "for 3 jobs (the last: ErrImagePull)" in reason
    await ended_ago(app, 301)
    assert list((await broken(app)).probe) == ["gpu-a"]
    await app.state.scheduler.run_once()
    assert [c.state for c in await copies(app)].count(CopyState.PENDING) == 1
    assert "the others wait for it" in (await broken(app)).barred["gpu-a"]
    await app.state.scheduler.run_once()
    assert [c.state for c in await copies(app)].count(CopyState.PENDING) == 1


async def test_an_older_copy_failing_while_the_probe_runs_lets_no_second_probe_go(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    # Three incidents 2 min apart bar gpu-a; a copy of other data made before the bar still
    # copies (not a probe: the bar ends and one probe goes). The probe P is made; the old
    # copy fails a minute later (a fourth incident, after P was made): 12 min on, its
    # backoff over, P still pending, a second probe went out (P counted as the probe only if
    # made after the last failure). P is made after the bar began: gpu-a stays barred.
    await prefetching(app, api)
    (copy,) = await copies(app)
    await report(app, copy, CopyPhase.FAILED, "ErrImagePull")
    await failed_before(app, copy, 2)
    async with transaction(app.state.sessions) as session:
        row = await session.get(DataCopy, copy.id)
        assert row is not None
        clone = {c.key: getattr(row, c.key) for c in DataCopy.__table__.columns}
        old = uuid.uuid4()
        clone |= {"id": old, "state": CopyState.COPYING, "ended_at": None, "reason": ""}
        clone |= {"data_source": "weights-v1", "created_at": row.created_at - timedelta(hours=1)}
        session.add(DataCopy(**clone))
    await reader(api, "other")
    await ended_ago(app, 301)
    assert list((await broken(app)).probe) == ["gpu-a"]  # the old copy is no probe
    await app.state.scheduler.run_once()
    probe = [c for c in await copies(app) if c.state is CopyState.PENDING]
    assert len(probe) == 1
    assert "the others wait for it" in (await broken(app)).barred["gpu-a"]
    async with transaction(app.state.sessions) as session:
        await session.execute(
            update(DataCopy)
            .where(DataCopy.id == old)
            .values(state=CopyState.FAILED, reason="disk full", ended_at=datetime.now(UTC))
        )
        later = datetime.now(UTC) + timedelta(minutes=12)
        found = await copy_backoff.broken_destinations(session, now=later)
    assert (found.probe, list(found.barred)) == ({}, ["gpu-a"])
    assert "failed 4 times in a row" in found.barred["gpu-a"]
    assert "the others wait for it" in found.barred["gpu-a"]


async def test_copies_failing_together_are_one_incident(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    # Ten copies for ten jobs failing within a minute (one cause) bar nothing; three apart do.
    await prefetching(app, api)
    (copy,) = await copies(app)
    await report(app, copy, CopyPhase.STOPPED)
    await failed_into(app, copy, [(5.0 * i, "volume full") for i in range(10)])
    assert await broken(app) == ({}, {})
    await failed_into(app, copy, [(120.0, "volume full"), (240.0, "volume full")])
    assert list((await broken(app)).barred) == ["gpu-a"]


async def test_a_lost_cluster_and_the_jobs_namespace_refused_count_no_failure_into_it(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    # fail_lost's copies (the cluster was NotReady a while) and the refusals of the job's
    # namespace (the job's choice: by the agent, or by the API server) say nothing of the
    # destination.
    await prefetching(app, api)
    (copy,) = await copies(app)
    await report(app, copy, CopyPhase.STOPPED)
    lost = [(120.0 * i, "cluster gpu-a is NotReady") for i in range(4)]
    refused = [
        (60.0 + 120.0 * i, "the agent creates no job in its own namespace 'vg'") for i in range(4)
    ]
    await failed_into(app, copy, lost + refused)
    assert await broken(app) == ({}, {})
    # The API server refusing the staging Job for the job's namespace: not in the cluster, or
    # RBAC grants the agent no write there (a namespace it does not serve).
    job = "creating staging Job team-a/train-stage-1"
    missing = f'{job}: namespaces "team-a" not found'
    forbidden = (
        f'{job}: jobs.batch is forbidden: User "system:serviceaccount:vg:agent" cannot create '
        'resource "jobs" in API group "batch" in the namespace "team-a"'
    )
    await failed_into(app, copy, [(30.0 + 120.0 * i, missing) for i in range(4)])
    await failed_into(app, copy, [(90.0 + 120.0 * i, forbidden) for i in range(4)])
    assert await broken(app) == ({}, {})


async def test_one_jobs_failures_alone_do_not_bar_the_cluster(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    # One job's copies failing again and again are its own backoff's business (`barred`);
    # another job's failure too makes the cluster's.
    await prefetching(app, api)
    (copy,) = await copies(app)
    await report(app, copy, CopyPhase.FAILED, "checksum mismatch")
    await failed_into(app, copy, [(120.0, "checksum mismatch"), (240.0, "x")], same_job=True)
    assert await broken(app) == ({}, {})
    await failed_into(app, copy, [(360.0, "ErrImagePull")])
    assert list((await broken(app)).barred) == ["gpu-a"]


async def test_a_deleted_jobs_failures_count_as_one_job(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    # Deleting a job leaves its copies without one (job_id NULL): its three failed retries
    # counted as three jobs, and barred the cluster for one job's failures.
    await prefetching(app, api)
    (copy,) = await copies(app)
    await report(app, copy, CopyPhase.FAILED, "checksum mismatch")
    await failed_into(app, copy, [(120.0, "checksum mismatch"), (240.0, "x")], same_job=True)
    async with transaction(app.state.sessions) as session:
        await session.execute(delete(Job).where(Job.id == copy.job_id))
    assert {c.job_id for c in await copies(app)} == {None}
    assert await broken(app) == ({}, {})
    await failed_into(app, copy, [(360.0, "ErrImagePull")])  # another (deleted) job's
    assert list((await broken(app)).barred) == ["gpu-a"]


async def test_a_success_into_the_cluster_ends_its_run_of_failures(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    await prefetching(app, api)
    (copy,) = await copies(app)
    await report(app, copy, CopyPhase.FAILED, "ErrImagePull")
    await failed_before(app, copy, 3)
    now = datetime.now(UTC)
    async with transaction(app.state.sessions) as session:
        assert list((await copy_backoff.broken_destinations(session, now=now)).barred) == ["gpu-a"]
        await session.execute(  # the latest of the four succeeded instead
            update(DataCopy).where(DataCopy.id == copy.id).values(state=CopyState.SUCCEEDED)
        )
        assert await copy_backoff.broken_destinations(session, now=now) == ({}, {})


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


@pytest.mark.parametrize("database_url", ["postgres"], indirect=True)  # row locks
async def test_deleting_a_cluster_while_a_job_of_its_copies_is_cancelled_does_not_deadlock(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    # The deletion locked the copy, then wrote its job's event (whose key check waits for the
    # job's row); the cancel locked the job, then waited for the copy: Postgres found a
    # deadlock and failed one. The events table held by a third transaction makes both wait
    # at their worst points: the deletion before its event, the cancel after the deletion's
    # first lock. Now the deletion locks the job first, and the cancel waits for it.
    uid, _ = await prefetching(app, api)
    await create_cluster(api, "gpu-c")
    async with transaction(app.state.sessions) as session:
        where = await session.scalar(select(Cluster.id).where(Cluster.name == "gpu-c"))
        await session.execute(update(DataCopy).values(source_cluster_id=where))
    deleted, cancelled = await against_a_cancel(app, api, uid, api.delete("/api/v1/clusters/gpu-c"))
    assert (deleted.status_code, cancelled.status_code) == (409, 200), (
        deleted.text,
        cancelled.text,
    )
    (copy,) = await copies(app)
    assert (copy.state, copy.reason) == (CopyState.STOPPING, "cluster gpu-c is being deleted")
    assert (await job(api, uid))["state"] == "Cancelled"


@pytest.mark.parametrize("database_url", ["postgres"], indirect=True)  # row locks
async def test_a_failed_copys_report_and_its_jobs_cancel_at_once_do_not_deadlock(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    # The same order for an agent's report of a failed copy (its PrefetchFailed event).
    uid, _ = await prefetching(app, api)
    (copy,) = await copies(app)
    _, cancelled = await against_a_cancel(
        app, api, uid, report(app, copy, CopyPhase.FAILED, "refused")
    )
    assert cancelled.status_code == 200, cancelled.text
    (copy,) = await copies(app)
    assert (copy.state, copy.reason) == (CopyState.FAILED, "refused")


@pytest.mark.parametrize("database_url", ["postgres"], indirect=True)  # row locks
async def test_a_lost_clusters_copy_failing_while_its_job_is_cancelled_does_not_deadlock(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    # The same order for the supervision that fails the copies into a lost cluster.
    uid, _ = await prefetching(app, api)
    async with transaction(app.state.sessions) as session:
        await session.execute(
            update(Cluster).where(Cluster.name == "gpu-a").values(state=ClusterState.NOT_READY)
        )

    async def supervising() -> None:
        async with transaction(app.state.sessions) as session:
            await copies_service.supervise_copies(session)

    _, cancelled = await against_a_cancel(app, api, uid, supervising())
    assert cancelled.status_code == 200, cancelled.text
    (copy,) = await copies(app)
    assert (copy.state, copy.reason) == (CopyState.FAILED, "cluster gpu-a is NotReady")


@pytest.mark.parametrize("database_url", ["postgres"], indirect=True)  # row locks
async def test_supervision_holds_no_copy_of_a_job_it_cannot_lock(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    # The copy's cluster is lost and its data is there too. A cancel holds the job, then
    # locks the copy. Supervision locked the copy (fail_lost skipped its job but not the
    # copy), then waited for the job (stop_arrived): Postgres found a deadlock. Now it
    # skips the job and its copies; the next pass fails the copy.
    uid, _ = await prefetching(app, api)
    (copy,) = await copies(app)
    async with transaction(app.state.sessions) as session:
        await session.execute(
            update(Cluster).where(Cluster.name == "gpu-a").values(state=ClusterState.NOT_READY)
        )
        await add_locality(session, source="corpus-v3", cluster="gpu-a")

    async def supervising() -> None:
        async with transaction(app.state.sessions) as session:
            await supervise(session, default_timeout_s=600)

    async with app.state.sessions() as holder, holder.begin():
        await holder.execute(select(Job.id).where(Job.id == uuid.UUID(uid)).with_for_update())
        passing = asyncio.create_task(supervising())
        await eventually(lambda: passing.done() or waiting_for_locks(app, 1), within=10)
        await holder.execute(select(DataCopy.id).where(DataCopy.id == copy.id).with_for_update())
    await asyncio.wait_for(passing, 30)
    assert (await copies(app))[0].state is CopyState.PENDING
    await supervising()
    (copy,) = await copies(app)
    assert (copy.state, copy.reason) == (CopyState.FAILED, "cluster gpu-a is NotReady")


@pytest.mark.parametrize("database_url", ["postgres"], indirect=True)  # row locks
async def test_a_copy_made_while_a_deletion_waits_for_jobs_is_not_locked_before_its_job(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    # The deletion of gpu-a waits for train's row; meanwhile a round commits a copy for
    # `other`, whose cancel then holds it. The deletion locked that copy and then other's row
    # while the cancel waited for the copy: a deadlock. Now the copy is left out of the pass,
    # and the deletion refused (delete again).
    uid, _ = await prefetching(app, api)
    other = await reader(api, "other")
    (copy,) = await copies(app)
    fresh = uuid.uuid4()

    async def deletion() -> None:  # its pass over copies (gpu-a runs `short`: refused first)
        async with transaction(app.state.sessions) as session:
            where = copy.destination_cluster_id
            await copies_service.stop_cluster_copies(session, cluster_id=where, name="gpu-a")

    async with app.state.sessions() as second, second.begin():
        async with app.state.sessions() as first, first.begin():
            await first.execute(select(Job.id).where(Job.id == uuid.UUID(uid)).with_for_update())
            deleting = asyncio.create_task(deletion())
            await eventually(lambda: waiting_for_locks(app, 1), within=10)
            async with transaction(app.state.sessions) as session:  # the round's commit
                row = await session.get(DataCopy, copy.id)
                clone = {c.key: getattr(row, c.key) for c in DataCopy.__table__.columns}
                session.add(DataCopy(**clone | {"id": fresh, "job_id": uuid.UUID(other)}))
            await second.execute(  # the cancel of `other`
                select(Job.id).where(Job.id == uuid.UUID(other)).with_for_update()
            )
        await eventually(lambda: deleting.done() or waiting_for_locks(app, 1), within=10)
        await second.execute(select(DataCopy.id).where(DataCopy.id == fresh).with_for_update())
    with pytest.raises(Conflict, match="made meanwhile: delete it again"):
        await asyncio.wait_for(deleting, 30)
    assert {c.state for c in await copies(app)} == {CopyState.PENDING}


@pytest.mark.parametrize("database_url", ["postgres"], indirect=True)  # row locks
async def test_a_copys_progress_report_does_not_wait_for_its_jobs_row(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    # Progress writes no event: a round's commit holding the job does not hold up the report.
    uid, _ = await prefetching(app, api)
    (copy,) = await copies(app)
    async with app.state.sessions() as holder, holder.begin():
        await holder.execute(select(Job.id).where(Job.id == uuid.UUID(uid)).with_for_update())
        await asyncio.wait_for(report(app, copy, CopyPhase.COPYING), 5)
    assert (await copies(app))[0].state is CopyState.COPYING


async def against_a_cancel(
    app: FastAPI, api: httpx.AsyncClient, uid: str, first: Coroutine[Any, Any, T]
) -> tuple[T, httpx.Response]:
    """`first` and a cancel of job `uid`, each made to wait at its worst point: the events
    table held by a third transaction stops `first` before it writes its event, and the cancel
    after `first`'s earlier locks. Returns both results once the table is let go."""
    async with app.state.sessions() as holder, holder.begin():
        await holder.execute(text("LOCK TABLE events IN SHARE MODE"))
        started = asyncio.ensure_future(first)
        await eventually(lambda: waiting_for_locks(app, 1), within=10)
        cancelling = asyncio.create_task(api.post(f"/api/v1/jobs/{uid}/cancel"))
        await eventually(lambda: waiting_for_locks(app, 2), within=10)
    return await asyncio.wait_for(asyncio.gather(started, cancelling), 30)


async def waiting_for_locks(app: FastAPI, count: int) -> bool:
    async with app.state.engine.connect() as connection:
        waiting = await connection.execute(
            text(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND wait_event_type = 'Lock'"
            )
        )
        return bool(waiting.scalar_one() >= count)


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


def test_the_backoff_stays_at_its_cap_however_many_copies_failed() -> None:
    # failed rows are kept: after about a thousand, 2**n no longer fits a float
    assert copy_backoff.retry_after(1) == copy_backoff.RETRY_AFTER_S
    assert copy_backoff.retry_after(5000) == copy_backoff.RETRY_CAP_S
