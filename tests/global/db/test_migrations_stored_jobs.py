"""Migrations that convert the jobs, copies and shares stored before them: lifecycle,
elasticity, GPU model names, preemptable flags, copy uids and share models (both
databases)."""

from __future__ import annotations

import copy
import uuid
from datetime import datetime
from typing import Any

import sqlalchemy as sa
import yaml
from sqlalchemy import inspect
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from tests.factories import elastic_document, example, job_document
from volcano_global.db import migrate
from volcano_global.db.base import Base, JSONType, utcnow
from volcano_global.db.models import ClusterShare, Job, Placement
from volcano_global.jobspec import LifecyclePolicy, ParseOptions, normalize_job
from volcano_global.jobspec.extensions import COMMUNICATION, ELASTIC, GANG_START_TIMEOUT
from volcano_global.services.scheduling.books import share_model


def _columns(type_: Any, *names: str) -> list[sa.ColumnClause[Any]]:
    return [sa.column(name, type_) for name in names]


# The tables as of revision 0008, with the columns a row needs (later models may differ).
QUEUES_0008 = sa.table(
    "queues",
    *_columns(sa.Uuid(), "id"),
    *_columns(sa.String(), "name"),
    *_columns(sa.Integer(), "weight", "priority"),
    *_columns(sa.DateTime(timezone=True), "created_at", "updated_at"),
)
JOBS_0008 = sa.table(
    "jobs",
    *_columns(sa.Uuid(), "id", "queue_id"),
    *_columns(JSONType, "manifest", "gang", "split_policy"),
    *_columns(sa.Integer(), "priority", "total_pods", "total_gpus"),
    *_columns(sa.DateTime(timezone=True), "submitted_at", "updated_at"),
    *_columns(sa.String(), "name", "namespace", "kind", "api_version", "source", "source_format"),
    *_columns(sa.String(), "state", "state_message", "submitted_by"),
)


def _job_row(queue_id: uuid.UUID, manifest: dict[str, Any]) -> dict[str, Any]:
    now = utcnow()
    return {
        "id": uuid.uuid4(),
        "queue_id": queue_id,
        "manifest": manifest,
        "gang": {},
        "split_policy": {},
        "priority": 0,
        "total_pods": 1,
        "total_gpus": 8,
        "submitted_at": now,
        "updated_at": now,
        "name": manifest["metadata"]["name"],
        "namespace": "ml",
        "kind": manifest["kind"],
        "api_version": manifest["apiVersion"],
        "source": "{}",
        "source_format": "json",
        "state": "Running",
        "state_message": "",
        "submitted_by": "admin",
    }


async def _insert_default_queue(
    conn: AsyncConnection, table: sa.TableClause, queue_id: uuid.UUID
) -> None:
    """The default queue, as the revision whose queues `table` describes stores it."""
    now = utcnow()
    row = {
        "id": queue_id,
        "name": "default",
        "weight": 1,
        "priority": 0,
        "created_at": now,
        "updated_at": now,
    }
    if "spec" in table.c:
        row |= {"spec": {}, "labels": {}, "annotations": {}}
    await conn.execute(table.insert(), [row])


async def test_stored_jobs_get_their_lifecycle_from_their_manifests(
    empty_engine: AsyncEngine,
) -> None:
    configured = job_document(
        "configured",
        runningEstimate="1h30m",
        maxRetry=5,
        policies=[
            {"exitCode": 2, "action": "RestartJob"},
            {"events": ["PodEvicted"], "event": "PodFailed", "action": "AbortJob"},
        ],
    )
    configured["metadata"]["annotations"] = {GANG_START_TIMEOUT: "120"}
    hyperjob = yaml.safe_load(example("hyperjob-llm-training.yaml"))
    hyperjob["spec"]["replicatedJobs"][0]["templateSpec"]["runningEstimate"] = "20m500ms"
    manifests = [configured, job_document("plain"), hyperjob]
    await migrate.upgrade(empty_engine, "0008")
    queue_id = uuid.uuid4()
    async with empty_engine.begin() as conn:
        await _insert_default_queue(conn, QUEUES_0008, queue_id)
        await conn.execute(JOBS_0008.insert(), [_job_row(queue_id, m) for m in manifests])
    await migrate.upgrade(empty_engine)
    columns = (
        "running_estimate_seconds",
        "lifecycle_policies",
        "max_retry",
        "gang_start_timeout_seconds",
    )
    jobs = Base.metadata.tables["jobs"]
    async with empty_engine.connect() as conn:
        rows = await conn.execute(sa.select(jobs.c.name, *(jobs.c[c] for c in columns)))
        stored = {name: tuple(values) for name, *values in rows}
    assert stored == {
        "configured": (
            5400.0,
            [LifecyclePolicy(events=["PodEvicted", "PodFailed"], action="AbortJob")],
            5,
            120,
        ),
        "plain": (60.0, [], 3, None),
        "llm-training": (1200.5, [], 3, None),
    }


