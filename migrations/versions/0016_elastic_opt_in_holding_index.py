"""elastic resizing is opt-in: stored jobs that did not opt in lose their elastic width; an
index on the placements that hold capacity (Active, Nominated)

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-03
"""

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0016"
down_revision: str | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
PAGE = 500
ELASTIC_ANNOTATION = "global.volcano.sh/elastic"
FINISHED = ("Succeeded", "Failed", "Cancelled")
HOLDING_INDEX = "ix_placements_holding_state"
# An OR, not IN: SQLite uses a partial index only when the query's condition implies the
# index's, and its proof follows the arms of an OR but not an IN list.
HOLDING = sa.text("state = 'Active' OR state = 'Nominated'")

jobs = sa.table(
    "jobs",
    sa.column("id", sa.Uuid()),
    sa.column("state", sa.String()),
    sa.column("manifest", JSON),
    sa.column("communication", JSON),
    sa.column("split_policy", JSON),
)


def upgrade() -> None:
    _make_undeclared_jobs_rigid(op.get_bind())
    op.create_index(
        HOLDING_INDEX, "placements", ["state"], sqlite_where=HOLDING, postgresql_where=HOLDING
    )


def downgrade() -> None:
    # The widths taken away stay away: a job given minUnits 0 here reads like one submitted
    # rigid, and putting a width back would resize jobs that never asked to be (what this
    # revision stops), under revision 0015's code as much as this one's.
    op.drop_index(HOLDING_INDEX, "placements", sqlite_where=HOLDING, postgresql_where=HOLDING)


def _make_undeclared_jobs_rigid(conn: sa.Connection) -> None:
    """Set minUnits to 0 in the split policy of every unfinished job stored with an elastic
    width (minUnits > 0) that did not declare itself elastic, a page of such jobs at a time
    (in id order: nothing held in memory but the page). A finished job keeps the policy it ran
    under."""
    update = (
        jobs.update()
        .where(jobs.c.id == sa.bindparam("job"))
        .values(split_policy=sa.bindparam("policy", type_=JSON))
    )
    after = None
    while True:
        page = (
            sa.select(
                jobs.c.id,
                jobs.c.split_policy,
                jobs.c.manifest[("metadata", "annotations")],
                jobs.c.communication,
            )
            .where(jobs.c.split_policy["minUnits"].as_integer() > 0, jobs.c.state.not_in(FINISHED))
            .order_by(jobs.c.id)
            .limit(PAGE)
        )
        if after is not None:
            page = page.where(jobs.c.id > after)
        rows = conn.execute(page).all()
        if not rows:
            return
        rigid = [
            {"job": id_, "policy": {**policy, "minUnits": 0}}
            for id_, policy, annotations, communication in rows
            if not _declared_elastic(annotations, communication)
        ]
        if rigid:
            conn.execute(update, rigid)
        after = rows[-1][0]


def _declared_elastic(annotations: Any, communication: Any) -> bool:
    """Whether submission would make the job elastic, as the parser decides it at this
    revision (`jobspec/normalize._with_width`): the annotation exactly "true", or a
    `minDataParallel` in the communication plan, which the parser stored in the
    communication column. Kept here as of this revision: a migration does not import code
    that may change after it."""
    declared = isinstance(annotations, dict) and annotations.get(ELASTIC_ANNOTATION) == "true"
    planned = isinstance(communication, dict) and communication.get("minDataParallel") is not None
    return declared or planned
