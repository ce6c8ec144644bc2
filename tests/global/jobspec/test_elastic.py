"""Elastic width read from a Volcano Job or HyperJob, only for a job that opts in
(`global.volcano.sh/elastic: "true"` or `minDataParallel`): `minAvailable` below the replicas,
in whole units rounded up; `minAvailable` equal to the replicas is a rigid gang; a HyperJob's
`minAvailable` in child jobs; `minDataParallel` in the communication plan. Without the opt-in,
`minAvailable` keeps Volcano's meaning and the job is placed whole."""

from __future__ import annotations

from typing import Any

import pytest

from tests.factories import example_document, job_document
from volcano_global.errors import Invalid
from volcano_global.jobspec import ParseOptions, normalize_job
from volcano_global.solver.requests import job_request

OPTIONS = ParseOptions(default_max_clusters=4)
PLAN = "global.volcano.sh/communication"
ELASTIC = "global.volcano.sh/elastic"


def width(doc: dict[str, Any], *, declared: str | None = "true") -> tuple[str, int, int]:
    """(split mode, unit pods, min units) as parsed, with `global.volcano.sh/elastic` set to
    `declared` (None: not given)."""
    if declared is not None:
        doc.setdefault("metadata", {}).setdefault("annotations", {})[ELASTIC] = declared
    split = normalize_job(doc, OPTIONS).split_policy
    return split.mode, split.unit_pods, split.min_units


def planned(replicas: int, plan: str, **spec: Any) -> dict[str, Any]:
    doc = job_document("train", replicas=replicas, **spec)
    doc["metadata"]["annotations"] = {PLAN: plan}
    return doc


def errors(doc: dict[str, Any]) -> dict[str, str]:
    with pytest.raises(Invalid) as caught:
        normalize_job(doc, OPTIONS)
    return {e.field: e.message for e in caught.value.errors}


def test_min_available_below_the_replicas_alone_is_volcanos_gang_minimum_not_a_range() -> None:
    # A straggler-tolerant job: placed whole, never resized.
    assert width(job_document("train", replicas=8, minAvailable=3), declared=None) == (
        "never",
        8,
        0,
    )
    doc = planned(16, "{tensorParallel: 8, pipelineParallel: 2}", minAvailable=5)
    assert width(doc, declared=None) == ("auto", 2, 0)
    assert width(job_document("train", replicas=8, minAvailable=3), declared="false") == (
        "never",
        8,
        0,
    )


def test_a_malformed_elastic_declaration_is_refused_naming_the_annotation() -> None:
    field = f'metadata.annotations["{ELASTIC}"]'
    doc = job_document("train", replicas=8, minAvailable=3)
    doc["metadata"]["annotations"] = {ELASTIC: "yes"}
    assert errors(doc) == {field: 'must be "true" or "false", got \'yes\''}
    # Declared, but nothing gives a width below all of it.
    doc = job_document("train", replicas=8)
    doc["metadata"]["annotations"] = {ELASTIC: "true"}
    (message,) = errors(doc).values()
    assert message.startswith('"true", but the job gives no width below all of it')
    # Declared rigid, with a minimum in the plan.
    doc = planned(16, "{tensorParallel: 8, pipelineParallel: 2, minDataParallel: 3}")
    doc["metadata"]["annotations"][ELASTIC] = "false"
    assert errors(doc) == {field: '"false" contradicts minDataParallel in the communication plan'}


def test_min_available_below_the_replicas_is_a_width_range_in_whole_replicas() -> None:
    # Replicas of TP 8 x PP 2 = 2 pods of 8 GPUs; 16 pods = 8 replicas. minAvailable 5 pods
    # is 2.5 replicas: rounded up to 3 (6 pods), the fewest whole replicas that run 5 pods.
    doc = planned(16, "{tensorParallel: 8, pipelineParallel: 2}", minAvailable=5)
    assert width(doc) == ("auto", 2, 3)
    assert width(planned(16, "{tensorParallel: 8, pipelineParallel: 2}", minAvailable=6)) == (
        "auto",
        2,
        3,
    )


