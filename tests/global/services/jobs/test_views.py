"""What the API shows of jobs (`services/jobs/views.py`, both databases): pages that follow each
other without a gap or a repeat when a job on several clusters comes in several rows, the
clusters of the active placement in rank order, a job's latest placement with its link
reservations, and filters that only narrow."""

from __future__ import annotations

import base64
import json
import uuid
from datetime import datetime, timedelta

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import select

from tests.factories import create_cluster, job_document, submit
from volcano_global.api.jobs import present_job
from volcano_global.db.base import utcnow
from volcano_global.db.engine import reading, transaction
from volcano_global.db.models import (
    Cluster,
    ClusterShare,
    Job,
    JobState,
    Link,
    LinkReservation,
    Placement,
    PlacementState,
)
from volcano_global.errors import Invalid
from volcano_global.services.jobs.views import JobFilter, job_page, job_view
from volcano_global.services.kube.store import clusters_of


@pytest.fixture
async def jobs(app: FastAPI, api: httpx.AsyncClient) -> dict[str, uuid.UUID]:
    """Jobs a, b, c submitted in that order: b split over west (ranks 4-7) and east (0-3)
    with a link reservation, c withdrawn from east, a never placed."""
    uids = {}
    for name in ("a", "b", "c"):
        uids[name] = uuid.UUID((await submit(api, job_document(name))).json()["uid"])
    for name in ("east", "west"):
        await create_cluster(api, name)
    link = {"clusterA": "east", "clusterB": "west", "capacityGbps": 100}
    assert (await api.post("/api/v1/links", json=link)).status_code == 201
    async with transaction(app.state.sessions) as session:
        ids = dict((await session.execute(select(Cluster.name, Cluster.id))).all())
        link_id = (await session.execute(select(Link.id))).scalar_one()
        split = Placement(job_id=uids["b"], generation=1, state=PlacementState.ACTIVE)
        split.shares = [
            ClusterShare(cluster_id=ids["west"], pods=1, gpus=8, units=1, rank_offset=4),
            ClusterShare(cluster_id=ids["east"], pods=1, gpus=8, units=1, rank_offset=0),
        ]
        split.link_reservations = [LinkReservation(link_id=link_id, gbps=12.5)]
        withdrawn = Placement(
            job_id=uids["c"],
            generation=1,
            state=PlacementState.WITHDRAWN,
            created_at=utcnow() - timedelta(seconds=5),
        )
        withdrawn.shares = [ClusterShare(cluster_id=ids["east"], pods=2, gpus=16, units=2)]
        session.add_all([split, withdrawn])
    return uids


async def _page(app: FastAPI, limit: int, token: str | None = None, **filters: object) -> tuple:
    async with reading(app.state.sessions) as session:
        return await job_page(
            session, filters=JobFilter(**filters), limit=limit, continue_token=token
        )


async def test_pages_follow_each_other_whatever_rows_a_job_takes(
    app: FastAPI, jobs: dict[str, uuid.UUID]
) -> None:
    for limit in (1, 2, 3, 50):
        names, clusters, token = [], {}, None
        while True:
            rows, found, token = await _page(app, limit, token)
            assert len(rows) <= limit
            names += [row["name"] for row in rows]
            clusters.update(found)
            if token is None:
                break
        assert names == ["c", "b", "a"], limit  # newest first, each once
        assert clusters == {jobs["b"]: ["east", "west"]}  # active placements only, rank order


async def test_filters_narrow_the_page(app: FastAPI, jobs: dict[str, uuid.UUID]) -> None:
    async def names(**filters: object) -> list[str]:
        return [row["name"] for row in (await _page(app, 50, **filters))[0]]

    assert await names(cluster="west") == ["b"]
    assert await names(cluster="east") == ["b"]  # c's placement there was withdrawn
    assert await names(queues=("default",)) == ["c", "b", "a"]
    assert await names(queues=()) == []  # a queue user of no queue
    assert await names(queue="default", text="b") == ["b"]
    assert await names(name="a", namespace="ml") == ["a"]
    assert await names(text="_") == []  # a literal underscore, not any one character


async def test_a_job_is_shown_with_its_latest_placement(
    app: FastAPI, jobs: dict[str, uuid.UUID]
) -> None:
    async with reading(app.state.sessions) as session:
        job, split = await job_view(session, uid=jobs["b"])
        assert job["name"] == "b"
        assert job["queue_name"] == "default"
        assert split is not None
        assert split.state is PlacementState.ACTIVE
        assert [(s["cluster"], s["rank_offset"]) for s in split.shares] == [
            ("east", 0),
            ("west", 4),
        ]
        assert split.reservations == [
            {"cluster_a": "east", "cluster_b": "west", "gbps": 12.5, "staging": False}
        ]
        _, withdrawn = await job_view(session, uid=jobs["c"])
        assert withdrawn is not None
        assert withdrawn.state is PlacementState.WITHDRAWN
        assert [s["pods"] for s in withdrawn.shares] == [2]
        assert withdrawn.reservations == []
        assert (await job_view(session, uid=jobs["a"]))[1] is None


async def test_a_continue_token_without_a_time_zone_is_refused(
    app: FastAPI, jobs: dict[str, uuid.UUID]
) -> None:
    naive = json.dumps([datetime(2026, 1, 1).isoformat(), str(uuid.uuid4())]).encode()
    token = base64.urlsafe_b64encode(naive).decode().rstrip("=")
    with pytest.raises(Invalid):
        await _page(app, 5, token)


async def test_a_finished_job_keeps_the_clusters_it_ran_in_a_waiting_one_does_not(
    app: FastAPI, jobs: dict[str, uuid.UUID]
) -> None:
    """Issue 37 item 5: once a job has finished its released placement still says where it
    ran (lists, `cluster=` filter, one job); a job waiting again after its run shows none."""
    async with transaction(app.state.sessions) as session:
        east = (await session.execute(select(Cluster.id).where(Cluster.name == "east"))).scalar()
        for name, state in (("a", JobState.SUCCEEDED), ("c", JobState.PENDING)):
            ran = Placement(job_id=jobs[name], generation=2, state=PlacementState.RELEASED)
            ran.shares = [ClusterShare(cluster_id=east, pods=2, gpus=16, units=2)]
            session.add(ran)
            job = await session.get(Job, jobs[name])
            assert job is not None
            job.state = state
    _, clusters, _ = await _page(app, 50)
    assert clusters[jobs["a"]] == ["east"]
    assert jobs["c"] not in clusters
    rows, _, _ = await _page(app, 50, cluster="east")
    assert {row["name"] for row in rows} == {"a", "b"}
    async with reading(app.state.sessions) as session:
        job, placement = await job_view(session, uid=jobs["a"])
        on_kubectl = await clusters_of(session, [jobs["a"], jobs["c"]])
    assert present_job(job, placement).clusters == ["east"]
    assert on_kubectl == {jobs["a"]: ["east"]}  # kubectl's CLUSTERS column and watches
