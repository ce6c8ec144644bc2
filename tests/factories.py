"""Test data with realistic defaults, created through the public API."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from fastapi import FastAPI
from sqlalchemy import event, text

from volcano_global.db.engine import transaction
from volcano_global.jobspec import load_document
from volcano_global.rpc.shares import ShareAssignment
from volcano_global.schemas.clusters import InventoryDelta
from volcano_global.services.inventory.clusters import lock_cluster
from volcano_global.services.inventory.sequence import NumberedDelta, apply_in_sequence
from volcano_global.services.jobs import writer

BILLION_LAUGHS = """
a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]
"""

EXAMPLES = Path(__file__).resolve().parent.parent / "docs" / "examples"
_SHARE = ShareAssignment(
    placement_id="0123abcd-0000-0000-0000-000000000000",
    generation=1,
    job_uid="u",
    job_name="train",
    namespace="ml",
    pods=2,
    rank_offset=0,
    world_pods=2,
    cluster_index=0,
    cluster_count=1,
    rendezvous_address="train-0123abcd-task-0.train-0123abcd.ml.svc:29500",
    member_job_name="train-0123abcd",
)


async def create_cluster(
    api: httpx.AsyncClient, name: str = "gpu-east", **overrides: Any
) -> dict[str, Any]:
    body = {"name": name, "labels": {"region": "us-east", "zone": "us-east-1a"}, **overrides}
    response = await api.post("/api/v1/clusters", json=body)
    assert response.status_code == 201, response.text
    return response.json()


def inventory(
    cluster: str, *, tors: int = 2, nodes_per_tor: int = 4, gpu_model: str = "H100", used: int = 0
) -> dict[str, Any]:
    """A two-tier topology: one spine over `tors` ToR HyperNodes of 8-GPU nodes."""
    spine = f"{cluster}-spine"
    domains: list[dict[str, Any]] = [{"name": spine, "tier": 2, "tierName": "spine"}]
    nodes = []
    for t in range(tors):
        tor = f"{cluster}-tor{t}"
        domains.append({"name": tor, "tier": 1, "tierName": "tor", "parent": spine})
        for n in range(nodes_per_tor):
            nodes.append(
                {
                    "name": f"{cluster}-n{t}-{n}",
                    "gpuModel": gpu_model,
                    "gpuAllocatable": 8,
                    "gpuUsed": used,
                    "cpuAllocatableMillis": 192_000,
                    "memoryAllocatableBytes": 2 << 40,
                    "domain": tor,
                }
            )
    return {"domains": domains, "nodes": nodes}


async def next_delta(app: FastAPI, cluster: str, fields: dict[str, Any]) -> None:
    """The cluster's agent's next delta (an InventoryDelta's fields), as its stream applies it."""
    async with transaction(app.state.sessions) as session:
        locked = await lock_cluster(session, name=cluster)
        numbered = NumberedDelta(locked.inventory_seq + 1, InventoryDelta.model_validate(fields))
        await apply_in_sequence(session, cluster=locked, deltas=[numbered])


async def create_queue(
    api: httpx.AsyncClient, name: str = "llm", **overrides: Any
) -> dict[str, Any]:
    response = await api.post("/api/v1/queues", json={"name": name, "weight": 2, **overrides})
    assert response.status_code == 201, response.text
    return response.json()


def example(name: str) -> str:
    return (EXAMPLES / name).read_text()


def example_document(name: str) -> dict[str, Any]:
    """A docs/examples file, read as the API reads a submitted YAML document."""
    return load_document(
        (EXAMPLES / name).read_bytes(), fmt="yaml", max_nodes=100_000, max_depth=64
    )


def volcano_queue(name: str, **spec: Any) -> dict[str, Any]:
    """A Volcano Queue document with this spec."""
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": spec,
    }


def queue_document(name: str, **annotations: str) -> dict[str, Any]:
    """A Volcano Queue document with these annotations (the Global's per-queue settings)."""
    document = volcano_queue(name, weight=1)
    document["metadata"]["annotations"] = annotations
    return document


def priority_class(name: str, value: int, **fields: Any) -> dict[str, Any]:
    """A Kubernetes PriorityClass document."""
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
        **fields,
    }


def share_assignment(**overrides: Any) -> ShareAssignment:
    """The whole of a 2-pod job `ml/train` assigned to one cluster, as its agent receives it."""
    return dataclasses.replace(_SHARE, **overrides)


