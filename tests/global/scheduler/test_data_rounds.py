"""Data gravity on the server (issue 33), rounds against the database (SQLite and Postgres):
a job reading a DataSource starts where the data is when it can, stages it elsewhere when the
holder is busy for long (the copy on its share, its bandwidth reserved on the link until the
share's staging ends), waits for the holder when that is sooner; a claim applied while the job
waits counts in the next round; a requeued job goes back to its checkpoint's cluster, or
stages the checkpoint, which then counts as where the job went."""

from __future__ import annotations

import math
import uuid
from datetime import timedelta

import httpx
import pytest
from fastapi import FastAPI

from tests.conftest import app_settings, running
from tests.data_documents import data_source_claim
from tests.data_rounds import (
    URI,
    Reports,
    apply,
    clusters_of,
    corpus,
    job,
    put_inventory,
    reader,
    rows,
)
from tests.factories import create_cluster
from volcano_global.db.base import utcnow
from volcano_global.db.engine import transaction
from volcano_global.rpc.v1 import agent_pb2 as pb
from volcano_global.services.data.checkpoints import find_location
from volcano_global.services.dispatch.supervision import supervise
from volcano_global.services.scheduling.round_input import read_round
from volcano_global.settings import DataSettings, Settings
from volcano_global.solver.gravity import DataOptions
from volcano_global.solver.preemption import Rules
from volcano_global.solver.round_plan import RoundOptions


async def clusters(api: httpx.AsyncClient, *, used: dict[str, int] | None = None) -> None:
    """gpu-a and gpu-b, 64 GPUs each (`used` per node by cluster), 400 Gbps between them."""
    for name in ("gpu-a", "gpu-b"):
        await create_cluster(api, name)
        await put_inventory(api, name, used=(used or {}).get(name, 0))
    link = {"clusterA": "gpu-a", "clusterB": "gpu-b", "capacityGbps": 400}
    assert (await api.post("/api/v1/links", json=link)).status_code == 201


async def reserved(api: httpx.AsyncClient) -> float:
    return float((await api.get("/api/v1/links")).json()["items"][0]["reservedGbps"])


