"""What a Kubernetes member cluster says it holds (`core_agent/kubernetes/held.py`): its
labelled Volcano Jobs grouped by placement, with what is still being applied, without what is
being cancelled."""

from __future__ import annotations

from typing import Any

from core_agent.kubernetes.held import held_shares
from tests.factories import share_assignment
from volcano_global.rpc.shares import HeldShare, SharePhase


def vcjob(name: str, placement: str, phase: str, *, generation: str = "7") -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "namespace": "ml",
            "labels": {
                "global.volcano.sh/placement": placement,
                "global.volcano.sh/job-uid": f"job-of-{placement}",
                "global.volcano.sh/generation": generation,
            },
            "annotations": {"global.volcano.sh/members": "1"},
        },
        "status": {"state": {"phase": phase}},
    }


def test_a_cluster_lists_its_volcano_jobs_by_placement_and_what_it_is_applying() -> None:
    store = {
        ("ml", "a"): vcjob("a", "p-running", "Running"),
        ("ml", "b"): vcjob("b", "p-done", "Completed", generation="x"),
        ("ml", "c"): vcjob("c", "p-cancelling", "Running"),
        ("ml", "d"): vcjob("d", "p-pending", "Pending"),
    }
    creating = share_assignment(placement_id="p-creating", job_uid="u", generation=9)
    again = share_assignment(placement_id="p-pending", job_uid="job-of-p-pending")

    held = held_shares(
        store,
        applying={"p-creating": creating, "p-pending": again},
        cancelled={"p-cancelling"},
    )

    assert held == [
        HeldShare(placement_id="p-done", job_uid="job-of-p-done", phase=SharePhase.SUCCEEDED),
        HeldShare(
            placement_id="p-pending",
            job_uid="job-of-p-pending",
            phase=SharePhase.ACCEPTED,
            generation=7,
            applying=True,
        ),
        HeldShare(
            placement_id="p-running",
            job_uid="job-of-p-running",
            phase=SharePhase.RUNNING,
            generation=7,
        ),
        HeldShare(
            placement_id="p-creating",
            job_uid="u",
            phase=SharePhase.ACCEPTED,
            generation=9,
            applying=True,
        ),
    ]
