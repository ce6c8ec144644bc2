"""Every waiting job considered, on the server (SQLite and Postgres): a round with a window of
one job starts a job beyond it that fits, tells one that does not fit why (without reading its
document), and writes the reasons of many waiting jobs in as many statements as of a few."""

from __future__ import annotations

import httpx
from fastapi import FastAPI
from sqlalchemy import event, select

from tests.factories import create_cluster, inventory, job_document, submit
from volcano_global.db.engine import transaction
from volcano_global.db.models import Job


async def one_cluster(app: FastAPI, api: httpx.AsyncClient) -> None:
    """80 GPUs (two ToRs of five 8-GPU nodes); the solver plans one job a round."""
    await create_cluster(api, "east")
    body = inventory("east", tors=2, nodes_per_tor=5)
    assert (await api.put("/api/v1/clusters/east/inventory", json=body)).status_code == 200
    app.state.scheduler.settings.scheduling.window = 1


async def state(api: httpx.AsyncClient, uid: str) -> dict[str, str]:
    job = (await api.get(f"/api/v1/jobs/{uid}")).json()
    return {"state": job["state"], "reason": job.get("pendingReason") or ""}


async def test_a_job_beyond_the_window_starts_and_one_that_cannot_is_told_why(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    await one_cluster(app, api)
    small = (await submit(api, job_document("small", replicas=1, gpus=8))).json()["uid"]
    medium = (await submit(api, job_document("medium", replicas=4, gpus=8))).json()["uid"]
    huge = (await submit(api, job_document("huge", replicas=20, gpus=8))).json()["uid"]
    await app.state.scheduler.run_once()
    # The window is the job with least expected service (small); medium is beyond it.
    assert (await state(api, small))["state"] == "Placed"
    assert (await state(api, medium))["state"] == "Placed"
    waiting = await state(api, huge)
    assert waiting == {
        "state": "Pending",
        "reason": "no room now: no cluster it may use has 20 pods of 8 GPUs free for it whole, "
        "after the jobs ahead of it in line",
    }
    # The next rounds find nothing new to say: a reason that did not change is not written.
    await app.state.scheduler.run_once()
    before = await updated_at(app)
    await app.state.scheduler.run_once()
    assert await updated_at(app) == before


async def updated_at(app: FastAPI) -> dict[object, object]:
    async with transaction(app.state.sessions) as session:
        return dict((await session.execute(select(Job.id, Job.updated_at))).all())


async def test_the_reasons_of_many_waiting_jobs_take_no_more_statements_than_a_few(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    await one_cluster(app, api)
    engine = app.state.engine.sync_engine
    counts = []
    for size in (3, 30):
        for i in range(size):
            document = job_document(f"too-big-{size}-{i}", replicas=20 + i, gpus=8)
            assert (await submit(api, document)).status_code == 201
        statements: list[str] = []

        def count(*args: object, statements: list[str] = statements) -> None:
            statements.append(str(args[2]))

        event.listen(engine, "before_cursor_execute", count)
        try:
            await app.state.scheduler.run_once()
        finally:
            event.remove(engine, "before_cursor_execute", count)
        counts.append(len(statements))
        # The documents of the jobs beyond the window are not read: one job's (the window's).
        assert sum("jobs.gang" in s for s in statements) == 1
    assert counts[1] <= counts[0]  # (the first round reads a few things once more)
    async with transaction(app.state.sessions) as session:
        reasons = (await session.execute(select(Job.pending_reason))).scalars().all()
    # The window's job has the solver's reason, the 32 beyond it the fast pass's.
    assert len(reasons) == 33 and sum("no room now: " in (r or "") for r in reasons) == 32


async def test_a_job_with_a_master_beyond_the_window_starts(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    # 4 pods of 8 GPUs and a master without GPUs: its columns say 5 pods and 32 GPUs, which
    # read as one pod of 32 GPUs, that no 8-GPU node holds (docs/placement.md, "Tasks without
    # GPUs"): it waited for its turn in the window.
    await one_cluster(app, api)
    small = (await submit(api, job_document("small", replicas=1, gpus=8))).json()["uid"]
    doc = job_document("mpi", replicas=4, gpus=8)
    master = {**doc["spec"]["tasks"][0], "name": "master", "replicas": 1}
    master["template"] = {"spec": {"containers": [{"name": "m", "image": "mpi"}]}}
    doc["spec"]["tasks"].insert(0, master)
    mpi = (await submit(api, doc)).json()["uid"]
    await app.state.scheduler.run_once()
    assert (await state(api, small))["state"] == "Placed"  # the window
    assert (await state(api, mpi))["state"] == "Placed"  # beyond it
