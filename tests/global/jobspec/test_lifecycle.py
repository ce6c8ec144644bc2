"""The lifecycle the parser reads once at submission: running estimate, Volcano policies,
maxRetry and the gang start timeout (what dispatch and gang supervision act on)."""

from __future__ import annotations

import copy
import sys
from typing import Any

import pytest
import yaml

from tests.factories import example, job_document
from volcano_global.errors import Invalid
from volcano_global.jobspec import Lifecycle, ParseOptions, normalize_job
from volcano_global.jobspec.extensions import GANG_START_TIMEOUT
from volcano_global.jobspec.lifecycle import (
    lifecycle_of_document,
    lifecycle_policies,
    running_estimate_seconds,
)
from volcano_global.jobspec.model import LifecyclePolicy


def lifecycle(doc: dict[str, Any]) -> Lifecycle:
    return normalize_job(doc, ParseOptions()).lifecycle


def hyperjob(*estimates: object) -> dict[str, Any]:
    """The shipped HyperJob example with one replicated job per estimate (None: no estimate)."""
    doc = yaml.safe_load(example("hyperjob-llm-training.yaml"))
    (entry,) = doc["spec"]["replicatedJobs"]
    doc["spec"]["replicatedJobs"] = []
    doc["spec"]["minAvailable"] = 1
    for index, estimate in enumerate(estimates):
        child = copy.deepcopy(entry) | {"name": f"part-{index}", "replicas": 1}
        if estimate is not None:
            child["templateSpec"]["runningEstimate"] = estimate
        doc["spec"]["replicatedJobs"].append(child)
    return doc


def test_a_job_without_lifecycle_fields_gets_the_defaults() -> None:
    assert lifecycle(job_document()) == Lifecycle(
        running_estimate_seconds=60.0, policies=[], max_retry=3, gang_start_timeout_seconds=None
    )


@pytest.mark.parametrize(
    ("estimate", "seconds"),
    [
        ("1h30m", 5400.0),
        ("1.5h", 5400.0),
        ("90s", 90.0),
        ("2h0m30s", 7230.0),
        ("500ms", 0.5),
        ("1m500ms", 60.5),
        ("0s", 60.0),  # no time at all: the default
        ("0", 60.0),
        ("1h.5m", 3630.0),  # Go reads "1h" then ".5m"
        ("250us", 60.0),  # a quarter of a millisecond: more than no time, read as stored
    ],
)
def test_the_running_estimate_is_a_go_duration_in_seconds(estimate: object, seconds: float) -> None:
    read = lifecycle(job_document(runningEstimate=estimate)).running_estimate_seconds
    assert read == pytest.approx(seconds if estimate != "250us" else 0.00025)


@pytest.mark.parametrize("estimate", ["soon", "1d", "90", "2h30", "10 minutes", "-5m", "h", 600])
def test_a_running_estimate_that_is_not_a_go_duration_is_refused_naming_it(
    estimate: object,
) -> None:
    # metav1.Duration refuses these (Volcano's webhook cannot decode the job); read as no
    # estimate ("1d", "90") or as another one ("2h30": 2 h), they would order the queue wrong.
    with pytest.raises(Invalid) as refused:
        lifecycle(job_document(runningEstimate=estimate))
    (error,) = refused.value.errors
    assert error.field == "spec.runningEstimate"
    said = "must be in [0, " if estimate == "-5m" else "a duration such as 90m, 1h30m or 500ms"
    assert said in error.message


def test_a_stored_estimate_that_is_not_a_duration_reads_as_none() -> None:
    # A document stored before submission refused these still reads: as no estimate.
    assert running_estimate_seconds("soon") == 60.0
    assert running_estimate_seconds("2h30") == 60.0
    assert running_estimate_seconds(600) == 60.0


def test_an_estimate_too_long_for_a_number_reads_as_the_longest_there_is() -> None:
    # (the parser refuses it at the door: tests/global/api/test_jobs.py)
    assert running_estimate_seconds("9" * 400 + "h") == sys.float_info.max


def test_a_hyperjob_runs_as_long_as_its_first_child_with_an_estimate() -> None:
    assert lifecycle(hyperjob(None, "20m", "3h")).running_estimate_seconds == 1200.0
    assert lifecycle(hyperjob(None, None)).running_estimate_seconds == 60.0


