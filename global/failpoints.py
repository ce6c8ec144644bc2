"""Failpoints: named places in the Global where fault tests make the process die by SIGKILL, at
the worst moment for the data (in the spirit of etcd's gofail). Off unless the environment
variable `VGLOBAL_FAILPOINTS` arms some, e.g. `round-commit=3,dispatch-sent=1`: the third time
a scheduling round is about to commit, or the first time an assignment has been handed to an
agent's stream, whichever comes first, the process kills itself. Unarmed, a failpoint costs one
dictionary look-up.

Points: `round-commit` (a round's placements written, not committed), `dispatch-sent` (an
assignment handed to the stream, its acknowledgement not yet stored), `report-commit` (an
agent's status report applied, not committed), `preempt-evicted` (a round's evictions
committed, their preemptors not started), `preempt-start` (a preemptor's start written, not
committed)."""

from __future__ import annotations

import os
import signal
import sys

POINTS = frozenset(
    {"round-commit", "dispatch-sent", "report-commit", "preempt-evicted", "preempt-start"}
)


def _parse(spec: str) -> dict[str, int]:
    armed: dict[str, int] = {}
    for item in filter(None, (part.strip() for part in spec.split(","))):
        name, _, count = item.partition("=")
        if name not in POINTS or not count.isdigit() or int(count) < 1:
            raise ValueError(
                f"VGLOBAL_FAILPOINTS: {item!r} is not POINT=N with N >= 1 and POINT one of "
                f"{', '.join(sorted(POINTS))}"
            )
        armed[name] = int(count)
    return armed


_armed = _parse(os.environ.get("VGLOBAL_FAILPOINTS", ""))


def hit(name: str) -> None:
    """Count a pass through failpoint `name`; at its armed count, die at once (SIGKILL: no
    cleanup, no commit, no goodbye to the agents)."""
    remaining = _armed.get(name)
    if remaining is None:
        return
    if remaining > 1:
        _armed[name] = remaining - 1
        return
    sys.stderr.write(f"FAILPOINT {name}: killing the process\n")
    sys.stderr.flush()
    os.kill(os.getpid(), signal.SIGKILL)
