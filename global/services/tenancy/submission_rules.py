"""What a submission is checked against - the priority classes it resolves against and the
queues' tenancy rules - read again only when queues or classes changed (issue 35: reading them
for every submission, three statements, took a submission from 3.1 to 5.6 ms of server CPU).

A change on any replica still applies to the next job. The tables' fingerprint (`mark`) moves
with every change: on Postgres each table's row count and the sum of its rows' `xmin` (every
insert, update and delete changes it, whatever the replicas' clocks say); on SQLite the row
count, the newest `updated_at` and the sum of every row's (an update stamped before the newest,
as a clock that stepped back would stamp it, still moves the sum). A transaction sees its own
writes in the fingerprint too, so a queue applied with its jobs in one request applies to them.

`submission_rules` reads the fingerprint, one small statement, and the rules afresh when it
moved. `POST /api/v1/jobs` reads nothing: it checks the job against the rules this process
read last (`last_rules`) and the job writer's batch compares their mark with the fingerprint
in the statement that writes the job (`fingerprint_sql`), writing none checked under rules
that have moved since (its submitter reads them again and checks the job anew)."""

from __future__ import annotations

import weakref
from dataclasses import dataclass

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from volcano_global.jobspec.priority_classes import PriorityClass
from volcano_global.jobspec.tenancy import TenancyDefaults, TenancyRules
from volcano_global.services.tenancy.boundary import tenancy_rules
from volcano_global.services.tenancy.priority_classes import resolution_table


# One text value, so that the job writer's batch can compare it with the mark each submission
# was checked under. SQLite's sum of stamps as 17 significant digits: the float exactly.
def _sqlite_part(table: str) -> str:
    return (
        f"(SELECT count(*) || ',' || coalesce(max(updated_at), '') || ',' || "
        f"printf('%!.17g', total(julianday(updated_at))) FROM {table})"
    )


FINGERPRINT_SQL = {
    "postgresql": "concat_ws(',', (SELECT count(*) FROM queues), "
    "(SELECT coalesce(sum(xmin::text::bigint), 0) FROM queues), "
    "(SELECT count(*) FROM priority_classes), "
    "(SELECT coalesce(sum(xmin::text::bigint), 0) FROM priority_classes))",
    "sqlite": f"{_sqlite_part('queues')} || ';' || {_sqlite_part('priority_classes')}",
}
_FINGERPRINT = {dialect: text(f"SELECT {sql}") for dialect, sql in FINGERPRINT_SQL.items()}


@dataclass(frozen=True)
class SubmissionRules:
    classes: dict[str, PriorityClass]
    default_class: str | None
    tenancy: TenancyRules
    mark: str  # the fingerprint they were read under


# Per database engine (each app has its own): the rules last read, with the defaults.
_CACHE: weakref.WeakKeyDictionary[object, tuple[TenancyDefaults, SubmissionRules]] = (
    weakref.WeakKeyDictionary()
)


async def submission_rules(session: AsyncSession, defaults: TenancyDefaults) -> SubmissionRules:
    """The priority classes, the global default class and the tenancy rules now."""
    engine = session.get_bind()
    mark = await fingerprint(session)
    cached = last_rules(engine, defaults)
    if cached is not None and cached.mark == mark:
        return cached
    classes, default_class = await resolution_table(session)
    tenancy = await tenancy_rules(session, defaults=defaults)
    rules = SubmissionRules(classes, default_class, tenancy, mark)
    _CACHE[engine] = (defaults, rules)
    return rules


def last_rules(engine: object, defaults: TenancyDefaults) -> SubmissionRules | None:
    """The rules this process read last from `engine`'s database (None if none yet, or under
    other defaults), not checked against the database: their `mark` is, where the job is
    written."""
    cached = _CACHE.get(engine)
    if cached is None or cached[0] != defaults:
        return None
    return cached[1]


async def fingerprint(session: AsyncSession) -> str:
    """The queues' and priority classes' fingerprint now, as `SubmissionRules.mark`."""
    statement = _FINGERPRINT[session.get_bind().dialect.name]
    return str((await session.execute(statement)).scalar_one())
