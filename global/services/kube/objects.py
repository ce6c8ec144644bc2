"""A stored job as the Kubernetes object kubectl reads: the document as submitted, the
server's metadata (uid, resourceVersion, creationTimestamp) and a Volcano-style `.status`
from the Global's job state, with the clusters it runs in."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from volcano_global.db.models import JobState
from volcano_global.errors import Invalid

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

# The Global's job state as the phase of a Volcano Job (`status.state.phase`): placed and
# dispatched jobs are admitted but not yet running, Volcano's Inqueue; a cancelled job is
# Volcano's Aborted (stopped by a user, not by a failure).
PHASES = {
    JobState.PENDING: "Pending",
    JobState.PLACED: "Inqueue",
    JobState.DISPATCHED: "Inqueue",
    JobState.RUNNING: "Running",
    JobState.SUCCEEDED: "Completed",
    JobState.FAILED: "Failed",
    JobState.CANCELLED: "Aborted",
}


def resource_version(moment: datetime) -> str:
    """A resourceVersion: the row's last change in microseconds since the epoch. Every change
    of a job stamps `updated_at` (the column's onupdate), so it grows with every change."""
    return str((moment - _EPOCH) // timedelta(microseconds=1))


def parse_resource_version(text: str, parameter: str = "resourceVersion") -> int:
    if not text.isdigit() or len(text) > 19:
        raise Invalid.one(parameter, f"{text!r} is not a resourceVersion this server issued")
    return int(text)


def timestamp(moment: datetime | None) -> str | None:
    """RFC 3339 in UTC to the second, as Kubernetes writes metav1.Time."""
    if moment is None:
        return None
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _counts(job: Mapping[str, Any]) -> dict[str, int]:
    """Pods by phase as far as the Global knows them: it tracks the job, not each pod, so all
    of the job's pods are in the phase of the job."""
    state, pods = job["state"], job["total_pods"]
    key = {
        JobState.RUNNING: "running",
        JobState.SUCCEEDED: "succeeded",
        JobState.FAILED: "failed",
        JobState.CANCELLED: "terminating",
    }.get(state, "pending")
    counts = {"pending": 0, "running": 0, "succeeded": 0, "failed": 0, "terminating": 0}
    counts[key] = pods if state is not JobState.CANCELLED else 0
    return counts


def job_status(job: Mapping[str, Any], clusters: list[str]) -> dict[str, Any]:
    state: JobState = job["state"]
    changed = (
        job["finished_at"]
        or job["started_at"]
        or job["dispatched_at"]
        or job["placed_at"]
        or job["submitted_at"]
    )
    status: dict[str, Any] = {
        "state": {
            "phase": PHASES[state],
            "reason": state.value,
            "message": job["state_message"] or (job["pending_reason"] or ""),
            "lastTransitionTime": timestamp(changed),
        },
        "minAvailable": job["min_available"],
        **_counts(job),
        "retryCount": job["requeues"],
        # What Volcano has no word for: the Global's own state and where the job runs.
        "globalState": state.value,
        "queue": job["queue_name"],
        "clusters": clusters,
    }
    if state is JobState.PENDING and job["pending_reason"]:
        status["pendingReason"] = job["pending_reason"]
    status |= _run_times(job)
    return status


def _run_times(job: Mapping[str, Any]) -> dict[str, Any]:
    """When the run started and ended (as a Kubernetes Job's `startTime`, `completionTime`)
    and, once ended, Volcano's `runningDuration`: how long a finished job ran stays shown."""
    started, finished = job["started_at"], job["finished_at"]
    if started is None:
        return {}
    times: dict[str, Any] = {"startTime": timestamp(started)}
    if finished is not None:
        times["completionTime"] = timestamp(finished)
        times["runningDuration"] = go_duration((finished - started).total_seconds())
    return times


def go_duration(total_seconds: float) -> str:
    """Seconds as a Go duration string (metav1.Duration): `1h2m3s`, `45s`, `0s`."""
    seconds = max(0, int(total_seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    text = (f"{hours}h" if hours else "") + (f"{minutes}m" if hours or minutes else "")
    return text + f"{seconds}s"


def job_object(job: Mapping[str, Any], clusters: list[str]) -> dict[str, Any]:
    """The object for a row of the jobs table (every column and `queue_name`)."""
    document = copy.deepcopy(job["manifest"])
    metadata = document.setdefault("metadata", {})
    metadata.update(
        name=job["name"],
        namespace=job["namespace"],
        uid=str(job["id"]),
        resourceVersion=resource_version(job["updated_at"]),
        generation=1,
        creationTimestamp=timestamp(job["submitted_at"]),
    )
    if job["deleted_at"] is not None:
        metadata["deletionTimestamp"] = timestamp(job["deleted_at"])
    document["status"] = job_status(job, clusters)
    return document


def is_created(job: Mapping[str, Any]) -> bool:
    """The row as it was inserted, not changed since (the writer stamps both at once)."""
    return bool(job["updated_at"] == job["submitted_at"])
