"""Data found in a member cluster grows its DataSources' locality, end to end: a real Global
(REST, gRPC on a socket, database) and a Kubernetes agent against the API emulator over HTTP.
PVCs and Fluid Datasets labelled `datadependency.volcano.sh/source: <name>` count once Bound
(docs/data.md, "Agent label convention"); a label that cannot name a DataSource is ignored
with a warning, a name no DataSource has is skipped, and every new stream repeats the list."""

from __future__ import annotations

import logging
from typing import Any

import httpx
import pytest
import yaml

from core_agent.kubernetes.presence import SOURCE_LABEL
from core_agent.kubernetes.source import KubernetesSource
from tests.core_agent.federation import Federation, federation
from tests.core_agent.test_kubernetes_shares import member_cluster
from tests.data_documents import data_source
from tests.factories import eventually
from tests.k8s_emulator.server import FLUID_DATASETS, NAMESPACES, PVCS, KubeEmulator


def labelled(name: str, source: str, phase: str) -> dict[str, Any]:
    """A PVC (or, with `kind`, any object) in namespace `datasets` naming `source`."""
    return {
        "metadata": {"name": name, "namespace": "datasets", "labels": {SOURCE_LABEL: source}},
        "spec": {"accessModes": ["ReadOnlyMany"], "resources": {"requests": {"storage": "1Ti"}}},
        "status": {"phase": phase},
    }


async def apply(api: httpx.AsyncClient, document: dict[str, Any]) -> None:
    response = await api.post(
        "/api/v1/apply",
        content=yaml.safe_dump(document),
        headers={"Content-Type": "application/yaml"},
    )
    assert response.status_code == 200, response.text


async def clusters(api: httpx.AsyncClient, name: str) -> list[str]:
    response = await api.get(f"/api/v1/datasources/{name}")
    assert response.status_code == 200, response.text
    return list(response.json()["clusters"])


async def holds(fed: Federation, name: str, expected: list[str]) -> None:
    async def check() -> bool:
        return await clusters(fed.api, name) == expected

    await eventually(check)


async def connects(fed: Federation) -> int:
    items = (await fed.api.get("/api/v1/clusters/k8s/events")).json()["items"]
    return sum(e["count"] for e in items if e["reason"] == "AgentConnected")


def datasets_namespace(emulator: KubeEmulator) -> None:
    emulator.create(NAMESPACES, {"metadata": {"name": "datasets"}})


async def test_a_bound_labelled_pvc_adds_its_cluster_to_the_data_source(
    database_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    async with member_cluster() as (emulator, kube_api), federation(database_url) as fed:
        datasets_namespace(emulator)
        await apply(fed.api, data_source("corpus-v3", clusters=("gpu-west",)))
        await apply(fed.api, data_source("ckpt-7b", clusters=("gpu-west",)))
        emulator.create(PVCS, labelled("corpus", "corpus-v3", "Pending"))
        emulator.create(PVCS, labelled("ckpt", "ckpt-7b", "Bound"))
        emulator.create(PVCS, labelled("bad", "Corpus_V3", "Bound"))  # no DataSource name
        emulator.create(PVCS, labelled("other", "unknown-data", "Bound"))  # no DataSource

        await fed.join("k8s", KubernetesSource(kube_api, watch_timeout_s=5))
        await fed.ready("k8s")
        await holds(fed, "ckpt-7b", ["gpu-west", "k8s"])
        # The Pending PVC's source was left out of the same list: unchanged.
        assert await clusters(fed.api, "corpus-v3") == ["gpu-west"]
        assert "'Corpus_V3' is not a DataSource name (a DNS subdomain): ignored" in caplog.text
        assert "k8s reports data ['unknown-data'] that no DataSource names: skipped" in (
            caplog.text
        )
        # Fluid's CRD is not installed here: said once, and nothing else fails.
        assert caplog.text.count("fluiddatasets: resource type not served") == 1

        # The PV controller binds the claim: the watch brings it, the locality grows.
        emulator.patch(PVCS, "corpus", {"status": {"phase": "Bound"}}, "datasets")
        await holds(fed, "corpus-v3", ["gpu-west", "k8s"])
        assert (await connects(fed)) == 1  # no message of the agent ended its stream

        # An admin sets the locality (a changed clusterNames: the same document again would
        # keep what agents added) while the agent is away; the data is still there, so its
        # next stream's full list adds the cluster back (level-triggered).
        await fed.leave("k8s")
        await apply(fed.api, data_source("corpus-v3", clusters=("gpu-west", "gpu-north")))
        assert await clusters(fed.api, "corpus-v3") == ["gpu-west", "gpu-north"]
        await fed.join("k8s", KubernetesSource(kube_api, watch_timeout_s=5))
        await holds(fed, "corpus-v3", ["gpu-west", "gpu-north", "k8s"])
        assert (await connects(fed)) == 2


async def test_a_fluid_dataset_counts_once_bound_even_when_its_crd_comes_later(
    database_url: str,
) -> None:
    async with member_cluster() as (emulator, kube_api), federation(database_url) as fed:
        kube_api.rediscover_s = 0.2  # how often the agent looks again for a missing type
        datasets_namespace(emulator)
        await apply(fed.api, data_source("imagenet", clusters=("gpu-west",)))
        await fed.join("k8s", KubernetesSource(kube_api, watch_timeout_s=5))
        await fed.ready("k8s")

        emulator.register(FLUID_DATASETS, "Dataset", namespaced=True)  # Fluid installed
        dataset = labelled("imagenet", "imagenet", "NotBound")
        dataset["spec"] = {"mounts": [{"mountPoint": "s3://datasets/imagenet/", "name": "in"}]}
        emulator.create(FLUID_DATASETS, dataset)
        await eventually(lambda: any("data.fluid.io" in r for r in emulator.requests[-50:]))
        assert await clusters(fed.api, "imagenet") == ["gpu-west"]

        emulator.patch(FLUID_DATASETS, "imagenet", {"status": {"phase": "Bound"}}, "datasets")
        await holds(fed, "imagenet", ["gpu-west", "k8s"])
