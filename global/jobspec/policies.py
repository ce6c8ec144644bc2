"""Volcano lifecycle `policies` (a Job's and each task's) checked as Volcano checks them.

Two layers refuse a policy in Volcano (ed72c7c): the API server, by the Job CRD's schema
(`event` one of the enum, `events` a *list* of them, `exitCode` an int32, `timeout` a Go
duration), and the validating webhook (`pkg/webhooks/admission/jobs/validate/util.go`):

- a policy names events (`event` and/or `events`) or an `exitCode`, never both, never neither;
- only the events a user may give (not PodRunning, OutOfSync, CommandIssued);
- with events, only the actions a user may give (not SyncJob, Enqueue, SyncQueue, OpenQueue,
  CloseQueue); an exitCode policy's action is not checked by the webhook, so not here either;
- an event appears in one policy only (within one policy a repeat is harmless: Volcano
  removes it), and `*` stands alone;
- an exitCode is not 0 and appears once.

Before this, an `events: PodFailed` (a string) was silently left out of the policies the Global
acts on, and duplicate events were accepted.
"""

from __future__ import annotations

from typing import Any

from volcano_global.jobspec.durations import GO_DURATION
from volcano_global.jobspec.fields import INT32_MAX, Checker, child

ALL_EVENTS = (
    "*",
    "PodPending",
    "PodRunning",
    "PodFailed",
    "PodEvicted",
    "Unknown",
    "TaskCompleted",
    "OutOfSync",
    "CommandIssued",
    "JobUpdated",
    "TaskFailed",
)
INTERNAL_EVENTS = frozenset({"PodRunning", "OutOfSync", "CommandIssued"})
USER_EVENTS = tuple(e for e in ALL_EVENTS if e not in INTERNAL_EVENTS)
USER_ACTIONS = (
    "AbortJob",
    "RestartJob",
    "RestartTask",
    "RestartPod",
    "RestartPartition",
    "TerminateJob",
    "CompleteJob",
    "ResumeJob",
)
POLICY_FIELDS = frozenset({"event", "events", "action", "exitCode", "timeout"})


def check_policies(owner: dict[str, Any], path: str, check: Checker) -> None:
    """Check `owner["policies"]` (a JobSpec or a TaskSpec) and report each bad field."""
    entries = check.sequence(owner, "policies", path)
    if not entries:
        return
    ppath = child(path, "policies")
    seen_events: dict[str, str] = {}  # event -> the field that first named it
    seen_codes: dict[int, str] = {}
    for index, entry in enumerate(entries):
        here = child(ppath, index)
        if not isinstance(entry, dict):
            check.fail(here, "must be a mapping")
            continue
        check.unknown_fields(entry, POLICY_FIELDS, here)
        events = _events(entry, here, check)
        code = check.integer(entry, "exitCode", here, minimum=-INT32_MAX - 1)
        action = check.string(entry, "action", here)
        timeout = entry.get("timeout")
        if timeout is not None and (
            not isinstance(timeout, str) or not GO_DURATION.fullmatch(timeout)
        ):
            check.fail(child(here, "timeout"), "must be a duration such as 10m or 1h30m")
        has_events = bool(events) or entry.get("event") or entry.get("events")
        if has_events and "exitCode" in entry and entry["exitCode"] is not None:
            check.fail(here, "must not specify event and exitCode simultaneously")
            continue
        if not has_events and entry.get("exitCode") is None:
            check.fail(here, "either event (or events) or exitCode must be specified")
            continue
        if events:
            if action not in USER_ACTIONS:
                check.fail(
                    child(here, "action"),
                    f"invalid policy action {action!r}; "
                    f"valid actions are {', '.join(USER_ACTIONS)}",
                )
            for event in dict.fromkeys(events):  # a repeat inside one policy is removed
                where = _event_field(entry, here, event)
                if event in seen_events:
                    check.fail(
                        where,
                        f"duplicate event {event!r} across policies (also {seen_events[event]})",
                    )
                else:
                    seen_events[event] = where
        elif code is not None:
            if code == 0:
                check.fail(child(here, "exitCode"), "0 is not a valid error code")
            elif code in seen_codes:
                check.fail(
                    child(here, "exitCode"),
                    f"duplicate exitCode {code} (also in {seen_codes[code]})",
                )
            else:
                seen_codes[code] = here
    if "*" in seen_events and len(seen_events) > 1:
        check.fail(seen_events["*"], "'*' (any event) must be the only event any policy names")


def _events(entry: dict[str, Any], path: str, check: Checker) -> list[str]:
    """The policy's events, `event` and `events` together, each checked against the CRD's
    enum and the webhook's list of events a user may give."""
    events: list[str] = []
    listed = entry.get("events")
    if listed is not None:
        if not isinstance(listed, list):
            check.fail(
                child(path, "events"),
                f"must be a list of events, e.g. [{listed}]"
                if isinstance(listed, str)
                else "must be a list of events",
            )
        else:
            for i, event in enumerate(listed):
                if _event_ok(event, child(child(path, "events"), i), check):
                    events.append(event)
    single = entry.get("event")
    if single is not None and _event_ok(single, child(path, "event"), check):
        events.append(single)
    return events


def _event_ok(event: Any, path: str, check: Checker) -> bool:
    if not isinstance(event, str) or event not in ALL_EVENTS:
        check.fail(path, f"unknown event {event!r}; valid events are {', '.join(USER_EVENTS)}")
        return False
    if event in INTERNAL_EVENTS:
        check.fail(
            path, f"invalid policy event {event!r}; valid events are {', '.join(USER_EVENTS)}"
        )
        return False
    return True


def _event_field(entry: dict[str, Any], path: str, event: str) -> str:
    listed = entry.get("events")
    if isinstance(listed, list) and event in listed:
        return child(child(path, "events"), listed.index(event))
    return child(path, "event")