def share_layout(
    *, offset: int, pods: int, world: int, index: int = 0, count: int = 1, **overrides: Any
) -> ShareAssignment:
    """A share of `pods` pods from rank `offset` of the job's `world`, in the `index`th of its
    `count` clusters (the member job's name derived, as the agent does when none is sent)."""
    return share_assignment(
        rank_offset=offset,
        pods=pods,
        world_pods=world,
        cluster_index=index,
        cluster_count=count,
        member_job_name="",
        **overrides,
    )


def job_document(
    name: str = "train", *, queue: str = "default", replicas: int = 2, gpus: int = 8, **spec: Any
) -> dict[str, Any]:
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "ml"},
        "spec": {
            "queue": queue,
            "tasks": [
                {
                    "name": "worker",
                    "replicas": replicas,
                    "template": {
                        "spec": {
                            "containers": [
                                {
                                    "name": "trainer",
                                    "image": "trainer:1",
                                    "resources": {"limits": {"nvidia.com/gpu": str(gpus)}},
                                }
                            ]
                        }
                    },
                }
            ],
            **spec,
        },
    }


def split_annotations(
    unit_pods: int, *, crossing_gbps: int | str | None = None, max_clusters: int | None = None
) -> dict[str, str]:
    """The annotations that let a job split across clusters in units of `unit_pods` pods
    (with the bandwidth each crossing needs and the most clusters, when given)."""
    annotations = {"global.volcano.sh/split": "auto", "global.volcano.sh/unit-pods": str(unit_pods)}
    if crossing_gbps is not None:
        annotations["global.volcano.sh/crossing-gbps"] = str(crossing_gbps)
    if max_clusters is not None:
        annotations["global.volcano.sh/max-clusters"] = str(max_clusters)
    return annotations


def elastic_document(name: str = "train", **kwargs: Any) -> dict[str, Any]:
    """A job that opted in to resizing (`global.volcano.sh/elastic`): give it `minAvailable`
    below its replicas."""
    document = job_document(name, **kwargs)
    document["metadata"]["annotations"] = {"global.volcano.sh/elastic": "true"}
    return document


async def submit(api: httpx.AsyncClient, document: dict[str, Any] | str) -> httpx.Response:
    if isinstance(document, str):
        return await api.post(
            "/api/v1/jobs", content=document, headers={"Content-Type": "application/yaml"}
        )
    return await api.post("/api/v1/jobs", json=document)


def to_yaml(document: dict[str, Any]) -> str:
    return yaml.safe_dump(document)


# How long `eventually` waits by default: minutes, for what background loops (rounds, streams,
# reports) bring about. On a loaded 2-core CI host they take tens of seconds where they take one
# unloaded, and 15 s failed tests that were right; a test that is wrong still fails, later.
EVENTUALLY_S = 120.0

# How long a test waits for one reply, event or call that should come soon, as a guard against
# a hang: a hang fails in a minute. 5-10 s was tight on a loaded CI host. A test that checks
# that something does *not* wait for a period keeps its own bound below that period.
REPLY_S = 60.0


async def eventually(
    check: Callable[[], bool | Awaitable[bool]], within: float = EVENTUALLY_S
) -> None:
    """Wait until `check` holds (polling every 50 ms); fail after `within` seconds."""
    deadline = asyncio.get_running_loop().time() + within
    while True:
        result = check()
        if isinstance(result, Awaitable):
            result = await result
        if result:
            return
        assert asyncio.get_running_loop().time() < deadline, "condition not reached in time"
        await asyncio.sleep(0.05)


async def waiting_for_locks(app: FastAPI, count: int = 1) -> bool:
    """Whether at least `count` sessions of the app's Postgres database wait for a lock."""
    async with app.state.engine.connect() as connection:
        waiting = await connection.execute(
            text(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND wait_event_type = 'Lock'"
            )
        )
        return bool(waiting.scalar_one() >= count)


@contextlib.contextmanager
def statements_seen(app: FastAPI) -> Iterator[list[str]]:
    """The statements the app runs meanwhile, whitespace collapsed: SQLAlchemy's (its cursor
    events) and the job writer's Postgres batch, which runs on the driver and has none."""
    seen: list[str] = []

    def cursor(conn: object, cursor: object, statement: str, *args: object) -> None:
        seen.append(" ".join(statement.split()))

    real = writer.postgres_rows

    async def on_driver(connection: Any, statement: Any, params: Any) -> Any:
        seen.append(" ".join(str(statement).split()))
        return await real(connection, statement, params)

    engine = app.state.engine.sync_engine
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(writer, "postgres_rows", on_driver)
        event.listen(engine, "before_cursor_execute", cursor)
        try:
            yield seen
        finally:
            event.remove(engine, "before_cursor_execute", cursor)
