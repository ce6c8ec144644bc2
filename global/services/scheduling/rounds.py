"""The record of scheduling rounds (what each committed round placed, how long it took, its
gap), kept for the API, the console and the metrics."""

from __future__ import annotations

import math
from datetime import datetime

from sqlalchemy import delete, select
from sqlalchemy.ext.asyncio import AsyncSession

from volcano_global.db.models import SchedulingRound

KEPT_ROUNDS = 1000


async def record_round(
    session: AsyncSession,
    *,
    generation: int,
    wall_seconds: float,
    solve_seconds: float,
    status: str,
    gap: float | None,
    placed: int,
    pending: int,
    policy: str,
    finished_at: datetime,
) -> None:
    """Keep a committed round on record (the newest KEPT_ROUNDS are kept)."""
    session.add(
        SchedulingRound(
            generation=generation,
            wall_seconds=wall_seconds,
            solve_seconds=solve_seconds,
            status=status,
            gap=gap if gap is not None and math.isfinite(gap) else None,
            placed=placed,
            pending=pending,
            policy=policy,
            finished_at=finished_at,
        )
    )
    await session.flush()
    cutoff = (
        await session.execute(
            select(SchedulingRound.finished_at)
            .order_by(SchedulingRound.finished_at.desc())
            .offset(KEPT_ROUNDS)
            .limit(1)
        )
    ).scalar_one_or_none()
    if cutoff is not None:
        await session.execute(delete(SchedulingRound).where(SchedulingRound.finished_at <= cutoff))


async def recent_rounds(session: AsyncSession, *, limit: int) -> list[SchedulingRound]:
    rows = await session.execute(
        select(SchedulingRound).order_by(SchedulingRound.finished_at.desc()).limit(limit)
    )
    return list(rows.scalars())
