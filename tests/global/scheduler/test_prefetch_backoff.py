"""Failed prefetch copies back off (issue 33; SQLite and Postgres): per job and cluster, and per
destination cluster when copies into it keep failing for several jobs, then one probe."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import httpx
from fastapi import FastAPI
from sqlalchemy import delete, update

from tests.data_rounds import job, reader
from tests.prefetch_support import (
    a_copy_ended,
    broken,
    copies,
    ended_ago,
    failed_before,
    failed_into,
    prefetching,
    report,
)
from volcano_global.db.engine import transaction
from volcano_global.db.models import (
    CopyState,
    DataCopy,
    Job,
)
from volcano_global.rpc.copies import CopyCause, CopyPhase
from volcano_global.services.data import copy_backoff
from volcano_global.services.data.copies import REPLICA, REPLICA_NAMESPACE


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


async def test_a_cluster_whose_copies_keep_failing_gets_none_for_any_job_for_a_while(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    # Copies into gpu-a failed three times in a row, for three jobs: a fourth job's data is
    # not copied there (it was: one failed copy per waiting job), and its reason says why;
    # after the backoff one copy tries again (the probe), and while it runs no other goes.
    copy = await a_copy_ended(app, api, CopyPhase.FAILED, "ErrImagePull")
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
    copy = await a_copy_ended(app, api, CopyPhase.FAILED, "ErrImagePull")
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
    copy = await a_copy_ended(app, api, CopyPhase.STOPPED)
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
    copy = await a_copy_ended(app, api, CopyPhase.STOPPED)
    lost = [(120.0 * i, "cluster gpu-a is NotReady") for i in range(4)]
    await failed_into(app, copy, lost, cause=CopyCause.CLUSTER_LOST)
    refused = [
        (60.0 + 120.0 * i, "the agent creates no job in its own namespace 'vg'") for i in range(4)
    ]
    await failed_into(app, copy, refused, cause=CopyCause.NAMESPACE_REFUSED)
    assert await broken(app) == ({}, {})
    # The API server refusing the staging Job for the job's namespace: not in the cluster, or
    # RBAC grants the agent no write there (a namespace it does not serve); in one namespace,
    # however many jobs' copies.
    job = "creating staging Job team-a/train-stage-1"
    missing = f'{job}: namespaces "team-a" not found'
    forbidden = (
        f'{job}: jobs.batch is forbidden: User "system:serviceaccount:vg:agent" cannot create '
        'resource "jobs" in API group "batch" in the namespace "team-a"'
    )
    for ago, why, cause in ((30.0, missing, "namespace-missing"), (90.0, forbidden, "forbidden")):
        failures = [(ago + 120.0 * i, why) for i in range(4)]
        await failed_into(app, copy, failures, cause=CopyCause(cause), namespace="team-a")
    assert await broken(app) == ({}, {})


async def test_one_jobs_failures_alone_do_not_bar_the_cluster(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    # One job's copies failing again and again are its own backoff's business (`barred`);
    # another job's failure too makes the cluster's.
    copy = await a_copy_ended(app, api, CopyPhase.FAILED, "checksum mismatch")
    await failed_into(app, copy, [(120.0, "checksum mismatch"), (240.0, "x")], same_job=True)
    assert await broken(app) == ({}, {})
    await failed_into(app, copy, [(360.0, "ErrImagePull")])
    assert list((await broken(app)).barred) == ["gpu-a"]


async def test_a_deleted_jobs_failures_count_as_one_job(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    # Deleting a job leaves its copies without one (job_id NULL): its three failed retries
    # counted as three jobs, and barred the cluster for one job's failures.
    copy = await a_copy_ended(app, api, CopyPhase.FAILED, "checksum mismatch")
    await failed_into(app, copy, [(120.0, "checksum mismatch"), (240.0, "x")], same_job=True)
    async with transaction(app.state.sessions) as session:
        await session.execute(delete(Job).where(Job.id == copy.job_id))
    assert {c.job_id for c in await copies(app)} == {None}
    assert await broken(app) == ({}, {})
    await failed_into(app, copy, [(360.0, "ErrImagePull")])  # another (deleted) job's
    assert list((await broken(app)).barred) == ["gpu-a"]


async def test_failed_replicas_alone_count_as_one_job(app: FastAPI, api: httpx.AsyncClient) -> None:
    # Replicas (copies for no job) of three datasets failing into gpu-a, each its own
    # incident: one job's failures, which bar no cluster to every job's copies.
    copy = await a_copy_ended(app, api, CopyPhase.FAILED, "ErrImagePull")
    async with transaction(app.state.sessions) as session:
        await session.execute(
            update(DataCopy)
            .where(DataCopy.id == copy.id)
            .values(job_id=None, job_uid=None, purpose=REPLICA, namespace=REPLICA_NAMESPACE)
        )
    for ago, source in ((120.0, "corpus-a"), (240.0, "corpus-b")):
        await failed_into(app, copy, [(ago, "ErrImagePull")], data_source=source, same_job=True)
    assert await broken(app) == ({}, {})
    await failed_into(app, copy, [(360.0, "ErrImagePull")], purpose="prefetch")  # a job's
    assert "for 2 jobs" in (await broken(app)).barred["gpu-a"]


async def test_a_bar_two_jobs_made_lasts_once_both_are_deleted(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    # Jobs train and other (both of namespace ml, both reading corpus-v3) bar gpu-a. Both
    # deleted, their copies lost their job (job_id NULL) and counted as one (ml, corpus-v3):
    # the bar lifted without any copy into gpu-a succeeding.
    copy = await a_copy_ended(app, api, CopyPhase.FAILED, "ErrImagePull")
    await failed_into(app, copy, [(120.0, "ErrImagePull")], same_job=True)
    other = uuid.UUID(await reader(api, "other"))
    await failed_into(app, copy, [(240.0, "ErrImagePull")], job=other)
    assert "for 2 jobs" in (await broken(app)).barred["gpu-a"]
    async with transaction(app.state.sessions) as session:
        await session.execute(delete(Job))
    assert {c.job_id for c in await copies(app)} == {None}
    assert "for 2 jobs" in (await broken(app)).barred["gpu-a"]


async def test_a_second_jobs_failure_makes_a_bar_from_its_own_incident(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    # One job's three failures within 24 h make no bar; another job's failure two days later
    # made one as of the first job's third: the bar is decided on the failures up to the
    # incident that makes it, and there are no three incidents within 24 h up to that one.
    copy = await a_copy_ended(app, api, CopyPhase.FAILED, "checksum mismatch")
    earlier = [(120.0 * i, "checksum mismatch") for i in (1, 2)]
    await failed_into(app, copy, earlier, same_job=True)
    assert await broken(app) == ({}, {})
    await failed_into(app, copy, [(-48 * 3600.0, "ErrImagePull")])
    assert await broken(app) == ({}, {})


async def test_a_success_into_the_cluster_ends_its_run_of_failures(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    copy = await a_copy_ended(app, api, CopyPhase.FAILED, "ErrImagePull")
    await failed_before(app, copy, 3)
    now = datetime.now(UTC)
    async with transaction(app.state.sessions) as session:
        assert list((await copy_backoff.broken_destinations(session, now=now)).barred) == ["gpu-a"]
        await session.execute(  # the latest of the four succeeded instead
            update(DataCopy).where(DataCopy.id == copy.id).values(state=CopyState.SUCCEEDED)
        )
        assert await copy_backoff.broken_destinations(session, now=now) == ({}, {})


def test_the_backoff_stays_at_its_cap_however_many_copies_failed() -> None:
    # failed rows are kept: after about a thousand, 2**n no longer fits a float
    assert copy_backoff.retry_after(1) == copy_backoff.RETRY_AFTER_S
    assert copy_backoff.retry_after(5000) == copy_backoff.RETRY_CAP_S
