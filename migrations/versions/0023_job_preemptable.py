"""jobs.preemptable: Volcano's `volcano.sh/preemptable` annotation, read once at submission
instead of from the stored document in each round's SQL; stored jobs take it from their
documents.

Revision ID: 0018_preemptable
Revises: 0017_hour3
Create Date: 2026-12-05
"""

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0018_preemptable"
down_revision: str | None = "0018_data"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
PAGE = 500
PREEMPTABLE = "volcano.sh/preemptable"

jobs = sa.table(
    "jobs",
    sa.column("id", sa.Uuid()),
    sa.column("manifest", JSON),
    sa.column("preemptable", sa.Boolean()),
)


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(
            sa.Column("preemptable", sa.Boolean(), nullable=False, server_default=sa.true())
        )
    _mark_unpreemptable_jobs(op.get_bind())


def downgrade() -> None:
    # The annotation stays in each stored document, where the revision before reads it.
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("preemptable")


def _mark_unpreemptable_jobs(conn: sa.Connection) -> None:
    """Set preemptable false on every job whose document says "false", a page of jobs at a time
    in id order (nothing held in memory but the page's annotations). Read in Python: the same
    code on SQLite and Postgres, whatever each makes of a JSON path."""
    update = jobs.update().where(jobs.c.id == sa.bindparam("job")).values(preemptable=False)
    after = None
    while True:
        page = (
            sa.select(jobs.c.id, jobs.c.manifest[("metadata", "annotations")])
            .order_by(jobs.c.id)
            .limit(PAGE)
        )
        if after is not None:
            page = page.where(jobs.c.id > after)
        rows = conn.execute(page).all()
        if not rows:
            return
        pinned = [{"job": id_} for id_, annotations in rows if not _preemptable(annotations)]
        if pinned:
            conn.execute(update, pinned)
        after = rows[-1][0]


def _preemptable(annotations: Any) -> bool:
    """As the rounds read it before this revision: anything but exactly "false" (or no
    annotation) and the job may be preempted. Kept here as of this revision: a migration does
    not import code that may change after it."""
    return not (isinstance(annotations, dict) and annotations.get(PREEMPTABLE) == "false")
