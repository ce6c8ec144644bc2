"""Prefetch copies and their jobs locked in one order (Postgres): a cluster's deletion, an
agent's report and the supervision never deadlock against a cancel of the copy's job."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Coroutine
from typing import Any, TypeVar

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import select, text, update

from tests.data_rounds import job, reader
from tests.factories import REPLY_S, create_cluster, eventually, waiting_for_locks
from tests.prefetch_support import copies, prefetching, report
from volcano_global.db.engine import transaction
from volcano_global.db.models import (
    Cluster,
    ClusterState,
    CopyState,
    DataCopy,
    Job,
)
from volcano_global.errors import Conflict
from volcano_global.rpc.copies import CopyPhase
from volcano_global.services.data import copies as copies_service
from volcano_global.services.data.sources import add_locality
from volcano_global.services.dispatch.supervision import supervise

T = TypeVar("T")


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
        await eventually(lambda: passing.done() or waiting_for_locks(app, 1))
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
            await eventually(lambda: waiting_for_locks(app, 1))
            async with transaction(app.state.sessions) as session:  # the round's commit
                row = await session.get(DataCopy, copy.id)
                clone = {c.key: getattr(row, c.key) for c in DataCopy.__table__.columns}
                session.add(DataCopy(**clone | {"id": fresh, "job_id": uuid.UUID(other)}))
            await second.execute(  # the cancel of `other`
                select(Job.id).where(Job.id == uuid.UUID(other)).with_for_update()
            )
        await eventually(lambda: deleting.done() or waiting_for_locks(app, 1))
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
        await asyncio.wait_for(report(app, copy, CopyPhase.COPYING), REPLY_S)
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
        await eventually(lambda: waiting_for_locks(app, 1))
        cancelling = asyncio.create_task(api.post(f"/api/v1/jobs/{uid}/cancel"))
        await eventually(lambda: waiting_for_locks(app, 2))
    return await asyncio.wait_for(asyncio.gather(started, cancelling), 30)
