"""data_copies.job_uid: the uid of the job a copy was made for, kept when the job's row is
deleted (job_id is then set NULL), so that a destination's bar still tells the deleted
jobs' failures apart; filled from job_id for the copies made before

Revision ID: 0026_data_copy_job_uid
Revises: 0025_data_copy_cause
Create Date: 2026-12-05
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0026_data_copy_job_uid"
down_revision: str | None = "0025_data_copy_cause"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("data_copies") as batch:
        batch.add_column(sa.Column("job_uid", sa.Uuid(), nullable=True))
    op.execute("UPDATE data_copies SET job_uid = job_id WHERE job_id IS NOT NULL")


def downgrade() -> None:
    with op.batch_alter_table("data_copies") as batch:
        batch.drop_column("job_uid")
