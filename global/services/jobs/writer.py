"""Group commit for new jobs: submissions that arrive while a batch is being written wait for
the next one, and a batch is one transaction instead of a transaction per job: on Postgres one
statement that reads the queues its jobs name and inserts the jobs and their events (one round
trip), on SQLite one read, a multi-row INSERT of the jobs, one of their events and a commit.
The submission itself reads nothing: its queue is looked up here, with the batch. The first
submission after a quiet spell is written at once; under load a batch holds what queued
during the previous write, so the wait is at most one write.

A live job's name is unique (the partial unique index `ACTIVE_NAME_INDEX`, the table's only
unique index besides its primary key, a fresh UUID): a row that collides, with a stored job or
an earlier row of its own batch, is skipped by `ON CONFLICT DO NOTHING` and its submitter told
so; the others are written. A job whose queue does not exist is not written and its submitter
told so. Any other integrity error (e.g. the queue was deleted between the read and the
insert) makes the batch be written again one job at a time, so only the job at fault fails. A
database error fails every submission of the batch (each caller gets the error: the client
retries); nothing is reported written that is not committed."""

from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass
from typing import Any

from sqlalchemy import bindparam, insert, text
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from sqlalchemy.sql.elements import TextClause

from volcano_global.db.bulk import as_json, cached_statement, record_of
from volcano_global.db.engine import autocommit
from volcano_global.db.group_commit import GroupCommit
from volcano_global.db.models import Event, Job

MAX_BATCH = 500  # jobs per INSERT (each has ~30 columns: well under the bind-parameter limits)


class WriteOutcome(enum.Enum):
    STORED = "stored"
    NAME_TAKEN = "a live job has its name"
    NO_QUEUE = "its queue does not exist"
    QUEUE_CLOSED = "its queue is Closed"
    NOT_LEAF = "its queue has child queues (jobs run only in leaf queues)"


@dataclass
class _Item:
    job: dict[str, Any]  # every column of the row but queue_id, set from `queue` when written
    queue: str  # the queue's name
    events: list[dict[str, Any]]  # every column of each event row


class JobWriter:
    def __init__(self, sessions: async_sessionmaker[AsyncSession]) -> None:
        self.sessions = sessions
        self._group = GroupCommit[_Item, WriteOutcome](
            self._insert,
            what="jobs",
            max_batch=MAX_BATCH,
            alone=lambda exc: isinstance(exc, IntegrityError),
        )

    async def add(
        self, job: dict[str, Any], events: list[dict[str, Any]], *, queue: str
    ) -> WriteOutcome:
        """Write the job (into the queue named `queue`, whose id it is given) and its events in
        the next batch, and tell whether it was stored. Raises what the write raised (the job
        is then not stored)."""
        return await self._group.add(_Item(job, queue, events))

    async def _insert(self, batch: list[_Item]) -> list[WriteOutcome]:
        async with self.sessions() as session:
            if session.get_bind().dialect.name == "postgresql":
                outcomes = await _insert_at_once(await autocommit(session), batch)
            else:
                async with session.begin():
                    outcomes = await _insert_in_steps(session, batch)
        return [outcomes[item.job["id"]] for item in batch]


async def _insert_at_once(
    session: AsyncSession, batch: list[_Item]
) -> dict[uuid.UUID, WriteOutcome]:
    """Postgres: the whole batch in one statement (atomic on its own: no BEGIN or COMMIT round
    trip), its jobs and events as two JSON parameters (`db/bulk.py`)."""
    jobs = [{**item.job, "queue_name": item.queue, "n": n} for n, item in enumerate(batch)]
    events = [{**e, "owner": item.job["id"]} for item in batch for e in item.events]
    job_columns = tuple(c for c in batch[0].job if c != "queue_id")  # set from the queue's name
    event_columns = tuple(c for c in events[0] if c != "owner") if events else ()
    statement = cached_statement(
        ("job batch", job_columns, event_columns), _batch_statement, job_columns, event_columns
    )
    rows = await session.execute(statement, {"jobs": as_json(jobs), "events": as_json(events)})
    stored, queue_ids, refused = set(), {}, {}
    for row_id, queue, usable in rows:
        if queue is None:
            stored.add(row_id)
        else:
            queue_ids[queue] = row_id
            refused[queue] = _REFUSALS.get(usable)
    outcomes = {}
    for item in batch:
        job_id = item.job["id"]
        if item.queue not in queue_ids:
            outcomes[job_id] = WriteOutcome.NO_QUEUE
            continue
        if refused[item.queue] is not None:
            outcomes[job_id] = refused[item.queue]
            continue
        item.job["queue_id"] = queue_ids[item.queue]
        outcomes[job_id] = WriteOutcome.STORED if job_id in stored else WriteOutcome.NAME_TAKEN
    return outcomes