async def test_a_job_starts_where_its_data_is_when_both_clusters_are_free(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    await clusters(api)
    await corpus(api)
    # A job that reads nothing takes gpu-a (the two clusters tie): gravity, not chance, below.
    control = await reader(api, "control", claim=False)
    assert (await app.state.scheduler.run_once()).result.placed == [control]
    assert await clusters_of(api, control) == ["gpu-a"]
    assert (await api.post(f"/api/v1/jobs/{control}/cancel")).status_code == 200

    uid = await reader(api)
    assert (await app.state.scheduler.run_once()).result.placed == [uid]
    assert await clusters_of(api, uid) == ["gpu-b"]
    shares, held = await rows(app, api, uid)
    assert [s.staging for s in shares] == [None]
    assert held == []
    assert (await job(api, uid))["placement"]["linkReservations"] == []
    assert await reserved(api) == 0


async def staged_in_a(app: FastAPI, api: httpx.AsyncClient) -> tuple[str, Reports]:
    """gpu-b holds the data but runs a job for 10 more hours: the reader stages it into
    gpu-a (2 TiB at 100 Gbps: about 3 min), the copy on its share, its bandwidth held."""
    token = (await create_cluster(api, "gpu-a"))["agentToken"]
    await create_cluster(api, "gpu-b")
    await put_inventory(api, "gpu-b")
    link = {"clusterA": "gpu-a", "clusterB": "gpu-b", "capacityGbps": 400}
    assert (await api.post("/api/v1/links", json=link)).status_code == 201
    reports = Reports(app, token)
    await reports.start()
    await corpus(api)
    hog = await reader(api, "hog", estimate="10h")  # it reads the corpus too: into gpu-b
    await app.state.scheduler.run_once()
    assert await clusters_of(api, hog) == ["gpu-b"]

    uid = await reader(api)
    assert (await app.state.scheduler.run_once()).result.placed == [uid]
    return uid, reports


async def test_a_busy_holder_makes_the_job_stage_its_data_with_bandwidth_held(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    uid, reports = await staged_in_a(app, api)
    try:
        shown = await job(api, uid)
        assert [s["cluster"] for s in shown["placement"]["shares"]] == ["gpu-a"]
        shares, held = await rows(app, api, uid)
        assert shares[0].staging == [
            {
                "data_source": "corpus-v3",
                "bytes": 2 * 2**40,
                "destination": "/data/corpus-v3/",
                "source_cluster": "gpu-b",
                "source_uri": URI,
                "gbps": 100.0,
            }
        ]
        assert [(r.gbps, r.staging_share_id) for r in held] == [(100.0, shares[0].id)]
        assert await reserved(api) == 100.0
        assert shown["placement"]["linkReservations"] == [
            {"clusterA": "gpu-a", "clusterB": "gpu-b", "gbps": 100.0, "staging": True}
        ]
        events = (await api.get(f"/api/v1/jobs/{uid}/events")).json()["items"]
        placed = next(e["message"] for e in events if e["reason"] == "Placed")
        assert "staging corpus-v3 (2 TiB) from gpu-b to gpu-a at 100 Gbps" in placed

        placement = shown["placement"]["uid"]
        await reports.report(placement, pb.SHARE_PHASE_STAGING)
        assert await reserved(api) == 100.0  # copying: still held
        await reports.report(placement, pb.SHARE_PHASE_ACCEPTED)
        assert await reserved(api) == 0  # the copy ended: the bandwidth returns
        _, held = await rows(app, api, uid)
        assert held == []
        assert (await job(api, uid))["placement"]["linkReservations"] == []
        source = (await api.get("/api/v1/datasources/corpus-v3")).json()
        assert source["clusters"] == ["gpu-b", "gpu-a"]
    finally:
        await reports.stream.close()


async def test_a_failed_staging_returns_the_bandwidth_with_the_placement(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    uid, reports = await staged_in_a(app, api)
    try:
        placement = (await job(api, uid))["placement"]["uid"]
        await reports.report(placement, pb.SHARE_PHASE_STAGING)
        await reports.report(placement, pb.SHARE_PHASE_FAILED, "staging Job failed: Deadline")
        shown = await job(api, uid)
        assert (shown["state"], shown["placement"]["state"]) == ("Pending", "Withdrawn")
        assert await reserved(api) == 0
        source = (await api.get("/api/v1/datasources/corpus-v3")).json()
        assert source["clusters"] == ["gpu-b"]  # nothing arrived
    finally:
        await reports.stream.close()


async def test_a_claim_applied_while_its_job_waits_counts_in_the_next_round(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    await clusters(api, used={"gpu-a": 8, "gpu-b": 8})  # no room anywhere
    await corpus(api)
    uid = await reader(api, claim=False)
    await app.state.scheduler.run_once()
    assert "corpus-v3" not in (await job(api, uid))["pendingReason"]

    await apply(api, data_source_claim("late", workload="train"))
    await app.state.scheduler.run_once()
    assert (await job(api, uid))["pendingReason"].startswith(
        "dataset corpus-v3 (2 TiB) is in gpu-b"
    )
    for name in ("gpu-a", "gpu-b"):
        await put_inventory(api, name)
    assert (await app.state.scheduler.run_once()).result.placed == [uid]
    assert await clusters_of(api, uid) == ["gpu-b"]


async def test_a_job_waits_for_the_holder_when_that_is_sooner_than_staging(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    await clusters(api)
    await corpus(api, size="40Ti")  # about 59 min to stage at 100 Gbps
    hog = await reader(api, "hog", estimate="2m")
    await app.state.scheduler.run_once()
    assert await clusters_of(api, hog) == ["gpu-b"]

    uid = await reader(api)
    report = await app.state.scheduler.run_once()
    assert report.result.placed == []
    shown = await job(api, uid)
    assert shown["state"] == "Pending"
    assert shown["pendingReason"].startswith(
        "dataset corpus-v3 (40 TiB) is in gpu-b; staging to gpu-a at 100 Gbps takes 59 min; "
        "gpu-b has room in about 2 min: waiting for gpu-b"
    )
    assert await reserved(api) == 0


async def test_a_requeued_job_goes_back_to_the_cluster_of_its_checkpoint(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    await clusters(api, used={"gpu-a": 8})  # the first placement can only be gpu-b
    uid = await reader(api, claim=False)
    await app.state.scheduler.run_once()
    assert await clusters_of(api, uid) == ["gpu-b"]
    response = await api.post(
        f"/api/v1/jobs/{uid}/checkpoints", json={"step": 100, "sizeBytes": 2**40}
    )
    assert response.status_code in (200, 201, 204), response.text
    await put_inventory(api, "gpu-a")  # now both are free: gpu-a would win a tie
    async with transaction(app.state.sessions) as session:
        withdrawn = await supervise(
            session, default_timeout_s=60, now=utcnow() + timedelta(seconds=600)
        )
    assert [o.action for o in withdrawn] == ["Withdrawn"]
    assert (await job(api, uid))["state"] == "Pending"

    assert (await app.state.scheduler.run_once()).result.placed == [uid]
    assert await clusters_of(api, uid) == ["gpu-b"]
    shares, held = await rows(app, api, uid)
    assert [s.staging for s in shares] == [None]
    assert held == []


async def test_a_checkpoint_staged_elsewhere_moves_with_the_job(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    """Its checkpoint is in gpu-b, busy for 10 hours: the job stages the checkpoint into
    gpu-a, and once that staging ends the checkpoint counts as gpu-a's for the next requeue."""
    token = (await create_cluster(api, "gpu-a"))["agentToken"]
    await create_cluster(api, "gpu-b")
    await put_inventory(api, "gpu-b")
    link = {"clusterA": "gpu-a", "clusterB": "gpu-b", "capacityGbps": 400}
    assert (await api.post("/api/v1/links", json=link)).status_code == 201
    reports = Reports(app, token)
    await reports.start()
    try:
        await corpus(api)
        hog = await reader(api, "hog", estimate="10h")
        await app.state.scheduler.run_once()
        assert await clusters_of(api, hog) == ["gpu-b"]
        uid = await reader(api, claim=False)
        checkpoint = {"step": 7, "sizeBytes": 2**40, "cluster": "gpu-b"}
        response = await api.post(f"/api/v1/jobs/{uid}/checkpoints", json=checkpoint)
        assert response.status_code in (200, 201, 204), response.text

        assert (await app.state.scheduler.run_once()).result.placed == [uid]
        assert await clusters_of(api, uid) == ["gpu-a"]
        shares, _ = await rows(app, api, uid)
        path = f"/data/checkpoints/{uid}/"
        assert shares[0].staging == [
            {
                "data_source": "checkpoint",
                "bytes": 2**40,
                "destination": path,
                "source_cluster": "gpu-b",
                "source_uri": path,
                "gbps": 100.0,
            }
        ]
        placement = (await job(api, uid))["placement"]["uid"]
        await reports.report(placement, pb.SHARE_PHASE_ACCEPTED)
        assert await reserved(api) == 0
        async with transaction(app.state.sessions) as session:
            moved = await find_location(session, job_id=uuid.UUID(uid))
            assert moved is not None
            assert (moved.cluster, moved.step) == ("gpu-a", 7)
    finally:
        await reports.stream.close()


async def test_holders_mode_from_the_environment_never_stages(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """VGLOBAL_SCHEDULING__DATA__MODE=holders (Volcano Global's hard filter): the holder is
    busy for 10 hours and the other cluster free, yet the job waits for the holder."""
    monkeypatch.setenv("VGLOBAL_SCHEDULING__DATA__MODE", "holders")
    monkeypatch.setenv("VGLOBAL_SCHEDULING__DATA__STAGING_GBPS", "50")
    settings = app_settings(database_url)
    settings.scheduling = Settings().scheduling.model_copy(update={"enabled": False})
    assert settings.scheduling.data.staging_gbps == 50
    async with running(settings) as (app, api):
        await clusters(api)
        await corpus(api)
        hog = await reader(api, "hog", estimate="10h")
        await app.state.scheduler.run_once()
        assert await clusters_of(api, hog) == ["gpu-b"]
        uid = await reader(api)
        assert (await app.state.scheduler.run_once()).result.placed == []
        reason = (await job(api, uid))["pendingReason"]
        assert reason.startswith("dataset corpus-v3 (2 TiB): only where it is (gpu-b)")


def test_staging_rates_out_of_bounds_or_out_of_order_are_refused() -> None:
    with pytest.raises(ValueError, match="min_staging_gbps"):
        DataSettings(staging_gbps=10, min_staging_gbps=20)
    for rate in (0.0, math.inf, 2e6):
        with pytest.raises(ValueError, match="staging_gbps"):
            DataSettings(staging_gbps=rate)


def test_the_servers_staging_defaults_are_the_rounds() -> None:
    """The simulator and the benchmarks run `DataOptions`' defaults; the server's settings
    must be the same numbers."""
    defaults = DataSettings()
    options = DataOptions()
    assert (
        defaults.mode,
        defaults.staging_gbps,
        defaults.min_staging_gbps,
        defaults.cross_region_margin,
    ) == (
        options.mode.value,
        options.staging_gbps,
        options.min_staging_gbps,
        options.cross_region_margin,
    )


async def test_an_eviction_counts_the_restore_of_the_victims_checkpoint(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    """A running job's reported checkpoint (1 TiB) is what an eviction would make it copy
    back: 1 TiB over the 100 Gbps a copy takes, about 88 s, in the round's running jobs."""
    await clusters(api, used={"gpu-a": 8})
    uid = await reader(api, claim=False)
    await app.state.scheduler.run_once()
    response = await api.post(
        f"/api/v1/jobs/{uid}/checkpoints", json={"step": 100, "sizeBytes": 2**40}
    )
    assert response.status_code in (200, 201, 204), response.text
    async with transaction(app.state.sessions) as session:
        data, _ = await read_round(session, window=10, options=RoundOptions(preemption=Rules()))
    (victim,) = data.running
    assert victim.id == uid and victim.restore_s == pytest.approx(2**40 * 8 / 100e9)


async def test_a_round_knows_the_clusters_regions_from_their_labels(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    """The regions copies are weighed by (`DataOptions.cross_region_margin`, and among
    sources as fast, one in the destination's region) come from the clusters' labels."""
    await create_cluster(api, "gpu-a", labels={"topology.kubernetes.io/region": "eu-west"})
    await create_cluster(api, "gpu-b")  # the factory's labels: region us-east
    await create_cluster(api, "gpu-c", labels={})
    for name in ("gpu-a", "gpu-b", "gpu-c"):
        await put_inventory(api, name)
    await corpus(api)
    await reader(api)
    async with transaction(app.state.sessions) as session:
        data, _ = await read_round(session, window=10)
    assert data.regions == {"gpu-a": "eu-west", "gpu-b": "us-east"}
