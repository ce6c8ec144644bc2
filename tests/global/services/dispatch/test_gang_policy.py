"""Which action a lost share leads to: the job's Volcano policies, else the defaults."""

from __future__ import annotations

from volcano_global.services.dispatch.supervision import policy_action


def test_the_first_matching_policy_decides() -> None:
    manifest = {
        "spec": {
            "policies": [
                {"event": "PodFailed", "action": "RestartJob"},
                {"events": ["PodEvicted", "Unknown"], "action": "AbortJob"},
            ]
        }
    }
    assert policy_action(manifest, "PodEvicted") == "AbortJob"
    assert policy_action(manifest, "PodFailed") == "RestartJob"


def test_any_event_matches_a_wildcard_policy() -> None:
    assert (
        policy_action(
            {"spec": {"policies": [{"event": "*", "action": "TerminateJob"}]}}, "PodFailed"
        )
        == "TerminateJob"
    )


def test_without_a_policy_an_evicted_share_requeues_and_a_failed_one_aborts() -> None:
    assert policy_action({"spec": {}}, "PodEvicted") == "RestartJob"
    assert policy_action({"spec": {"policies": "junk"}}, "PodFailed") == "AbortJob"
