"""From the unified job API's normalized jobs to solver requests, and the traffic model."""

from __future__ import annotations

import copy

import pytest

from tests.factories import example_document
from volcano_global.jobspec import ParseOptions, normalize_job
from volcano_global.settings import SchedulingDefaults
from volcano_global.solver.requests import job_request
from volcano_global.solver.traffic import allreduce_gbps, pair_demand_gbps


def request_for(name: str, **annotations: str):  # type: ignore[no-untyped-def]
    doc = example_document(name)
    doc["metadata"].setdefault("annotations", {}).update(annotations)
    job = normalize_job(doc, ParseOptions(priority_classes=SchedulingDefaults().priority_classes))
    return job, job_request(
        job_id=job.name,
        gang=job.gang,
        split=job.split_policy,
        communication=job.communication,
        priority=job.priority,
        queue=job.queue or "default",
    )


def test_llm_pretraining_request() -> None:
    job, request = request_for("llm-pretrain-64x8.yaml")
    assert (request.pods, request.gpus_per_pod, request.gpu_model, request.unit_pods) == (
        64,
        8,
        "H100",
        4,
    )
    assert (request.splittable, request.max_clusters, request.min_share_units) == (True, 3, 1)
    assert request.unit_tier == 1
    assert request.share_tier is None  # job-level topology is soft
    # 70e9 params x 2 bytes x 8 bits (ZeRO-1: factor 1) over 10% of a 12 s step.
    assert request.allreduce_gbps == pytest.approx(70e9 * 2 * 8 / 1.2 / 1e9)
    assert job.communication is not None
    assert allreduce_gbps(job.communication) == request.allreduce_gbps


def test_declared_crossing_rate_overrides_the_plan() -> None:
    _, request = request_for("llm-pretrain-64x8.yaml", **{"global.volcano.sh/crossing-gbps": "120"})
    assert request.allreduce_gbps == 120


def test_hyperjob_units_are_child_jobs() -> None:
    _, request = request_for("hyperjob-llm-training.yaml")
    assert (request.pods, request.unit_pods, request.units, request.max_clusters) == (32, 16, 2, 2)
    assert request.splittable
    assert request.allowed_clusters is None


def test_plain_job_is_one_unit() -> None:
    _, request = request_for("volcano-job-basic.yaml")
    assert request.unit == request.pods
    assert not request.splittable
    assert request.gpus_per_pod == 0


def test_only_gpu_pods_count() -> None:
    _, request = request_for("mpi-job.yaml")  # the master has no GPU: only GPU pods count
    assert (request.pods, request.gpus_per_pod) == (2, 1)


def test_pair_demand_follows_the_hierarchical_exchange() -> None:
    assert pair_demand_gbps(100.0, 1) == 0
    assert pair_demand_gbps(100.0, 2) == 100.0  # each pair carries 2G/k per direction
    assert pair_demand_gbps(100.0, 4) == 50.0


def test_a_heterogeneous_hyperjob_is_a_request_of_its_children() -> None:
    # Volcano's HyperJob use case 2: an H100 child pinned to gpu-east, an A100 one to gpu-west.
    _, request = request_for("hyperjob-heterogeneous.yaml")
    assert [
        (p.name, p.pods, p.gpus_per_pod, p.gpu_model, p.allowed_clusters) for p in request.parts
    ] == [
        ("trainer-h100-0", 8, 8, "H100", ("gpu-east",)),
        ("trainer-a100-0", 8, 8, "A100", ("gpu-west",)),
    ]
    assert (request.gpus, request.max_clusters, request.splittable) == (128, 2, True)
    # Children alike stay one request of units (the model places them).
    assert request_for("hyperjob-llm-training.yaml")[1].parts == ()


def test_a_child_with_pods_of_different_sizes_is_not_modelled() -> None:
    doc = example_document("hyperjob-heterogeneous.yaml")
    tasks = doc["spec"]["replicatedJobs"][1]["templateSpec"]["tasks"]
    tasks.append(copy.deepcopy(tasks[0]) | {"name": "small"})
    tasks[1]["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "4"
    job = normalize_job(doc, ParseOptions(priority_classes=SchedulingDefaults().priority_classes))
    with pytest.raises(ValueError, match=r"child 'trainer-a100' has pods of different sizes"):
        job_request(
            job_id="x",
            gang=job.gang,
            split=job.split_policy,
            communication=None,
            priority=0,
            queue="q",
        )
    never = job.split_policy.model_copy(update={"mode": "never"})
    with pytest.raises(ValueError, match="keeps it in one cluster"):
        job_request(
            job_id="x", gang=job.gang, split=never, communication=None, priority=0, queue="q"
        )


def test_a_child_of_no_replicas_does_not_make_the_job_heterogeneous() -> None:
    # Its tasks ran no pod but their GPU model counted: an H100 HyperJob declaring an A100
    # child of replicas 0 was refused as parts on different GPU models.
    doc = example_document("hyperjob-heterogeneous.yaml")
    doc["spec"]["replicatedJobs"][0]["replicas"] = 2
    doc["spec"]["replicatedJobs"][1]["replicas"] = 0
    doc["spec"]["minAvailable"] = 2
    job = normalize_job(doc, ParseOptions(priority_classes=SchedulingDefaults().priority_classes))
    request = job_request(
        job_id="x", gang=job.gang, split=job.split_policy, communication=None, priority=0, queue="q"
    )
    assert (request.parts, request.gpu_model, request.pods, request.gpus_per_pod) == (
        (),
        "H100",
        16,
        8,
    )
