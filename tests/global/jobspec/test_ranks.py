"""Tasks without GPUs beside GPU tasks (an MPI master, a parameter server on CPUs) hold no
rank: the placement counts and splits only the GPU pods, and each member cluster's Volcano
Job gets them whole with the share of its Volcano Job's first rank. Before, the member jobs
were cut by rank over every task while the placement counted GPU pods only: the MPI example
placed whole ran its master and 1 of its 2 workers."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.factories import example_document, share_assignment
from volcano_global.errors import Invalid
from volcano_global.jobspec import ParseOptions, normalize_job
from volcano_global.jobspec.members import member_jobs, parallelism_env, rendezvous_address
from volcano_global.jobspec.ranks import ranked_flags, ranked_pods
from volcano_global.rpc.shares import ShareAssignment
from volcano_global.settings import SchedulingDefaults
from volcano_global.solver.requests import job_request

OPTIONS = ParseOptions(priority_classes=SchedulingDefaults().priority_classes)


def share(offset: int, pods: int, index: int, count: int, world: int) -> ShareAssignment:
    return share_assignment(
        job_name="lm-mpi-job",
        namespace="research",
        rank_offset=offset,
        pods=pods,
        cluster_index=index,
        cluster_count=count,
        world_pods=world,
    )


def tasks_of(documents: list[dict[str, Any]]) -> list[list[tuple[str, int]]]:
    return [[(t["name"], t["replicas"]) for t in d["spec"]["tasks"]] for d in documents]


def mpi(workers: int = 2) -> dict[str, Any]:
    doc = example_document("mpi-job.yaml")
    doc["spec"]["tasks"][1]["replicas"] = workers
    doc["spec"]["minAvailable"] = workers + 1
    return doc


def test_the_mpi_example_placed_whole_runs_its_master_and_both_workers() -> None:
    doc = mpi()
    job = normalize_job(doc, OPTIONS)
    assert ranked_pods(job.gang) == 2  # what the placement holds: the GPU pods
    (member,) = member_jobs(doc, share(0, 2, 0, 1, world=2))
    assert tasks_of([member]) == [[("mpimaster", 1), ("mpiworker", 2)]]
    assert member["spec"]["minAvailable"] == 3  # every pod of the member job, no more
    assert member["metadata"]["annotations"]["global.volcano.sh/ranks"] == "0-1"


def test_a_split_mpi_job_has_its_master_in_the_rank_0_share_only() -> None:
    doc = mpi(workers=4)
    first = member_jobs(doc, share(0, 2, 0, 2, world=4))
    second = member_jobs(doc, share(2, 2, 1, 2, world=4))
    assert tasks_of(first) == [[("mpimaster", 1), ("mpiworker", 2)]]
    assert tasks_of(second) == [[("mpiworker", 2)]]
    assert [first[0]["spec"]["minAvailable"], second[0]["spec"]["minAvailable"]] == [3, 2]
    # The rendezvous is rank 0's pod (where the SDK runtime's torch rank 0 listens), not the
    # master's: it was the first pod in document order.
    member = first[0]["metadata"]["name"]
    assert rendezvous_address(doc, member=member, namespace="research", split=False) == (
        f"{member}-mpiworker-0.{member}.research.svc:29500"
    )
    # Three shares of the GPU ranks: the master still goes once, with rank 0.
    thirds = [
        member_jobs(doc, share(o, p, i, 3, world=4))
        for i, (o, p) in enumerate(((0, 1), (1, 2), (3, 1)))
    ]
    assert [tasks_of(d)[0] for d in thirds] == [
        [("mpimaster", 1), ("mpiworker", 1)],
        [("mpiworker", 2)],
        [("mpiworker", 1)],
    ]


def test_a_job_without_gpus_ranks_all_its_pods() -> None:
    assert ranked_flags([(1, 0), (2, 0)]) == [True, True]
    assert ranked_flags([(1, 0), (2, 1)]) == [False, True]
    assert ranked_flags([(1, 0), (0, 1)]) == [True, True]  # a GPU task of no pod: none
    doc = mpi()
    for t in doc["spec"]["tasks"]:
        t["template"]["spec"]["containers"][0].pop("resources", None)
    (member,) = member_jobs(doc, share(0, 3, 0, 1, world=3))
    assert tasks_of([member]) == [[("mpimaster", 1), ("mpiworker", 2)]]
    assert ranked_pods(normalize_job(doc, OPTIONS).gang) == 3


def test_the_split_unit_divides_the_gpu_pods() -> None:
    doc = mpi(workers=4)
    doc["spec"]["plugins"] = {"svc": []}  # not wired by ssh: it may split
    doc["metadata"]["annotations"] = {
        "global.volcano.sh/split": "auto",
        "global.volcano.sh/unit-pods": "2",
    }
    split = normalize_job(doc, OPTIONS).split_policy  # 4 GPU pods (5 pods): units of 2
    assert (split.mode, split.unit_pods) == ("auto", 2)
    doc["metadata"]["annotations"]["global.volcano.sh/unit-pods"] = "3"
    with pytest.raises(Invalid) as refused:
        normalize_job(doc, OPTIONS)
    assert "must divide the job's 4 GPU pods" in refused.value.errors[0].message


def test_the_parallelism_is_counted_on_gpu_pods() -> None:
    doc = mpi(workers=4)
    doc["metadata"]["annotations"] = {
        "global.volcano.sh/communication": "dataParallel: 4\ngpusPerPod: 1\n"
    }
    assert parallelism_env(doc, world_pods=4) == "dp=4"  # was dp=3: 4 of 5 "declared" pods
    assert parallelism_env(doc, world_pods=2) == "dp=2"


def mpi_hyperjob() -> dict[str, Any]:
    """Two static children, each an MPI job (a master without GPUs, 2 GPU workers)."""
    child = copy.deepcopy(mpi()["spec"])
    child.pop("queue")
    return {
        "apiVersion": "training.volcano.sh/v1alpha1",
        "kind": "HyperJob",
        "metadata": {"name": "lm-mpi-job", "namespace": "research"},
        "spec": {"replicatedJobs": [{"name": "mpi", "replicas": 2, "templateSpec": child}]},
    }


def test_a_hyperjob_child_keeps_its_master_with_its_workers() -> None:
    doc = mpi_hyperjob()
    job = normalize_job(doc, OPTIONS)
    request = job_request(
        job_id="x",
        gang=job.gang,
        split=job.split_policy,
        communication=None,
        priority=0,
        queue="q",
    )
    # 4 GPU pods in units of a child's 2: the masters are not charged a GPU each (was 6 x 1).
    assert (request.pods, request.unit_pods, request.gpus, request.parts) == (4, 2, 4, ())
    first = member_jobs(doc, share(0, 2, 0, 2, world=4))
    second = member_jobs(doc, share(2, 2, 1, 2, world=4))
    assert [d["metadata"]["name"][-6:] for d in first + second] == ["-mpi-0", "-mpi-1"]
    assert tasks_of(first) == tasks_of(second) == [[("mpimaster", 1), ("mpiworker", 2)]]
    whole = member_jobs(doc, share(0, 4, 0, 1, world=4))
    assert tasks_of(whole) == [[("mpimaster", 1), ("mpiworker", 2)]] * 2
    assert [d["spec"]["minAvailable"] for d in whole] == [3, 3]


def test_a_hyperjob_of_children_that_differ_counts_each_childs_gpu_pods() -> None:
    doc = mpi_hyperjob()
    bigger = copy.deepcopy(doc["spec"]["replicatedJobs"][0])
    bigger["name"] = "big"
    bigger["replicas"] = 1
    bigger["templateSpec"]["tasks"][1]["replicas"] = 4
    doc["spec"]["replicatedJobs"].append(bigger)
    job = normalize_job(doc, OPTIONS)
    request = job_request(
        job_id="x",
        gang=job.gang,
        split=job.split_policy,
        communication=None,
        priority=0,
        queue="q",
    )
    # Was refused: "child 'mpi' has pods of different sizes [0, 1]".
    assert [(p.name, p.pods, p.gpus_per_pod) for p in request.parts] == [
        ("mpi-0", 2, 1),
        ("mpi-1", 2, 1),
        ("big-0", 4, 1),
    ]
    (big,) = member_jobs(doc, share(4, 4, 1, 2, world=8))
    assert tasks_of([big]) == [[("mpimaster", 1), ("mpiworker", 4)]]


def test_an_elastic_width_counts_the_gpu_pods_beside_a_whole_master() -> None:
    doc = mpi(workers=4)
    doc["spec"]["minAvailable"] = 3  # the master and 2 of the 4 workers
    doc["metadata"]["annotations"] = {"global.volcano.sh/elastic": "true"}
    split = normalize_job(doc, OPTIONS).split_policy
    # Units of 1 GPU pod; 2 of them with the master make minAvailable (was 3 of 5 pods).
    assert (split.unit_pods, split.min_units) == (1, 2)


def test_a_job_wired_by_the_ssh_or_mpi_plugin_is_never_split() -> None:
    # Each cluster's member job would get its own keys and host list: the launcher would
    # reach only its own cluster's workers (and the mpi plugin's webhook refuses a member job
    # without its master).
    doc = mpi(workers=4)
    doc["metadata"]["annotations"] = {"global.volcano.sh/split": "auto"}
    with pytest.raises(Invalid) as refused:
        normalize_job(doc, OPTIONS)
    (error,) = refused.value.errors
    assert error.field == 'metadata.annotations["global.volcano.sh/split"]'
    assert "wired by Volcano's ssh plugin cannot be split" in error.message
    doc["metadata"]["annotations"] = {}
    doc["metadata"]["annotations"]["global.volcano.sh/communication"] = (
        '{"tensorParallel": 1, "dataParallel": 4, "gpusPerPod": 1}'
    )
    split = normalize_job(doc, OPTIONS).split_policy  # a plan that would split it: whole
    assert (split.mode, split.max_clusters, split.source) == ("never", 1, "plugins")
