"""How a job's priorityClassName resolves (jobspec/priority_classes.py, normalize)."""

from __future__ import annotations

import pytest

from tests.factories import job_document
from volcano_global.errors import Invalid
from volcano_global.jobspec import ParseOptions, normalize_job
from volcano_global.jobspec.priority_classes import BUILT_IN, PriorityClass

CLASSES = {
    **BUILT_IN,
    "batch": PriorityClass("batch", 10, "PreemptLowerPriority", global_default=True),
    "polite": PriorityClass("polite", 500, "Never"),
}


def test_a_named_class_gives_its_value_and_preemption_policy() -> None:
    job = normalize_job(
        job_document(priorityClassName="polite"),
        ParseOptions(priority_classes=CLASSES, default_priority_class="batch"),
    )
    assert (job.priority_class_name, job.priority, job.preemption_policy) == (
        "polite",
        500,
        "Never",
    )


def test_a_job_naming_none_gets_the_global_default_or_zero() -> None:
    with_default = ParseOptions(priority_classes=CLASSES, default_priority_class="batch")
    job = normalize_job(job_document(), with_default)
    assert (job.priority_class_name, job.priority) == ("batch", 10)
    job = normalize_job(job_document(), ParseOptions(priority_classes=CLASSES))
    assert (job.priority_class_name, job.priority, job.preemption_policy) == (
        None,
        0,
        "PreemptLowerPriority",
    )


def test_bare_values_still_resolve_and_unknown_names_are_refused() -> None:
    job = normalize_job(
        job_document(priorityClassName="high"), ParseOptions(priority_classes={"high": 7})
    )
    assert (job.priority, job.preemption_policy) == (7, "PreemptLowerPriority")
    with pytest.raises(Invalid) as refused:
        normalize_job(
            job_document(priorityClassName="nope"), ParseOptions(priority_classes=CLASSES)
        )
    assert refused.value.errors[0].field == "spec.priorityClassName"
