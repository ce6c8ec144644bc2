"""A queue's time-sharing by attained service (`solver.timesharing`), as its Volcano Queue
annotations say it (off by default; docs/placement.md):

    global.volcano.sh/time-sharing: "true"
    global.volcano.sh/time-sharing-quantum: "1h"   # a Go duration; optional, 1h by default

A queue document with a value that cannot be read is refused naming the annotation
(`check_time_sharing`, called where the Queue is read); the simulator's scenario files give the
same two settings as `timeSharing` and `timeSharingQuantum`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from volcano_global.jobspec.durations import go_duration_seconds
from volcano_global.jobspec.fields import Checker, child

TIME_SHARING = "global.volcano.sh/time-sharing"
QUANTUM = "global.volcano.sh/time-sharing-quantum"
DEFAULT_QUANTUM_S = 3600.0
MIN_QUANTUM_S = 60.0  # shorter, a gang would spend its quantum restoring its checkpoint


def quantum_seconds(text: str) -> float:
    """A Go duration ("1h", "90m", "1h30m") in seconds, at least `MIN_QUANTUM_S`; raises
    ValueError saying what is wrong."""
    seconds = go_duration_seconds(text.strip())
    if seconds < MIN_QUANTUM_S:
        raise ValueError(f"{text!r} is shorter than the minimum quantum, {MIN_QUANTUM_S:g} s")
    return seconds


def check_time_sharing(annotations: Mapping[str, Any], check: Checker) -> None:
    """Refuse a queue document whose time-sharing annotations cannot be read (Invalid)."""
    path = "metadata.annotations"
    flag = annotations.get(TIME_SHARING)
    if flag is not None and str(flag).lower() not in ("true", "false"):
        check.fail(child(path, TIME_SHARING), 'must be "true" or "false"')
    quantum = annotations.get(QUANTUM)
    if quantum is None:
        return
    try:
        quantum_seconds(str(quantum))
    except ValueError as exc:
        check.fail(child(path, QUANTUM), str(exc))


def time_sharing_quantum(annotations: Mapping[str, Any]) -> float | None:
    """The quantum in seconds of a queue that time-shares; None for one that does not (a
    stored queue's annotations were checked when it was applied)."""
    if str(annotations.get(TIME_SHARING, "false")).lower() != "true":
        return None
    quantum = annotations.get(QUANTUM)
    return DEFAULT_QUANTUM_S if quantum is None else quantum_seconds(str(quantum))