# The tables as of revision 0015, with the columns a row needs.
QUEUES_0015 = sa.table(
    "queues",
    *_columns(sa.Uuid(), "id"),
    *_columns(sa.String(), "name"),
    *_columns(sa.Integer(), "weight", "priority"),
    *_columns(JSONType, "spec", "labels", "annotations"),
    *_columns(sa.DateTime(timezone=True), "created_at", "updated_at"),
)
JOBS_0015 = sa.table(
    "jobs",
    *(sa.column(c.name, c.type) for c in JOBS_0008.columns),
    *_columns(JSONType, "communication"),
)


def _submitted(
    queue_id: uuid.UUID,
    document: dict[str, Any],
    *,
    state: str = "Running",
    before_opt_in: bool = False,
) -> dict[str, Any]:
    """The row submission stored for `document`. `before_opt_in`: as stored before resizing
    became opt-in, when minAvailable below the replicas alone gave the job the width the parser
    now gives it only with the declaration (the document is stored as sent, without it)."""
    parsed = copy.deepcopy(document)
    if before_opt_in:
        parsed["metadata"].setdefault("annotations", {})[ELASTIC] = "true"
    job = normalize_job(parsed, ParseOptions())
    communication = job.communication
    return _job_row(queue_id, document) | {
        "state": state,
        "gang": job.gang.model_dump(mode="json", by_alias=True),
        "split_policy": job.split_policy.model_dump(mode="json", by_alias=True),
        "communication": communication.model_dump(mode="json", by_alias=True)
        if communication
        else None,
        "total_pods": job.gang.total_pods,
        "total_gpus": job.gang.total_gpus,
    }


def _planned(name: str, replicas: int, plan: str, **spec: Any) -> dict[str, Any]:
    document = job_document(name, replicas=replicas, **spec)
    document["metadata"]["annotations"] = {COMMUNICATION: plan}
    return document


async def test_jobs_stored_elastic_without_opting_in_become_rigid(
    empty_engine: AsyncEngine,
) -> None:
    await migrate.upgrade(empty_engine, "0015")
    queue_id = uuid.uuid4()
    unasked = [
        # minAvailable to start before stragglers: whole units of one pod, at least 6.
        _submitted(
            queue_id, job_document("stragglers", replicas=8, minAvailable=6), before_opt_in=True
        ),
        # A plan without minDataParallel (stored as null) and minAvailable below the replicas.
        _submitted(
            queue_id,
            _planned(
                "planned-whole", 16, "{tensorParallel: 8, pipelineParallel: 2}", minAvailable=10
            ),
            state="Pending",
            before_opt_in=True,
        ),
        # More than two pages of them (the migration reads 500 at a time).
        *(
            _submitted(
                queue_id, job_document(f"gang-{i}", replicas=4, minAvailable=2), before_opt_in=True
            )
            for i in range(1100)
        ),
    ]
    declared = [
        _submitted(queue_id, elastic_document("declared", replicas=8, minAvailable=4)),
        _submitted(
            queue_id,
            _planned("planned", 16, "{tensorParallel: 8, pipelineParallel: 2, minDataParallel: 3}"),
        ),
        # Finished: its record keeps the policy it ran under.
        _submitted(
            queue_id,
            job_document("finished", replicas=8, minAvailable=6),
            state="Succeeded",
            before_opt_in=True,
        ),
    ]
    stored = unasked + declared
    assert all(row["split_policy"]["minUnits"] > 0 for row in stored)
    async with empty_engine.begin() as conn:
        await _insert_default_queue(conn, QUEUES_0015, queue_id)
        await conn.execute(JOBS_0015.insert(), stored)
    await migrate.upgrade(empty_engine, "0016")
    async with empty_engine.connect() as conn:  # the stored JSON, as this revision left it
        rows = await conn.execute(sa.select(JOBS_0015.c.name, JOBS_0015.c.split_policy))
        policies = {name: policy for name, policy in rows}
    assert policies == {row["name"]: row["split_policy"] | {"minUnits": 0} for row in unasked} | {
        row["name"]: row["split_policy"] for row in declared
    }
    assert {policies[n]["minUnits"] for n in ("declared", "planned", "finished")} == {4, 3, 6}


