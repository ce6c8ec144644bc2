"""audit records name the token (its id) and the client address the call came from

Revision ID: 0017_audit
Revises: 0017_streamsec
Create Date: 2026-12-04
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0017_audit"
down_revision: str | None = "0017_streamsec"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # No foreign key to api_tokens: the record outlives the token row (a job's tokens go
    # with the job), and it must still say which token it was.
    with op.batch_alter_table("events", schema=None) as batch_op:
        batch_op.add_column(sa.Column("token_id", sa.Uuid(), nullable=True))
        batch_op.add_column(sa.Column("client_address", sa.String(length=64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("events", schema=None) as batch_op:
        batch_op.drop_column("client_address")
        batch_op.drop_column("token_id")