def _batch_statement(job_columns: tuple[str, ...], event_columns: tuple[str, ...]) -> TextClause:
    """Read the queues the jobs name; insert, in submission order, the jobs whose queue exists
    (a live name taken: skipped), and the events of the jobs inserted. Returns (job id, NULL)
    for each job inserted and (queue id, queue name) for each queue found."""
    jobs, events = Job.__table__, Event.__table__
    names = ", ".join(job_columns)
    picked = ", ".join(f"i.{c}" for c in job_columns)
    event_names = ", ".join(event_columns)
    event_picked = ", ".join(f"e.{c}" for c in event_columns)
    # Table and column names come from the model, never from input.
    sql = (
        "WITH incoming AS (SELECT * FROM jsonb_to_recordset(CAST(:jobs AS jsonb)) "
        f"AS u({record_of(jobs, job_columns)}, queue_name text, n int)), "
        f"found AS (SELECT q.id, q.name, {_USABLE} AS usable FROM queues AS q "
        "WHERE q.name IN (SELECT queue_name FROM incoming)), "
        f"new_jobs AS (INSERT INTO jobs ({names}, queue_id) SELECT {picked}, f.id "
        "FROM incoming AS i JOIN found AS f ON f.name = i.queue_name "
        "WHERE f.usable = 'open' ORDER BY i.n "
        "ON CONFLICT DO NOTHING RETURNING id)"
    )
    if event_columns:
        sql += (
            f", new_events AS (INSERT INTO events ({event_names}) SELECT {event_picked} "
            "FROM jsonb_to_recordset(CAST(:events AS jsonb)) "
            f"AS e({record_of(events, event_columns)}, owner uuid) "
            "WHERE e.owner IN (SELECT id FROM new_jobs))"
        )
    sql += (
        " SELECT id, CAST(NULL AS text), CAST(NULL AS text) FROM new_jobs"
        " UNION ALL SELECT id, name, usable FROM found"
    )
    return text(sql)


async def _insert_in_steps(
    session: AsyncSession, batch: list[_Item]
) -> dict[uuid.UUID, WriteOutcome]:
    """SQLite: the queues read, then one multi-row INSERT of the jobs and one of their events,
    in the caller's transaction."""
    names = {item.queue for item in batch}
    found = text(
        f"SELECT q.name, q.id, {_USABLE} AS usable FROM queues AS q WHERE q.name IN :names"
    ).bindparams(bindparam("names", expanding=True))
    queue_ids, refused = {}, {}
    for name, id_, usable in await session.execute(found, {"names": list(names)}):
        queue_ids[name], refused[name] = uuid.UUID(str(id_)), _REFUSALS.get(usable)
    outcomes = {item.job["id"]: WriteOutcome.NO_QUEUE for item in batch}
    rows = []
    for item in batch:
        if item.queue in queue_ids and refused[item.queue] is not None:
            outcomes[item.job["id"]] = refused[item.queue]
        elif item.queue in queue_ids:
            item.job["queue_id"] = queue_ids[item.queue]
            rows.append(item.job)
            outcomes[item.job["id"]] = WriteOutcome.NAME_TAKEN  # unless the insert returns it
    if rows:
        for job_id in (await session.execute(_INSERT_JOBS, rows)).scalars():
            outcomes[job_id] = WriteOutcome.STORED
    stored = [item for item in batch if outcomes[item.job["id"]] is WriteOutcome.STORED]
    events = [e for item in stored for e in item.events]
    if events:
        await session.execute(insert(Event.__table__), events)
    return outcomes


# Whether a queue takes jobs: Open, and a leaf (no queue names it as parent).
_USABLE = (
    "CASE WHEN q.state <> 'Open' THEN 'closed' "
    "WHEN EXISTS (SELECT 1 FROM queues AS c WHERE c.parent = q.name) THEN 'parent' "
    "ELSE 'open' END"
)
_REFUSALS = {"closed": WriteOutcome.QUEUE_CLOSED, "parent": WriteOutcome.NOT_LEAF}

# SQLAlchemy sends the rows of an executemany of this as multi-row VALUES.
_INSERT_JOBS = sqlite_insert(Job.__table__).on_conflict_do_nothing().returning(Job.__table__.c.id)
