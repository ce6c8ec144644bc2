"""GPU Feature Discovery's product names and the short names are one model (issue 37 item 7):
a job pinned with `nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3` runs on a cluster whose
nodes say `H100`, a job pinned to `A100` runs where the nodes carry GFD's
`NVIDIA-A100-SXM4-80GB`; an unknown name is kept as written and still pends with the reason."""

from __future__ import annotations

from typing import Any

from core_agent.simulated.cluster import ClusterSpec, SimulatedCluster
from tests.core_agent.federation import Federation, federation
from tests.factories import eventually, job_document
from volcano_global.jobspec.gpu_models import canonical_model
from volcano_global.schemas.clusters import NodeIn


def spec(model: str) -> ClusterSpec:
    return ClusterSpec.model_validate(
        {"nodeGroups": [{"count": 2, "gpusPerNode": 8, "gpuModel": model}]}
    )


async def fleet(fed: Federation) -> None:
    # east's spec says H100; west's the label GFD writes on an 80 GB SXM A100.
    for name, model in (("east", "H100"), ("west", "NVIDIA-A100-SXM4-80GB")):
        cluster = SimulatedCluster.from_spec(name, spec(model))
        cluster.time_scale = 0.05
        await fed.join(name, cluster)
    await fed.ready("east", "west")


def pinned(name: str, selector: dict[str, str] | None = None, **annotations: str) -> dict[str, Any]:
    doc = job_document(name, replicas=2, runningEstimate="10s")
    if selector:
        doc["spec"]["tasks"][0]["template"]["spec"]["nodeSelector"] = selector
    if annotations:
        doc["metadata"]["annotations"] = annotations
    return doc


async def test_a_job_pinned_to_a_gfd_name_runs_where_the_nodes_say_the_short_name(
    database_url: str,
) -> None:
    async with federation(database_url) as fed:
        await fleet(fed)
        h100 = await fed.submit(pinned("h100", {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}))
        a100 = await fed.submit(pinned("a100", **{"global.volcano.sh/gpu-model": "A100"}))
        ran = {}
        for uid in (h100, a100):
            job = await fed.reach(uid, "Succeeded")
            ran[uid] = [s["cluster"] for s in job["placement"]["shares"]]
        assert (ran[h100], ran[a100]) == (["east"], ["west"])
        clusters = (await fed.api.get("/api/v1/clusters")).json()["items"]
        models = {c["name"]: [m["gpuModel"] for m in c["capacity"]] for c in clusters}
        assert models == {"east": ["H100"], "west": ["A100"]}  # one name in every listing

        unknown = await fed.submit(pinned("b9000", {"nvidia.com/gpu.product": "NVIDIA-B9000"}))
        why = "no cluster has GPU model NVIDIA-B9000 (fleet: A100, H100)"

        async def pends() -> bool:
            return why in ((await fed.job(unknown))["pendingReason"] or "")

        await eventually(pends)


def test_the_table_and_the_rule_for_unknown_names() -> None:
    assert canonical_model("NVIDIA-H100-80GB-HBM3") == "H100"
    assert canonical_model("NVIDIA H100 80GB HBM3") == "H100"  # as nvidia-smi prints it
    assert canonical_model("nvidia-l40s") == "L40S"
    assert canonical_model("AMD_Instinct_MI300X") == "MI300X"
    # Memory and form factor that change what fits stay apart.
    assert canonical_model("NVIDIA-A100-SXM4-40GB") == "A100-40GB"
    assert canonical_model("NVIDIA-A100-SXM4-80GB") == "A100"
    # Unknown names and MIG slices are kept as written; short names are already the model.
    assert canonical_model(" NVIDIA-B9000 ") == "NVIDIA-B9000"
    assert canonical_model("NVIDIA-A100-SXM4-40GB-MIG-1g.5gb") == "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb"
    assert canonical_model("H100") == "H100"


def test_an_agent_of_an_older_release_reporting_gfd_names_is_stored_by_the_short_name() -> None:
    assert NodeIn.model_validate({"name": "n0", "gpuModel": "NVIDIA-H200"}).gpu_model == "H200"
    assert NodeIn.model_validate({"name": "n0"}).gpu_model is None
