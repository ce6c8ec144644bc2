"""Volcano's heterogeneous HyperJob (use case 2) end to end over simulated member clusters,
real gRPC and the real database: an H100 child in the H100 cluster and an A100 child in the A100
cluster, started together, Running when both run, Succeeded when both have."""

from __future__ import annotations

import yaml

from core_agent.simulated.cluster import ClusterSpec, SimulatedCluster
from tests.core_agent.federation import federation
from tests.factories import example


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
