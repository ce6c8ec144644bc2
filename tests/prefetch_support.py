"""What the prefetch tests share: a job prefetching, its copies, an agent's reports of them,
failed copies made by hand (the backoff's input)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import httpx
from fastapi import FastAPI
from sqlalchemy import select

from tests.data_rounds import clusters_of, corpus, put_inventory, reader
from tests.factories import create_cluster
from volcano_global.db.engine import transaction
from volcano_global.db.models import (
    Cluster,
    CopyState,
    DataCopy,
)
from volcano_global.rpc.copies import CopyCause, CopyPhase, CopyStatus
from volcano_global.services.data import copy_backoff
from volcano_global.services.data.copies import apply_report


async def reserved(api: httpx.AsyncClient) -> float:
    return float((await api.get("/api/v1/links")).json()["items"][0]["reservedGbps"])


async def copies(app: FastAPI) -> list[DataCopy]:
    async with transaction(app.state.sessions) as session:
        found = await session.execute(select(DataCopy).order_by(DataCopy.created_at))
        return list(found.scalars())


async def report(
    app: FastAPI,
    copy: DataCopy,
    phase: CopyPhase,
    message: str = "",
    cause: CopyCause | None = None,
) -> None:
    """The destination's agent says where the copy stands (`cause` None: an agent from before
    causes)."""
    async with transaction(app.state.sessions) as session:
        cluster = await session.scalar(select(Cluster.id).where(Cluster.name == "gpu-a"))
        assert cluster is not None
        await apply_report(
            session,
            cluster_id=cluster,
            status=CopyStatus(copy_id=str(copy.id), phase=phase, message=message, cause=cause),
        )


async def prefetching(
    app: FastAPI, api: httpx.AsyncClient, *, created: bool = False
) -> tuple[str, str]:
    """gpu-b holds corpus-v3 (2 TiB) and runs `hog` (it reads the corpus) for 10 more hours;
    gpu-a runs `short` (reads nothing) for 30 more minutes. `train` (64 GPUs, reads the
    corpus) fits in neither now. By hand: a holder has room in about 10 h; staging into gpu-a
    at 100 Gbps takes 2 TiB * 8 / 100 Gbps = 176 s, and gpu-a has room in about 30 min; so
    room and data are both in gpu-a in 30 min, sooner than 10 h: copy it there now."""
    for name in ("gpu-a", "gpu-b"):
        if not created:
            await create_cluster(api, name)
        await put_inventory(api, name)
    link = {"clusterA": "gpu-a", "clusterB": "gpu-b", "capacityGbps": 400}
    assert (await api.post("/api/v1/links", json=link)).status_code == 201
    await corpus(api)
    hog = await reader(api, "hog", estimate="10h")
    assert (await app.state.scheduler.run_once()).result.placed == [hog]
    short = await reader(api, "short", estimate="30m", claim=False)
    assert (await app.state.scheduler.run_once()).result.placed == [short]
    assert (await clusters_of(api, hog), await clusters_of(api, short)) == (["gpu-b"], ["gpu-a"])
    for name in ("gpu-a", "gpu-b"):  # their pods run: the agents' inventories say so
        await put_inventory(api, name, used=8)
    uid = await reader(api)
    assert (await app.state.scheduler.run_once()).result.placed == []
    return uid, short


async def a_copy_ended(
    app: FastAPI, api: httpx.AsyncClient, phase: CopyPhase, message: str = ""
) -> DataCopy:
    """A job prefetching into gpu-a, its copy reported ended (`phase`, `message`)."""
    await prefetching(app, api)
    (copy,) = await copies(app)
    await report(app, copy, phase, message)
    return copy


async def ended_ago(app: FastAPI, seconds: float) -> None:
    """Every copy's end moved `seconds` further into the past (time passes)."""
    async with transaction(app.state.sessions) as session:
        for copy in (await session.execute(select(DataCopy))).scalars():
            if copy.ended_at is not None:
                copy.ended_at -= timedelta(seconds=seconds)


async def failed_before(app: FastAPI, copy: DataCopy, count: int) -> None:
    """`count` more failed copies into the copy's destination, for no job (other jobs'),
    2 min apart (each its own incident)."""
    await failed_into(app, copy, [(120.0 * (i + 1), f"ImagePullBackOff {i}") for i in range(count)])


async def failed_into(
    app: FastAPI,
    copy: DataCopy,
    failures: list[tuple[float, str]],
    *,
    same_job: bool = False,
    cause: CopyCause | None = CopyCause.DESTINATION,
    namespace: str = "",
    data_source: str = "",
    state: CopyState = CopyState.FAILED,
    job: uuid.UUID | None = None,
    purpose: str = "",
) -> None:
    """Failed copies into the copy's destination (seconds before its end, reason), blaming
    `cause` (None: recorded by a replica from before causes), for no job (each another deleted job's: in its own namespace, or `namespace`;
    of the copy's data, or `data_source`) or, `same_job`, for its job (or `job`, in its
    namespace). `state`: copies that ended otherwise (SUCCEEDED: ones that worked); `purpose`:
    the copy's, unless given."""
    made = []
    async with transaction(app.state.sessions) as session:
        row = await session.get(DataCopy, copy.id)
        assert row is not None and row.ended_at is not None
        for ago, why in failures:
            clone = {c.key: getattr(row, c.key) for c in DataCopy.__table__.columns}
            clone |= {"id": uuid.uuid4(), "reason": why, "state": state}
            clone |= {"cause": cause, "data_source": data_source or row.data_source}
            clone["purpose"] = purpose or row.purpose
            if job is not None:
                clone |= {"job_id": job, "job_uid": job}
            elif not same_job:
                clone |= {"job_id": None, "job_uid": None}
                clone["namespace"] = namespace or f"team-{uuid.uuid4().hex[:8]}"
            clone["ended_at"] = row.ended_at - timedelta(seconds=ago)
            made.append(DataCopy(**clone))
        session.add_all(made)


async def broken(app: FastAPI, *, now: datetime | None = None) -> copy_backoff.Broken:
    async with transaction(app.state.sessions) as session:
        return await copy_backoff.broken_destinations(session, now=now or datetime.now(UTC))
