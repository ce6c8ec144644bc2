"""an index on each queue's waiting line: (queue, state, priority descending, submission, id)

Revision ID: 0017_fairness
Revises: 0017_audit
Create Date: 2026-12-04
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0017_fairness"
down_revision: str | None = "0017_audit"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

INDEX = "ix_jobs_queue_waiting"


def upgrade() -> None:
    op.create_index(
        INDEX, "jobs", ["queue_id", "state", sa.text("priority DESC"), "submitted_at", "id"]
    )


def downgrade() -> None:
    op.drop_index(INDEX, "jobs")
