"""A round never sees more free GPUs than the Global's books leave (`scheduling/books.py`): a
running share whose pods the cluster no longer shows (they ended before their report came, or
the agent restarted empty before reconciliation) still holds its GPUs until it ends."""

from __future__ import annotations

import httpx
from fastapi import FastAPI
from sqlalchemy import select, update

from tests.factories import create_cluster, create_queue, inventory, job_document, submit
from volcano_global.db.engine import transaction
from volcano_global.db.models import Cluster, ClusterShare, Job, JobState
from volcano_global.rpc.shares import SharePhase
from volcano_global.services.scheduling.free import free_capacity


async def free_gpus(app: FastAPI) -> int:
    async with transaction(app.state.sessions) as session:
        clusters = list((await session.execute(select(Cluster))).scalars())
        states = await free_capacity(session, clusters)
    return sum(leaf.free_gpus for state in states for leaf in state.leaves)


async def test_a_running_share_the_inventory_does_not_show_still_holds_its_gpus(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    await create_cluster(api, "gpu-east")
    body = inventory("gpu-east", tors=2, nodes_per_tor=4)  # 64 GPUs, all free
    assert (await api.put("/api/v1/clusters/gpu-east/inventory", json=body)).status_code == 200
    await create_queue(api, "llm")
    await submit(api, job_document("train", queue="llm", replicas=2))  # 16 GPUs
    report = await app.state.scheduler.run_once()
    assert report is not None and len(report.result.placed) == 1
    assert await free_gpus(app) == 48  # placed, not running yet: held

    # Its pods ran and ended in the cluster (the inventory shows all 64 free again) but the
    # report saying so has not come: the books still hold the share.
    async with transaction(app.state.sessions) as session:
        await session.execute(update(Job).values(state=JobState.RUNNING))
        await session.execute(update(ClusterShare).values(phase=SharePhase.RUNNING))
    assert await free_gpus(app) == 48

    # The report came: the share ended, its GPUs are free.
    async with transaction(app.state.sessions) as session:
        await session.execute(update(ClusterShare).values(phase=SharePhase.SUCCEEDED))
    assert await free_gpus(app) == 64
