"""The emulator serves Volcano Queues (scheduling.volcano.sh/v1beta1, cluster-scoped) as a
cluster with Volcano does: the CRD's schema checked, `.status` only through the status
subresource. Through the real kubernetes-asyncio client over HTTP."""

from __future__ import annotations

import json

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from tests.k8s_emulator.server import VOLCANO_QUEUES, KubeEmulator

GROUP, VERSION, PLURAL = VOLCANO_QUEUES


def queue(name: str, **spec: object) -> dict[str, object]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": spec,
        "status": {"state": "Closed"},
    }


async def test_queues_are_created_read_and_checked_against_their_crd(
    kube: tuple[KubeEmulator, client.ApiClient],
) -> None:
    emulator, api = kube
    emulator.register(VOLCANO_QUEUES, "Queue", namespaced=False)
    custom = client.CustomObjectsApi(api)
    made = await custom.create_cluster_custom_object(
        GROUP, VERSION, PLURAL, queue("llm", weight=4, capability={"nvidia.com/gpu": 64})
    )
    assert made["spec"] == {"weight": 4, "capability": {"nvidia.com/gpu": 64}}
    assert made.get("status") in (None, {})  # a create leaves the status alone
    read = await custom.get_cluster_custom_object(GROUP, VERSION, PLURAL, "llm")
    assert read["metadata"]["resourceVersion"] == made["metadata"]["resourceVersion"]
    with pytest.raises(ApiException) as caught:
        await custom.create_cluster_custom_object(GROUP, VERSION, PLURAL, queue("bad", weight=0))
    assert caught.value.status == 422
    assert "spec.weight" in json.loads(caught.value.body)["message"]
    with pytest.raises(ApiException) as missing:
        await custom.get_cluster_custom_object(GROUP, VERSION, PLURAL, "nope")
    assert missing.value.status == 404
