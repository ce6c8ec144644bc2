"""job tokens and measurements reported by training processes

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-30
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("api_tokens", schema=None) as batch_op:
        batch_op.add_column(sa.Column("job_id", sa.Uuid(), nullable=True))
        batch_op.create_index(batch_op.f("ix_api_tokens_job_id"), ["job_id"], unique=False)
        batch_op.create_foreign_key(
            batch_op.f("fk_api_tokens_job_id_jobs"), "jobs", ["job_id"], ["id"], ondelete="CASCADE"
        )
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column(
                "measurements",
                sa.JSON().with_variant(postgresql.JSONB(), "postgresql"),
                nullable=True,
            )
        )


def downgrade() -> None:
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_column("measurements")
    with op.batch_alter_table("api_tokens", schema=None) as batch_op:
        batch_op.drop_constraint(batch_op.f("fk_api_tokens_job_id_jobs"), type_="foreignkey")
        batch_op.drop_index(batch_op.f("ix_api_tokens_job_id"))
        batch_op.drop_column("job_id")
