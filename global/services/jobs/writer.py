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
told so. A submission may ask to be refused when a finished job not deleted holds its name
(`POST /api/v1/jobs`; apply submits a new job then): that check is part of the batch's read,
not a statement of its own. So is the check that the rules a job was checked against are
current: a submission may carry the mark of the priority classes and tenancy rules it was
checked under (`services/tenancy/submission_rules.py`), and is not written if the batch finds
the queues' and classes' fingerprint moved since (its submitter checks it again). Any other
integrity error (e.g. the queue was deleted between the read and the insert) makes the batch
be written again one job at a time, so only the job at fault fails. A database error fails
every submission of the batch (each caller gets the error: the client retries); nothing is
reported written that is not committed."""

from __future__ import annotations

import asyncio
import enum
import uuid
from dataclasses import dataclass
from typing import Any

from sqlalchemy import bindparam, insert, text
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, AsyncSession, async_sessionmaker
from sqlalchemy.sql.elements import TextClause

from volcano_global.db.bulk import as_json, cached_statement, postgres_rows, record_of
from volcano_global.db.engine import take_write_lock
from volcano_global.db.group_commit import GroupCommit
from volcano_global.db.models import Event, Job
from volcano_global.db.models.jobs import TERMINAL_JOB_STATES
from volcano_global.services.tenancy.submission_rules import FINGERPRINT_SQL

MAX_BATCH = 500  # jobs per INSERT (each has ~30 columns: well under the bind-parameter limits)


class WriteOutcome(enum.Enum):
    STORED = "stored"
    NAME_TAKEN = "a live job has its name"
    NO_QUEUE = "its queue does not exist"
    QUEUE_CLOSED = "its queue is Closed"
    NOT_LEAF = "its queue has child queues (jobs run only in leaf queues)"
    FINISHED_HOLDER = "a finished job not deleted has its name"
    STALE_RULES = "the rules it was checked against changed since"


@dataclass(frozen=True)
class Written:
    outcome: WriteOutcome
    holder_state: str | None = None  # FINISHED_HOLDER: the state of the job holding the name


@dataclass
class _Item:
    job: dict[str, Any]  # every column of the row but queue_id, set from `queue` when written
    queue: str  # the queue's name
    events: list[dict[str, Any]]  # every column of each event row
    refuse_finished: bool  # refused if a finished job not deleted holds its namespace/name
    rules_mark: str | None  # not written unless the rules' fingerprint is still this one


class JobWriter:
    def __init__(self, sessions: async_sessionmaker[AsyncSession]) -> None:
        self.sessions = sessions
        self._group = GroupCommit[_Item, Written](
            self._insert,
            what="jobs",
            max_batch=MAX_BATCH,
            alone=lambda exc: isinstance(exc, IntegrityError),
        )

    async def add(
        self,
        job: dict[str, Any],
        events: list[dict[str, Any]],
        *,
        queue: str,
        refuse_finished: bool = False,
        rules_mark: str | None = None,
    ) -> Written:
        """Write the job (into the queue named `queue`, whose id it is given) and its events in
        the next batch, and tell whether it was stored. `refuse_finished`: not if a finished job
        not deleted holds its name. `rules_mark`: not if the submission rules' fingerprint is
        no longer this one. Raises what the write raised (the job is then not stored)."""
        return await self.enqueue(
            job, events, queue=queue, refuse_finished=refuse_finished, rules_mark=rules_mark
        )

    def enqueue(
        self,
        job: dict[str, Any],
        events: list[dict[str, Any]],
        *,
        queue: str,
        refuse_finished: bool = False,
        rules_mark: str | None = None,
    ) -> asyncio.Future[Written]:
        """As `add`, queued now: the future of its outcome."""
        return self._group.enqueue(_Item(job, queue, events, refuse_finished, rules_mark))

    async def _insert(self, batch: list[_Item]) -> list[Written]:
        engine: AsyncEngine = self.sessions.kw["bind"]
        if engine.dialect.name == "postgresql":
            async with engine.connect() as connection:  # no session: one statement, no ORM
                written = await _insert_at_once(connection, batch)
        else:
            async with self.sessions() as session, session.begin():
                # The read decides what is inserted: no other process may write between.
                await take_write_lock(session)
                written = await _insert_in_steps(session, batch)
        return [written[item.job["id"]] for item in batch]


@dataclass
class _Found:
    """What the batch's read found: its queues, the finished jobs holding its names and the
    submission rules' fingerprint."""

    queue_ids: dict[str, uuid.UUID]  # by name
    refused: dict[str, WriteOutcome | None]  # by queue name: why it takes no jobs
    holders: dict[uuid.UUID, str]  # incoming job id -> the state of the finished holder
    mark: str | None = None  # the fingerprint (read if an item carries a mark)

    def verdict(self, item: _Item) -> Written | None:
        """Why the item is not written, or None if it is to be inserted."""
        if item.rules_mark is not None and item.rules_mark != self.mark:
            return Written(WriteOutcome.STALE_RULES)
        if item.queue not in self.queue_ids:
            return Written(WriteOutcome.NO_QUEUE)
        if (refusal := self.refused[item.queue]) is not None:
            return Written(refusal)
        if (state := self.holders.get(item.job["id"])) is not None:
            return Written(WriteOutcome.FINISHED_HOLDER, state)
        return None


