"""Volcano's heterogeneous HyperJob (use case 2: one logical job whose replicated jobs run on
clusters with different GPU models, each pinned by `clusterNames`) through a real round
(CP-SAT, SQLite and Postgres): each child whole in a cluster with its model, all children or
none, dispatched as the child Volcano Jobs of their own templates."""

from __future__ import annotations

import json
import uuid
from typing import Any

import httpx
import pytest
import yaml
from fastapi import FastAPI
from sqlalchemy import select, update

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
from volcano_global.db.models import (
    Cluster,
    ClusterShare,
    Job,
    JobState,
    OutboxKind,
    OutboxMessage,
    Placement,
)
from volcano_global.jobspec.members import member_jobs
from volcano_global.rpc.shares import ShareAssignment, SharePhase
from volcano_global.services.scheduling import free as free_module
from volcano_global.services.scheduling.free import free_capacity
from volcano_global.services.scheduling.timing import running_jobs
from volcano_global.solver.durations import DurationModel

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


def mixed_nodes(cluster: str, **counts: int) -> dict[str, Any]:
    """8-GPU nodes, so many of each model, outside any HyperNode: every model's leaf is named
    after the cluster."""
    return {
        "domains": [],
        "nodes": [
            {"name": f"{cluster}-{model.lower()}-{n}", "gpuModel": model, "gpuAllocatable": 8}
            | {"cpuAllocatableMillis": 192_000, "memoryAllocatableBytes": 2 << 40}
            for model, count in counts.items()
            for n in range(count)
        ],
    }


def pinned(name: str, model: str) -> dict[str, Any]:
    """A job of 8 pods of 8 GPUs of `model`."""
    document = job_document(name, queue="llm", replicas=8)
    document["spec"]["tasks"][0]["template"]["spec"]["nodeSelector"] = {
        "nvidia.com/gpu.product": model
    }
    return document


async def two_models_east(api: httpx.AsyncClient) -> dict[str, Any]:
    """gpu-east of 8 H100 and 10 A100 nodes outside any HyperNode (both models' leaves are
    named gpu-east), gpu-west of 8 A100 nodes, and queue llm: gpu-east's inventory."""
    await create_cluster(api, "gpu-east")
    east = mixed_nodes("gpu-east", H100=8, A100=10)
    assert (await api.put("/api/v1/clusters/gpu-east/inventory", json=east)).status_code == 200
    await create_cluster(api, "gpu-west")
    body = inventory("gpu-west", gpu_model="A100")
    assert (await api.put("/api/v1/clusters/gpu-west/inventory", json=body)).status_code == 200
    await create_queue(api, "llm")
    return east


async def placed_in_two_models(app: FastAPI, api: httpx.AsyncClient) -> str:
    """The example placed, its H100 child in gpu-east (`two_models_east`), its A100 child in
    gpu-west: the job's uid."""
    await two_models_east(api)
    uid = (await submit(api, HETEROGENEOUS)).json()["uid"]
    assert (report := await app.state.scheduler.run_once()) and report.result.placed == [uid]
    return str(uid)


async def runs(app: FastAPI, uid: str) -> None:
    """The job Running, its shares too, its pods ended before its report came (the inventory
    shows every GPU free)."""
    async with transaction(app.state.sessions) as session:
        await session.execute(
            update(Job).where(Job.id == uuid.UUID(uid)).values(state=JobState.RUNNING)
        )
        await session.execute(update(ClusterShare).values(phase=SharePhase.RUNNING))


async def test_a_child_in_a_cluster_of_two_models_holds_its_own_models_gpus(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    # The H100 child's share holds the H100s: while it is placed (its hold), and while it
    # runs with its pods not in the inventory (the books). Booked by its job's model - a
    # parted job has none - it came off the A100 leaf of the same name, the H100s left free.
    uid = await placed_in_two_models(app, api)
    async with transaction(app.state.sessions) as session:
        rows = await session.execute(
            select(Cluster.name, ClusterShare.gpu_model).join(
                Cluster, Cluster.id == ClusterShare.cluster_id
            )
        )
        assert sorted(rows.all()) == [("gpu-east", "H100"), ("gpu-west", "A100")]
    assert (await assignments(app, uid))["gpu-east"].gpu_model == "H100"

    h100 = (await submit(api, pinned("h100", "H100"))).json()["uid"]
    assert (report := await app.state.scheduler.run_once()) and report.result.placed == []

    await runs(app, uid)  # now the books hold the H100s; the A100s of gpu-east are free
    a100 = (await submit(api, pinned("a100", "A100"))).json()["uid"]
    assert (report := await app.state.scheduler.run_once()) and report.result.placed == [a100]
    shares = (await api.get(f"/api/v1/jobs/{a100}")).json()["placement"]["shares"]
    assert [s["cluster"] for s in shares] == ["gpu-east"]
    assert (await api.get(f"/api/v1/jobs/{h100}")).json()["state"] == "Pending"


async def test_a_round_plans_with_a_child_running_on_its_own_model(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    # What the job frees when it ends (planning) or is evicted: the H100s of gpu-east, not
    # the model of most of its nodes (A100), as a share of a job that names none is read.
    uid = await placed_in_two_models(app, api)
    await runs(app, uid)
    async with transaction(app.state.sessions) as session:
        clusters = list((await session.execute(select(Cluster))).scalars())
        states = await free_capacity(session, clusters)
        running = await running_jobs(
            session, clusters, states, now=utcnow(), durations=DurationModel()
        )
    (job,) = running
    assert job.gpus == (("gpu-east", "H100", 64), ("gpu-west", "A100", 64))
    assert {(cluster, model) for cluster, _, model, *_ in job.pods} == {
        ("gpu-east", "H100"),
        ("gpu-west", "A100"),
    }


@pytest.mark.parametrize("database_url", ["postgres"], indirect=True)  # SQLite: one connection
async def test_a_child_whose_gpus_were_taken_while_the_round_read_waits(
    app: FastAPI, api: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Between the round's read and its commit, other pods take gpu-east's H100s. The commit
    # reads the clusters whose inventory moved again and takes each start's shares from them
    # (`round_apply._misfits`), by the share's model: the H100 child no longer fits and the
    # job waits. By its job's model (none), it came off the A100s of the same leaf name.
    east = await two_models_east(api)
    uid = (await submit(api, HETEROGENEOUS)).json()["uid"]
    real = free_module.free_states

    async def then_h100s_taken(*args: object, **kwargs: object) -> object:
        states = await real(*args, **kwargs)  # type: ignore[arg-type]
        if not taken:
            taken.append(True)
            for node in east["nodes"]:
                node["gpuUsed"] = 8 if node["gpuModel"] == "H100" else 0
            put = await api.put("/api/v1/clusters/gpu-east/inventory", json=east)
            assert put.status_code == 200
        return states

    taken: list[bool] = []
    monkeypatch.setattr(free_module, "free_states", then_h100s_taken)
    report = await app.state.scheduler.run_once()
    assert taken and report is not None
    assert (report.result.placed, list(report.result.deferred)) == ([], [uid])
