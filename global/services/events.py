"""Events about jobs and clusters, folded like Kubernetes events: a repeat of the same type,
reason and message bumps the count and the last-seen time."""

from __future__ import annotations

import uuid

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from volcano_global.db.base import utcnow
from volcano_global.db.models import Event, EventType


async def record_event(
    session: AsyncSession,
    *,
    reason: str,
    message: str,
    type: EventType = EventType.NORMAL,
    job_id: uuid.UUID | None = None,
    cluster_id: uuid.UUID | None = None,
    fold: bool = True,
) -> Event:
    now = utcnow()
    previous = (
        None
        if not fold
        else (
            await session.execute(
                select(Event)
                .where(
                    Event.job_id == job_id if job_id else Event.job_id.is_(None),
                    Event.cluster_id == cluster_id if cluster_id else Event.cluster_id.is_(None),
                    Event.type == type,
                    Event.reason == reason,
                    Event.message == message,
                )
                .order_by(Event.last_seen_at.desc())
                .limit(1)
            )
        ).scalar_one_or_none()
    )
    if previous is not None:
        previous.count += 1
        previous.last_seen_at = now
        return previous  # written with the transaction's next flush
    event = Event(
        job_id=job_id,
        cluster_id=cluster_id,
        type=type,
        reason=reason,
        message=message,
        first_seen_at=now,
        last_seen_at=now,
    )
    session.add(event)  # inserted with the transaction's next flush (after its job)
    return event


def event_row(
    *,
    reason: str,
    message: str,
    type: EventType = EventType.NORMAL,
    job_id: uuid.UUID | None = None,
    cluster_id: uuid.UUID | None = None,
    token_id: uuid.UUID | None = None,
    client_address: str | None = None,
) -> dict[str, object]:
    """Every column of a new event, for a bulk insert (the job writer's: every row of a batch
    has the same columns, so the audit ones are always there)."""
    now = utcnow()
    return {
        "id": uuid.uuid4(),
        "job_id": job_id,
        "cluster_id": cluster_id,
        "type": type,
        "reason": reason,
        "message": message,
        "count": 1,
        "first_seen_at": now,
        "last_seen_at": now,
        "token_id": token_id,
        "client_address": client_address,
    }


async def list_events(
    session: AsyncSession,
    *,
    job_id: uuid.UUID | None = None,
    cluster_id: uuid.UUID | None = None,
    limit: int = 200,
) -> list[Event]:
    query = select(Event).order_by(Event.last_seen_at.desc(), Event.id).limit(limit)
    if job_id is not None:
        query = query.where(Event.job_id == job_id)
    if cluster_id is not None:
        query = query.where(Event.cluster_id == cluster_id)
    return list((await session.execute(query)).scalars())


AUDIT = "Audit"


async def record_audit(
    session: AsyncSession,
    *,
    who: str,
    method: str,
    path: str,
    denied: str | None = None,
    token_id: uuid.UUID | None = None,
    client_address: str | None = None,
) -> None:
    """One record per mutating call: an accepted one in the call's own transaction, a refused
    one (`denied`: why) in a transaction of its own; never folded. `token_id` and
    `client_address` say which token called and from where (the name is free text)."""
    event = await record_event(
        session, reason=AUDIT, message=audit_message(who, method, path, denied), fold=False
    )
    event.token_id, event.client_address = token_id, client_address


def audit_message(who: str, method: str, path: str, denied: str | None = None) -> str:
    message = f"{who}: {method} {path}"
    if denied is not None:
        message = f"DENIED {message} ({denied})"
    return message[:2000]


async def audit_trail(session: AsyncSession, *, limit: int) -> list[Event]:
    rows = await session.execute(
        select(Event).where(Event.reason == AUDIT).order_by(Event.first_seen_at.desc()).limit(limit)
    )
    return list(rows.scalars())
