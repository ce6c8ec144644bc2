"""Garbage-collector settings for the long-running processes (`vglobal server` and its
workers, `vglobal scheduler`).

Measured with `bench/load_bench.py` (50 submissions/s, 20 x 5,000-node agents streaming): with
CPython's defaults a full collection ran every ~2 s over 300,000-600,000 objects, most of them
the modules, models and routes built at startup, and stopped the event loop for 180-230 ms
each time - that was the latency tail. Freezing what startup built takes it out of every later
scan (`gc.freeze`); a larger first-generation threshold lets a request's short-lived objects die
by reference count before a collection promotes them to the older generations."""

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
