"""The shares a member cluster holds, for the Global's reconciliation: its Volcano Jobs
labelled with a placement (as the watch keeps them), grouped by placement, each with the phase
its jobs' status gives; plus the assignments still being applied (their jobs may not exist yet,
e.g. while their data is staged: the Global must not take them for lost). Placements being
cancelled are left out."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Mapping
from typing import Any

from core_agent.kubernetes.shares import share_phase
from core_agent.kubernetes.watcher import Store
from volcano_global.jobspec.members import JOB_UID_LABEL, LABEL_PREFIX, PLACEMENT_LABEL
from volcano_global.rpc.shares import HeldShare, ShareAssignment, SharePhase

GENERATION_LABEL = LABEL_PREFIX + "generation"


def held_shares(
    store: Store, *, applying: Mapping[str, ShareAssignment], cancelled: Collection[str]
) -> list[HeldShare]:
    by_placement: defaultdict[str, list[dict[str, Any]]] = defaultdict(list)
    for obj in store.values():
        pid = _labels(obj).get(PLACEMENT_LABEL)
        if pid and pid not in cancelled:
            by_placement[pid].append(obj)
    held = []
    for pid, jobs in sorted(by_placement.items()):
        labels = _labels(jobs[0])
        phase, _ = share_phase(jobs)
        generation = labels.get(GENERATION_LABEL, "0")
        held.append(
            HeldShare(
                placement_id=pid,
                generation=int(generation) if generation.isdigit() else 0,
                job_uid=labels.get(JOB_UID_LABEL, ""),
                phase=phase,
                applying=pid in applying,
            )
        )
    for pid, assignment in sorted(applying.items()):
        if pid not in by_placement and pid not in cancelled:
            held.append(
                HeldShare(
                    placement_id=pid,
                    generation=assignment.generation,
                    job_uid=assignment.job_uid,
                    phase=SharePhase.STAGING if assignment.staging else SharePhase.ACCEPTED,
                    applying=True,
                )
            )
    return held


def _labels(obj: dict[str, Any]) -> dict[str, str]:
    return obj["metadata"].get("labels") or {}
