"""Volcano's heterogeneous HyperJob (use case 2) end to end over simulated member clusters,
real gRPC and the real database: an H100 child in the H100 cluster and an A100 child in the A100
cluster, started together, Running when both run, Succeeded when both have."""

from __future__ import annotations

import yaml

from core_agent.simulated.cluster import ClusterSpec, SimulatedCluster
from tests.core_agent.federation import federation
from tests.factories import example, job_document


def spec(model: str) -> ClusterSpec:
    return ClusterSpec.model_validate(
        {
            "nodeGroups": [{"count": 8, "gpusPerNode": 8, "gpuModel": model}],
            "topology": {"tiers": [{"name": "tor", "size": 4}]},
        }
    )


async def test_each_child_runs_on_its_gpu_model_and_the_job_completes(database_url: str) -> None:
    doc = yaml.safe_load(example("hyperjob-heterogeneous.yaml"))
    for replicated in doc["spec"]["replicatedJobs"]:
        replicated["templateSpec"]["runningEstimate"] = "20s"
    async with federation(database_url) as fed:
        clusters = {}
        for name, model in (("gpu-east", "H100"), ("gpu-west", "A100")):
            clusters[name] = SimulatedCluster.from_spec(name, spec(model))
            clusters[name].time_scale = 0.1
            await fed.join(name, clusters[name])
        await fed.link("gpu-east", "gpu-west")
        await fed.ready("gpu-east", "gpu-west")
        uid = await fed.submit(doc)

        job = await fed.reach(uid, "Running")
        assert [(s["cluster"], s["pods"]) for s in job["placement"]["shares"]] == [
            ("gpu-east", 8),
            ("gpu-west", 8),
        ]
        for name, model in (("gpu-east", "H100"), ("gpu-west", "A100")):
            used = {n.gpu_model: n.used_gpus for n in clusters[name].nodes.values() if n.used_gpus}
            assert set(used) == {model}
            assert sum(n.used_gpus for n in clusters[name].nodes.values()) == 64

        await fed.reach(uid, "Succeeded")
        assert (await fed.reasons(uid))[:4] == ["Succeeded", "Running", "Dispatched", "Placed"]
        assert all(n.used_gpus == 0 for c in clusters.values() for n in c.nodes.values())


async def test_a_child_runs_in_a_cluster_of_two_models_beside_a_job_of_the_other(
    database_url: str,
) -> None:
    # gpu-east has 8 H100 and 8 A100 nodes outside any HyperNode (both models' leaves are
    # named gpu-east): the H100 child runs on its H100s, and an A100 job, with gpu-west's
    # A100s held by the A100 child, on its A100s meanwhile.
    doc = yaml.safe_load(example("hyperjob-heterogeneous.yaml"))
    for replicated in doc["spec"]["replicatedJobs"]:
        replicated["templateSpec"]["runningEstimate"] = "600s"  # runs on while checked
    mixed = ClusterSpec.model_validate(
        {
            "nodeGroups": [
                {"count": 8, "gpusPerNode": 8, "gpuModel": "H100"},
                {"count": 8, "gpusPerNode": 8, "gpuModel": "A100"},
            ]
        }
    )
    async with federation(database_url) as fed:
        clusters = {
            "gpu-east": SimulatedCluster.from_spec("gpu-east", mixed),
            "gpu-west": SimulatedCluster.from_spec("gpu-west", spec("A100")),
        }
        for name, cluster in clusters.items():
            cluster.time_scale = 0.1
            await fed.join(name, cluster)
        await fed.link("gpu-east", "gpu-west")
        await fed.ready("gpu-east", "gpu-west")
        uid = await fed.submit(doc)
        await fed.reach(uid, "Running")
        a100 = job_document("a100", replicas=8, runningEstimate="600s")
        a100["spec"]["tasks"][0]["template"]["spec"]["nodeSelector"] = {
            "nvidia.com/gpu.product": "A100"
        }
        job = await fed.reach(await fed.submit(a100), "Running")
        assert [s["cluster"] for s in job["placement"]["shares"]] == ["gpu-east"]
        assert (await fed.job(uid))["state"] == "Running"
        used = {m: 0 for m in ("H100", "A100")}
        for node in clusters["gpu-east"].nodes.values():
            used[node.gpu_model] += node.used_gpus
        assert used == {"H100": 64, "A100": 64}
