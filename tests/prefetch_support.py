"""What the prefetch tests share: a job prefetching, its copies, an agent's reports of them."""

from __future__ import annotations

import httpx
from fastapi import FastAPI
from sqlalchemy import select

from tests.data_rounds import clusters_of, corpus, put_inventory, reader
from tests.factories import create_cluster
from volcano_global.db.engine import transaction
from volcano_global.db.models import (
    Cluster,
    DataCopy,
)
from volcano_global.rpc.copies import CopyPhase, CopyStatus
from volcano_global.services.data.copies import apply_report


async def reserved(api: httpx.AsyncClient) -> float:
    return float((await api.get("/api/v1/links")).json()["items"][0]["reservedGbps"])


async def copies(app: FastAPI) -> list[DataCopy]:
    async with transaction(app.state.sessions) as session:
        found = await session.execute(select(DataCopy).order_by(DataCopy.created_at))
        return list(found.scalars())


async def report(app: FastAPI, copy: DataCopy, phase: CopyPhase, message: str = "") -> None:
    """The destination's agent says where the copy stands."""
    async with transaction(app.state.sessions) as session:
        cluster = await session.scalar(select(Cluster.id).where(Cluster.name == "gpu-a"))
        assert cluster is not None
        await apply_report(
            session,
            cluster_id=cluster,
            status=CopyStatus(copy_id=str(copy.id), phase=phase, message=message),
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
