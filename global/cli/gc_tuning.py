"""Garbage-collector settings for the long-running processes (`vglobal server` and its
workers, `vglobal scheduler`).

With CPython's defaults, full collections scan the modules, models and routes built at
startup again and again and stop the event loop while they do (docs/benchmarks.md has the
figures). Freezing what startup built takes it out of every later scan (`gc.freeze`); a larger
first-generation threshold lets a request's short-lived objects die by reference count before a
collection promotes them to the older generations."""

from __future__ import annotations

import gc

FIRST_GENERATION_THRESHOLD = 10_000  # CPython's default: 700 allocations
OLDER_GENERATION_THRESHOLD = 10  # collections of the younger generation between two (default)


def tune_gc() -> None:
    """Call once startup has built the long-lived objects (after the app is created)."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(
        FIRST_GENERATION_THRESHOLD, OLDER_GENERATION_THRESHOLD, OLDER_GENERATION_THRESHOLD
    )
