"""A job token lives as long as its run (issue 38, item 9): revoked when its placement ends
however it ends, so an ended run's pods get 401; the next run has a token of its own; a token
of an ended run that escaped revocation (issued before the rule) gets 409 on measurements."""

from __future__ import annotations

import uuid
from datetime import timedelta

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import select, update

from tests.factories import create_cluster, job_document, statements_seen, submit
from tests.grpc_stream import Stream, snapshot
from volcano_global.db.base import utcnow
from volcano_global.db.engine import transaction
from volcano_global.db.models import (
    ApiToken,
    Cluster,
    Job,
    OutboxKind,
    OutboxMessage,
    Placement,
    TokenRole,
)
from volcano_global.rpc.shares import SharePhase
from volcano_global.rpc.v1 import agent_pb2 as pb
from volcano_global.services.dispatch.reports import ShareReport, apply_reports
from volcano_global.services.dispatch.supervision import supervise

MEASURED = {"stepTimeSeconds": 1.5, "bytesPerStep": 4e9}


async def placed(app: FastAPI, api: httpx.AsyncClient, *names: str) -> tuple[Stream, list[str]]:
    """The jobs placed on one cluster by one round (nothing started yet)."""
    token = str((await create_cluster(api, "gpu-east"))["agentToken"])
    stream = Stream(app, token)
    await stream.hello()
    assert (await stream.send(snapshot(1, nodes=8))).ack.seq == 1
    uids = [(await submit(api, job_document(n, replicas=1, gpus=1))).json()["uid"] for n in names]
    report = await app.state.scheduler.run_once()
    assert report is not None and sorted(report.result.placed) == sorted(uids)
    return stream, uids


async def run_token(app: FastAPI, uid: str) -> tuple[uuid.UUID, str]:
    """The newest placement of the job and the job token its assignment carries."""
    async with transaction(app.state.sessions) as session:
        placement = (
            await session.execute(
                select(Placement)
                .where(Placement.job_id == uuid.UUID(uid))
                .order_by(Placement.created_at.desc())
                .limit(1)
            )
        ).scalar_one()
        assign = (
            await session.execute(
                select(OutboxMessage).where(
                    OutboxMessage.placement_id == placement.id,
                    OutboxMessage.kind == OutboxKind.ASSIGN,
                )
            )
        ).scalar_one()
    return placement.id, str(assign.payload["job_token"])


async def measure(api: httpx.AsyncClient, uid: str, token: str) -> httpx.Response:
    return await api.post(
        f"/api/v1/jobs/{uid}/measurements",
        json=MEASURED,
        headers={"Authorization": f"Bearer {token}"},
    )


async def report(stream: Stream, placement_id: uuid.UUID, phase: int, seq: int) -> None:
    status = pb.JobStatusReport(placement_id=str(placement_id), phase=phase, report_seq=seq)
    reply = await stream.reply(pb.AgentMessage(job_status=status), "report_ack")
    assert reply.report_ack.report_seq == seq


