"""Go durations, as `metav1.Duration` reads them (Volcano's `runningEstimate`, a policy's
`timeout`, the time-sharing quantum): a sign, then numbers each with a unit (ns, us, ms, s,
m, h), e.g. "1h30m", "90s", "1.5h", "500ms"; "0" alone is no time. "1d", "90" or "2h30" are
not durations: Kubernetes refuses such a document, and so does the Global."""

from __future__ import annotations

import math
import re

GO_DURATION = re.compile(r"[-+]?(0|((\d+(\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h))+)")
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")
_SECONDS = {
    "h": 3600.0,
    "m": 60.0,
    "s": 1.0,
    "ms": 1e-3,
    "us": 1e-6,
    "µs": 1e-6,
    "μs": 1e-6,
    "ns": 1e-9,
}
EXAMPLES = "a duration such as 90m, 1h30m or 500ms (units h, m, s, ms, us, ns)"


def go_duration_seconds(text: str) -> float:
    """The duration in seconds (negative if signed so; infinite if too long to hold); raises
    ValueError saying what a duration looks like when `text` is not one."""
    if not GO_DURATION.fullmatch(text):
        raise ValueError(f"{text!r} is not {EXAMPLES}")
    total = sum(float(n) * _SECONDS[unit] for n, unit in _PART.findall(text))
    if not math.isfinite(total):
        return math.inf
    return -total if text.startswith("-") else total
