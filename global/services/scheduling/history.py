"""The federation over time: allocation (GPUs allocated of total), the waiting jobs and how
long they wait, sampled by the scheduling loop and read back in buckets by the history API
and the console's History page.

A sample is taken at most once a SAMPLE_EVERY_S (a round every 2 s would otherwise write
43,200 rows a day) and kept KEPT_FOR, so the table holds at most ~20,000 rows at any fleet
size; reading a week back in 10-minute buckets reads them all and stays cheap."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Row, delete, func, select
from sqlalchemy.ext.asyncio import AsyncSession

from volcano_global.db.models import ClusterGpuCapacity, Job, JobState, RoundSample

SAMPLE_EVERY_S = 30.0
KEPT_FOR = timedelta(days=7)
MAX_POINTS = 2000  # buckets one answer may hold


@dataclass(frozen=True)
class HistoryPoint:
    """One bucket: the mean allocation and waiting jobs of its samples, their longest wait."""

    at: datetime  # the bucket's start
    gpus_total: float
    gpus_allocated: float
    waiting_jobs: float
    waiting_gpus: float
    median_wait_seconds: float
    oldest_wait_seconds: float
    samples: int


async def take_sample(session: AsyncSession, *, now: datetime) -> RoundSample:
    """Record the federation now and drop the samples older than KEPT_FOR."""
    total, free = (
        await session.execute(
            select(
                func.coalesce(func.sum(ClusterGpuCapacity.total_gpus), 0),
                func.coalesce(func.sum(ClusterGpuCapacity.free_gpus), 0),
            )
        )
    ).one()
    waiting = (
        await session.execute(
            select(Job.submitted_at, Job.total_gpus).where(Job.state == JobState.PENDING)
        )
    ).all()
    waits = [max(0.0, (now - submitted).total_seconds()) for submitted, _ in waiting]
    sample = RoundSample(
        taken_at=now,
        gpus_total=int(total),
        gpus_allocated=int(total) - int(free),
        waiting_jobs=len(waiting),
        waiting_gpus=sum(int(gpus) for _, gpus in waiting),
        median_wait_seconds=statistics.median(waits) if waits else 0.0,
        oldest_wait_seconds=max(waits, default=0.0),
    )
    session.add(sample)
    await session.execute(delete(RoundSample).where(RoundSample.taken_at < now - KEPT_FOR))
    await session.flush()
    return sample


async def history(session: AsyncSession, *, since: datetime, step_s: int) -> list[HistoryPoint]:
    """The samples taken at or after `since`, in buckets of `step_s` seconds, oldest first;
    a bucket without a sample is left out (the loop was stopped or led by no replica).
    Rows, not ORM objects: a week is 20,000 samples, and objects cost several times more."""
    rows = await session.execute(
        select(
            RoundSample.taken_at,
            RoundSample.gpus_total,
            RoundSample.gpus_allocated,
            RoundSample.waiting_jobs,
            RoundSample.waiting_gpus,
            RoundSample.median_wait_seconds,
            RoundSample.oldest_wait_seconds,
        )
        .where(RoundSample.taken_at >= since)
        .order_by(RoundSample.taken_at)
    )
    buckets: dict[int, list[Row[Any]]] = {}
    for row in rows:
        index = int((row.taken_at - since).total_seconds() // step_s)
        buckets.setdefault(index, []).append(row)
    return [
        _point(since + timedelta(seconds=index * step_s), samples)
        for index, samples in buckets.items()
    ]


def _point(at: datetime, samples: list[Row[Any]]) -> HistoryPoint:
    return HistoryPoint(
        at=at,
        gpus_total=statistics.fmean(s.gpus_total for s in samples),
        gpus_allocated=statistics.fmean(s.gpus_allocated for s in samples),
        waiting_jobs=statistics.fmean(s.waiting_jobs for s in samples),
        waiting_gpus=statistics.fmean(s.waiting_gpus for s in samples),
        median_wait_seconds=statistics.fmean(s.median_wait_seconds for s in samples),
        oldest_wait_seconds=max(s.oldest_wait_seconds for s in samples),
        samples=len(samples),
    )
