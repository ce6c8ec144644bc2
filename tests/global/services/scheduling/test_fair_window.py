"""A round reads the head of every queue's line, whatever one tenant queued (issue 38 item 3):
a queue's thousands of waiting jobs do not hide another queue's job from fair share."""

from __future__ import annotations

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import insert, select

from tests.backlog import clone_jobs
from tests.factories import create_cluster, create_queue, inventory, job_document, submit
from volcano_global.db.base import utcnow
from volcano_global.db.engine import transaction
from volcano_global.db.models import Job, Queue
from volcano_global.services.scheduling.heads import (
    QUEUES_PER_STATEMENT,
    heads_per_queue,
    queue_heads,
)
from volcano_global.services.scheduling.round_input import read_round
from volcano_global.services.scheduling.timing import duration_model
from volcano_global.services.tenancy.queue_shares import queue_tree
from volcano_global.services.tenancy.queues import WAITING
from volcano_global.solver import Policy, planning
from volcano_global.solver.round_plan import RoundOptions, order

BACKLOG = 3_500


async def _backlog(app: FastAPI, api: httpx.AsyncClient) -> str:
    """One cluster with 6 GPUs free; queue `hog` with 3,501 waiting 16-GPU jobs (none fits),
    then queue `small`'s 1-GPU job, submitted last. Returns the small job's id."""
    await create_cluster(api, "gpu-east")
    body = inventory("gpu-east", tors=1, nodes_per_tor=1, used=2)
    assert (await api.put("/api/v1/clusters/gpu-east/inventory", json=body)).status_code == 200
    for name in ("hog", "small"):
        await create_queue(api, name)
    first = (await submit(api, job_document("big", queue="hog", replicas=2))).json()["uid"]
    await clone_jobs(app.state.sessions, first, BACKLOG)
    small = await submit(api, job_document("one", queue="small", replicas=1, gpus=1))
    return str(small.json()["uid"])


@pytest.mark.parametrize("policy", [Policy.CPSAT, Policy.FIRST_FIT])
async def test_another_queue_s_job_is_in_the_round_behind_a_backlog_of_thousands(
    app: FastAPI, api: httpx.AsyncClient, policy: Policy
) -> None:
    small = await _backlog(app, api)
    async with transaction(app.state.sessions) as session:
        data, _ = await read_round(session, window=10, policy=policy)
    considered = [r.id for r in order(data, policy, RoundOptions())]
    assert len(considered) == 10
    # Fair share: the small queue holds nothing, the hog queue's first job takes 16 GPUs.
    assert considered.index(small) == 1


async def test_another_queue_s_one_gpu_job_is_placed_in_the_next_round(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    small = await _backlog(app, api)
    app.state.scheduler.settings.scheduling.window = 10
    assert await app.state.scheduler.run_once() is not None
    job = (await api.get(f"/api/v1/jobs/{small}")).json()
    assert job["state"] == "Placed", job["pendingReason"] if "pendingReason" in job else job
    hog = (await api.get("/api/v1/jobs", params={"queue": "hog", "limit": 1})).json()
    assert hog["items"][0]["state"] == "Pending"


def test_each_queue_reads_at_least_the_window_and_shares_the_round_s_total() -> None:
    assert heads_per_queue(200, 16, 1) == 3_200  # one queue: as deep as the whole round
    assert heads_per_queue(200, 16, 10) == 320
    assert heads_per_queue(200, 4, 100) == 200  # never less than the window


async def test_queues_beyond_one_statement_are_read_in_the_next(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    await create_queue(api, "tenant")
    uid = (await submit(api, job_document("t", queue="tenant", replicas=1))).json()["uid"]
    await clone_jobs(app.state.sessions, uid, 3)
    async with transaction(app.state.sessions) as session:
        empty = [{"name": f"q{n:03}"} for n in range(QUEUES_PER_STATEMENT + 5)]
        ids = list((await session.execute(insert(Queue).returning(Queue.id), empty)).scalars())
        tenant = (
            await session.execute(Queue.__table__.select().where(Queue.name == "tenant"))
        ).one()
        heads = await queue_heads(session, [*ids, tenant.id], per_queue=2)
    assert len(heads) == 2  # the tenant's first two, read in the second statement
    assert {h.queue_id for h in heads} == {tenant.id}
    assert heads[0].submitted_at <= heads[1].submitted_at


@pytest.mark.parametrize("policy", [Policy.CPSAT, Policy.FIRST_FIT])
async def test_the_round_orders_its_heads_as_the_simulator_orders_every_waiting_job(
    app: FastAPI, api: httpx.AsyncClient, policy: Policy
) -> None:
    """The simulator orders every waiting job of its trace (`planning.order`); the server's
    window, read per queue, is the first `window` of that same order."""
    await _backlog(app, api)
    await create_queue(api, "third")
    urgent = job_document("urgent", queue="third", replicas=1, priorityClassName="high-priority")
    assert (await submit(api, urgent)).status_code == 201
    async with transaction(app.state.sessions) as session:
        data, _ = await read_round(session, window=10, policy=policy)
        tree = await queue_tree(session)
        durations = await duration_model(session)
        rows = (
            await session.execute(
                select(Job.id, Queue.name, Job.priority, Job.total_gpus, Job.submitted_at)
                .join(Queue, Queue.id == Job.queue_id)
                .where(WAITING)
            )
        ).all()
    now = utcnow()
    every = planning.order(
        policy,
        [
            planning.waiting(
                str(r.id),
                queue=r.name,
                priority=r.priority,
                gpus=r.total_gpus,
                submitted_at=r.submitted_at,
                estimate_s=None,
                now=now,
                durations=durations,
            )
            for r in rows
        ],
        held={name: q.held for name, q in tree.items()},
        weights={name: q.weight for name, q in tree.items()},
        tree=tree,
    )
    assert len(rows) == BACKLOG + 3
    assert [r.id for r in order(data, policy, RoundOptions())] == [c.key for c in every[:10]]


async def test_a_time_sharing_queue_s_new_job_is_read_before_its_demoted_ones(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    """Review: read by submission, a time-sharing queue's first jobs - all demoted, older -
    hid its new, never-run job from every round (the round orders least served first)."""
    applied = await api.post(
        "/api/v1/apply",
        json={
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "Queue",
            "metadata": {
                "name": "shared",
                "annotations": {"global.volcano.sh/time-sharing": "true"},
            },
            "spec": {"weight": 1},
        },
    )
    assert applied.status_code == 200, applied.text
    old = (await submit(api, job_document("old", queue="shared", replicas=1))).json()["uid"]
    await clone_jobs(app.state.sessions, old, 5)
    new = (await submit(api, job_document("new", queue="shared", replicas=1))).json()["uid"]
    async with transaction(app.state.sessions) as session:
        await session.execute(
            Job.__table__.update().where(Job.name != "new").values(attained_gpu_s=3600.0)
        )
        shared = (await session.execute(select(Queue.id).where(Queue.name == "shared"))).one()
        by_service = await queue_heads(session, [shared.id], per_queue=2, sharing={shared.id})
        by_submission = await queue_heads(session, [shared.id], per_queue=2)
        data, _ = await read_round(session, window=1, policy=Policy.GREEDY)
    assert str(by_service[0].id) == new
    assert new not in {str(h.id) for h in by_submission}
    assert [w.request.id for w in data.waiting] == [new]
