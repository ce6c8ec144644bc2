"""How often the interpreter hands its lock from one thread to another, for the long-running
processes (`vglobal server` and its workers, `vglobal scheduler`).

A round's plan runs in a thread of its own while the event loop serves requests and agents.
Each time the loop thread releases the interpreter lock (every poll for I/O does), the
planning thread takes it and keeps it for the whole switch interval before the loop thread
may run again: with CPython's 5 ms, a loop turn costs 5 ms while a plan is being built, and
requests queue behind it (docs/benchmarks.md, "The event loop's long turns, session 23"). A
shorter interval bounds that wait; a thread alone never switches, so it costs nothing when
no plan runs."""

from __future__ import annotations

import sys

SWITCH_INTERVAL_S = 0.001  # CPython's default: 0.005


def tune_thread_switching() -> None:
    sys.setswitchinterval(SWITCH_INTERVAL_S)
