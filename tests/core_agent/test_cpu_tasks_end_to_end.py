"""Volcano's MPI example (docs/examples/mpi-job.yaml: a master without GPUs, two GPU workers)
through a real round, the real gRPC stream and the real agent into an emulated member cluster:
its Volcano Job has all 3 pods (it had the master and 1 worker: the placement counts GPU
pods, the member job was cut by rank over every task). Split, the master goes to the rank-0
cluster only, which exports rank 0's pod (the first worker) as the rendezvous."""

from __future__ import annotations

from typing import Any

from core_agent.kubernetes.source import KubernetesSource
from tests.core_agent.federation import Federation, federation
from tests.core_agent.test_kubernetes_shares import (
    env_of,
    member_cluster,
    set_phase,
    two_members,
    volcano_jobs,
)
from tests.factories import eventually, example_document, split_annotations, volcano_queue
from tests.k8s_emulator.server import NAMESPACES, SERVICES, KubeEmulator


def tasks_of(vcjob: dict[str, Any]) -> list[tuple[str, int]]:
    return [(t["name"], t["replicas"]) for t in vcjob["spec"]["tasks"]]


async def with_research(fed: Federation, *emulators: KubeEmulator) -> None:
    """The example's queue in the Global and its namespace in each member cluster."""
    created = await fed.api.post("/api/v1/queues", json=volcano_queue("research", weight=1))
    assert created.status_code == 201, created.text
    for emulator in emulators:
        emulator.create(NAMESPACES, {"metadata": {"name": "research"}})


async def test_the_mpi_example_runs_with_its_master_and_both_workers(database_url: str) -> None:
    async with member_cluster() as (emulator, kube_api), federation(database_url) as fed:
        await with_research(fed, emulator)
        await fed.join("k8s", KubernetesSource(kube_api, watch_timeout_s=5))
        await fed.ready("k8s")
        uid = await fed.submit(example_document("mpi-job.yaml"))

        await eventually(lambda: len(volcano_jobs(emulator)) == 1)
        job = await fed.reach(uid, "Dispatched")
        assert job["totalGpus"] == 2
        (vcjob,) = volcano_jobs(emulator)  # admitted by the emulator's Volcano webhook
        assert tasks_of(vcjob) == [("mpimaster", 1), ("mpiworker", 2)]
        assert vcjob["spec"]["minAvailable"] == 3
        assert vcjob["spec"]["plugins"] == {"ssh": [], "svc": []}

        set_phase(emulator, vcjob, "Running", running=3)
        await fed.reach(uid, "Running")
        set_phase(emulator, vcjob, "Completed", succeeded=3)
        await fed.reach(uid, "Succeeded")


async def test_a_split_mpi_job_has_one_master_in_the_rank_0_cluster(database_url: str) -> None:
    async with two_members(database_url) as (fed, east, west):
        await with_research(fed, east, west)
        doc = example_document("mpi-job.yaml")
        # 8 workers of 8 GPUs: more than one member's 38 free GPUs hold, so split 4 + 4.
        worker = doc["spec"]["tasks"][1]
        worker["replicas"] = 8
        worker["template"]["spec"]["containers"][0]["resources"] = {
            "requests": {"cpu": "4", "memory": "8Gi", "nvidia.com/gpu": "8"},
            "limits": {"nvidia.com/gpu": "8"},
        }
        doc["spec"]["minAvailable"] = 9
        # A launcher beside its workers, not wired by the ssh plugin (a job wired by it is
        # never split: normalize.WIRED_PLUGINS).
        doc["spec"]["plugins"] = {"svc": []}
        doc["metadata"]["annotations"] = split_annotations(2, crossing_gbps=50)
        uid = await fed.submit(doc)

        await eventually(lambda: len(volcano_jobs(east)) == 1 and len(volcano_jobs(west)) == 1)
        await fed.reach(uid, "Dispatched")
        members = {"east": east, "west": west}
        vcjobs = {name: volcano_jobs(e)[0] for name, e in members.items()}
        index = {name: env_of(v)["VGLOBAL_CLUSTER_INDEX"] for name, v in vcjobs.items()}
        first = next(name for name, i in index.items() if i == "0")
        other = "west" if first == "east" else "east"
        assert tasks_of(vcjobs[first]) == [("mpimaster", 1), ("mpiworker", 4)]
        assert tasks_of(vcjobs[other]) == [("mpiworker", 4)]
        assert vcjobs[first]["spec"]["minAvailable"] == 5
        assert vcjobs[other]["spec"]["minAvailable"] == 4
        # The exported rendezvous selects rank 0's pod: the first worker, not the master.
        await eventually(lambda: len(members[first].objects[SERVICES]) == 1)
        (service,) = members[first].objects[SERVICES].values()
        assert service["spec"]["selector"]["volcano.sh/task-spec"] == "mpiworker"
        assert service["spec"]["selector"]["volcano.sh/task-index"] == "0"

        set_phase(members[first], vcjobs[first], "Running", running=5)
        set_phase(members[other], vcjobs[other], "Running", running=4)
        await fed.reach(uid, "Running")