async def test_jobs_stored_under_gfd_product_names_take_the_short_name(
    empty_engine: AsyncEngine,
) -> None:
    await migrate.upgrade(empty_engine, "0017_fairness")
    queue_id = uuid.uuid4()
    rows = [
        _submitted(queue_id, job_document(name), state="Pending") | {"gpu_model": model}
        for name, model in (
            ("gfd", "NVIDIA-H100-80GB-HBM3"),
            ("short", "H100"),
            ("custom", "my-gpu"),
            ("any", None),
        )
    ]
    async with empty_engine.begin() as conn:
        await _insert_default_queue(conn, QUEUES_0015, queue_id)
        with_model = sa.table(
            "jobs",
            *(sa.column(c.name, c.type) for c in JOBS_0015.columns),
            sa.column("gpu_model", sa.String),
        )
        await conn.execute(with_model.insert(), rows)
    await migrate.upgrade(empty_engine, "0017_hour3")
    jobs = Base.metadata.tables["jobs"]
    async with empty_engine.connect() as conn:
        models = dict((await conn.execute(sa.select(jobs.c.name, jobs.c.gpu_model))).all())
    assert models == {"gfd": "H100", "short": "H100", "custom": "my-gpu", "any": None}


async def test_stored_jobs_take_their_preemptable_flag_from_their_documents(
    empty_engine: AsyncEngine,
) -> None:
    await migrate.upgrade(empty_engine, "0017_hour3")
    queue_id, now = uuid.uuid4(), utcnow()

    def annotated(name: str, value: str | None) -> dict[str, Any]:
        document = job_document(name)
        if value is not None:
            document["metadata"]["annotations"] = {"volcano.sh/preemptable": value}
        return _submitted(queue_id, document)

    # As the rounds read the annotation before: only exactly "false" keeps a job from eviction.
    given = {"pinned": "false", "free": "true", "unsaid": None, "capital": "False"}
    # More than a page of each (the migration reads 500 at a time).
    many = {f"job-{i}": "false" if i % 2 else None for i in range(600)}
    rows = [annotated(name, value) for name, value in (given | many).items()]
    async with empty_engine.begin() as conn:
        await conn.execute(
            QUEUES_0015.insert(),
            [
                {
                    "id": queue_id,
                    "name": "default",
                    "weight": 1,
                    "priority": 0,
                    "spec": {},
                    "labels": {},
                    "annotations": {},
                    "created_at": now,
                    "updated_at": now,
                }
            ],
        )
        await conn.execute(JOBS_0015.insert(), rows)
    await migrate.upgrade(empty_engine, "0018_preemptable")
    jobs = Base.metadata.tables["jobs"]
    async with empty_engine.connect() as conn:
        flags = dict((await conn.execute(sa.select(jobs.c.name, jobs.c.preemptable))).all())
    assert flags == {name: value != "false" for name, value in (given | many).items()}
    await migrate.downgrade(empty_engine, "0018_data")
    async with empty_engine.connect() as conn:
        columns = await conn.run_sync(
            lambda c: {col["name"] for col in inspect(c).get_columns("jobs")}
        )
        manifests = (await conn.execute(sa.select(JOBS_0015.c.manifest))).scalars().all()
    assert "preemptable" not in columns
    assert sorted(m["metadata"]["name"] for m in manifests) == sorted(given | many)


async def _default_queue_and_east(
    conn: AsyncConnection, queue_id: uuid.UUID, east: uuid.UUID, now: datetime
) -> None:
    """The queue `default` and a Ready cluster `east`, in the columns both have since 0025
    (later ones have defaults)."""
    queue = {"id": queue_id, "name": "default", "weight": 1, "priority": 0, "spec": {}}
    queue |= {"labels": {}, "annotations": {}, "created_at": now, "updated_at": now}
    await conn.execute(Base.metadata.tables["queues"].insert(), queue)
    cluster = (
        {"id": east, "name": "east", "description": "", "labels": {}, "state": "Ready"}
        | {"created_at": now, "updated_at": now, "inventory_generation": 1}
        | {"inventory_seq": 0, "nodes_removed_seq": 0, "agent_stream_epoch": 0}
        | {"nodes_total": 0, "nodes_ready": 0}
    )
    clusters = Base.metadata.tables["clusters"]
    columns = (sa.column(name, clusters.c[name].type) for name in cluster)
    await conn.execute(sa.table("clusters", *columns).insert(), cluster)


