"""What a round knows about the running jobs for preemption (`timing.running_jobs`): priority,
queue, the `volcano.sh/preemptable` annotation, how long it has run, its name."""

from __future__ import annotations

import uuid
from datetime import timedelta

import httpx
from fastapi import FastAPI
from sqlalchemy import select

from tests.factories import create_cluster, create_queue, inventory, job_document, submit
from volcano_global.db.base import utcnow
from volcano_global.db.engine import transaction
from volcano_global.db.models import Cluster, Job, JobState
from volcano_global.services.scheduling.free import free_capacity
from volcano_global.services.scheduling.timing import duration_model, running_jobs


async def test_running_jobs_carry_what_preemption_needs(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    await create_cluster(api, "gpu-east")
    body = inventory("gpu-east", tors=2, nodes_per_tor=8)
    assert (await api.put("/api/v1/clusters/gpu-east/inventory", json=body)).status_code == 200
    await create_queue(api, "llm")
    keep = job_document("keep", queue="llm", replicas=2)
    keep["metadata"]["annotations"] = {"volcano.sh/preemptable": "false"}
    ids = {
        "keep": (await submit(api, keep)).json()["uid"],
        "free": (await submit(api, job_document("free", queue="llm", replicas=2))).json()["uid"],
    }
    report = await app.state.scheduler.run_once()
    assert report is not None and len(report.result.placed) == 2
    async with transaction(app.state.sessions) as session:
        clusters = list((await session.execute(select(Cluster))).scalars())
        states = await free_capacity(session, clusters)
        run = await running_jobs(
            session,
            clusters,
            states,
            now=utcnow(),
            durations=await duration_model(session),
        )
    by_id = {r.id: r for r in run}
    assert set(by_id) == set(ids.values())
    keep_run, free_run = by_id[ids["keep"]], by_id[ids["free"]]
    assert (keep_run.preemptable, free_run.preemptable) == (False, True)
    assert (keep_run.queue, keep_run.name, keep_run.total_gpus) == ("llm", "ml/keep", 16)
    assert keep_run.run_s >= 0 and keep_run.lost_s == keep_run.run_s
    # Where its pods are, per leaf domain, as `solver.planning.freed` takes them.
    assert sum(n * per_pod for cluster, _, _, n, per_pod in keep_run.pods) == 16
    assert {cluster for cluster, *_ in keep_run.pods} == {"gpu-east"}


async def test_the_duration_model_learns_each_queues_estimate_error(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    """Finished jobs that gave a runningEstimate teach the round how their queue's estimates
    hold (issue 34): here the "llm" queue's jobs ran twice theirs."""
    await create_queue(api, "llm")
    ids = []
    for i in range(5):
        doc = job_document(f"done-{i}", queue="llm", replicas=1)
        doc["spec"]["runningEstimate"] = "100s"
        ids.append(uuid.UUID((await submit(api, doc)).json()["uid"]))
    end = utcnow()
    async with transaction(app.state.sessions) as session:
        for job in (await session.execute(select(Job).where(Job.id.in_(ids)))).scalars():
            job.state = JobState.SUCCEEDED
            job.started_at, job.finished_at = end - timedelta(seconds=200), end
    async with transaction(app.state.sessions) as session:
        model = await duration_model(session)
    assert model.estimate_error("llm") == 2.0
    # A running llm job that gave 300 s is expected to run 600 s; at 100 s, 500 s are left.
    assert model.remaining(8, 100.0, 300.0, queue="llm") == 500.0
