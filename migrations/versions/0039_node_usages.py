"""node_usages: what the pods on each node use, moved out of `nodes` into a narrow row per
node (keyed by cluster and name, written and removed with its node by the code: no foreign
key, whose row-at-a-time check slowed Postgres' full sync). An agent's usages change many nodes
a second; on SQLite, updating the node's whole row dirtied most of a cluster's pages for 500
random nodes (docs/benchmarks.md, "Where SQLite's deltas go, session 21"). Existing nodes'
usages are copied, then `nodes.gpu_used`, `cpu_used_millis` and `memory_used_bytes` dropped
(on Postgres the `node_update` type loses the same attributes: migration 0027).

Not additive: a replica of an earlier release writes and reads the dropped columns, so it
fails on this schema. Stop every replica of the earlier release before migrating (agents
reconnect and resend what was not acknowledged; nothing accepted is lost).

Revision ID: 0034_node_usages
Revises: 0033_node_changes_count
Create Date: 2026-12-07
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0034_node_usages"
down_revision: str | None = "0033_node_changes_count"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_USAGES = ("gpu_used", "cpu_used_millis", "memory_used_bytes")
_COPIED = ("cluster_id", "name", *_USAGES, "seq")
# node_update as migration 0027 made it (the downgrade makes it again in this order).
_NODE_UPDATE_BEFORE = (
    "name text, gpu_model text, gpu_allocatable integer, gpu_used integer, "
    "cpu_allocatable_millis bigint, cpu_used_millis bigint, memory_allocatable_bytes bigint, "
    "memory_used_bytes bigint, ready boolean, schedulable boolean, labels jsonb, taints jsonb, "
    "domain_id uuid, seq bigint, cluster_id uuid"
)


def upgrade() -> None:
    op.create_table(
        "node_usages",
        sa.Column("cluster_id", sa.Uuid(), nullable=False),
        sa.Column("name", sa.String(length=253), nullable=False),
        sa.Column("gpu_used", sa.Integer(), nullable=False),
        sa.Column("cpu_used_millis", sa.BigInteger(), nullable=False),
        sa.Column("memory_used_bytes", sa.BigInteger(), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("cluster_id", "name", name=op.f("pk_node_usages")),
        sqlite_with_rowid=False,
        postgresql_with={"fillfactor": 85},  # models.NODES_FILLFACTOR
    )
    columns = ", ".join(_COPIED)
    op.execute(f"INSERT INTO node_usages ({columns}) SELECT {columns} FROM nodes")
    with op.batch_alter_table("nodes") as batch:  # SQLite: the table copied once, any version
        for column in _USAGES:
            batch.drop_column(column)
    if op.get_bind().dialect.name == "postgresql":
        # Altered in place, not renamed as migration 0027 advises: a replica of an earlier
        # release fails on the dropped columns anyway, so none may run beside this schema.
        op.execute(
            "ALTER TYPE node_update " + ", ".join(f"DROP ATTRIBUTE {column}" for column in _USAGES)
        )


def downgrade() -> None:
    for column, kind in zip(_USAGES, ("INTEGER", "BIGINT", "BIGINT"), strict=True):
        op.execute(f"ALTER TABLE nodes ADD COLUMN {column} {kind} NOT NULL DEFAULT 0")
    for column in _USAGES:
        op.execute(
            f"UPDATE nodes SET {column} = coalesce((SELECT u.{column} FROM node_usages AS u "
            "WHERE u.cluster_id = nodes.cluster_id AND u.name = nodes.name), 0)"
        )
    op.drop_table("node_usages")
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TYPE node_update")
        op.execute(f"CREATE TYPE node_update AS ({_NODE_UPDATE_BEFORE})")