async def _insert_at_once(
    connection: AsyncConnection, batch: list[_Item]
) -> dict[uuid.UUID, Written]:
    """Postgres: the whole batch in one statement (atomic on its own: no BEGIN or COMMIT round
    trip), its jobs and events as two JSON parameters, on the driver (`db/bulk.py`)."""
    jobs = [
        {
            **item.job,
            "queue_name": item.queue,
            "n": n,
            "refuse_finished": item.refuse_finished,
            "rules_mark": item.rules_mark,
        }
        for n, item in enumerate(batch)
    ]
    events = [{**e, "owner": item.job["id"]} for item in batch for e in item.events]
    job_columns = tuple(c for c in batch[0].job if c != "queue_id")  # set from the queue's name
    event_columns = tuple(c for c in events[0] if c != "owner") if events else ()
    statement = cached_statement(
        ("job batch", job_columns, event_columns), _batch_statement, job_columns, event_columns
    )
    parameters = {"jobs": as_json(jobs), "events": as_json(events)}
    rows = await postgres_rows(connection, statement, parameters)
    found, stored = _Found({}, {}, {}), set()
    for what, row_id, name, detail in rows:
        if what == "stored":
            stored.add(row_id)
        elif what == "queue":
            found.queue_ids[name], found.refused[name] = row_id, _REFUSALS.get(detail)
        elif what == "rules":
            found.mark = name
        else:
            found.holders[row_id] = detail
    written = {}
    for item in batch:
        job_id = item.job["id"]
        verdict = found.verdict(item)
        if verdict is None:
            item.job["queue_id"] = found.queue_ids[item.queue]
            verdict = Written(WriteOutcome.STORED if job_id in stored else WriteOutcome.NAME_TAKEN)
        written[job_id] = verdict
    return written


def _batch_statement(job_columns: tuple[str, ...], event_columns: tuple[str, ...]) -> TextClause:
    """Read the queues the jobs name, the finished jobs holding the names of those that refuse
    them and the submission rules' fingerprint; insert, in submission order, the jobs whose
    queue takes them, whose name no finished job holds (a live name taken: skipped) and whose
    rules' mark, if any, is the fingerprint, and the events of the jobs inserted. Returns
    ('stored', job id) for each job inserted, ('queue', queue id, name, usable) for each queue
    found, ('holder', job id, NULL, state) for each job refused its name and ('rules', NULL,
    fingerprint, NULL)."""
    jobs, events = Job.__table__, Event.__table__
    names = ", ".join(job_columns)
    picked = ", ".join(f"i.{c}" for c in job_columns)
    event_names = ", ".join(event_columns)
    event_picked = ", ".join(f"e.{c}" for c in event_columns)
    # Table and column names come from the model, never from input.
    sql = (
        "WITH incoming AS (SELECT * FROM jsonb_to_recordset(CAST(:jobs AS jsonb)) "
        f"AS u({record_of(jobs, job_columns)}, queue_name text, n int, refuse_finished boolean, "
        "rules_mark text)), "
        f"rules AS (SELECT {FINGERPRINT_SQL['postgresql']} AS mark), "
        f"found AS (SELECT q.id, q.name, {_USABLE} AS usable FROM queues AS q "
        "WHERE q.name IN (SELECT queue_name FROM incoming)), "
        # A lookup by name per incoming job (LATERAL): a join let the planner, with
        # statistics from before the finished jobs piled up, hash every finished job.
        "holders AS (SELECT i.id, h.state FROM incoming AS i CROSS JOIN LATERAL "
        "(SELECT j.state FROM jobs AS j WHERE j.namespace = i.namespace AND j.name = i.name "
        f"AND {_FINISHED_HOLDER} ORDER BY j.submitted_at DESC LIMIT 1) AS h "
        "WHERE i.refuse_finished), "
        f"new_jobs AS (INSERT INTO jobs ({names}, queue_id) SELECT {picked}, f.id "
        "FROM incoming AS i JOIN found AS f ON f.name = i.queue_name "
        "WHERE f.usable = 'open' AND i.id NOT IN (SELECT id FROM holders) "
        "AND (i.rules_mark IS NULL OR i.rules_mark = (SELECT mark FROM rules)) ORDER BY i.n "
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
        " SELECT 'stored', id, CAST(NULL AS text), CAST(NULL AS text) FROM new_jobs"
        " UNION ALL SELECT 'queue', id, name, usable FROM found"
        " UNION ALL SELECT 'holder', id, NULL, state FROM holders"
        " UNION ALL SELECT 'rules', NULL, mark, NULL FROM rules"
    )
    return text(sql)


