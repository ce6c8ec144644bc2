"""Time-sharing on the server, on both databases: a queue opts in with its annotation, a round
demotes the running job of that queue that received the most GPU-time for a waiting job of its
class (requeued without using up its maxRetry, told why in numbers), and the job's attained
service is kept across the requeue for the rounds after."""

from __future__ import annotations

import uuid
from datetime import timedelta

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import select, update

from tests.factories import create_cluster, job_document, queue_document, submit
from tests.grpc_stream import Stream, node
from volcano_global.db.base import utcnow
from volcano_global.db.engine import transaction
from volcano_global.db.models import Event, Job, JobState, Placement
from volcano_global.rpc.v1 import agent_pb2 as pb
from volcano_global.services.dispatch.supervision import share_lost
from volcano_global.services.scheduling.round_input import read_round
from volcano_global.solver import Policy

SHARING = {
    "global.volcano.sh/time-sharing": "true",
    "global.volcano.sh/time-sharing-quantum": "1h",
}
HOURS_RUN = 2.0


def inventory(seq: int, used: int) -> pb.AgentMessage:
    """Node n0 under one ToR, with `used` of its 8 GPUs in use."""
    domains = [pb.Domain(name="spine", tier=2), pb.Domain(name="tor0", tier=1, parent="spine")]
    return pb.AgentMessage(
        snapshot=pb.InventorySnapshot(seq=seq, domains=domains, nodes=[node("n0", used=used)])
    )


async def job_row(app: FastAPI, job_id: uuid.UUID) -> Job:
    async with transaction(app.state.sessions) as session:
        return (await session.execute(select(Job).where(Job.id == job_id))).scalar_one()


async def long_job_running(
    app: FastAPI, api: httpx.AsyncClient, annotations: dict[str, str]
) -> tuple[Stream, uuid.UUID]:
    """Queue `shared` with these annotations, one 8-GPU node, and an 8-GPU job of the queue
    on it that has run 2 hours (checkpointed a minute ago, expected to run 10 h)."""
    applied = await api.post("/api/v1/apply", json=queue_document("shared", **annotations))
    assert applied.json()["items"][0]["result"] == "created", applied.text
    stream = Stream(app, str((await create_cluster(api, "gpu-east"))["agentToken"]))
    await stream.hello()
    await stream.reply(inventory(1, used=0), "ack")
    document = job_document("long", queue="shared", replicas=1, runningEstimate="36000s")
    long_id = uuid.UUID((await submit(api, document)).json()["uid"])
    assert len((await app.state.scheduler.run_once()).result.placed) == 1
    await stream.reply(inventory(2, used=8), "ack")
    now = utcnow()
    async with transaction(app.state.sessions) as session:
        await session.execute(
            update(Job)
            .where(Job.id == long_id)
            .values(
                state=JobState.RUNNING,
                started_at=now - timedelta(hours=HOURS_RUN),
                checkpointed_at=now - timedelta(minutes=1),
            )
        )
    return stream, long_id


async def test_the_most_served_job_yields_and_keeps_its_attained_service(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    stream, long_id = await long_job_running(app, api, SHARING)
    short = await submit(api, job_document("short", queue="shared", replicas=1))
    short_id = uuid.UUID(short.json()["uid"])

    report = await app.state.scheduler.run_once()
    assert report.result.nominated == [str(short_id)]
    assert [(o.job, o.action) for o in report.result.evicted] == [("ml/long", "Requeued")]
    demoted = await job_row(app, long_id)
    assert demoted.state is JobState.PENDING
    assert demoted.requeues == 0  # a demotion is no failure: maxRetry is not used up
    served = 8 * HOURS_RUN * 3600
    assert served <= demoted.attained_gpu_s < served + 8 * 60
    reason = demoted.pending_reason or ""
    assert reason.startswith("demoted by time-sharing (queue shared, quantum 1 h)"), reason
    assert "received 16.0 GPU-hours over its runs and ran 2.0 h since its last start" in reason
    assert "0.1 GPU-hours of work lost" in reason  # 8 GPUs x 1 minute since the checkpoint
    async with transaction(app.state.sessions) as session:
        reasons = {
            (e.job_id, e.reason)
            for e in (await session.execute(select(Event))).scalars()
            if e.reason in ("Demoted", "TimeSharing", "PodEvicted")
        }
        assert reasons == {(long_id, "Demoted"), (short_id, "TimeSharing")}
        # The next round reads what it received, and orders it after less-served work.
        data, _ = await read_round(session, window=10, policy=Policy.GREEDY)
    assert data.time_sharing == {"shared": 3600.0}
    [waiting] = [w.request for w in data.waiting if w.request.id == str(long_id)]
    assert waiting.served_gpu_s == demoted.attained_gpu_s
    await stream.close()


@pytest.mark.parametrize(
    "annotations",
    [{}, {"global.volcano.sh/time-sharing": "false"}],
    ids=["no annotation", "false"],
)
async def test_a_queue_that_does_not_opt_in_never_time_shares(
    app: FastAPI, api: httpx.AsyncClient, annotations: dict[str, str]
) -> None:
    stream, long_id = await long_job_running(app, api, annotations)
    await submit(api, job_document("short", queue="shared", replicas=1))
    report = await app.state.scheduler.run_once()
    assert report is None or (not report.result.nominated and not report.result.evicted)
    assert (await job_row(app, long_id)).state is JobState.RUNNING
    await stream.close()


@pytest.mark.parametrize(
    ("annotation", "value", "message"),
    [
        ("global.volcano.sh/time-sharing", "yes", 'must be "true" or "false"'),
        ("global.volcano.sh/time-sharing-quantum", "an hour", "is not a duration"),
        ("global.volcano.sh/time-sharing-quantum", "10s", "shorter than the minimum quantum"),
    ],
)
async def test_a_queue_with_an_unreadable_setting_is_refused_naming_it(
    api: httpx.AsyncClient, annotation: str, value: str, message: str
) -> None:
    document = queue_document("shared", **{**SHARING, annotation: value})
    applied = (await api.post("/api/v1/apply", json=document)).json()["items"][0]
    assert applied["result"] == "error"
    [cause] = applied["causes"]
    assert cause["field"] == f'metadata.annotations["{annotation}"]'
    assert message in cause["message"]


async def test_a_run_that_ends_any_other_way_still_counts_as_service(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    """Review: only evictions and demotions kept a run's GPU-seconds; a share lost (a pod
    failed, the job's policy requeued it) reset the job to what it had before the run."""
    stream, long_id = await long_job_running(app, api, SHARING)
    async with transaction(app.state.sessions) as session:
        job = (await session.execute(select(Job).where(Job.id == long_id))).scalar_one()
        placement = (
            await session.execute(select(Placement).where(Placement.job_id == long_id))
        ).scalar_one()
        await share_lost(
            session,
            placement=placement,
            job=job,
            event="PodFailed",
            message="a pod failed",
            action="RestartJob",
        )
    requeued = await job_row(app, long_id)
    assert requeued.state is JobState.PENDING
    served = 8 * HOURS_RUN * 3600
    assert served <= requeued.attained_gpu_s < served + 8 * 60
    await stream.close()
