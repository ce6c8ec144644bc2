"""/api/v1/history: allocation, waiting jobs and waits over time, as the scheduling loop
sampled them (`services/scheduling/history.py`)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Annotated

from fastapi import APIRouter, Query

from volcano_global.api.deps import Reader, Session
from volcano_global.db.base import utcnow
from volcano_global.errors import Invalid
from volcano_global.schemas.common import error_responses
from volcano_global.schemas.history import History, HistoryPointOut
from volcano_global.services.scheduling import history

router = APIRouter(prefix="/api/v1", tags=["overview"])


@router.get("/history", operation_id="getHistory", responses=error_responses(401, 403, 422))
async def get_history(
    session: Session,
    _: Reader,
    since: Annotated[
        datetime | None,
        Query(description="From this time (RFC 3339; without offset: UTC). Default: 6 h ago."),
    ] = None,
    step: Annotated[
        int, Query(ge=30, le=86_400, description="Seconds per bucket (30 to 86,400).")
    ] = 60,
) -> History:
    """GPUs allocated of total, waiting jobs and their waits, in buckets of `step` seconds
    from `since` (at most 2,000 buckets; the samples are kept 7 days)."""
    now = utcnow()
    start = _since(since, now)
    if (now - start).total_seconds() / step > history.MAX_POINTS:
        raise Invalid.one(
            "step (query)",
            f"{step} s from {start.isoformat()} is more than {history.MAX_POINTS} buckets: "
            "use a larger step or a later since",
        )
    points = await history.history(session, since=start, step_s=step)
    return History(
        since=start,
        step_seconds=step,
        items=[HistoryPointOut.model_validate(p, from_attributes=True) for p in points],
    )


def _since(since: datetime | None, now: datetime) -> datetime:
    if since is None:
        return now - timedelta(hours=6)
    since = since if since.tzinfo is not None else since.replace(tzinfo=UTC)
    if since > now:
        raise Invalid.one("since (query)", f"{since.isoformat()} is in the future")
    return since
