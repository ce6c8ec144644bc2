"""jobs.updated_at indexed: `GET /api/v1/jobs?updatedSince=` (the watch of `vglobal get jobs
-w`) reads only the jobs that changed

Revision ID: 0014
Revises: 0010
Create Date: 2026-12-02
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0014"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index("ix_jobs_updated_at", "jobs", ["updated_at"])


def downgrade() -> None:
    op.drop_index("ix_jobs_updated_at", table_name="jobs")
