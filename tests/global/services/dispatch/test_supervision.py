"""Gang supervision (`services.dispatch.supervision.supervise`) on both databases: which
placements a sweep withdraws, when, and that it leaves the others alone; and that the
scheduler sweeps at most once a `gang_sweep_interval_s`, however often its rounds come."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import update

from tests.factories import create_cluster, job_document, submit
from tests.grpc_stream import Stream, snapshot
from volcano_global.clock import ManualClock
from volcano_global.db.base import utcnow
from volcano_global.db.engine import transaction
from volcano_global.db.models import Cluster, ClusterState, Job, JobState
from volcano_global.jobspec.extensions import GANG_START_TIMEOUT
from volcano_global.services.dispatch.supervision import supervise

DEFAULT_S = 60.0
# A job stored by a replica of before the lifecycle columns (both serve during a rolling
# upgrade) has them NULL: supervision reads its document instead, and acts the same.
STORED_BY = pytest.mark.parametrize("older_replica", [False, True], ids=["this", "older-replica"])


async def _as_stored_by_an_older_replica(app: FastAPI) -> None:
    async with transaction(app.state.sessions) as session:
        await session.execute(
            update(Job).values(
                running_estimate_seconds=None,
                lifecycle_policies=None,
                max_retry=None,
                gang_start_timeout_seconds=None,
            )
        )


def _timed(timeouts: dict[str, str | None]) -> list[dict[str, Any]]:
    """Jobs named after `timeouts`, each with its own gang start timeout (annotation) or the
    default."""
    documents = []
    for name, timeout in timeouts.items():
        document = job_document(name, replicas=1, gpus=1)
        if timeout is not None:
            document["metadata"]["annotations"] = {GANG_START_TIMEOUT: timeout}
        documents.append(document)
    return documents


async def _placed(app: FastAPI, api: httpx.AsyncClient, documents: list[dict[str, Any]]) -> None:
    """The jobs placed on one cluster by one scheduling round and never started."""
    token = str((await create_cluster(api, "gpu-east"))["agentToken"])
    stream = Stream(app, token)
    await stream.hello()
    assert (await stream.send(snapshot(1, nodes=8))).ack.seq == 1
    for document in documents:
        assert (await submit(api, document)).status_code == 201
    report = await app.state.scheduler.run_once()
    assert report is not None
    assert len(report.result.placed) == len(documents)


async def _sweep(app: FastAPI, after_s: float) -> list[str]:
    async with transaction(app.state.sessions) as session:
        outcomes = await supervise(
            session,
            default_timeout_s=DEFAULT_S,
            now=utcnow() + timedelta(seconds=after_s),
        )
    return sorted(f"{o.job} {o.action}" for o in outcomes)


@STORED_BY
async def test_each_gang_is_withdrawn_when_its_own_start_timeout_passes(
    app: FastAPI, api: httpx.AsyncClient, older_replica: bool
) -> None:
    timeouts = {
        "short": "5",
        "default": None,
        "long": "600",
        "never": str(366 * 86_400),
    }  # the longest there is
    await _placed(app, api, _timed(timeouts))
    if older_replica:
        await _as_stored_by_an_older_replica(app)
    assert await _sweep(app, 1) == []
    assert await _sweep(app, 10) == ["ml/short Withdrawn"]
    assert await _sweep(app, DEFAULT_S + 5) == ["ml/default Withdrawn"]
    assert await _sweep(app, 300) == []  # the default has passed, but not its own timeout
    assert await _sweep(app, 605) == ["ml/long Withdrawn"]
    assert await _sweep(app, 10**7) == []
    for name in ("short", "default", "long"):
        jobs = (await api.get("/api/v1/jobs", params={"name": name})).json()["items"]
        assert [j["state"] for j in jobs] == ["Pending"]
        events = (await api.get(f"/api/v1/jobs/{jobs[0]['uid']}/events")).json()["items"]
        assert [e["reason"] for e in events].count("GangTimeout") == 1


async def test_a_gang_on_a_cluster_that_is_not_ready_is_withdrawn_at_once(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    await _placed(app, api, _timed({"a": None, "b": "600"}))
    async with transaction(app.state.sessions) as session:
        await session.execute(update(Cluster).values(state=ClusterState.NOT_READY))
    assert await _sweep(app, 0) == ["ml/a Withdrawn", "ml/b Withdrawn"]
    assert await _sweep(app, 0) == []  # withdrawn placements are not looked at again


@STORED_BY
async def test_a_running_job_on_a_lost_cluster_follows_its_policies_and_max_retry(
    app: FastAPI, api: httpx.AsyncClient, older_replica: bool
) -> None:
    # (Volcano refuses '*' beside another event: the eviction is named.)
    aborts = [
        {"event": "PodFailed", "action": "RestartJob"},
        {"events": ["PodEvicted", "Unknown"], "action": "AbortJob"},
    ]
    await _placed(
        app,
        api,
        [
            job_document("restarts", replicas=1, gpus=1),  # PodEvicted -> RestartJob
            job_document("aborts", replicas=1, gpus=1, policies=aborts),
            job_document("no-retry", replicas=1, gpus=1, maxRetry=0),
        ],
    )
    if older_replica:
        await _as_stored_by_an_older_replica(app)
    async with transaction(app.state.sessions) as session:
        await session.execute(update(Job).values(state=JobState.RUNNING))
        await session.execute(update(Cluster).values(state=ClusterState.NOT_READY))
    assert await _sweep(app, 0) == [
        "ml/aborts Failed",
        "ml/no-retry Failed",
        "ml/restarts Requeued",
    ]
    states = {
        j["name"]: (j["state"], j["requeues"])
        for j in (await api.get("/api/v1/jobs")).json()["items"]
    }
    assert states == {
        "restarts": ("Pending", 1),
        "aborts": ("Failed", 0),
        "no-retry": ("Failed", 0),
    }


async def test_the_scheduler_sweeps_at_most_once_an_interval(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    scheduler = app.state.scheduler
    scheduler.clock = clock = ManualClock()
    await _placed(app, api, _timed({"a": None}))
    assert await scheduler.supervise() == []  # swept: nothing late
    async with transaction(app.state.sessions) as session:
        await session.execute(update(Cluster).values(state=ClusterState.NOT_READY))
    clock.advance(scheduler.settings.scheduling.gang_sweep_interval_s / 2)
    assert await scheduler.supervise() == []  # too soon after the last sweep: not swept
    clock.advance(scheduler.settings.scheduling.gang_sweep_interval_s / 2)
    assert [(o.job, o.action) for o in await scheduler.supervise()] == [("ml/a", "Withdrawn")]
