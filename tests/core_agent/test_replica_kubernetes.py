"""A replica in a Kubernetes member cluster, with a real Global: a dataset read by two jobs
lately is copied ahead of demand into the emulated cluster's region, as a staging Job in the
replica namespace (not a job's: a replica has none), named after its data source; the
emulator's job controller runs it, and the cluster then holds the data."""

from __future__ import annotations

from core_agent.kubernetes.source import KubernetesSource
from core_agent.kubernetes.staging import STAGING_LABEL
from core_agent.simulated.cluster import SimulatedCluster
from tests.core_agent.data_federation import SPEC, corpus_in_west, reader
from tests.core_agent.federation import federation
from tests.core_agent.test_kubernetes_shares import member_cluster, set_phase, volcano_jobs
from tests.core_agent.test_kubernetes_staging import CONFIG, staging_jobs
from tests.core_agent.test_prefetch_kubernetes import fill
from tests.factories import create_cluster, eventually
from tests.k8s_emulator.server import NAMESPACES

REPLICAS = {"data": {"replicate_readers": 2, "cross_region_margin": 100.0}}


async def test_a_replica_runs_as_a_staging_job_in_the_replica_namespace(
    database_url: str,
) -> None:
    async with (
        member_cluster() as (emulator, kube_api),
        federation(database_url, scheduling=REPLICAS) as fed,
    ):
        emulator.jobs.run_s = 1.0
        emulator.create(NAMESPACES, {"metadata": {"name": "volcano-global-data"}})
        for name, region in (("east", "us-east"), ("west", "eu-west")):
            made = await create_cluster(fed.api, name, labels={"region": region})
            fed.tokens[name] = made["agentToken"]
        await fed.join("east", KubernetesSource(kube_api, watch_timeout_s=5, staging=CONFIG))
        await fed.join("west", SimulatedCluster.from_spec("west", SPEC))
        await corpus_in_west(fed)
        hog = await reader(fed, "hog", "10h")  # where the data is, for 10 h
        await fed.reach(hog, "Running")
        other = await reader(fed, "other", "10h", reads=False, replicas=4)  # east, 10 h
        await eventually(lambda: len(volcano_jobs(emulator)) == 1)
        set_phase(emulator, volcano_jobs(emulator)[0], "Running", running=4)
        fill(emulator)
        await fed.reach(other, "Running")

        uid = await reader(fed, "train", "1h", replicas=4)  # waits for west: 2 readers
        await eventually(lambda: bool(staging_jobs(emulator)))
        [job] = staging_jobs(emulator)
        assert job["metadata"]["namespace"] == "volcano-global-data"
        assert job["metadata"]["labels"][STAGING_LABEL] == "true"
        assert job["metadata"]["name"].startswith("corpus-stage-")  # its data's name

        async def held_in_east() -> bool:
            found = (await fed.api.get("/api/v1/datasources/corpus")).json()
            return bool(found["clusters"] == ["west", "east"])

        await eventually(held_in_east)
        assert (await fed.job(uid))["state"] == "Pending"
        assert len(volcano_jobs(emulator)) == 1  # the replica made no Volcano Job
