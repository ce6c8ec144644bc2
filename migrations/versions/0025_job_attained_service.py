"""jobs.attained_gpu_s: the GPU-seconds a job's ended runs received (its attained service),
kept across requeues for time-sharing by attained service (solver/timesharing.py); 0 for the
jobs stored before, as if their earlier runs had received nothing.

Revision ID: 0020_attained_service
Revises: 0019_staging_links
Create Date: 2026-12-05
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0020_attained_service"
down_revision: str | None = "0019_staging_links"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(
            sa.Column("attained_gpu_s", sa.Double(), nullable=False, server_default="0")
        )


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("attained_gpu_s")
