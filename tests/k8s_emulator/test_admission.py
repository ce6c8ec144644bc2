"""The emulator's admission refuses and prunes what a real API server with Volcano refuses and
prunes (the API server's name rules, the Job CRD's schema, Volcano's job webhook), checked
through the real kubernetes-asyncio client over HTTP."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from tests.k8s_emulator.server import NAMESPACES, VOLCANO_JOBS, KubeEmulator

GROUP, VERSION, PLURAL = VOLCANO_JOBS


@pytest.fixture
def kube(
    kube: tuple[KubeEmulator, client.ApiClient],
) -> tuple[KubeEmulator, client.ApiClient]:
    """The emulator with Volcano's Job CRD and the namespace `ml`."""
    emulator, _ = kube
    emulator.register(VOLCANO_JOBS, "Job", namespaced=True)
    emulator.create(NAMESPACES, {"metadata": {"name": "ml"}})
    return kube


def vcjob(name: str, *, task: str = "worker", replicas: int = 2, **spec: Any) -> dict[str, Any]:
    container = {"name": "c", "image": "trainer:1"}
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "minAvailable": replicas,
            "tasks": [
                {
                    "name": task,
                    "replicas": replicas,
                    "template": {"spec": {"containers": [container]}},
                }
            ],
            **spec,
        },
    }


async def refused(api: client.ApiClient, body: dict[str, Any], **options: Any) -> ApiException:
    with pytest.raises(ApiException) as caught:
        await client.CustomObjectsApi(api).create_namespaced_custom_object(
            GROUP, VERSION, "ml", PLURAL, body, **options
        )
    return caught.value


def message(exc: ApiException) -> str:
    return str(json.loads(exc.body)["message"])


async def test_service_names_are_dns_1035_labels(kube) -> None:  # type: ignore[no-untyped-def]
    _, api = kube
    core = client.CoreV1Api(api)
    for bad in ("7b-train-rdzv", "train.v2-rdzv", "r" * 64):
        with pytest.raises(ApiException) as caught:
            await core.create_namespaced_service("ml", {"metadata": {"name": bad}, "spec": {}})
        assert caught.value.status == 422
        assert f'Service "{bad}" is invalid: metadata.name' in message(caught.value)
    await core.create_namespaced_service("ml", {"metadata": {"name": "r" * 63}, "spec": {}})


async def test_volcano_refuses_long_job_and_pod_names(kube) -> None:  # type: ignore[no-untyped-def]
    emulator, api = kube
    objects = client.CustomObjectsApi(api)
    # 48 characters: the webhook checks `<job>-worker-0` (57), accepted.
    await objects.create_namespaced_custom_object(GROUP, VERSION, "ml", PLURAL, vcjob("j" * 48))
    # 57 characters give the 66-character pod name the issue found: Volcano's webhook says no.
    denied = await refused(api, vcjob("j" * 57))
    assert denied.status == 400
    assert 'admission webhook "validatejob.volcano.sh" denied the request' in message(denied)
    assert f"create pod with name {'j' * 57}-worker-0 validate failed" in message(denied)
    assert "no more than 63 characters" in message(denied)
    # The API server's own rule comes first: a custom resource's name is a DNS subdomain.
    upper = await refused(api, vcjob("Train"))
    assert upper.status == 422
    assert 'Job.batch.volcano.sh "Train" is invalid: metadata.name' in message(upper)
    assert [o["metadata"]["name"] for o in emulator.objects[VOLCANO_JOBS].values()] == ["j" * 48]


async def test_volcano_job_spec_rules(kube) -> None:  # type: ignore[no-untyped-def]
    _, api = kube
    cases = [
        (vcjob("a", replicas=2, minAvailable=3), 400, "should not be greater than total replicas"),
        # The CRD says minItems 1 before the webhook's "No task specified in job spec".
        ({**vcjob("b"), "spec": {"tasks": []}}, 422, "spec.tasks in body should have at least 1"),
        (
            _tasks(vcjob("c"), replicas="two"),
            422,
            "spec.tasks[0].replicas in body must be of type integer",
        ),
        (_tasks(vcjob("d"), minAvailable=3), 400, "'minAvailable' is greater than 'replicas'"),
        (
            _partition(vcjob("e"), 0, 2),
            422,
            "totalPartitions in body should be greater than or equal to 1",
        ),
        (
            _partition(vcjob("f", replicas=3), 1, 2),
            400,
            "'Replicas' are not equal to TotalPartitions*PartitionSize",
        ),
        (_tasks(vcjob("g"), topologyPolicy="always"), 422, 'Unsupported value: "always"'),
        (_tasks(vcjob("h"), dependsOn={"name": ["master"]}), 400, "directed acyclic graph"),
        # A split MPI job's share without the launcher: Volcano says no (docs/agents.md).
        (vcjob("i", plugins={"mpi": ["--master=launcher"]}), 400, "mpi master task was not found"),
    ]
    for body, code, text in cases:
        exc = await refused(api, body)
        assert (exc.status, text in message(exc)) == (code, True), message(exc)
    ordered = vcjob("ordered")
    master = {**copy.deepcopy(ordered["spec"]["tasks"][0]), "name": "master", "replicas": 1}
    ordered["spec"]["tasks"].insert(0, master)
    ordered["spec"]["tasks"][1]["dependsOn"] = {"name": ["master"]}
    ordered["spec"]["plugins"] = {"mpi": ["--port=2222"]}  # the default master: "master"
    await client.CustomObjectsApi(api).create_namespaced_custom_object(
        GROUP, VERSION, "ml", PLURAL, ordered
    )  # a dependency on the Job's own task is a DAG, and its mpi master is there


async def test_unknown_fields_are_pruned_or_refused_when_strict(kube) -> None:  # type: ignore[no-untyped-def]
    emulator, api = kube
    body = vcjob("train", minMembers=3)  # not a JobSpec field
    body["spec"]["tasks"][0]["template"]["spec"]["containers"][0]["gpus"] = 8
    strict = await refused(api, copy.deepcopy(body), field_validation="Strict")
    assert strict.status == 422
    assert 'unknown field "spec.minMembers"' in message(strict)
    objects = client.CustomObjectsApi(api)
    _, _, headers = await objects.create_namespaced_custom_object_with_http_info(
        GROUP, VERSION, "ml", PLURAL, body
    )
    warnings = headers.getall("Warning")
    assert '299 - "unknown field \\"spec.minMembers\\""' in warnings
    assert len(warnings) == 2  # and the container's field
    (stored,) = emulator.objects[VOLCANO_JOBS].values()
    assert "minMembers" not in stored["spec"]
    assert stored["spec"]["tasks"][0]["template"]["spec"]["containers"][0] == {
        "name": "c",
        "image": "trainer:1",
    }
    assert stored["spec"]["minAvailable"] == 2  # known fields stay


def _tasks(body: dict[str, Any], **fields: Any) -> dict[str, Any]:
    body["spec"]["tasks"][0].update(fields)
    return body


def _partition(body: dict[str, Any], total: int, size: int) -> dict[str, Any]:
    return _tasks(body, partitionPolicy={"totalPartitions": total, "partitionSize": size})
