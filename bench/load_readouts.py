"""What the database says after a bench/load_bench.py run: whether the measured jobs have
finished (the drain), and when the jobs reached each lifecycle stage."""

from __future__ import annotations

import asyncio
import math
import time
from datetime import UTC, datetime

from harness import Server
from load_requests import percentile
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

STAGES = ("submitted", "placed", "dispatched", "started", "finished")


async def lifecycle_stages(
    database_url: str, window: tuple[datetime, datetime]
) -> dict[str, float]:
    """Read from the database after a 2 s grace: per lifecycle stage, how many jobs (the
    warm-up's too) reached it during the measured `window` a second (the achieved rate), and
    how long the measured jobs took from submission to it (p50/p99; those not there yet are
    counted as missing, not as slow)."""
    await asyncio.sleep(2.0)
    engine = create_async_engine(database_url)
    columns = ", ".join(f"{stage}_at" for stage in STAGES)
    try:
        async with engine.connect() as db:
            rows = (await db.execute(text(f"SELECT name, {columns} FROM jobs"))).all()
    finally:
        await engine.dispose()
    begin, end = window
    seconds = (end - begin).total_seconds()
    measured = [r for r in rows if r.name.startswith("load-") and int(r.name[5:]) < 10**6]
    result: dict[str, float] = {"jobs": len(measured)}
    for index, stage in enumerate(STAGES, start=1):
        reached = [r[index] for r in rows if r[index] is not None]
        result[f"{stage}_per_s"] = sum(begin <= _utc(t) < end for t in reached) / seconds
        if index > 1:
            delays = [(r[index] - r[1]).total_seconds() for r in measured if r[index]]
            result[stage] = len(delays)
            result[f"{stage}_p50_s"] = percentile(delays, 0.5)
            result[f"{stage}_p99_s"] = percentile(delays, 0.99)
    return result


def _utc(moment: datetime) -> datetime:
    """SQLite hands back naive UTC datetimes, Postgres aware ones."""
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


async def drained(database_url: str, within: float) -> int:
    """Wait until every measured job has finished, at most `within` seconds; how many had
    not."""
    engine = create_async_engine(database_url)
    deadline = time.monotonic() + within
    unfinished = -1
    try:
        while unfinished and time.monotonic() < deadline:
            await asyncio.sleep(0.5)
            async with engine.connect() as db:
                query = text(
                    "SELECT count(*) FROM jobs WHERE finished_at IS NULL AND name LIKE 'load-0%'"
                )
                unfinished = int((await db.execute(query)).scalar_one())
    finally:
        await engine.dispose()
    return unfinished


async def scrape(server: Server) -> str:
    """The server's `/metrics` as they stand."""
    return (await server.api.get("/metrics")).text


def loop_lag_buckets(scraped: str) -> dict[float, float]:
    """The `vglobal_event_loop_lag_seconds` histogram of a scrape: cumulative counts by upper
    bound (+Inf included)."""
    return {
        float(sample.labels["le"]): sample.value
        for sample in _samples(scraped, "vglobal_event_loop_lag_seconds")
        if sample.name.endswith("_bucket")
    }


def leading(scraped: str) -> bool:
    """Whether the scraped server ran the scheduling loop (its `vglobal_scheduler_leader`)."""
    return any(s.value == 1 for s in _samples(scraped, "vglobal_scheduler_leader"))


def _samples(scraped: str, name: str) -> list:  # type: ignore[type-arg]
    return [
        sample
        for family in text_string_to_metric_families(scraped)
        if family.name == name
        for sample in family.samples
    ]


def lag_quantile(before: dict[float, float], after: dict[float, float], q: float) -> str:
    """Which bucket holds quantile `q` of the probes between two scrapes, as text ("<= 100
    ms"; "n/a" for a server without the histogram, a tree older than 6a03b7f, or no probe).
    A 0.25 s probe meets a stall of S seconds with a chance of about S / (0.25 + S): over a
    30 s load (~120 probes) the p99 is the largest probe or the one below it."""
    bounds = sorted(after)
    total = after[bounds[-1]] - before.get(bounds[-1], 0.0) if bounds else 0.0
    if total <= 0:
        return "n/a"
    for bound in bounds:
        if after[bound] - before.get(bound, 0.0) >= q * total:
            return (
                f"<= {bound * 1000:g} ms" if math.isfinite(bound) else f"> {bounds[-2] * 1000:g} ms"
            )
    return "n/a"
