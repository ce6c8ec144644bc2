"""jobs deleted through the Kubernetes-compatible API (deleted_at) leave its view but stay in
the job history; changes are read in updated_at order by its watches

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-02
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("deleted_at", sa.DateTime(timezone=True), nullable=True))
        batch_op.create_index("ix_jobs_updated_at", ["updated_at"], unique=False)
        batch_op.create_index("ix_jobs_namespace_name", ["namespace", "name"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_index("ix_jobs_namespace_name")
        batch_op.drop_index("ix_jobs_updated_at")
        batch_op.drop_column("deleted_at")
