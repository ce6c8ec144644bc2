"""A job's lifecycle fields read once, at submission, from a document already checked: how long
it is expected to run, what a lost share leads to and how often it may be requeued. Dispatch
and gang supervision read the stored result; the document is read again only for a job an
older replica stored without it (`lifecycle_of_document`)."""

from __future__ import annotations

import math
import sys
from typing import Any

from volcano_global.jobspec.durations import go_duration_seconds
from volcano_global.jobspec.extensions import GANG_START_TIMEOUT
from volcano_global.jobspec.fields import INT32_MAX
from volcano_global.jobspec.model import Lifecycle, LifecyclePolicy

DEFAULT_RUNNING_ESTIMATE_S = 60.0  # without an estimate (or one that reads as no time)
DEFAULT_MAX_RETRY = 3  # Volcano's default spec.maxRetry


def read_lifecycle(
    kind: str, spec: dict[str, Any], *, max_retry: int | None, start_timeout_s: int | None
) -> Lifecycle:
    """A Job's own `runningEstimate`, `policies` and `maxRetry` (checked by `read_job_spec`).
    A HyperJob has neither policies nor maxRetry (Volcano's defaults apply); its estimate is
    the first of its children's."""
    # A timeout longer than a column holds (68 years) is as good as never.
    timeout = None if start_timeout_s is None else min(start_timeout_s, INT32_MAX)
    if kind == "Job":
        estimate = spec.get("runningEstimate")
        policies = lifecycle_policies(spec.get("policies"))
    else:
        templates = [entry["templateSpec"] for entry in spec["replicatedJobs"]]
        estimate = next((t["runningEstimate"] for t in templates if t.get("runningEstimate")), None)
        policies = []
    return Lifecycle(
        running_estimate_seconds=running_estimate_seconds(estimate),
        policies=policies,
        max_retry=DEFAULT_MAX_RETRY if max_retry is None else max_retry,
        gang_start_timeout_seconds=timeout,
    )


def lifecycle_of_document(document: dict[str, Any]) -> Lifecycle:
    """The lifecycle of a document stored after it was checked (by `normalize_job`), read
    again: for a job stored by a replica of before the lifecycle was kept with the job."""
    spec = document.get("spec") or {}
    annotations = (document.get("metadata") or {}).get("annotations") or {}
    timeout = annotations.get(GANG_START_TIMEOUT)
    retry = spec.get("maxRetry")
    kind = "HyperJob" if document.get("kind") == "HyperJob" else "Job"
    return read_lifecycle(
        kind,
        spec,
        max_retry=retry if kind == "Job" and isinstance(retry, int) else None,
        start_timeout_s=int(timeout) if timeout is not None else None,
    )


def running_estimate_seconds(value: object) -> float:
    """Volcano's `runningEstimate`, a Go duration such as "1h30m" or "500ms"
    (`durations.go_duration_seconds`), in seconds. Anything that is not a duration of more than
    no time is the default (submission refuses it: this reads documents stored before it did)."""
    if not isinstance(value, str):
        return DEFAULT_RUNNING_ESTIMATE_S
    try:
        total = go_duration_seconds(value)
    except ValueError:
        return DEFAULT_RUNNING_ESTIMATE_S
    if not math.isfinite(total):  # too many digits: stored as the longest time a column holds
        return sys.float_info.max
    return total if total > 0 else DEFAULT_RUNNING_ESTIMATE_S


def given_estimate(seconds: float | None) -> float | None:
    """A stored estimate as the scheduler reads it: the default (what a job without one gets)
    is no estimate at all - which a user's own "1m" cannot be told apart from."""
    if seconds is None or seconds == DEFAULT_RUNNING_ESTIMATE_S:
        return None
    return seconds


def lifecycle_policies(value: object) -> list[LifecyclePolicy]:
    """The job-level `policies` supervision can match: an entry that is not a mapping, has no
    string action or names no event is skipped, as it never matched."""
    if not isinstance(value, list):
        return []
    policies = []
    for entry in value:
        if not isinstance(entry, dict) or not isinstance(entry.get("action"), str):
            continue
        listed = entry.get("events")
        events = [e for e in listed if isinstance(e, str)] if isinstance(listed, list) else []
        if isinstance(entry.get("event"), str):
            events.append(entry["event"])
        if events:
            policies.append(LifecyclePolicy(events=events, action=entry["action"]))
    return policies