async def _insert_in_steps(session: AsyncSession, batch: list[_Item]) -> dict[uuid.UUID, Written]:
    """SQLite: the queues read (and the finished holders of the names that refuse them), then
    one multi-row INSERT of the jobs and one of their events, in the caller's transaction
    (which holds the write lock from its start: `take_write_lock`)."""
    found = await _read_found(session, batch)
    written, rows = {}, []
    for item in batch:
        verdict = found.verdict(item)
        if verdict is None:
            item.job["queue_id"] = found.queue_ids[item.queue]
            rows.append(item.job)
            verdict = Written(WriteOutcome.NAME_TAKEN)  # unless the insert returns it
        written[item.job["id"]] = verdict
    if rows:
        for job_id in (await session.execute(_INSERT_JOBS, rows)).scalars():
            written[job_id] = Written(WriteOutcome.STORED)
    stored = [item for item in batch if written[item.job["id"]].outcome is WriteOutcome.STORED]
    events = [e for item in stored for e in item.events]
    if events:
        await session.execute(insert(Event.__table__), events)
    return written


async def _read_found(session: AsyncSession, batch: list[_Item]) -> _Found:
    """The batch's queues, the finished jobs holding the names of the items that refuse them,
    and the submission rules' fingerprint if an item carries a mark: one statement."""
    asking = {(i.job["namespace"], i.job["name"]) for i in batch if i.refuse_finished}
    marked = any(i.rules_mark is not None for i in batch)
    statement = cached_statement(
        ("sqlite found", bool(asking), marked), _sqlite_read, bool(asking), marked
    )
    parameters: dict[str, Any] = {"names": list({i.queue for i in batch})}
    if asking:
        parameters |= {
            "namespaces": list({n for n, _ in asking}),
            "jobs": list({n for _, n in asking}),
        }
    found, by_name = _Found({}, {}, {}), {}
    for what, first, second, detail, _ in await session.execute(statement, parameters):
        if what == "queue":  # name, id, usable
            found.queue_ids[first] = uuid.UUID(str(second))
            found.refused[first] = _REFUSALS.get(detail)
        elif what == "holder":  # namespace, name, state; oldest first: the newest one's stays
            by_name[(first, second)] = detail
        else:
            found.mark = first
    for item in batch:
        key = (item.job["namespace"], item.job["name"])
        if item.refuse_finished and key in by_name:
            found.holders[item.job["id"]] = str(by_name[key])
    return found


def _sqlite_read(asking: bool, marked: bool) -> TextClause:
    """Rows ('queue', name, id, usable, NULL), ('holder', namespace, name, state, submitted)
    oldest first if `asking`, and ('rules', fingerprint, NULL, NULL, NULL) if `marked`."""
    parts = [
        f"SELECT 'queue', q.name, q.id, {_USABLE}, NULL FROM queues AS q WHERE q.name IN :names"
    ]
    if asking:
        # Two IN lists, not a row-value IN: without statistics SQLite plans the latter on the
        # state index (every finished job read), the former on (namespace, name).
        parts.append(
            "SELECT 'holder', j.namespace, j.name, j.state, j.submitted_at FROM jobs AS j "
            f"WHERE j.namespace IN :namespaces AND j.name IN :jobs AND {_FINISHED_HOLDER}"
        )
    if marked:
        parts.append(f"SELECT 'rules', {FINGERPRINT_SQL['sqlite']}, NULL, NULL, NULL")
    names = ["names", "namespaces", "jobs"] if asking else ["names"]
    return text(" UNION ALL ".join(parts) + " ORDER BY 5").bindparams(
        *(bindparam(name, expanding=True) for name in names)
    )


# Whether a queue takes jobs: Open, and a leaf (no queue names it as parent).
_USABLE = (
    "CASE WHEN q.state <> 'Open' THEN 'closed' "
    "WHEN EXISTS (SELECT 1 FROM queues AS c WHERE c.parent = q.name) THEN 'parent' "
    "ELSE 'open' END"
)
_REFUSALS = {"closed": WriteOutcome.QUEUE_CLOSED, "parent": WriteOutcome.NOT_LEAF}

# A finished job not deleted: it holds its name as a Kubernetes object does until deleted.
_FINISHED_HOLDER = "j.deleted_at IS NULL AND j.state IN ({})".format(
    ", ".join(f"'{state.value}'" for state in sorted(TERMINAL_JOB_STATES))
)

# SQLAlchemy sends the rows of an executemany of this as multi-row VALUES.
_INSERT_JOBS = sqlite_insert(Job.__table__).on_conflict_do_nothing().returning(Job.__table__.c.id)
