"""node_usage: the composite type of the rows a delta's node usages set (Postgres only; in
`nodes` until migration 0039 moved them to `node_usages`), as `node_update` is for whole
nodes (migration 0027, whose notes on changing such a type hold here too): its attributes
are the columns that UPDATE sets and matches on, in its order
(`services/inventory/node_usages.USAGE_UPDATED`; tests/global/db/test_copy_rows.py compares
the two).

Revision ID: 0032_node_usage_type
Revises: 0031_node_changes_json
Create Date: 2026-12-06
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0032_node_usage_type"
down_revision: str | None = "0031_node_changes_json"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_ATTRIBUTES = (
    "name text, gpu_used integer, cpu_used_millis bigint, memory_used_bytes bigint, "
    "seq bigint, cluster_id uuid"
)


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(f"CREATE TYPE node_usage AS ({_ATTRIBUTES})")


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TYPE node_usage")
