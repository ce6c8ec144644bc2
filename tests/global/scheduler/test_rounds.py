"""Scheduling rounds against the database (SQLite and Postgres): read, plan, atomic apply."""

from __future__ import annotations

import asyncio
import copy
import itertools
import math
import time
import uuid

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import event, func, select, update

from tests.factories import (
    create_cluster,
    create_queue,
    example,
    inventory,
    job_document,
    submit,
)
from volcano_global.db.base import utcnow
from volcano_global.db.engine import transaction
from volcano_global.db.fast_reads import Read
from volcano_global.db.models import ClusterShare, Job, JobState, OutboxMessage, Placement
from volcano_global.scheduler.loop import Scheduler
from volcano_global.schemas.clusters import InventoryDelta
from volcano_global.services.inventory.clusters import lock_cluster
from volcano_global.services.inventory.deltas import apply_delta
from volcano_global.services.scheduling import round_apply
from volcano_global.services.scheduling.round_apply import apply_plan
from volcano_global.services.scheduling.round_input import RoundContext, read_round
from volcano_global.services.scheduling.rounds import record_round
from volcano_global.solver import Policy
from volcano_global.solver.round_plan import RoundPlan, plan_round

LLM = example("llm-pretrain-64x8.yaml")


async def two_clusters(api: httpx.AsyncClient, link_gbps: float = 400) -> None:
    for name in ("gpu-east", "gpu-west"):
        await create_cluster(api, name)
        assert (
            await api.put(
                f"/api/v1/clusters/{name}/inventory", json=inventory(name, tors=5, nodes_per_tor=8)
            )
        ).status_code == 200
    await api.post(
        "/api/v1/links",
        json={"clusterA": "gpu-east", "clusterB": "gpu-west", "capacityGbps": link_gbps},
    )
    await create_queue(api, "llm")


def llm_job(name: str, crossing_gbps: str = "100") -> str:
    return LLM.replace("name: llama-70b-pretrain", f"name: {name}").replace(
        'global.volcano.sh/max-clusters: "3"',
        f'global.volcano.sh/max-clusters: "3"\n    global.volcano.sh/crossing-gbps: "{crossing_gbps}"',
    )


