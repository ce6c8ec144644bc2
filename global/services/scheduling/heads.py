"""The heads of every queue's line, for a round's fair order to choose from.

A round reads, per queue, its first waiting jobs by (priority, submission) - never a slice of
the whole backlog, where one tenant's thousands of jobs would hide every other queue's. Each
queue's read follows its own index range (`ix_jobs_queue_waiting`: queue, state, priority
descending, submission, id) and stops at the limit; the queues' reads go as one statement per
`QUEUES_PER_STATEMENT` queues (UNION ALL of limited sub-selects: SQLite and Postgres alike).

How many per queue (`heads_per_queue`): at least the window, so the fair order's first
`window` picks are the same as over every waiting job (within a priority a queue's jobs go in
submission order and no queue takes more than the window); the round's total (window x
depth) shared among the queues when that gives more, so that with one busy queue the planned
order still chooses short work from deep in its line. At most max(window x queues, window x
depth) rows are read.

A time-sharing queue's line is read least served first (attained GPU-seconds, then
submission), as the round orders it (`solver.queue_order`): by submission, a queue whose first
few hundred jobs were demoted would hide its new, never-run jobs from every round. That read
sorts the queue's waiting jobs (no index serves it): time-sharing queues only."""

from __future__ import annotations

import uuid
from collections.abc import Collection, Sequence

from sqlalchemy import Row, Select, select, true, union_all
from sqlalchemy.ext.asyncio import AsyncSession

from volcano_global.db.models import Job
from volcano_global.db.parts import parts
from volcano_global.services.tenancy.queues import WAITING

# Compound SELECTs hold at most 500 terms on SQLite; 100 keeps each statement modest.
QUEUES_PER_STATEMENT = 100


def heads_per_queue(window: int, depth: int, queues: int) -> int:
    """Waiting jobs read per queue: the window, or the round's total shared, if more."""
    return max(window, window * depth // max(queues, 1))


async def queue_heads(
    session: AsyncSession,
    queue_ids: Sequence[uuid.UUID],
    per_queue: int,
    *,
    excluding: Collection[uuid.UUID] = (),
    sharing: Collection[uuid.UUID] = (),
) -> list[Row[tuple[uuid.UUID, uuid.UUID, int, int, object, float | None, float]]]:
    """Per queue, its first `per_queue` waiting jobs by (priority descending, submission,
    id) - by (priority descending, attained service, submission, id) for the `sharing`
    queues -, `excluding` some: rows of (id, queue id, priority, total GPUs, submitted at,
    running estimate, attained GPU-seconds)."""
    rows: list[Row] = []
    for chunk in parts(queue_ids, QUEUES_PER_STATEMENT):
        heads = [_head_of(q, per_queue, excluding, q in sharing) for q in chunk]
        statement = heads[0] if len(heads) == 1 else union_all(*heads)
        rows += (await session.execute(statement)).all()
    return rows


# What the line is ordered by: (id, queue id, priority, total GPUs, submitted at, running
# estimate, attained GPU-seconds).
_HEAD = (
    Job.id,
    Job.queue_id,
    Job.priority,
    Job.total_gpus,
    Job.submitted_at,
    Job.running_estimate_seconds,
    Job.attained_gpu_s,
)


def _head_of(
    queue_id: uuid.UUID, limit: int, excluding: Collection[uuid.UUID], least_served: bool
) -> Select[tuple[object, ...]]:
    skipped = Job.id.not_in(list(excluding)) if excluding else true()
    served = (Job.attained_gpu_s,) if least_served else ()
    head = (
        select(*_HEAD)
        .where(Job.queue_id == queue_id, WAITING, skipped)
        .order_by(Job.priority.desc(), *served, Job.submitted_at, Job.id)
        .limit(limit)
        .subquery()
    )
    # Wrapped: a member of a compound SELECT may not have its own ORDER BY/LIMIT on SQLite.
    return select(*head.c)


async def waiting_rows(
    session: AsyncSession,
) -> list[
    Row[tuple[uuid.UUID, uuid.UUID, int, int, object, float | None, float, int, str | None, str]]
]:
    """Every waiting job by a few columns, no document: (id, queue id, priority, total GPUs,
    submitted at, running estimate, attained GPU-seconds, total pods, GPU model, kind). What a
    round that considers the whole queue orders and screens (`solver.whole_queue`)."""
    rows = await session.execute(
        select(*_HEAD, Job.total_pods, Job.gpu_model, Job.kind).where(WAITING)
    )
    return list(rows.all())
