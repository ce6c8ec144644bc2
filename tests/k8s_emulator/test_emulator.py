"""The emulator behaves like the API server where the agent depends on it, checked through the
real kubernetes-asyncio client over HTTP."""

from __future__ import annotations

import asyncio

import pytest
from kubernetes_asyncio import client, watch
from kubernetes_asyncio.client.exceptions import ApiException

from tests.factories import REPLY_S
from tests.k8s_emulator.server import (
    HYPERNODES,
    NAMESPACES,
    NODES,
    PODS,
    PVCS,
    VOLCANO_JOBS,
)


def node(name: str, **labels: str) -> dict:
    return {
        "metadata": {"name": name, "labels": labels},
        "status": {"capacity": {"nvidia.com/gpu": "8"}},
    }


def pod(name: str, node_name: str = "", phase: str = "Pending") -> dict:
    return {
        "metadata": {"name": name, "namespace": "ml"},
        "spec": {"nodeName": node_name, "containers": [{"name": "c"}]},
        "status": {"phase": phase},
    }


async def test_list_pages_and_increasing_versions(kube) -> None:  # type: ignore[no-untyped-def]
    emulator, api = kube
    core = client.CoreV1Api(api)
    for i in range(5):
        emulator.create(NODES, node(f"n{i}"))
    first = await core.list_node(limit=2)
    assert [n.metadata.name for n in first.items] == ["n0", "n1"]
    assert first.metadata._continue
    versions = [int(n.metadata.resource_version) for n in first.items]
    assert versions == sorted(versions)
    assert len(set(versions)) == 2
    second = await core.list_node(limit=2, _continue=first.metadata._continue)
    third = await core.list_node(limit=2, _continue=second.metadata._continue)
    assert [n.metadata.name for n in second.items + third.items] == ["n2", "n3", "n4"]
    assert not third.metadata._continue
    assert int(first.metadata.resource_version) >= max(versions)


async def test_selectors(kube) -> None:  # type: ignore[no-untyped-def]
    emulator, api = kube
    core = client.CoreV1Api(api)
    emulator.create(NODES, node("a", pool="train", zone="z1"))
    emulator.create(NODES, node("b", pool="infer", zone="z1"))
    emulator.create(NODES, node("c", zone="z2"))
    names = lambda result: [n.metadata.name for n in result.items]  # noqa: E731
    assert names(await core.list_node(label_selector="pool=train")) == ["a"]
    assert names(await core.list_node(label_selector="zone=z1,pool!=train")) == ["b"]
    assert names(await core.list_node(label_selector="pool in (train,infer)")) == ["a", "b"]
    assert names(await core.list_node(label_selector="!pool")) == ["c"]
    emulator.create(PODS, pod("p1", "a", "Running"))
    emulator.create(PODS, pod("p2", "", "Pending"))
    emulator.create(PODS, pod("p3", "b", "Succeeded"))
    bound = await core.list_pod_for_all_namespaces(
        field_selector="spec.nodeName!=,status.phase!=Succeeded"
    )
    assert [p.metadata.name for p in bound.items] == ["p1"]


async def test_watch_from_a_version_and_selector_transitions(kube) -> None:  # type: ignore[no-untyped-def]
    emulator, api = kube
    core = client.CoreV1Api(api)
    emulator.create(PODS, pod("p1", "a", "Running"))
    listed = await core.list_pod_for_all_namespaces(field_selector="status.phase!=Succeeded")
    events: list[tuple[str, str]] = []

    async def consume() -> None:
        async with watch.Watch() as w:
            async for event in w.stream(
                core.list_pod_for_all_namespaces,
                field_selector="status.phase!=Succeeded",
                resource_version=listed.metadata.resource_version,
                timeout_seconds=5,
            ):
                events.append((event["type"], event["raw_object"]["metadata"]["name"]))
                if len(events) == 4:
                    return

    task = asyncio.create_task(consume())
    await asyncio.sleep(0.2)
    emulator.create(PODS, pod("p2", "b", "Running"))
    emulator.patch(PODS, "p2", {"metadata": {"labels": {"x": "y"}}}, "ml")
    emulator.patch(PODS, "p1", {"status": {"phase": "Succeeded"}}, "ml")  # leaves the selector
    emulator.delete(PODS, "p2", "ml")
    await asyncio.wait_for(task, REPLY_S)
    assert events == [("ADDED", "p2"), ("MODIFIED", "p2"), ("DELETED", "p1"), ("DELETED", "p2")]


