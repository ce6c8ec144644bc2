"""The record of committed scheduling rounds (for operators and the console)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import String
from sqlalchemy.orm import Mapped, mapped_column

from volcano_global.db.base import Base, UUIDPrimaryKey, utcnow


class SchedulingRound(UUIDPrimaryKey, Base):
    __tablename__ = "scheduling_rounds"

    generation: Mapped[int]
    finished_at: Mapped[datetime] = mapped_column(default=utcnow, index=True)
    wall_seconds: Mapped[float]  # snapshot + solve + commit
    solve_seconds: Mapped[float]
    status: Mapped[str] = mapped_column(String(32))  # OPTIMAL, FEASIBLE, GREEDY, ...
    gap: Mapped[float | None]  # None: no bound was proven (or the round failed)
    placed: Mapped[int]
    pending: Mapped[int]
    policy: Mapped[str] = mapped_column(String(32))


class RoundSample(UUIDPrimaryKey, Base):
    """The federation as the scheduling loop saw it at one moment: what the console's history
    view draws. Taken at most once a SAMPLE_EVERY_S and kept for a bounded time
    (`services/scheduling/history.py`), so the table stays small at any fleet size."""

    __tablename__ = "round_samples"

    taken_at: Mapped[datetime] = mapped_column(default=utcnow, index=True)
    gpus_total: Mapped[int]
    gpus_allocated: Mapped[int]
    waiting_jobs: Mapped[int]
    waiting_gpus: Mapped[int]
    median_wait_seconds: Mapped[float]  # of the jobs waiting then (0: none waits)
    oldest_wait_seconds: Mapped[float]
