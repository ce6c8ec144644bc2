"""Group commit for new jobs: submissions that arrive while a batch is being written wait for
the next one, and a batch is one transaction - one multi-row INSERT of the jobs, one of their
events, one commit - instead of a transaction per job. The first submission after a quiet spell
is written at once; under load a batch holds what queued during the previous write, so the
wait is at most one write.

A live job's name is unique (the partial unique index `ACTIVE_NAME_INDEX`, the table's only
unique index besides its primary key, a fresh UUID): a row that collides, with a stored job or
an earlier row of its own batch, is skipped by `ON CONFLICT DO NOTHING` and its submitter told
so; the others are written. Any other integrity error (e.g. the queue was
deleted meanwhile) makes the batch be written again one job at a time, so only the job at fault
fails. A database error fails every submission of the batch (each caller gets the error: the
client retries); nothing is reported written that is not committed."""

from __future__ import annotations

import asyncio
import logging
import uuid
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Insert, insert
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from volcano_global.db.engine import transaction
from volcano_global.db.models import Event, Job

log = logging.getLogger(__name__)
MAX_BATCH = 500  # jobs per INSERT (each has ~25 columns: well under the bind-parameter limits)


@dataclass
class _Item:
    job: dict[str, Any]  # every column of the row
    events: list[dict[str, Any]]  # every column of each event row
    written: asyncio.Future[bool]  # False: the live name was taken


class JobWriter:
    def __init__(self, sessions: async_sessionmaker[AsyncSession]) -> None:
        self.sessions = sessions
        self._queue: list[_Item] = []
        self._batch: list[_Item] = []  # being written
        self._writing: asyncio.Task[None] | None = None

    async def add(self, job: dict[str, Any], events: list[dict[str, Any]]) -> bool:
        """Write the job and its events in the next batch; False if a live job has its name.
        Raises what the write raised (the job is then not stored)."""
        item = _Item(job, events, asyncio.get_running_loop().create_future())
        self._queue.append(item)
        if self._writing is None:
            self._writing = asyncio.create_task(self._drain())
            self._writing.add_done_callback(self._abandon)
        return await item.written

    async def _drain(self) -> None:
        try:
            while self._queue:
                self._batch, self._queue = self._queue[:MAX_BATCH], self._queue[MAX_BATCH:]
                await self._write(self._batch)
        finally:
            self._writing = None

    def _abandon(self, task: asyncio.Task[None]) -> None:
        """The writer was cancelled (shutting down), maybe before it started: no caller may
        wait for ever, and the next submission starts a new writer."""
        if self._writing is task:
            self._writing = None
        if task.cancelled():
            for item in self._batch + self._queue:
                item.written.cancel()
            self._queue = []

    async def _write(self, batch: list[_Item]) -> None:
        try:
            inserted = await self._insert(batch)
        except IntegrityError as exc:
            if len(batch) > 1:
                log.info("a batch of %d jobs hit %s: writing them one by one", len(batch), exc.orig)
                for item in batch:
                    await self._write([item])
                return
            _settle(batch, error=exc)
            return
        except Exception as exc:  # the database: every caller of the batch gets the error
            _settle(batch, error=exc)
            return
        _settle(batch, inserted=inserted)

    async def _insert(self, batch: list[_Item]) -> set[uuid.UUID]:
        async with transaction(self.sessions) as session:
            rows = await session.execute(_insert_jobs(session), [item.job for item in batch])
            inserted = set(rows.scalars())
            events = [e for item in batch if item.job["id"] in inserted for e in item.events]
            if events:
                await session.execute(insert(Event.__table__), events)
        return inserted


def _insert_jobs(session: AsyncSession) -> Insert:
    """INSERT ... ON CONFLICT DO NOTHING RETURNING id, built once per dialect (SQLAlchemy sends
    the rows of an executemany as multi-row VALUES)."""
    dialect = session.get_bind().dialect.name
    statement = _INSERTS.get(dialect)
    if statement is None:
        table = Job.__table__
        statement = _INSERTS[dialect] = (
            (postgresql_insert if dialect == "postgresql" else sqlite_insert)(table)
            .on_conflict_do_nothing()
            .returning(table.c.id)
        )
    return statement


_INSERTS: dict[str, Insert] = {}


def _settle(
    batch: list[_Item], *, inserted: set[uuid.UUID] | None = None, error: Exception | None = None
) -> None:
    for item in batch:
        if item.written.done():  # its caller went away (the job is written all the same)
            continue
        if error is not None:
            item.written.set_exception(error)
        else:
            item.written.set_result(item.job["id"] in (inserted or set()))
