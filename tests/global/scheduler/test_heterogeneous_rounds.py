"""Volcano's heterogeneous HyperJob (use case 2: one logical job whose replicated jobs run on
clusters with different GPU models, each pinned by `clusterNames`) through a real round
(CP-SAT, SQLite and Postgres): each child whole in a cluster with its model, all children or
none, dispatched as the child Volcano Jobs of their own templates."""

from __future__ import annotations

import json
import uuid

import httpx
import yaml
from fastapi import FastAPI
from sqlalchemy import select

from tests.factories import (
    create_cluster,
    create_queue,
    example,
    inventory,
    job_document,
    submit,
)
from volcano_global.db.engine import transaction
from volcano_global.db.models import Cluster, OutboxKind, OutboxMessage, Placement
from volcano_global.jobspec.members import member_jobs
from volcano_global.rpc.shares import ShareAssignment

HETEROGENEOUS = example("hyperjob-heterogeneous.yaml")  # trainer-h100 -> gpu-east, a100 -> west


async def h100_east_a100_west(
    api: httpx.AsyncClient, *, west_used: int = 0, tors: int = 5, nodes_per_tor: int = 8
) -> None:
    """gpu-east of H100 nodes and gpu-west of A100 nodes (`tors` x `nodes_per_tor` nodes of 8
    GPUs each, `west_used` GPUs of every west node busy), linked."""
    for name, model, used in (("gpu-east", "H100", 0), ("gpu-west", "A100", west_used)):
        await create_cluster(api, name)
        body = inventory(name, tors=tors, nodes_per_tor=nodes_per_tor, gpu_model=model, used=used)
        assert (await api.put(f"/api/v1/clusters/{name}/inventory", json=body)).status_code == 200
    await api.post(
        "/api/v1/links", json={"clusterA": "gpu-east", "clusterB": "gpu-west", "capacityGbps": 400}
    )
    await create_queue(api, "llm")


async def assignments(app: FastAPI, job_uid: str) -> dict[str, ShareAssignment]:
    """The job's share assignments in the outbox, by cluster name."""
    async with transaction(app.state.sessions) as session:
        rows = await session.execute(
            select(Cluster.name, OutboxMessage.payload)
            .join(Cluster, Cluster.id == OutboxMessage.cluster_id)
            .join(Placement, Placement.id == OutboxMessage.placement_id)
            .where(Placement.job_id == uuid.UUID(job_uid), OutboxMessage.kind == OutboxKind.ASSIGN)
        )
        return {name: ShareAssignment.from_payload(payload) for name, payload in rows.all()}


async def test_each_child_runs_in_a_cluster_with_its_gpu_model(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    await h100_east_a100_west(api)
    uid = (await submit(api, HETEROGENEOUS)).json()["uid"]
    report = await app.state.scheduler.run_once()
    assert report is not None and report.result.placed == [uid]
    job = (await api.get(f"/api/v1/jobs/{uid}")).json()
    assert job["state"] == "Placed"
    shares = job["placement"]["shares"]
    assert [(s["cluster"], s["pods"], s["gpus"], s["rankOffset"]) for s in shares] == [
        ("gpu-east", 8, 64, 0),
        ("gpu-west", 8, 64, 8),
    ]
    # Each cluster gets one child Volcano Job: its own template, with its own GPU model.
    sent = await assignments(app, uid)
    manifest = yaml.safe_load(HETEROGENEOUS)
    for cluster, child, model in (
        ("gpu-east", "trainer-h100-0", "H100"),
        ("gpu-west", "trainer-a100-0", "A100"),
    ):
        assignment = sent[cluster]
        assert (assignment.gpu_model, assignment.gpus_per_pod, assignment.pods) == (model, 8, 8)
        (document,) = member_jobs(json.loads(assignment.manifest_json), assignment)
        assert document["metadata"]["name"].endswith(f"-{child}")
        (task,) = document["spec"]["tasks"]
        assert task["replicas"] == 8 and document["spec"]["minAvailable"] == 8
        assert task["template"]["spec"]["nodeSelector"] == {"nvidia.com/gpu.product": model}
        written = next(
            r["templateSpec"]["tasks"][0]["template"]["spec"]["containers"][0]["image"]
            for r in manifest["spec"]["replicatedJobs"]
            if r["name"] == child.rsplit("-", 1)[0]
        )
        assert task["template"]["spec"]["containers"][0]["image"] == written


async def test_nothing_starts_while_one_child_has_no_room(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    # Every A100 node has 4 GPUs busy: no room for the A100 child's pods of 8, though gpu-east
    # has room for the H100 child. Neither starts, and the reason names the missing child.
    await h100_east_a100_west(api, west_used=4)
    uid = (await submit(api, HETEROGENEOUS)).json()["uid"]
    report = await app.state.scheduler.run_once()
    assert report is not None and report.result.placed == []
    job = (await api.get(f"/api/v1/jobs/{uid}")).json()
    assert job["state"] == "Pending" and job["placement"] is None
    reason = job["pendingReason"]
    assert "child trainer-a100-0" in reason and "A100" in reason and "gpu-west" in reason
    assert "no child starts until all can" in reason


async def test_beyond_the_window_it_is_read_and_placed_child_by_child(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    # A window of one job (the small one: least expected service first). The heterogeneous
    # HyperJob is beyond it, and its 128 GPUs fit no one cluster of 72 whole: the fast pass
    # (step 1d) finds it no cluster, yet it is read in full and its children placed.
    await h100_east_a100_west(api, tors=1, nodes_per_tor=9)
    app.state.scheduler.settings.scheduling.window = 1
    small = (await submit(api, job_document("small", queue="llm", replicas=1))).json()["uid"]
    uid = (await submit(api, HETEROGENEOUS)).json()["uid"]
    report = await app.state.scheduler.run_once()
    assert report is not None and sorted(report.result.placed) == sorted([small, uid])
    shares = (await api.get(f"/api/v1/jobs/{uid}")).json()["placement"]["shares"]
    assert [(s["cluster"], s["pods"]) for s in shares] == [("gpu-east", 8), ("gpu-west", 8)]