def test_min_available_equal_to_the_replicas_is_a_rigid_gang() -> None:
    # (Declared elastic, these are refused: test_a_malformed_elastic_declaration...)
    rigid = job_document("train", replicas=8, minAvailable=8)
    assert width(rigid, declared=None) == ("never", 8, 0)
    assert width(job_document("train", replicas=8), declared=None) == ("never", 8, 0)
    # Rounded up to every replica: rigid as well.
    doc = planned(16, "{tensorParallel: 8, pipelineParallel: 4}", minAvailable=13)
    assert width(doc, declared=None) == (
        "auto",
        4,
        0,
    )


def test_a_job_that_never_splits_is_elastic_in_pods_or_in_its_partitions() -> None:
    assert width(job_document("train", replicas=8, minAvailable=3)) == ("never", 1, 3)
    doc = job_document("train", replicas=8, minAvailable=3)
    doc["spec"]["tasks"][0]["partitionPolicy"] = {"totalPartitions": 4, "partitionSize": 2}
    assert width(doc) == ("never", 2, 2)  # whole partitions: 3 pods -> 2 partitions
    request = job_request(
        job_id="j",
        gang=(job := normalize_job(doc, OPTIONS)).gang,
        split=job.split_policy,
        communication=None,
        priority=0,
        queue="q",
    )
    assert (request.splittable, request.unit_pods, request.min_units) == (False, 2, 2)


def test_tasks_min_available_counts_only_when_the_jobs_is_not_below_their_sum() -> None:
    doc = job_document("train", replicas=6, minAvailable=4)
    doc["spec"]["tasks"].insert(0, {**doc["spec"]["tasks"][0], "name": "master", "replicas": 1})
    # Tasks' minAvailable default to their replicas (7 in all) > 4: only the job's counts.
    assert width(doc) == ("never", 1, 4)
    doc["spec"]["tasks"][0]["minAvailable"] = 1
    doc["spec"]["tasks"][1]["minAvailable"] = 3
    assert width(doc) == ("never", 1, 4)  # master + 3 workers: the first 4 ranks meet both
    doc["spec"]["tasks"][1]["minAvailable"] = 3
    doc["spec"]["minAvailable"] = 4
    doc["spec"]["tasks"][0]["replicas"] = 2  # 2 masters first: 4 ranks hold 2 workers only
    doc["spec"]["tasks"][0]["minAvailable"] = 1
    assert width(doc) == ("never", 1, 5)


def test_a_hyperjobs_min_available_counts_child_jobs() -> None:
    doc = example_document("hyperjob-llm-training.yaml")
    assert width(doc, declared=None)[2] == 0  # minAvailable 2 of 2 children: rigid
    doc["spec"]["minAvailable"] = 1
    _, unit, fewest = width(doc)
    assert (unit, fewest) == (16, 1)
    job = normalize_job(doc, OPTIONS)  # (the annotation `width` added)
    request = job_request(
        job_id="h",
        gang=job.gang,
        split=job.split_policy,
        communication=job.communication,
        priority=0,
        queue="llm",
    )
    assert (request.units, request.min_units, request.elastic) == (2, 1, True)


def test_min_data_parallel_in_the_plan() -> None:
    # 16 pods of 8 GPUs, TP 8 x PP 2: DP 8; at least 3 replicas. The plan's minimum is itself
    # the declaration: no annotation needed.
    doc = planned(16, "{tensorParallel: 8, pipelineParallel: 2, minDataParallel: 3}")
    assert width(doc, declared=None) == (
        "auto",
        2,
        3,
    )
    # Both given: the stricter.
    doc = planned(
        16, "{tensorParallel: 8, pipelineParallel: 2, minDataParallel: 3}", minAvailable=10
    )
    assert width(doc) == ("auto", 2, 5)


@pytest.mark.parametrize("value", [0, 9])
def test_min_data_parallel_out_of_range_names_the_field(value: int) -> None:
    doc = planned(16, f"{{tensorParallel: 8, pipelineParallel: 2, minDataParallel: {value}}}")
    with pytest.raises(Invalid) as caught:
        normalize_job(doc, OPTIONS)
    fields = [e.field for e in caught.value.errors]
    assert any(f.endswith("minDataParallel") for f in fields), fields
