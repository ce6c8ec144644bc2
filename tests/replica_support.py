"""What the replica tests share: a fleet of two regions where a dataset is read by enough
jobs lately that a round copies it ahead of demand into the other region."""

from __future__ import annotations

import httpx
from fastapi import FastAPI
from sqlalchemy import select

from tests.data_documents import data_source_claim
from tests.data_rounds import apply, corpus, put_inventory
from tests.factories import create_cluster, job_document, submit
from tests.prefetch_support import copies
from volcano_global.db.engine import transaction
from volcano_global.db.models import Cluster, DataCopy
from volcano_global.rpc.copies import CopyCause, CopyPhase, CopyStatus
from volcano_global.services.data.copies import apply_report

EU = {"region": "eu-west"}
US = {"region": "us-east"}


def replicating(app: FastAPI, *, readers: int = 3) -> None:
    """The running scheduler plans replicas of datasets read by `readers` jobs lately, and
    keeps each job's own copy inside its region (the setting the bench measured)."""
    data = app.state.scheduler.settings.scheduling.data
    data.replicate_readers = readers
    data.cross_region_margin = 100.0


async def read_by(api: httpx.AsyncClient, name: str, *, gpus: int = 32) -> str:
    """A job of namespace ml reading corpus-v3 (a claim), `gpus` GPUs, for about an hour."""
    await apply(api, data_source_claim(f"{name}-corpus", workload=name))
    document = job_document(name, replicas=gpus // 8, runningEstimate="1h")
    response = await submit(api, document)
    assert response.status_code == 201, response.text
    return str(response.json()["uid"])


async def two_regions(app: FastAPI, api: httpx.AsyncClient) -> str:
    """gpu-a (eu-west) holds corpus-v3 (1 TiB); gpu-b and gpu-c are in us-east, gpu-c busier.
    Two readers run in gpu-a and fill it; a third waits for it (its own copy would leave
    the region: the margin keeps it waiting). Three readers lately: the round copies the
    corpus into us-east, to gpu-b (most free GPUs), from gpu-a at the copy rate (100 Gbps).
    Returns the waiting reader's uid."""
    await create_cluster(api, "gpu-a", labels=EU)
    await create_cluster(api, "gpu-b", labels=US)
    await create_cluster(api, "gpu-c", labels=US)
    for name in ("gpu-a", "gpu-b", "gpu-c"):
        await put_inventory(api, name, used=2 if name == "gpu-c" else 0)  # per node
    for a, b in (("gpu-a", "gpu-b"), ("gpu-a", "gpu-c"), ("gpu-b", "gpu-c")):
        link = {"clusterA": a, "clusterB": b, "capacityGbps": 150}
        assert (await api.post("/api/v1/links", json=link)).status_code == 201
    await corpus(api, size="1Ti", where="gpu-a")
    replicating(app)
    first = [await read_by(api, "first"), await read_by(api, "second")]
    assert sorted((await app.state.scheduler.run_once()).result.placed) == sorted(first)
    await put_inventory(api, "gpu-a", used=8)  # every GPU of every node
    waiting = await read_by(api, "third")
    assert (await app.state.scheduler.run_once()).result.placed == []
    return waiting


async def replicas(app: FastAPI) -> list[DataCopy]:
    return [c for c in await copies(app) if c.purpose == "replica"]


async def report_on(
    app: FastAPI,
    copy: DataCopy,
    phase: CopyPhase,
    message: str = "",
    cause: CopyCause | None = None,
) -> None:
    """The copy's destination agent says where it stands."""
    async with transaction(app.state.sessions) as session:
        await apply_report(
            session,
            cluster_id=copy.destination_cluster_id,
            status=CopyStatus(copy_id=str(copy.id), phase=phase, message=message, cause=cause),
        )


async def held(api: httpx.AsyncClient) -> dict[str, float]:
    """Each link's reserved bandwidth, by `a-b`."""
    items = (await api.get("/api/v1/links")).json()["items"]
    return {f"{i['clusterA']}-{i['clusterB']}": i["reservedGbps"] for i in items}


async def cluster_events(api: httpx.AsyncClient, name: str) -> list[dict[str, str]]:
    return list((await api.get(f"/api/v1/clusters/{name}/events")).json()["items"])


async def cluster_id(app: FastAPI, name: str) -> object:
    async with transaction(app.state.sessions) as session:
        return await session.scalar(select(Cluster.id).where(Cluster.name == name))