async def test_a_run_that_ends_in_any_way_takes_its_job_token_with_it(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    """Before: each token still reported (200) after its run ended (until the job ended)."""
    stream, (done, failed, cancelled, timed_out) = await placed(
        app, api, "done", "failed", "cancelled", "timed-out"
    )
    runs = {uid: await run_token(app, uid) for uid in (done, failed, cancelled, timed_out)}
    for uid, (_, token) in runs.items():
        assert (await measure(api, uid, token)).status_code == 200
    await report(stream, runs[done][0], pb.SHARE_PHASE_RUNNING, 1)
    await report(stream, runs[done][0], pb.SHARE_PHASE_SUCCEEDED, 2)
    await report(stream, runs[failed][0], pb.SHARE_PHASE_FAILED, 3)  # requeued
    assert (await api.post(f"/api/v1/jobs/{cancelled}/cancel")).status_code == 200
    async with transaction(app.state.sessions) as session:  # its gang never started
        await supervise(session, default_timeout_s=60, now=utcnow() + timedelta(hours=1))
    states = {uid: (await api.get(f"/api/v1/jobs/{uid}")).json()["state"] for uid in runs}
    assert states == {
        done: "Succeeded",
        failed: "Pending",
        cancelled: "Cancelled",
        timed_out: "Pending",
    }
    for uid, (_, token) in runs.items():
        refused = await measure(api, uid, token)
        assert refused.status_code == 401, (uid, refused.text)
        assert refused.json()["message"] == "invalid or revoked token"
        checkpoint = await api.post(
            f"/api/v1/jobs/{uid}/checkpoints",
            json={"step": 1},
            headers={"Authorization": f"Bearer {token}"},
        )
        assert checkpoint.status_code == 401
    await stream.close()


async def test_the_next_run_has_a_token_of_its_own(app: FastAPI, api: httpx.AsyncClient) -> None:
    stream, (uid,) = await placed(app, api, "train")
    first_placement, first = await run_token(app, uid)
    await report(stream, first_placement, pb.SHARE_PHASE_FAILED, 1)  # requeued
    report_again = await app.state.scheduler.run_once()
    assert report_again is not None and report_again.result.placed == [uid]
    second_placement, second = await run_token(app, uid)
    assert second_placement != first_placement and second != first
    assert (await measure(api, uid, first)).status_code == 401
    assert (await measure(api, uid, second)).status_code == 200
    async with transaction(app.state.sessions) as session:
        rows = (
            await session.execute(
                select(ApiToken.revoked_at)
                .where(ApiToken.job_id == uuid.UUID(uid), ApiToken.role == TokenRole.JOB)
                .order_by(ApiToken.created_at)
            )
        ).scalars()
        assert [at is not None for at in rows] == [True, False]
    await stream.close()


@pytest.mark.parametrize("later_run", [False, True], ids=["waiting", "placed-again"])
async def test_an_ended_runs_token_that_escaped_revocation_gets_409_on_measurements(
    app: FastAPI, api: httpx.AsyncClient, later_run: bool
) -> None:
    """A token issued before the rule, whose run ended then (not revoked): its measurements
    are refused as its checkpoints are, whether the job waits or runs again."""
    stream, (uid,) = await placed(app, api, "train")
    placement, token = await run_token(app, uid)
    await report(stream, placement, pb.SHARE_PHASE_FAILED, 1)
    if later_run:
        assert (await app.state.scheduler.run_once()).result.placed == [uid]
    async with transaction(app.state.sessions) as session:
        await session.execute(update(ApiToken).values(revoked_at=None))
    refused = await measure(api, uid, token)
    assert refused.status_code == 409, refused.text
    assert "this token's run ended at" in refused.json()["message"]
    assert (await api.get(f"/api/v1/jobs/{uid}")).json()["measurements"] is None
    admin = await api.post(f"/api/v1/jobs/{uid}/measurements", json=MEASURED)
    assert admin.status_code == 200  # an admin's report names no run
    await stream.close()


async def test_runs_that_end_in_one_batch_of_reports_each_lose_their_token_and_attain(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    """Reports applied together (one transaction: the agents' streams' group commit): every
    run that succeeded there has its job token revoked (one statement for the batch) and its
    GPUs x time running added to its job's attained service; a run still going in the same
    batch keeps its token."""
    stream, uids = await placed(app, api, "one", "two", "three")
    runs = {uid: await run_token(app, uid) for uid in uids}
    async with transaction(app.state.sessions) as session:
        cluster = (await session.execute(select(Cluster.id))).scalar_one()

    def reports_of(phase: SharePhase, *which: str) -> list[ShareReport]:
        return [ShareReport(cluster, runs[uid][0], phase) for uid in which]

    async with transaction(app.state.sessions) as session:
        await apply_reports(session, reports_of(SharePhase.RUNNING, *uids))
    async with transaction(app.state.sessions) as session:  # they ran for an hour
        await session.execute(update(Job).values(started_at=utcnow() - timedelta(hours=1)))
    done, going = uids[:2], uids[2]
    async with transaction(app.state.sessions) as session:
        await apply_reports(session, reports_of(SharePhase.SUCCEEDED, *done))
    for uid in done:
        detail = (await api.get(f"/api/v1/jobs/{uid}")).json()
        assert detail["state"] == "Succeeded"
        assert (await measure(api, uid, runs[uid][1])).status_code == 401
    assert (await measure(api, going, runs[going][1])).status_code == 200
    async with transaction(app.state.sessions) as session:
        attained = dict((await session.execute(select(Job.id, Job.attained_gpu_s))).all())
    for uid in done:  # one GPU for an hour and a moment
        assert 3600 <= attained[uuid.UUID(uid)] < 3660
    assert not attained[uuid.UUID(going)]
    await stream.close()


async def test_a_batch_that_ends_another_run_leaves_the_new_run_of_a_requeued_job_its_token(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    """A batch of reports holds a late report about a job's ended run beside its new run's and
    another job's end: only the run that ended in the batch loses its token (the batch's one
    revocation must not take the requeued job's new token with the old run's)."""
    stream, (again, other) = await placed(app, api, "again", "other")
    first_placement, _ = await run_token(app, again)
    await report(stream, first_placement, pb.SHARE_PHASE_FAILED, 1)  # requeued
    replaced = await app.state.scheduler.run_once()
    assert replaced is not None and replaced.result.placed == [again]
    second_placement, second = await run_token(app, again)
    other_placement, other_token = await run_token(app, other)
    async with transaction(app.state.sessions) as session:
        cluster = (await session.execute(select(Cluster.id))).scalar_one()
        await apply_reports(session, [ShareReport(cluster, other_placement, SharePhase.RUNNING)])
    async with transaction(app.state.sessions) as session:
        await apply_reports(
            session,
            [
                ShareReport(cluster, first_placement, SharePhase.RUNNING),  # late, ignored
                ShareReport(cluster, second_placement, SharePhase.ACCEPTED),
                ShareReport(cluster, other_placement, SharePhase.SUCCEEDED),
            ],
        )
    assert (await measure(api, other, other_token)).status_code == 401
    assert (await measure(api, again, second)).status_code == 200
    assert (await api.get(f"/api/v1/jobs/{again}")).json()["state"] == "Dispatched"
    await stream.close()


async def test_runs_a_batch_of_reports_breaks_lose_their_tokens_in_its_one_revocation(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    """Shares that fail in one batch of reports, before and after their jobs started (one
    withdrawn, one failed as its policy says), beside a run that succeeds: every ended run's
    token revoked, by the batch's one statement (not one more per broken gang, each flushing
    the batch's changes before it)."""
    stream, uids = await placed(app, api, "unstarted", "started", "done")
    unstarted, started, done = uids
    runs = {uid: await run_token(app, uid) for uid in uids}
    async with transaction(app.state.sessions) as session:
        cluster = (await session.execute(select(Cluster.id))).scalar_one()
        await apply_reports(
            session, [ShareReport(cluster, runs[u][0], SharePhase.RUNNING) for u in (started, done)]
        )
    with statements_seen(app) as seen:
        async with transaction(app.state.sessions) as session:
            await apply_reports(
                session,
                [
                    ShareReport(cluster, runs[unstarted][0], SharePhase.FAILED),
                    ShareReport(cluster, runs[started][0], SharePhase.FAILED),
                    ShareReport(cluster, runs[done][0], SharePhase.SUCCEEDED),
                ],
            )
    assert len([s for s in seen if s.startswith("UPDATE api_tokens")]) == 1
    states = {uid: (await api.get(f"/api/v1/jobs/{uid}")).json()["state"] for uid in uids}
    assert states == {unstarted: "Pending", started: "Failed", done: "Succeeded"}
    for uid, (_, token) in runs.items():
        assert (await measure(api, uid, token)).status_code == 401, uid
    await stream.close()
