"""A lone UTF-16 surrogate in any string of a request (JSON's `"\\ud800"`, YAML's escapes) is
refused with 422 naming the field, on SQLite and Postgres: neither database (nor a JSON answer)
can hold one, and it used to reach the database and come back as a 500."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from tests.factories import create_cluster, inventory, job_document, queue_document

LONE = "\ud800"
JSON = "application/json"
YAML = "application/yaml"


def _raw(value: Any) -> bytes:
    return json.dumps(value).encode()  # ASCII: the surrogate travels as the text \ud800


def _node(**fields: Any) -> dict[str, Any]:
    body = inventory("gpu-east")
    body["nodes"][0].update(fields)
    return body


def _job(*path: str | int, value: Any = LONE) -> dict[str, Any]:
    document = job_document("train")
    where: Any = document
    for part in path[:-1]:
        where = where.setdefault(part, {}) if isinstance(part, str) else where[part]
    where[path[-1]] = value
    return document


_CONTAINER = ("spec", "tasks", 0, "template", "spec", "containers", 0)
_YAML_JOB = b"""apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: t, namespace: ml, annotations: {team: "ml\\ud800"}}
spec: {tasks: [{name: w, replicas: 1, template: {spec: {containers: [{name: c, image: i}]}}}]}
"""
_PLAN = '{tensorParallel: 8, datasets: [{name: "corpus\\udc00"}]}'  # YAML inside the annotation

# (method, path, body, content type, the field the refusal must name)
CASES: list[tuple[str, str, bytes, str, str]] = [
    ("PUT", "/api/v1/clusters/gpu-east/inventory", _raw(_node(labels={"zone": LONE})), JSON,
     "nodes[0].labels.zone"),
    ("PUT", "/api/v1/clusters/gpu-east/inventory", _raw(_node(labels={LONE: "a"})), JSON,
     'nodes[0].labels["\\ud800"]'),
    ("PUT", "/api/v1/clusters/gpu-east/inventory",
     _raw(_node(labels={"topology.kubernetes.io/zone": LONE})), JSON,
     'nodes[0].labels["topology.kubernetes.io/zone"]'),
    ("PUT", "/api/v1/clusters/gpu-east/inventory",
     _raw(_node(taints=[{"key": "k", "value": LONE, "effect": "NoSchedule"}])), JSON,
     "nodes[0].taints[0].value"),
    ("POST", "/api/v1/clusters", _raw({"name": "c2", "labels": {"region": LONE}}), JSON,
     "labels.region"),
    ("POST", "/api/v1/clusters", _raw({"name": "c3", "description": LONE}), JSON,
     "description"),
    ("POST", "/api/v1/queues", _raw({"name": LONE}), JSON, "name"),
    ("POST", "/api/v1/tokens", _raw({"name": "t" + LONE, "role": "reader"}), JSON, "name"),
    ("POST", "/api/v1/links", _raw({"clusterA": "gpu-east", "clusterB": LONE, "capacityGbps": 1}),
     JSON, "clusterB"),
    ("POST", "/api/v1/jobs", _raw(_job("metadata", "annotations", "team")), JSON,
     "metadata.annotations.team"),
    ("POST", "/api/v1/jobs", _raw(_job(*_CONTAINER, "image")), JSON,
     "spec.tasks[0].template.spec.containers[0].image"),
    ("POST", "/api/v1/jobs", _YAML_JOB, YAML, "metadata.annotations.team"),
    ("POST", "/api/v1/jobs",
     _raw(_job("metadata", "annotations", "global.volcano.sh/communication", value=_PLAN)), JSON,
     'metadata.annotations["global.volcano.sh/communication"].datasets[0].name'),
    ("POST", "/api/v1/jobs/preview", _raw(_job("metadata", "labels", "team")), JSON,
     "metadata.labels.team"),
    ("PUT", "/api/v1/queues/q1", _raw(queue_document("q1", note=LONE)), JSON,
     "metadata.annotations.note"),
    ("POST", "/api/v1/priorityclasses",
     _raw({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
           "metadata": {"name": "p"}, "value": 1, "description": LONE}), JSON, "description"),
    ("POST", "/k8s/apis/batch.volcano.sh/v1alpha1/namespaces/ml/jobs",
     _raw(_job("metadata", "annotations", "team")), JSON, "metadata.annotations.team"),
    ("POST", "/k8s/apis/scheduling.volcano.sh/v1beta1/queues",
     _raw(queue_document("q2", note=LONE)), JSON, "metadata.annotations.note"),
    ("PATCH", "/k8s/apis/scheduling.volcano.sh/v1beta1/queues/default",
     _raw({"metadata": {"annotations": {"note": LONE}}}), "application/merge-patch+json",
     "metadata.annotations.note"),
]  # fmt: skip


@pytest.mark.parametrize(("method", "path", "body", "content_type", "field"), CASES)
async def test_a_lone_surrogate_is_422_naming_the_field(
    api: httpx.AsyncClient, method: str, path: str, body: bytes, content_type: str, field: str
) -> None:
    await create_cluster(api, "gpu-east")
    response = await api.request(method, path, content=body, headers={"Content-Type": content_type})
    assert response.status_code == 422, response.text
    causes = response.json()["details"]["causes"]
    assert [c["field"] for c in causes] == [field]
    assert "lone UTF-16 surrogate" in causes[0]["message"]


async def test_apply_refuses_the_document_naming_the_field(api: httpx.AsyncClient) -> None:
    body = _raw(queue_document("q1", note=LONE))
    response = await api.post("/api/v1/apply", content=body, headers={"Content-Type": JSON})
    (item,) = response.json()["items"]
    assert (item["result"], item["code"]) == ("error", 422)
    assert [c["field"] for c in item["causes"]] == ["metadata.annotations.note"]
    assert (await api.get("/api/v1/queues/q1")).status_code == 404


async def test_a_surrogate_pair_is_a_character_and_is_kept(api: httpx.AsyncClient) -> None:
    """JSON's escaped pair `\\ud83d\\ude80` is one character (U+1F680): stored and read back."""
    body = b'{"name": "c4", "description": "launch \\ud83d\\ude80"}'
    response = await api.post("/api/v1/clusters", content=body, headers={"Content-Type": JSON})
    assert response.status_code == 201, response.text
    assert (await api.get("/api/v1/clusters/c4")).json()["description"] == "launch \U0001f680"
