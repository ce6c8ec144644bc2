"""Which action a lost share leads to: the job's Volcano policies as read at submission, else
the defaults."""

from __future__ import annotations

from typing import Any

from tests.factories import job_document
from volcano_global.jobspec import ParseOptions, normalize_job
from volcano_global.jobspec.lifecycle import lifecycle_policies
from volcano_global.services.dispatch.supervision import policy_action


def action(policies: Any, event: str) -> str:
    """The action for `event` of a job submitted with these `spec.policies`, as supervision
    reads them from the stored job."""
    job = normalize_job(job_document(policies=policies), ParseOptions())
    return policy_action(job.lifecycle.policies, event)


def test_the_first_matching_policy_decides() -> None:
    """Volcano refuses an event in two policies, so the order decides only for a policy of
    several events (and for a job stored before events were checked, read as it was)."""
    policies = [
        {"event": "PodFailed", "action": "RestartJob"},
        {"events": ["PodEvicted", "Unknown"], "action": "AbortJob"},
        {"event": "TaskFailed", "action": "CompleteJob"},
    ]
    assert action(policies, "PodEvicted") == "AbortJob"
    assert action(policies, "PodFailed") == "RestartJob"
    stored = lifecycle_policies([*policies, {"event": "PodEvicted", "action": "CompleteJob"}])
    assert policy_action(stored, "PodEvicted") == "AbortJob"


def test_any_event_matches_a_wildcard_policy() -> None:
    assert action([{"event": "*", "action": "TerminateJob"}], "PodFailed") == "TerminateJob"
    assert action([{"events": ["*"], "action": "CompleteJob"}], "PodEvicted") == "CompleteJob"


def test_without_a_policy_an_evicted_share_requeues_and_a_failed_one_aborts() -> None:
    assert action(None, "PodEvicted") == "RestartJob"
    assert policy_action(lifecycle_policies("junk"), "PodFailed") == "AbortJob"
    assert action([{"exitCode": 3, "action": "RestartJob"}], "PodFailed") == "AbortJob"