async def test_a_round_splits_a_job_that_fits_no_single_cluster(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    await two_clusters(api)
    uid = (await submit(api, llm_job("big"))).json()["uid"]
    report = await app.state.scheduler.run_once()
    assert report is not None
    assert report.result.placed == [uid]
    assert report.status.startswith("OPTIMAL")
    job = (await api.get(f"/api/v1/jobs/{uid}")).json()
    assert job["state"] == "Placed"
    assert job["timestamps"]["placedAt"]
    shares = job["placement"]["shares"]
    assert sorted(s["cluster"] for s in shares) == ["gpu-east", "gpu-west"]
    assert sum(s["pods"] for s in shares) == 64
    assert sorted(s["rankOffset"] for s in shares)[0] == 0
    assert all(s["pods"] % 4 == 0 for s in shares)  # whole data-parallel replicas
    assert job["placement"]["linkReservations"] == [
        {"clusterA": "gpu-east", "clusterB": "gpu-west", "gbps": 100.0, "staging": False}
    ]
    assert (await api.get("/api/v1/links")).json()["items"][0]["reservedGbps"] == 100.0
    events = (await api.get(f"/api/v1/jobs/{uid}/events")).json()["items"]
    assert events[0]["reason"] == "Placed"
    assert "100 Gbps on gpu-east<->gpu-west" in events[0]["message"]
    listed = (await api.get("/api/v1/jobs", params={"cluster": "gpu-west"})).json()["items"]
    assert [j["uid"] for j in listed] == [uid]


async def test_pending_reason_in_numbers_and_held_capacity(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    await two_clusters(api, link_gbps=400)
    first = (await submit(api, llm_job("first"))).json()["uid"]
    await app.state.scheduler.run_once()
    assert (await api.get(f"/api/v1/jobs/{first}")).json()["state"] == "Placed"
    # The first job's pods are not running yet, but its capacity is held: the second waits.
    second = (await submit(api, llm_job("second"))).json()["uid"]
    await app.state.scheduler.run_once()
    job = (await api.get(f"/api/v1/jobs/{second}")).json()
    assert job["state"] == "Pending"
    assert job["pendingReason"] == (
        "needs 64 pods x 8 H100 (512 GPUs); only gpu-west has room for its units now, 128 GPUs "
        "(it may split over at most 3 clusters)"
    )
    # Too thin a link for the declared rate: the reason names the link.
    await api.post(f"/api/v1/jobs/{first}/cancel")
    thin = (await submit(api, llm_job("thin", crossing_gbps="900"))).json()["uid"]
    await api.post(f"/api/v1/jobs/{second}/cancel")
    await app.state.scheduler.run_once()
    reason = (await api.get(f"/api/v1/jobs/{thin}")).json()["pendingReason"]
    assert reason == (
        "needs 64 pods x 8 H100 (512 GPUs); best split over gpu-east, gpu-west: link "
        "gpu-east<->gpu-west has 400 Gbps free, the split needs 900.0 Gbps"
    )


async def decided_not_committed(
    app: FastAPI, api: httpx.AsyncClient
) -> tuple[str, RoundPlan, RoundContext]:
    """A round that admitted the job "big" on two clusters, stopped before its commit."""
    await two_clusters(api)
    uid = (await submit(api, llm_job("big"))).json()["uid"]
    async with transaction(app.state.sessions) as session:
        data, context = await read_round(session, window=10)
    plan = plan_round(data, Policy.CPSAT)
    assert plan.decision.job(uid).admitted
    return uid, plan, context


async def test_a_job_whose_room_was_taken_meanwhile_is_deferred(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    uid, plan, context = await decided_not_committed(app, api)
    sessions = app.state.sessions
    await api.put("/api/v1/clusters/gpu-east/inventory", json=inventory("gpu-east", used=8))
    async with transaction(sessions) as session:
        result = await apply_plan(session, plan=plan, context=context)
    assert result.placed == []
    assert "no longer has" in result.deferred[uid]
    job = (await api.get(f"/api/v1/jobs/{uid}")).json()
    assert job["state"] == "Pending"
    assert job["placement"] is None
    assert job["pendingReason"] == (
        f"admitted in round {result.generation}, but by its commit {result.deferred[uid]} (the "
        "inventory moved while it solved); tried again in the next round"
    )
    assert (await api.get("/api/v1/links")).json()["items"][0]["reservedGbps"] == 0
    await app.state.scheduler.run_once()  # the next round sees the full cluster: no room
    job = (await api.get(f"/api/v1/jobs/{uid}")).json()
    assert job["state"] == "Pending"
    assert job["pendingReason"].startswith("needs 64 pods")


async def fill_leaf(app: FastAPI, cluster: str, leaf: str) -> None:
    """An agent's delta: every node of `leaf` (in `two_clusters`' inventory) fully used."""
    nodes = [
        n | {"gpuUsed": 8}
        for n in inventory(cluster, tors=5, nodes_per_tor=8)["nodes"]
        if n["domain"] == leaf
    ]
    async with transaction(app.state.sessions) as session:
        row = await lock_cluster(session, name=cluster)
        delta = InventoryDelta.model_validate({"nodeUpserts": nodes})
        await apply_delta(session, cluster=row, delta=delta, seq=row.inventory_seq + 1)


async def test_a_job_whose_one_leaf_filled_meanwhile_is_deferred(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    """The commit re-reads only the leaves the decision uses: filling one of them is seen."""
    uid, plan, context = await decided_not_committed(app, api)
    share = next(s for d in plan.starts for s in d.shares)
    leaf = share.domains[0][0]
    await fill_leaf(app, share.cluster, leaf)
    async with transaction(app.state.sessions) as session:
        result = await apply_plan(session, plan=plan, context=context)
    assert result.deferred[uid].startswith(f"{leaf} in {share.cluster} no longer has room")
    assert result.placed == []


async def test_only_the_jobs_that_no_longer_fit_wait_the_rest_of_the_round_commits(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    """Two jobs of a whole ToR each; the ToR of one fills while the round solves: that one is
    deferred (and placed by the next round elsewhere), the other placed."""
    await two_clusters(api)
    uids = [
        (await submit(api, job_document(name, replicas=8, gpus=8))).json()["uid"]
        for name in ("first", "second")
    ]
    async with transaction(app.state.sessions) as session:
        data, context = await read_round(session, window=10)
    plan = plan_round(data, Policy.CPSAT)
    first, second = (plan.decision.job(uid) for uid in uids)
    assert first.admitted
    assert second.admitted
    (share,) = first.shares
    leaf = share.domains[0][0]
    assert leaf not in {d for s in second.shares for d, _ in s.domains}
    await fill_leaf(app, share.cluster, leaf)
    async with transaction(app.state.sessions) as session:
        result = await apply_plan(session, plan=plan, context=context)
    assert result.placed == [uids[1]]
    assert list(result.deferred) == [uids[0]]
    await app.state.scheduler.run_once()
    placed = (await api.get(f"/api/v1/jobs/{uids[0]}")).json()
    assert placed["state"] == "Placed"
    assert leaf not in {d for s in placed["placement"]["shares"] for d in s["domains"]}


async def test_a_round_still_fitting_a_moved_inventory_commits(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    """Large clusters' inventories move all the time: a decision that still fits is kept."""
    uid, plan, context = await decided_not_committed(app, api)
    sessions = app.state.sessions
    for name in ("gpu-east", "gpu-west"):  # more room than before, same HyperNodes
        more = inventory(name, tors=5, nodes_per_tor=8)
        assert (await api.put(f"/api/v1/clusters/{name}/inventory", json=more)).status_code == 200
    async with transaction(sessions) as session:
        result = await apply_plan(session, plan=plan, context=context)
    assert result.placed == [uid]
    assert (await api.get(f"/api/v1/jobs/{uid}")).json()["state"] == "Placed"


async def test_a_long_round_spaces_the_next_by_its_duration(
    app: FastAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rounds on a large inventory must leave the process time for requests and streams."""
    scheduler = app.state.scheduler
    starts: list[float] = []

    async def slow_round(**_: object) -> None:
        starts.append(time.monotonic())
        await asyncio.sleep(0.3)

    monkeypatch.setattr(scheduler, "run_once", slow_round)
    for _ in range(2):
        scheduler.wake.set()  # no wait for the period
        await scheduler.step()
    assert starts[1] - starts[0] >= 2 * 0.3


async def test_a_scheduler_of_its_own_works_off_a_backlog_without_waiting_for_the_period(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    """As `vglobal scheduler` runs it (nothing wakes it, rounds may take all its time): after a
    round that placed jobs the next starts at once; the period is waited only when idle."""
    await two_clusters(api)
    settings = app.state.settings.model_copy(deep=True)
    settings.scheduling.window, settings.scheduling.interval_s = 1, 30.0
    settings.scheduling.whole_queue = False  # a job per round: only the window is considered
    scheduler = Scheduler(app.state.engine, app.state.sessions, settings, busy_share=1.0)
    uids = [
        (await submit(api, job_document(f"job-{i}", replicas=1, gpus=8))).json()["uid"]
        for i in range(3)
    ]
    try:
        for _ in uids:  # a job per round (window 1); none waits for the 30 s period
            await asyncio.wait_for(scheduler.step(), timeout=20)
        states = [(await api.get(f"/api/v1/jobs/{uid}")).json()["state"] for uid in uids]
        assert states == ["Placed"] * 3
        with pytest.raises(TimeoutError):  # idle: it waits for the period (or a wake-up)
            await asyncio.wait_for(scheduler.step(), timeout=1)
        # A full window of jobs that cannot be placed is not a backlog: no round after round.
        too_big = job_document("too-big", replicas=100, gpus=8)
        assert (await submit(api, too_big)).status_code == 201
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(scheduler.step(), timeout=1)
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(scheduler.step(), timeout=1)
    finally:
        await scheduler.stop()


async def test_a_round_writes_its_placements_in_statements_per_table_not_per_job(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    """Placing 30 jobs takes as many statements as placing 5 (the rows go table by table)."""
    await two_clusters(api)
    statements: list[object] = []
    engine = app.state.engine.sync_engine

    def count(*args: object) -> None:
        statements.append(args[2])

    event.listen(engine, "before_cursor_execute", count)
    counts = []
    try:
        for size in (5, 30):
            for i in range(size):
                await submit(api, job_document(f"small-{size}-{i}", replicas=1))
            statements.clear()
            report = await app.state.scheduler.run_once()
            assert report is not None
            assert len(report.result.placed) == size
            counts.append(len(statements))
    finally:
        event.remove(engine, "before_cursor_execute", count)
    assert counts[1] <= counts[0] + 2, counts


async def test_a_job_s_detail_reads_its_placement_and_shares_in_one_statement(
    app: FastAPI, api: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """GET of a placed job: the job, then its placement with its shares and their clusters;
    link reservations are read only for a split (they exist only there)."""
    await two_clusters(api)
    whole = (await submit(api, job_document("whole", replicas=1))).json()["uid"]
    split = (await submit(api, llm_job("big"))).json()["uid"]
    report = await app.state.scheduler.run_once()
    assert report is not None
    assert sorted(report.result.placed) == sorted([whole, split])
    statements: list[object] = []
    engine = app.state.engine.sync_engine
    through_driver = Read.rows  # on Postgres these bypass SQLAlchemy's events
    inside = False

    def count(*args: object) -> None:
        if not inside:
            statements.append(args[2])

    async def counted(read: Read, *args: object) -> object:
        nonlocal inside
        statements.append(read.statement)
        inside = True
        try:
            return await through_driver(read, *args)  # type: ignore[arg-type]
        finally:
            inside = False

    details = {}
    monkeypatch.setattr(Read, "rows", counted)
    event.listen(engine, "before_cursor_execute", count)
    try:
        for uid in (whole, split):
            statements.clear()
            details[uid] = (await api.get(f"/api/v1/jobs/{uid}")).json()
            details[uid]["statements"] = len(statements)
    finally:
        event.remove(engine, "before_cursor_execute", count)
    assert details[whole]["statements"] == 2
    assert details[split]["statements"] == 3
    assert [s["pods"] for s in details[whole]["placement"]["shares"]] == [1]
    assert details[whole]["placement"]["linkReservations"] == []
    assert len(details[split]["placement"]["shares"]) == 2
    assert details[split]["placement"]["linkReservations"] == [
        {"clusterA": "gpu-east", "clusterB": "gpu-west", "gbps": 100.0, "staging": False}
    ]


async def test_a_job_stored_before_the_bounds_is_set_aside_and_the_round_recorded(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    # A job the API refuses today (9e18 GPUs a pod) as an older release could have stored it.
    await two_clusters(api)
    poison = (await submit(api, job_document("poison", queue="llm"))).json()["uid"]
    fine = (await submit(api, job_document("fine", queue="llm"))).json()["uid"]
    async with transaction(app.state.sessions) as session:
        job = await session.get(Job, uuid.UUID(poison))
        assert job is not None
        job.gang = job.gang.model_copy(
            update={
                "tasks": [
                    t.model_copy(
                        update={"resources": t.resources.model_copy(update={"gpus": 9 * 10**18})}
                    )
                    for t in job.gang.tasks
                ]
            }
        )
    report = await app.state.scheduler.run_once()
    assert report is not None and report.status != "ERROR"
    assert (await api.get(f"/api/v1/jobs/{fine}")).json()["state"] == "Placed"
    refused = (await api.get(f"/api/v1/jobs/{poison}")).json()
    assert refused["state"] == "Pending"
    assert refused["pendingReason"].startswith("set aside: GPUs per pod must be in [0, 1024]")
    rounds = (await api.get("/api/v1/scheduling/rounds")).json()["items"]
    assert rounds[0]["placed"] == 1


async def test_a_round_without_a_proven_bound_is_recorded_with_no_gap(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    async with transaction(app.state.sessions) as session:
        await record_round(
            session,
            generation=7,
            wall_seconds=1.0,
            solve_seconds=1.0,
            status="UNKNOWN",
            gap=math.nan,
            placed=0,
            pending=3,
            policy="cpsat",
            finished_at=utcnow(),
        )
    rounds = (await api.get("/api/v1/scheduling/rounds")).json()["items"]
    assert (rounds[0]["generation"], rounds[0]["gap"]) == (7, None)


async def test_a_stored_job_this_release_cannot_read_is_set_aside_alone(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    """A gang stored in a form the models refuse (a newer release's, or written by hand): the
    round sets that job aside with the reason and places the others; reading it loads."""
    await two_clusters(api)
    odd = (await submit(api, job_document("odd", queue="llm"))).json()["uid"]
    fine = (await submit(api, job_document("fine", queue="llm"))).json()["uid"]
    async with transaction(app.state.sessions) as session:
        await session.execute(
            update(Job).where(Job.id == uuid.UUID(odd)).values(gang={"futureField": 1})
        )
    report = await app.state.scheduler.run_once()
    assert report is not None and report.result.placed == [fine]
    async with transaction(app.state.sessions) as session:
        job = await session.get(Job, uuid.UUID(odd))
        assert job is not None and job.pending_reason.startswith("set aside:")


async def test_a_job_the_round_cannot_model_is_told_once_not_every_round(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    # GPU pods of different sizes in one Volcano Job cannot be one gang yet: every round tells
    # it so, and the repeats fold into one Unschedulable event (its count rises), as
    # Kubernetes folds events, not one event a round.
    await two_clusters(api)
    mixed = job_document("mixed", queue="llm", replicas=2, gpus=8)
    small = copy.deepcopy(mixed["spec"]["tasks"][0]) | {"name": "small"}
    small["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "4"
    mixed["spec"]["tasks"].append(small)
    uid = (await submit(api, mixed)).json()["uid"]
    for i in range(4):  # a new job each time: every round runs (an idle one is skipped)
        await submit(api, job_document(f"other-{i}", queue="llm", replicas=1))
        await app.state.scheduler.run_once()
    job = (await api.get(f"/api/v1/jobs/{uid}")).json()
    assert job["pendingReason"].startswith("cannot be placed yet: ")
    events = (await api.get(f"/api/v1/jobs/{uid}/events")).json()["items"]
    assert [e["reason"] for e in events].count("Unschedulable") == 1


async def test_a_round_flushed_in_parts_writes_every_start_whole(
    app: FastAPI, api: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ten starts flushed three at a time: each job Placed with its shares and one assignment
    in the outbox, the assignments in start order, part after part."""
    monkeypatch.setattr(round_apply, "FLUSH_EVERY", 3)
    await two_clusters(api)
    for i in range(10):
        await submit(api, job_document(f"small-{i}", replicas=1))
    report = await app.state.scheduler.run_once()
    assert report is not None and len(report.result.placed) == 10
    async with transaction(app.state.sessions) as session:
        rows = (
            await session.execute(
                select(Placement.job_id, OutboxMessage.created_at, func.count(ClusterShare.id))
                .join(OutboxMessage, OutboxMessage.placement_id == Placement.id)
                .join(ClusterShare, ClusterShare.placement_id == Placement.id)
                .group_by(Placement.job_id, OutboxMessage.id, OutboxMessage.created_at)
            )
        ).all()
        states = set((await session.execute(select(Job.state))).scalars())
    assert sorted(str(job_id) for job_id, _, _ in rows) == sorted(report.result.placed)
    assert all(shares == 1 for _, _, shares in rows)
    assert states == {JobState.PLACED}
    written = {str(job_id): at for job_id, at, _ in rows}
    parts = [report.result.placed[i : i + 3] for i in range(0, 10, 3)]
    for earlier, later in itertools.pairwise(parts):
        assert max(written[uid] for uid in earlier) <= min(written[uid] for uid in later)
