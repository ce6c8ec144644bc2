"""The emulator's discovery, injected faults, named 404s, admission and garbage collection
behave as kube-apiserver and the garbage collector do, checked through the real
kubernetes-asyncio client over HTTP."""

from __future__ import annotations

import asyncio
import json

import aiohttp
import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from tests.k8s_emulator.faults import DISCONNECT
from tests.k8s_emulator.owner_references import Attributes, owner_references_enforcement
from tests.k8s_emulator.server import (
    HYPERNODES,
    NAMESPACES,
    NODES,
    SERVICES,
    VOLCANO_JOBS,
)


async def test_a_crd_registered_later_appears_in_discovery(kube) -> None:  # type: ignore[no-untyped-def]
    emulator, api = kube
    custom = client.CustomObjectsApi(api)
    with pytest.raises(ApiException) as absent:
        await custom.get_api_resources("topology.volcano.sh", "v1alpha1")
    assert absent.value.status == 404
    groups = await client.ApisApi(api).get_api_versions()
    assert "topology.volcano.sh" not in {g.name for g in groups.groups}

    emulator.register(HYPERNODES, "HyperNode", namespaced=False)
    served = await custom.get_api_resources("topology.volcano.sh", "v1alpha1")
    (hypernodes,) = served.resources
    assert (hypernodes.name, hypernodes.kind, hypernodes.namespaced) == (
        "hypernodes",
        "HyperNode",
        False,
    )
    groups = await client.ApisApi(api).get_api_versions()
    assert "topology.volcano.sh" in {g.name for g in groups.groups}
    core = await client.CoreV1Api(api).get_api_resources()
    assert {"nodes", "pods", "services"} <= {r.name for r in core.resources}


async def test_a_fault_answers_its_requests_then_the_server_does(kube) -> None:  # type: ignore[no-untyped-def]
    emulator, api = kube
    core = client.CoreV1Api(api)
    throttled = emulator.faults.add("GET", "/api/v1/nodes", 429, retry_after=3)
    with pytest.raises(ApiException) as refused:
        await core.list_node()
    assert refused.value.status == 429
    assert refused.value.headers["Retry-After"] == "3"
    assert "Too many requests" in refused.value.body
    assert throttled.hits == 1
    await core.list_node()  # used once: served normally now

    emulator.faults.add("GET", "/api/v1/nodes", 503, times=2, watch=True)
    await core.list_node()  # a list is not a watch: not matched
    emulator.faults.add("POST", "/api/v1/nodes", 500)
    with pytest.raises(ApiException) as webhook:
        await core.create_node({"metadata": {"name": "n0"}})
    assert webhook.value.status == 500
    assert "failed calling webhook" in webhook.value.body
    assert not emulator.objects[NODES]  # refused before it was stored

    # aiohttp repeats an idempotent request once when a pooled connection drops: two drops.
    dropped = emulator.faults.add("GET", "/api/v1/nodes", DISCONNECT, times=2)
    with pytest.raises(aiohttp.ClientError):
        await core.list_node()
    assert dropped.hits == 2


async def test_a_404_names_the_object_or_namespace_but_an_unknown_path_names_nothing(kube) -> None:  # type: ignore[no-untyped-def]
    emulator, api = kube
    core = client.CoreV1Api(api)
    custom = client.CustomObjectsApi(api)
    with pytest.raises(ApiException) as namespace:
        await core.create_namespaced_service("absent", {"metadata": {"name": "s"}})
    assert json.loads(namespace.value.body)["details"] == {"name": "absent", "kind": "namespaces"}
    emulator.create(NAMESPACES, {"metadata": {"name": "ml"}})
    with pytest.raises(ApiException) as named:
        await core.read_namespaced_service("s", "ml")
    assert json.loads(named.value.body)["details"] == {"name": "s", "kind": "services"}
    with pytest.raises(ApiException) as unknown:
        await custom.list_cluster_custom_object("batch.volcano.sh", "v1alpha1", "jobs")
    assert unknown.value.status == 404
    assert "details" not in unknown.value.body


async def test_owner_references_permission_enforcement(kube) -> None:  # type: ignore[no-untyped-def]
    emulator, api = kube
    core = client.CoreV1Api(api)
    emulator.create(NAMESPACES, {"metadata": {"name": "ml"}})
    granted: set[Attributes] = set()
    emulator.admission.append(owner_references_enforcement(granted.__contains__, emulator.types))
    owner = {"apiVersion": "v1", "kind": "Namespace", "name": "ml", "uid": "u1"}

    def service(name: str, **ref: bool) -> dict:
        return {"metadata": {"name": name, "ownerReferences": [{**owner, **ref}]}}

    await core.create_namespaced_service("ml", {"metadata": {"name": "unowned"}})
    with pytest.raises(ApiException) as cannot_delete:
        await core.create_namespaced_service("ml", service("a"))
    assert cannot_delete.value.status == 403
    assert "cannot set an ownerRef on a resource you can't delete" in cannot_delete.value.body

    granted.add(Attributes("delete", "", "services", namespace="ml", name="a"))
    await core.create_namespaced_service("ml", service("a"))
    granted.add(Attributes("delete", "", "services", namespace="ml", name="b"))
    with pytest.raises(ApiException) as blocking:
        await core.create_namespaced_service("ml", service("b", blockOwnerDeletion=True))
    assert "you can't set finalizers on" in blocking.value.body
    granted.add(Attributes("update", "", "namespaces", "finalizers", namespace="ml", name="ml"))
    await core.create_namespaced_service("ml", service("b", blockOwnerDeletion=True))
    assert {name for _, name in emulator.objects[SERVICES]} == {"unowned", "a", "b"}


async def test_garbage_collection_deletes_dependents_unless_orphaned(kube) -> None:  # type: ignore[no-untyped-def]
    emulator, api = kube
    emulator.register(VOLCANO_JOBS, "Job", namespaced=True)
    custom = client.CustomObjectsApi(api)

    def owned(name: str, owner: dict) -> dict:
        meta = owner["metadata"]
        ref = {"apiVersion": "v1", "kind": "X", "name": meta["name"], "uid": meta["uid"]}
        return {"metadata": {"name": name, "namespace": "ml", "ownerReferences": [ref]}}

    job = emulator.create(VOLCANO_JOBS, {"metadata": {"name": "j", "namespace": "ml"}})
    service = emulator.create(SERVICES, owned("s", job))
    emulator.create(SERVICES, owned("s-child", service))  # collected after its owner
    kept = emulator.create(VOLCANO_JOBS, {"metadata": {"name": "k", "namespace": "ml"}})
    emulator.create(SERVICES, owned("orphan", kept))

    await custom.delete_namespaced_custom_object(
        "batch.volcano.sh", "v1alpha1", "ml", "jobs", "j", propagation_policy="Background"
    )
    await custom.delete_namespaced_custom_object(
        "batch.volcano.sh", "v1alpha1", "ml", "jobs", "k", propagation_policy="Orphan"
    )
    for _ in range(20):
        if ("ml", "s-child") not in emulator.objects[SERVICES]:
            break
        await asyncio.sleep(0.01)
    assert list(emulator.objects[SERVICES]) == [("ml", "orphan")]