async def test_copies_keep_the_uid_of_the_job_they_were_made_for(
    empty_engine: AsyncEngine,
) -> None:
    """0026_data_copy_job_uid fills job_uid from job_id: the bar still tells two jobs' copies
    apart once both are deleted (a copy whose job went before the migration keeps none)."""
    await migrate.upgrade(empty_engine, "0025_data_copy_cause")
    tables = Base.metadata.tables
    copies = tables["data_copies"]
    before = sa.table(
        "data_copies", *(sa.column(c.name, c.type) for c in copies.c if c.name != "job_uid")
    )
    queue_id, now, east = uuid.uuid4(), utcnow(), uuid.uuid4()
    job = _submitted(queue_id, job_document("train"))
    async with empty_engine.begin() as conn:
        await _default_queue_and_east(conn, queue_id, east, now)
        await conn.execute(tables["jobs"].insert(), job)
        rows = [
            {"id": uuid.uuid4(), "data_source": name, "source_cluster_id": east}
            | {"destination_cluster_id": east, "bytes": 1, "gbps": 1.0, "purpose": "prefetch"}
            | {"namespace": "a", "item": {}, "state": "Failed", "staged_bytes": 0}
            | {"message": "", "reason": "x", "created_at": now, "job_id": job_id}
            for name, job_id in (("made-for-train", job["id"]), ("of-a-deleted-job", None))
        ]
        await conn.execute(before.insert(), rows)
    await migrate.upgrade(empty_engine)
    async with empty_engine.connect() as conn:
        found = dict((await conn.execute(sa.select(copies.c.data_source, copies.c.job_uid))).all())
    assert found == {"made-for-train": job["id"], "of-a-deleted-job": None}


async def test_shares_stored_before_their_model_are_read_by_their_jobs(
    empty_engine: AsyncEngine,
) -> None:
    """0030_share_gpu_model adds a nullable column and fills nothing: a share stored before
    keeps its row and reads as its job's model (`books.share_model`), as before; a downgrade
    drops the column and keeps the shares."""
    await migrate.upgrade(empty_engine, "0029_drop_domain_capacities")
    tables = Base.metadata.tables
    shares = tables["cluster_shares"]
    before = sa.table(
        "cluster_shares", *(sa.column(c.name, c.type) for c in shares.c if c.name != "gpu_model")
    )
    queue_id, now, east = uuid.uuid4(), utcnow(), uuid.uuid4()
    jobs = [
        _submitted(queue_id, job_document("pinned")) | {"gpu_model": "H100"},
        _submitted(queue_id, job_document("any")) | {"gpu_model": None},
    ]
    placements = [
        {"id": uuid.uuid4(), "job_id": job["id"], "generation": 1, "state": "Active"}
        | {"created_at": now}
        for job in jobs
    ]
    async with empty_engine.begin() as conn:
        await _default_queue_and_east(conn, queue_id, east, now)
        await conn.execute(tables["jobs"].insert(), jobs)
        await conn.execute(tables["placements"].insert(), placements)
        rows = [
            {"id": uuid.uuid4(), "placement_id": p["id"], "cluster_id": east, "pods": 8}
            | {"gpus": 64, "units": 1, "rank_offset": 0, "domains": {"east": 8}}
            | {"phase": "Running", "message": ""}
            for p in placements
        ]
        await conn.execute(before.insert(), rows)
    await migrate.upgrade(empty_engine)
    read = (
        sa.select(Job.name, ClusterShare.gpu_model, share_model())
        .join(Placement, Placement.id == ClusterShare.placement_id)
        .join(Job, Job.id == Placement.job_id)
    )
    async with empty_engine.connect() as conn:
        found = {name: (own, read) for name, own, read in await conn.execute(read)}
    assert found == {"pinned": (None, "H100"), "any": (None, None)}
    await migrate.downgrade(empty_engine, "0029_drop_domain_capacities")
    async with empty_engine.connect() as conn:
        columns = await conn.run_sync(
            lambda c: {col["name"] for col in inspect(c).get_columns("cluster_shares")}
        )
        kept = await conn.scalar(sa.select(sa.func.count()).select_from(before))
    assert "gpu_model" not in columns and kept == 2