async def test_watch_from_a_compacted_version_gets_410(kube) -> None:  # type: ignore[no-untyped-def]
    emulator, api = kube
    core = client.CoreV1Api(api)
    emulator.create(NODES, node("a"))
    old = (await core.list_node()).metadata.resource_version
    emulator.create(NODES, node("b"))
    emulator.compact()
    with pytest.raises(ApiException) as caught:
        async with watch.Watch() as w:
            async for _ in w.stream(core.list_node, resource_version=old, timeout_seconds=5):
                pass
    assert caught.value.status == 410


async def test_custom_resources_exist_only_once_registered(kube) -> None:  # type: ignore[no-untyped-def]
    emulator, api = kube
    custom = client.CustomObjectsApi(api)
    with pytest.raises(ApiException) as caught:
        await custom.list_cluster_custom_object("topology.volcano.sh", "v1alpha1", "hypernodes")
    assert caught.value.status == 404
    emulator.register(HYPERNODES, "HyperNode", namespaced=False)
    emulator.create(HYPERNODES, {"metadata": {"name": "s0"}, "spec": {"tier": 2, "members": []}})
    listed = await custom.list_cluster_custom_object(
        "topology.volcano.sh", "v1alpha1", "hypernodes"
    )
    assert [h["metadata"]["name"] for h in listed["items"]] == ["s0"]


async def test_a_volcano_job_s_status_changes_only_through_its_status_subresource(kube) -> None:  # type: ignore[no-untyped-def]
    emulator, api_client = kube
    emulator.register(VOLCANO_JOBS, "Job", namespaced=True)
    emulator.create(NAMESPACES, {"metadata": {"name": "ml"}})
    custom = client.CustomObjectsApi(api_client)
    where = ("batch.volcano.sh", "v1alpha1", "ml", "jobs")
    job = {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": "train"},
        "spec": {"minAvailable": 1, "tasks": [{"name": "w", "replicas": 1, "template": {}}]},
        "status": {"state": {"phase": "Completed"}},
    }
    created = await custom.create_namespaced_custom_object(*where, job)
    assert "status" not in created  # a create cannot set it
    emulator.patch(VOLCANO_JOBS, "train", {"status": {"state": {"phase": "Running"}}}, "ml")
    replaced = await custom.replace_namespaced_custom_object(
        *where, "train", {**job, "spec": {**job["spec"], "minAvailable": 0}}
    )
    assert replaced["spec"]["minAvailable"] == 0
    assert replaced["status"] == {"state": {"phase": "Running"}}  # an update leaves it alone
    patched = await custom.patch_namespaced_custom_object(
        *where, "train", {"status": {"state": {"phase": "Failed"}}}
    )
    assert patched["status"] == {"state": {"phase": "Running"}}
    written = await custom.patch_namespaced_custom_object_status(
        *where, "train", {"status": {"state": {"phase": "Completed"}}, "spec": {"minAvailable": 5}}
    )
    assert written["status"] == {"state": {"phase": "Completed"}}
    assert written["spec"]["minAvailable"] == 0  # the status subresource changes nothing else
    with pytest.raises(ApiException) as refused:
        await custom.patch_namespaced_custom_object_scale(*where, "train", {"spec": {}})
    assert refused.value.status == 404  # no scale subresource


async def test_claims_by_label_in_every_namespace_and_their_status_set_by_its_controller(
    kube,  # type: ignore[no-untyped-def]
) -> None:
    """As kube-apiserver: a PVC's create and update leave its status to the PV controller
    (`persistentvolumeclaims/status`); a label selector by key alone lists across namespaces."""
    emulator, api = kube
    core = client.CoreV1Api(api)
    emulator.create(NAMESPACES, {"metadata": {"name": "datasets"}})
    claim = {
        "metadata": {"name": "corpus", "labels": {"datadependency.volcano.sh/source": "c"}},
        "spec": {"accessModes": ["ReadOnlyMany"], "resources": {"requests": {"storage": "1Gi"}}},
        "status": {"phase": "Bound"},
    }
    created = await core.create_namespaced_persistent_volume_claim("datasets", claim)
    assert created.status is None or created.status.phase is None  # not the caller's to set
    emulator.create(PVCS, {"metadata": {"name": "scratch", "namespace": "default"}})
    await core.patch_namespaced_persistent_volume_claim_status(
        "corpus", "datasets", {"status": {"phase": "Bound"}}
    )
    listed = await core.list_persistent_volume_claim_for_all_namespaces(
        label_selector="datadependency.volcano.sh/source"
    )
    assert [(c.metadata.namespace, c.metadata.name, c.status.phase) for c in listed.items] == [
        ("datasets", "corpus", "Bound")
    ]
    resources = await core.get_api_resources()
    assert "persistentvolumeclaims" in {r.name for r in resources.resources}
