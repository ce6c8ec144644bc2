"""The data end-to-end tests' federation: member clusters east and west of 64 GPUs, linked
and Ready, with corpus (100 GiB) held in west, and jobs that read it."""

from __future__ import annotations

from core_agent.simulated.cluster import ClusterSpec, SimulatedCluster
from tests.core_agent.federation import Federation
from tests.data_documents import data_source, data_source_claim
from tests.data_rounds import apply
from tests.factories import job_document

SPEC = ClusterSpec.model_validate(
    {
        "nodeGroups": [{"count": 8, "gpusPerNode": 8, "gpuModel": "H100"}],
        "topology": {"tiers": [{"name": "tor", "size": 4}]},
    }
)


async def join_east_and_west(fed: Federation, *, time_scale: float) -> dict[str, SimulatedCluster]:
    """Simulated clusters east and west of SPEC joined (`time_scale`: how fast their
    simulated time runs, copies included), then `corpus_in_west`."""
    clusters = {name: SimulatedCluster.from_spec(name, SPEC) for name in ("east", "west")}
    for name, cluster in clusters.items():
        cluster.time_scale = time_scale
        await fed.join(name, cluster)
    await corpus_in_west(fed)
    return clusters


async def corpus_in_west(fed: Federation) -> None:
    """east and west (joined) linked and Ready, corpus (100 GiB) held in west."""
    await fed.link("east", "west")
    await fed.ready("east", "west")
    await apply(fed.api, data_source("corpus", clusters=("west",), size="100Gi"))


async def reader(
    fed: Federation, name: str, estimate: str, *, reads: bool = True, replicas: int = 8
) -> str:
    """A job of `replicas` pods of 8 GPUs, by default a whole 64-GPU cluster (reading corpus,
    claimed, if `reads`)."""
    if reads:
        await apply(fed.api, data_source_claim(f"{name}-corpus", source="corpus", workload=name))
    return await fed.submit(job_document(name, replicas=replicas, runningEstimate=estimate))
