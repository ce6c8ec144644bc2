"""A share's GPU model pinned on its pods in a cluster of several models (`model_pinning`):
the label values that name the model, the affinity ANDed into the template's own, and end to
end a job that names no model, placed by the Global on one model of an emulated member
cluster, whose Volcano Job's GPU pods require that model's nodes (they required none: Volcano
could run them on the other model while the Global's books counted this one)."""

from __future__ import annotations

import copy
from typing import Any

from core_agent.kubernetes.model_pinning import label_values, pin_model
from core_agent.kubernetes.source import KubernetesSource
from tests.core_agent.federation import federation
from tests.core_agent.kube_objects import node
from tests.core_agent.test_kubernetes_shares import member_cluster, volcano_jobs
from tests.factories import eventually, job_document
from tests.k8s_emulator.server import NODES

H100 = ("H100", "NVIDIA-H100-80GB-HBM3")  # two spellings of one model
A100 = "NVIDIA-A100-SXM4-80GB"


def amd(name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {"amd.com/gpu.product-name": "AMD-Instinct-MI300X"}},
        "status": {"allocatable": {"amd.com/gpu": "8", "cpu": "96"}},
    }


def template_of(document: dict[str, Any], task: int = 0) -> dict[str, Any]:
    return document["spec"]["tasks"][task]["template"]


def required_terms(template: dict[str, Any]) -> list[dict[str, Any]]:
    affinity = template["spec"].get("affinity", {}).get("nodeAffinity", {})
    return affinity.get("requiredDuringSchedulingIgnoredDuringExecution", {}).get(
        "nodeSelectorTerms", []
    )


def test_the_values_that_name_a_model_in_this_cluster() -> None:
    nodes = [
        node("h0", **{"nvidia.com/gpu.product": H100[0]}),
        node("h1", **{"nvidia.com/gpu.product": H100[1]}),
        node("a0", **{"nvidia.com/gpu.product": A100}),
        amd("m0"),
        {"metadata": {"name": "cpu"}, "status": {"allocatable": {"cpu": "64"}}},
    ]
    found = label_values(nodes)
    assert found.get("H100", {}) == {"nvidia.com/gpu.product": sorted(H100)}
    assert found.get("A100", {}) == {"nvidia.com/gpu.product": [A100]}
    assert found.get("MI300X", {}) == {"amd.com/gpu.product-name": ["AMD-Instinct-MI300X"]}
    assert found.get("B200", {}) == {}
    assert len(found) > 1  # several models
    assert len(label_values(nodes[:2])) == 1  # one model, two spellings


def test_gpu_tasks_are_pinned_and_their_own_affinity_kept() -> None:
    document = job_document(replicas=2)
    launcher = copy.deepcopy(document["spec"]["tasks"][0])
    launcher["name"] = "launcher"
    launcher["template"]["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "1"}}
    document["spec"]["tasks"].append(launcher)
    zone = {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a", "b"]}]}
    template_of(document)["spec"]["affinity"] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [zone]}
        }
    }
    requirement = {"nvidia.com/gpu.product": sorted(H100)}
    assert pin_model([document], "H100", requirement) == 1
    (term,) = required_terms(template_of(document))
    assert term["matchExpressions"] == [
        zone["matchExpressions"][0],
        {"key": "nvidia.com/gpu.product", "operator": "In", "values": sorted(H100)},
    ]
    assert required_terms(template_of(document, 1)) == []  # the CPU task runs anywhere


def test_a_task_that_names_its_model_is_left_alone() -> None:
    document = job_document()
    template_of(document)["spec"]["nodeSelector"] = {"nvidia.com/gpu.product": A100}
    assert pin_model([document], "H100", {"nvidia.com/gpu.product": sorted(H100)}) == 0
    assert "affinity" not in template_of(document)["spec"]


async def test_a_job_naming_no_model_runs_on_the_model_it_was_counted_against(
    database_url: str,
) -> None:
    async with member_cluster() as (emulator, kube_api), federation(database_url) as fed:
        # n0-n2 H100 (two spellings), n3-n5 A100.
        for i in range(6):
            product = A100 if i >= 3 else H100[i % 2]
            emulator.patch(
                NODES, f"n{i}", {"metadata": {"labels": {"nvidia.com/gpu.product": product}}}
            )
        await fed.join("k8s", KubernetesSource(kube_api, watch_timeout_s=5))
        await fed.ready("k8s")
        uid = await fed.submit(job_document(replicas=2))

        await eventually(lambda: len(volcano_jobs(emulator)) == 1)
        job = await fed.reach(uid, "Dispatched")
        (share,) = job["placement"]["shares"]
        # tor0 holds the H100 nodes, tor1 the A100 ones: where the Global counted the pods.
        (leaf,) = {name for name in share["domains"] if name.endswith(("tor0", "tor1"))}
        values = sorted(H100) if leaf.endswith("tor0") else [A100]
        (vcjob,) = volcano_jobs(emulator)
        (term,) = required_terms(template_of(vcjob))
        assert term["matchExpressions"] == [
            {"key": "nvidia.com/gpu.product", "operator": "In", "values": values}
        ]


async def test_in_a_cluster_of_one_model_nothing_is_added(database_url: str) -> None:
    async with member_cluster() as (emulator, kube_api), federation(database_url) as fed:
        await fed.join("k8s", KubernetesSource(kube_api, watch_timeout_s=5))
        await fed.ready("k8s")
        await fed.submit(job_document(replicas=2))
        await eventually(lambda: len(volcano_jobs(emulator)) == 1)
        (vcjob,) = volcano_jobs(emulator)
        assert "affinity" not in template_of(vcjob)["spec"]
