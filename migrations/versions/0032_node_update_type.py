"""node_update: the composite type of the rows an agent's delta sets in `nodes` (Postgres
only). A delta's UPDATE sends its rows as one array of this type instead of one array per
column: asyncpg checks each element of an array parameter in Python, so one array of rows is
a check a row where an array per column was a check a value (docs/benchmarks.md, "Deltas,
session 9"). Its attributes are the columns the UPDATE sets and matches on, in its order
(`services/inventory/deltas._UPDATED`): a change to those needs a migration of this type
(tests/global/db/test_copy_rows.py compares the two). Such a change makes a type of a new name
(`node_update_v2`) and drops this one a release later: replicas still running the old code
send rows of the old shape, and a type altered in place refuses them ("wrong number of
columns") on their open connections and new ones alike.

Revision ID: 0027_node_update_type
Revises: 0026_data_copy_job_uid
Create Date: 2026-12-06
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0027_node_update_type"
down_revision: str | None = "0026_data_copy_job_uid"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Strings as text: the assignment to the bounded column refuses a longer value (a cast to
# VARCHAR(n) would cut it silently).
_ATTRIBUTES = (
    "name text, gpu_model text, gpu_allocatable integer, gpu_used integer, "
    "cpu_allocatable_millis bigint, cpu_used_millis bigint, memory_allocatable_bytes bigint, "
    "memory_used_bytes bigint, ready boolean, schedulable boolean, labels jsonb, taints jsonb, "
    "domain_id uuid, seq bigint, cluster_id uuid"
)


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(f"CREATE TYPE node_update AS ({_ATTRIBUTES})")


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TYPE node_update")
