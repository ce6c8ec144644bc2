"""data_copies.cause: what a failed copy blames (its destination, the job's namespace there, the
cluster's being lost), recorded when it fails, so the backoff reads it instead of matching the
reason's words; the copies failed before are classified once, here, by those words

Revision ID: 0025_data_copy_cause
Revises: 0024_cluster_node_counts
Create Date: 2026-12-05
"""

import re
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0025_data_copy_cause"
down_revision: str | None = "0024_cluster_node_counts"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# The rules `copy_backoff.says_nothing_of_destination` read failures by until this revision,
# copied (a migration does not change when the code does).
_REFUSED = "the agent creates no job in"
_LOST = re.compile(r"cluster \S+ is \S+")
_MISSING = re.compile(r'namespaces "[^"]+" not found')
_FORBIDDEN = re.compile(r'is forbidden: .* in the namespace "')
_COPIES = sa.table(
    "data_copies",
    sa.column("id", sa.Uuid()),
    sa.column("state", sa.String()),
    sa.column("reason", sa.Text()),
    sa.column("cause", sa.String()),
)


def _cause(reason: str) -> str:
    if reason.startswith(_REFUSED):
        return "namespace-refused"
    if _LOST.fullmatch(reason):
        return "cluster-lost"
    if _MISSING.search(reason):
        return "namespace-missing"
    if _FORBIDDEN.search(reason):
        return "forbidden"
    return "destination"


def upgrade() -> None:
    with op.batch_alter_table("data_copies") as batch:
        batch.add_column(sa.Column("cause", sa.String(32), nullable=True))
    bind = op.get_bind()
    rows = bind.execute(
        sa.select(_COPIES.c.id, _COPIES.c.reason).where(_COPIES.c.state == "Failed")
    ).all()
    by_cause: dict[str, list[object]] = {}
    for copy_id, reason in rows:
        by_cause.setdefault(_cause(reason or ""), []).append(copy_id)
    for cause, ids in by_cause.items():
        for start in range(0, len(ids), 500):
            bind.execute(
                _COPIES.update()
                .where(_COPIES.c.id.in_(ids[start : start + 500]))
                .values(cause=cause)
            )


def downgrade() -> None:
    with op.batch_alter_table("data_copies") as batch:
        batch.drop_column("cause")
