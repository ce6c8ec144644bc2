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
    count, gpus, oldest, median = await _waiting(session)
    sample = RoundSample(
        taken_at=now,
        gpus_total=int(total),
        gpus_allocated=int(total) - int(free),
        waiting_jobs=count,
        waiting_gpus=gpus,
        median_wait_seconds=_since(median, now),
        oldest_wait_seconds=_since(oldest, now),
    )
    session.add(sample)
    await session.execute(delete(RoundSample).where(RoundSample.taken_at < now - KEPT_FOR))
    await session.flush()
    return sample


async def _waiting(session: AsyncSession) -> tuple[int, int, datetime | None, datetime | None]:
    """The waiting jobs' count, GPUs, oldest and median submission, counted in the database
    (a sample every 30 s must not load 100,000 waiting rows into the loop's process)."""
    pending = Job.state == JobState.PENDING
    count, gpus, oldest = (
        await session.execute(
            select(
                func.count(), func.coalesce(func.sum(Job.total_gpus), 0), func.min(Job.submitted_at)
            ).where(pending)
        )
    ).one()
    median = None
    if count:
        median = (
            await session.execute(
                select(Job.submitted_at)
                .where(pending)
                .order_by(Job.submitted_at.desc())
                .offset(int(count) // 2)
                .limit(1)
            )
        ).scalar_one_or_none()
    return int(count), int(gpus), oldest, median


def _since(at: datetime | None, now: datetime) -> float:
    return max(0.0, (now - at).total_seconds()) if at is not None else 0.0


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
