"""initial schema

Revision ID: 0001
Revises:
Create Date: 2026-11-30 03:43:53.630982
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:

    op.create_table(
        "clusters",
        sa.Column("name", sa.String(length=63), nullable=False),
        sa.Column("description", sa.String(length=512), nullable=False),
        sa.Column(
            "labels", sa.JSON().with_variant(postgresql.JSONB(), "postgresql"), nullable=False
        ),
        sa.Column(
            "state",
            sa.Enum(
                "Unknown", "Ready", "NotReady", name="clusterstate", native_enum=False, length=32
            ),
            nullable=False,
        ),
        sa.Column("last_heartbeat_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("inventory_generation", sa.Integer(), nullable=False),
        sa.Column("inventory_updated_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_clusters")),
        sa.UniqueConstraint("name", name=op.f("uq_clusters_name")),
    )
    op.create_table(
        "queues",
        sa.Column("name", sa.String(length=63), nullable=False),
        sa.Column("weight", sa.Integer(), nullable=False),
        sa.Column("gpu_quota", sa.Integer(), nullable=True),
        sa.Column("priority", sa.Integer(), nullable=False),
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_queues")),
        sa.UniqueConstraint("name", name=op.f("uq_queues_name")),
    )
    op.create_table(
        "api_tokens",
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column(
            "role",
            sa.Enum("admin", "agent", name="tokenrole", native_enum=False, length=32),
            nullable=False,
        ),
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("cluster_id", sa.Uuid(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.ForeignKeyConstraint(
            ["cluster_id"],
            ["clusters.id"],
            name=op.f("fk_api_tokens_cluster_id_clusters"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_api_tokens")),
        sa.UniqueConstraint("token_hash", name=op.f("uq_api_tokens_token_hash")),
    )
    with op.batch_alter_table("api_tokens", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_api_tokens_cluster_id"), ["cluster_id"], unique=False)

    op.create_table(
        "cluster_gpu_capacities",
        sa.Column("cluster_id", sa.Uuid(), nullable=False),
        sa.Column("gpu_model", sa.String(length=128), nullable=False),
        sa.Column("total_gpus", sa.Integer(), nullable=False),
        sa.Column("free_gpus", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["cluster_id"],
            ["clusters.id"],
            name=op.f("fk_cluster_gpu_capacities_cluster_id_clusters"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("cluster_id", "gpu_model", name=op.f("pk_cluster_gpu_capacities")),
    )
    op.create_table(
        "jobs",
        sa.Column("name", sa.String(length=63), nullable=False),
        sa.Column("namespace", sa.String(length=63), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("api_version", sa.String(length=64), nullable=False),
        sa.Column("queue_id", sa.Uuid(), nullable=False),
        sa.Column("priority", sa.Integer(), nullable=False),
        sa.Column("priority_class_name", sa.String(length=253), nullable=True),
        sa.Column("source", sa.Text(), nullable=False),
        sa.Column("source_format", sa.String(length=8), nullable=False),
        sa.Column(
            "manifest", sa.JSON().with_variant(postgresql.JSONB(), "postgresql"), nullable=False
        ),
        sa.Column("gang", sa.JSON().with_variant(postgresql.JSONB(), "postgresql"), nullable=False),
        sa.Column(
            "communication", sa.JSON().with_variant(postgresql.JSONB(), "postgresql"), nullable=True
        ),
        sa.Column(
            "split_policy", sa.JSON().with_variant(postgresql.JSONB(), "postgresql"), nullable=False
        ),
        sa.Column("total_pods", sa.Integer(), nullable=False),
        sa.Column("total_gpus", sa.Integer(), nullable=False),
        sa.Column("gpu_model", sa.String(length=128), nullable=True),
        sa.Column(
            "state",
            sa.Enum(
                "Pending",
                "Placed",
                "Dispatched",
                "Running",
                "Succeeded",
                "Failed",
                "Cancelled",
                name="jobstate",
                native_enum=False,
                length=32,
            ),
            nullable=False,
        ),
        sa.Column("state_message", sa.Text(), nullable=False),
        sa.Column("pending_reason", sa.Text(), nullable=True),
        sa.Column("submitted_by", sa.String(length=128), nullable=False),
        sa.Column("submitted_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("placed_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("dispatched_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.ForeignKeyConstraint(
            ["queue_id"], ["queues.id"], name=op.f("fk_jobs_queue_id_queues"), ondelete="RESTRICT"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_jobs")),
    )
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.create_index(
            "ix_jobs_queue_id_submitted_at", ["queue_id", "submitted_at"], unique=False
        )
        batch_op.create_index("ix_jobs_state_priority", ["state", "priority"], unique=False)
        batch_op.create_index("ix_jobs_submitted_at_id", ["submitted_at", "id"], unique=False)
        batch_op.create_index(
            "uq_jobs_active_namespace_name",
            ["namespace", "name"],
            unique=True,
            sqlite_where=sa.text("state NOT IN ('Succeeded', 'Failed', 'Cancelled')"),
            postgresql_where=sa.text("state NOT IN ('Succeeded', 'Failed', 'Cancelled')"),
        )

    op.create_table(
        "links",
        sa.Column("cluster_a_id", sa.Uuid(), nullable=False),
        sa.Column("cluster_b_id", sa.Uuid(), nullable=False),
        sa.Column("capacity_gbps", sa.Double(), nullable=False),
        sa.Column("latency_ms", sa.Double(), nullable=False),
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("capacity_gbps > 0", name=op.f("ck_links_positive_capacity")),
        sa.CheckConstraint("cluster_a_id <> cluster_b_id", name=op.f("ck_links_distinct_ends")),
        sa.ForeignKeyConstraint(
            ["cluster_a_id"],
            ["clusters.id"],
            name=op.f("fk_links_cluster_a_id_clusters"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["cluster_b_id"],
            ["clusters.id"],
            name=op.f("fk_links_cluster_b_id_clusters"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_links")),
        sa.UniqueConstraint(
            "cluster_a_id", "cluster_b_id", name=op.f("uq_links_cluster_a_id_cluster_b_id")
        ),
    )
    with op.batch_alter_table("links", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_links_cluster_b_id"), ["cluster_b_id"], unique=False)

    op.create_table(
        "topology_domains",
        sa.Column("cluster_id", sa.Uuid(), nullable=False),
        sa.Column("name", sa.String(length=253), nullable=False),
        sa.Column("tier", sa.Integer(), nullable=False),
        sa.Column("tier_name", sa.String(length=63), nullable=True),
        sa.Column("parent_id", sa.Uuid(), nullable=True),
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.ForeignKeyConstraint(
            ["cluster_id"],
            ["clusters.id"],
            name=op.f("fk_topology_domains_cluster_id_clusters"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["parent_id"],
            ["topology_domains.id"],
            name=op.f("fk_topology_domains_parent_id_topology_domains"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_topology_domains")),
        sa.UniqueConstraint("cluster_id", "name", name=op.f("uq_topology_domains_cluster_id_name")),
    )
    with op.batch_alter_table("topology_domains", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_topology_domains_parent_id"), ["parent_id"], unique=False
        )

    op.create_table(
        "domain_gpu_capacities",
        sa.Column("domain_id", sa.Uuid(), nullable=False),
        sa.Column("gpu_model", sa.String(length=128), nullable=False),
        sa.Column("total_gpus", sa.Integer(), nullable=False),
        sa.Column("free_gpus", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["domain_id"],
            ["topology_domains.id"],
            name=op.f("fk_domain_gpu_capacities_domain_id_topology_domains"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("domain_id", "gpu_model", name=op.f("pk_domain_gpu_capacities")),
    )
    op.create_table(
        "events",
        sa.Column("job_id", sa.Uuid(), nullable=True),
        sa.Column("cluster_id", sa.Uuid(), nullable=True),
        sa.Column(
            "type",
            sa.Enum("Normal", "Warning", name="eventtype", native_enum=False, length=32),
            nullable=False,
        ),
        sa.Column("reason", sa.String(length=128), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("count", sa.Integer(), nullable=False),
        sa.Column("first_seen_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_seen_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.ForeignKeyConstraint(
            ["cluster_id"],
            ["clusters.id"],
            name=op.f("fk_events_cluster_id_clusters"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["job_id"], ["jobs.id"], name=op.f("fk_events_job_id_jobs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_events")),
    )
    with op.batch_alter_table("events", schema=None) as batch_op:
        batch_op.create_index(
            "ix_events_cluster_id_last_seen_at", ["cluster_id", "last_seen_at"], unique=False
        )
        batch_op.create_index(
            "ix_events_job_id_last_seen_at", ["job_id", "last_seen_at"], unique=False
        )

    op.create_table(
        "nodes",
        sa.Column("cluster_id", sa.Uuid(), nullable=False),
        sa.Column("name", sa.String(length=253), nullable=False),
        sa.Column("gpu_model", sa.String(length=128), nullable=True),
        sa.Column("gpu_allocatable", sa.Integer(), nullable=False),
        sa.Column("gpu_used", sa.Integer(), nullable=False),
        sa.Column("cpu_allocatable_millis", sa.BigInteger(), nullable=False),
        sa.Column("cpu_used_millis", sa.BigInteger(), nullable=False),
        sa.Column("memory_allocatable_bytes", sa.BigInteger(), nullable=False),
        sa.Column("memory_used_bytes", sa.BigInteger(), nullable=False),
        sa.Column("ready", sa.Boolean(), nullable=False),
        sa.Column("schedulable", sa.Boolean(), nullable=False),
        sa.Column("domain_id", sa.Uuid(), nullable=True),
        sa.Column(
            "labels", sa.JSON().with_variant(postgresql.JSONB(), "postgresql"), nullable=False
        ),
        sa.Column(
            "taints", sa.JSON().with_variant(postgresql.JSONB(), "postgresql"), nullable=False
        ),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.ForeignKeyConstraint(
            ["cluster_id"],
            ["clusters.id"],
            name=op.f("fk_nodes_cluster_id_clusters"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["domain_id"],
            ["topology_domains.id"],
            name=op.f("fk_nodes_domain_id_topology_domains"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_nodes")),
        sa.UniqueConstraint("cluster_id", "name", name=op.f("uq_nodes_cluster_id_name")),
    )
    with op.batch_alter_table("nodes", schema=None) as batch_op:
        batch_op.create_index("ix_nodes_domain_id", ["domain_id"], unique=False)

    op.create_table(
        "placements",
        sa.Column("job_id", sa.Uuid(), nullable=False),
        sa.Column("generation", sa.Integer(), nullable=False),
        sa.Column(
            "state",
            sa.Enum(
                "Active",
                "Withdrawn",
                "Released",
                name="placementstate",
                native_enum=False,
                length=32,
            ),
            nullable=False,
        ),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("ended_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.ForeignKeyConstraint(
            ["job_id"], ["jobs.id"], name=op.f("fk_placements_job_id_jobs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_placements")),
    )
    with op.batch_alter_table("placements", schema=None) as batch_op:
        batch_op.create_index("ix_placements_job_id_state", ["job_id", "state"], unique=False)

    op.create_table(
        "cluster_shares",
        sa.Column("placement_id", sa.Uuid(), nullable=False),
        sa.Column("cluster_id", sa.Uuid(), nullable=False),
        sa.Column("pods", sa.Integer(), nullable=False),
        sa.Column("gpus", sa.Integer(), nullable=False),
        sa.Column("units", sa.Integer(), nullable=False),
        sa.Column("rank_offset", sa.Integer(), nullable=False),
        sa.Column(
            "domains", sa.JSON().with_variant(postgresql.JSONB(), "postgresql"), nullable=False
        ),
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.ForeignKeyConstraint(
            ["cluster_id"],
            ["clusters.id"],
            name=op.f("fk_cluster_shares_cluster_id_clusters"),
            ondelete="RESTRICT",
        ),
        sa.ForeignKeyConstraint(
            ["placement_id"],
            ["placements.id"],
            name=op.f("fk_cluster_shares_placement_id_placements"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_cluster_shares")),
    )
    with op.batch_alter_table("cluster_shares", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_cluster_shares_cluster_id"), ["cluster_id"], unique=False
        )
        batch_op.create_index(
            batch_op.f("ix_cluster_shares_placement_id"), ["placement_id"], unique=False
        )

    op.create_table(
        "link_reservations",
        sa.Column("placement_id", sa.Uuid(), nullable=False),
        sa.Column("link_id", sa.Uuid(), nullable=False),
        sa.Column("gbps", sa.Double(), nullable=False),
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.ForeignKeyConstraint(
            ["link_id"],
            ["links.id"],
            name=op.f("fk_link_reservations_link_id_links"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["placement_id"],
            ["placements.id"],
            name=op.f("fk_link_reservations_placement_id_placements"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_link_reservations")),
    )
    with op.batch_alter_table("link_reservations", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_link_reservations_link_id"), ["link_id"], unique=False)
        batch_op.create_index(
            batch_op.f("ix_link_reservations_placement_id"), ["placement_id"], unique=False
        )


def downgrade() -> None:

    with op.batch_alter_table("link_reservations", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_link_reservations_placement_id"))
        batch_op.drop_index(batch_op.f("ix_link_reservations_link_id"))

    op.drop_table("link_reservations")
    with op.batch_alter_table("cluster_shares", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_cluster_shares_placement_id"))
        batch_op.drop_index(batch_op.f("ix_cluster_shares_cluster_id"))

    op.drop_table("cluster_shares")
    with op.batch_alter_table("placements", schema=None) as batch_op:
        batch_op.drop_index("ix_placements_job_id_state")

    op.drop_table("placements")
    with op.batch_alter_table("nodes", schema=None) as batch_op:
        batch_op.drop_index("ix_nodes_domain_id")

    op.drop_table("nodes")
    with op.batch_alter_table("events", schema=None) as batch_op:
        batch_op.drop_index("ix_events_job_id_last_seen_at")
        batch_op.drop_index("ix_events_cluster_id_last_seen_at")

    op.drop_table("events")
    op.drop_table("domain_gpu_capacities")
    with op.batch_alter_table("topology_domains", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_topology_domains_parent_id"))

    op.drop_table("topology_domains")
    with op.batch_alter_table("links", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_links_cluster_b_id"))

    op.drop_table("links")
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_index(
            "uq_jobs_active_namespace_name",
            sqlite_where=sa.text("state NOT IN ('Succeeded', 'Failed', 'Cancelled')"),
            postgresql_where=sa.text("state NOT IN ('Succeeded', 'Failed', 'Cancelled')"),
        )
        batch_op.drop_index("ix_jobs_submitted_at_id")
        batch_op.drop_index("ix_jobs_state_priority")
        batch_op.drop_index("ix_jobs_queue_id_submitted_at")

    op.drop_table("jobs")
    op.drop_table("cluster_gpu_capacities")
    with op.batch_alter_table("api_tokens", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_api_tokens_cluster_id"))

    op.drop_table("api_tokens")
    op.drop_table("queues")
    op.drop_table("clusters")