def test_a_hyperjob_has_volcanos_default_policies_and_retries() -> None:
    life = lifecycle(hyperjob("1h"))
    assert (life.policies, life.max_retry) == ([], 3)


def test_policies_keep_their_order_with_event_and_events_together() -> None:
    policies = [
        {"event": "PodFailed", "action": "RestartJob"},
        {"events": ["PodEvicted", "Unknown"], "event": "TaskFailed", "action": "AbortJob"},
        {"exitCode": 3, "action": "RestartJob"},  # no event: never matched on a lost share
        {"event": "JobUpdated", "action": "TerminateJob"},
    ]
    life = lifecycle(job_document(policies=policies))
    assert [(p.events, p.action) for p in life.policies] == [
        (["PodFailed"], "RestartJob"),
        (["PodEvicted", "Unknown", "TaskFailed"], "AbortJob"),
        (["JobUpdated"], "TerminateJob"),
    ]
    assert lifecycle(job_document(policies=[{"event": "*", "action": "AbortJob"}])).policies == [
        LifecyclePolicy(events=["*"], action="AbortJob")
    ]


@pytest.mark.parametrize(
    ("policies", "field"),
    [
        (["junk"], "spec.policies[0]"),
        ([{"event": "PodEvicted"}], "spec.policies[0].action"),  # no action
        ([{"event": "PodEvicted", "action": 7}], "spec.policies[0].action"),
        (
            [{"events": "PodFailed", "event": "PodEvicted", "action": "CompleteJob"}],
            "spec.policies[0].events",
        ),
        ("junk", "spec.policies"),
    ],
)
def test_policies_volcano_refuses_are_refused_naming_the_field(policies: Any, field: str) -> None:
    """Before, such entries were silently left out of what the Global acts on."""
    with pytest.raises(Invalid) as caught:
        lifecycle(job_document(policies=policies))
    assert field in [e.field for e in caught.value.errors], caught.value.errors


def test_a_stored_document_with_policies_never_matched_reads_as_before() -> None:
    """A job an older replica stored (before policies were checked) is read tolerantly."""
    policies = [
        "junk",
        {"exitCode": 3, "action": "RestartJob"},
        {"event": "PodEvicted"},
        {"events": "PodFailed", "event": "PodEvicted", "action": "CompleteJob"},
    ]
    assert [(p.events, p.action) for p in lifecycle_policies(policies)] == [
        (["PodEvicted"], "CompleteJob")
    ]


def test_max_retry_is_the_jobs_own() -> None:
    assert lifecycle(job_document(maxRetry=0)).max_retry == 0
    assert lifecycle(job_document(maxRetry=7)).max_retry == 7
    with pytest.raises(Invalid) as caught:
        lifecycle(job_document(maxRetry=-1))
    assert [(e.field, e.message) for e in caught.value.errors] == [
        ("spec.maxRetry", "must be >= 0")
    ]


def test_the_gang_start_timeout_comes_from_its_annotation() -> None:
    doc = job_document()
    doc["metadata"]["annotations"] = {GANG_START_TIMEOUT: "300"}
    assert lifecycle(doc).gang_start_timeout_seconds == 300
    doc["metadata"]["annotations"] = {GANG_START_TIMEOUT: "5m"}
    with pytest.raises(Invalid) as caught:
        lifecycle(doc)
    assert [e.message for e in caught.value.errors] == ["must be an integer, got '5m'"]


@pytest.mark.parametrize(
    "doc",
    [
        job_document("plain", replicas=1),
        job_document(
            "full",
            replicas=1,
            runningEstimate="1h30m",
            maxRetry=0,
            policies=[{"events": ["PodEvicted", "PodFailed"], "action": "AbortJob"}],
        ),
        hyperjob(None, "2h"),
    ],
    ids=["plain", "full", "hyperjob"],
)
def test_a_stored_document_read_again_gives_the_lifecycle_the_parser_gave(
    doc: dict[str, Any],
) -> None:
    """What a job stored by a replica of before the lifecycle columns falls back to."""
    if doc["kind"] == "Job":
        doc["metadata"]["annotations"] = {GANG_START_TIMEOUT: "900"}
    assert lifecycle_of_document(doc) == lifecycle(doc)
