"""Migrations that fill what they add from the rows stored before them: clusters' node counts,
failed copies' causes and the node change log's bounds and counts (both databases)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from volcano_global.db import migrate
from volcano_global.db.base import Base, utcnow


def _cluster(cluster_id: uuid.UUID, name: str, now: datetime, **more: Any) -> dict[str, Any]:
    """A clusters row with the columns every revision since 0023 has, and `more`."""
    return (
        {"id": cluster_id, "name": name, "description": "", "labels": {}, "state": "Ready"}
        | {"created_at": now, "updated_at": now, "inventory_generation": 1}
        | {"inventory_seq": 0, "nodes_removed_seq": 0, "agent_stream_epoch": 0}
        | more
    )


def _nodes_before_usages() -> sa.Table:
    """The nodes table as it was before 0034_node_usages (the usages in its rows)."""
    nodes = Base.metadata.tables["nodes"].to_metadata(sa.MetaData())
    nodes.append_column(sa.Column("gpu_used", sa.Integer(), default=0))
    for name in ("cpu_used_millis", "memory_used_bytes"):
        nodes.append_column(sa.Column(name, sa.BigInteger(), default=0))
    return nodes


async def _insert_clusters(conn: AsyncConnection, rows: list[dict[str, Any]]) -> None:
    """Clusters rows of the columns they name (the model's later columns have defaults)."""
    clusters = Base.metadata.tables["clusters"]
    columns = (sa.column(name, clusters.c[name].type) for name in rows[0])
    await conn.execute(sa.table("clusters", *columns).insert(), rows)


async def test_clusters_get_the_counts_of_the_nodes_they_hold(empty_engine: AsyncEngine) -> None:
    """0024_cluster_node_counts fills the kept counts from the nodes already stored."""
    await migrate.upgrade(empty_engine, "0023_cluster_runs_copies")
    clusters, nodes, now = Base.metadata.tables["clusters"], _nodes_before_usages(), utcnow()
    # The clusters table as it was (the model's has the new columns, with defaults).
    before = sa.table(
        "clusters",
        *(
            sa.column(name, clusters.c[name].type)
            for name in ("id", "name", "description", "labels", "state", "created_at", "updated_at")
        ),
        *(sa.column(name, sa.Integer()) for name in ("inventory_generation", "inventory_seq")),
        *(sa.column(name, sa.Integer()) for name in ("nodes_removed_seq", "agent_stream_epoch")),
    )
    ids = {name: uuid.uuid4() for name in ("east", "west", "empty")}
    async with empty_engine.begin() as conn:
        await conn.execute(
            before.insert(),
            [_cluster(cid, name, now) for name, cid in ids.items()],
        )
        await conn.execute(
            nodes.insert(),
            [
                {"id": uuid.uuid4(), "cluster_id": ids[name], "name": f"n{i}", "ready": i % 3 > 0}
                for name, count in (("east", 7), ("west", 4))
                for i in range(count)
            ],
        )
    await migrate.upgrade(empty_engine)
    async with empty_engine.connect() as conn:
        rows = await conn.execute(
            sa.select(clusters.c.name, clusters.c.nodes_total, clusters.c.nodes_ready)
        )
        counts = {name: (total, ready) for name, total, ready in rows}
    assert counts == {"east": (7, 4), "west": (4, 2), "empty": (0, 0)}


async def test_failed_copies_get_the_cause_their_reasons_said(empty_engine: AsyncEngine) -> None:
    """0025_data_copy_cause classifies the copies failed before by the words the backoff read."""
    await migrate.upgrade(empty_engine, "0024_cluster_node_counts")
    copies, now = Base.metadata.tables["data_copies"], utcnow()
    # The data_copies table as it was (the model's has the cause).
    before = sa.table(
        "data_copies",
        *(sa.column(c.name, c.type) for c in copies.c if c.name not in ("cause", "job_uid")),
    )
    east, west = uuid.uuid4(), uuid.uuid4()
    async with empty_engine.begin() as conn:
        await _insert_clusters(
            conn,
            [
                _cluster(cid, name, now, nodes_total=0, nodes_ready=0)
                for name, cid in (("east", east), ("west", west))
            ],
        )
        reasons = {
            "ErrImagePull": ("Failed", "destination"),
            "cluster east is NotReady": ("Failed", "cluster-lost"),
            "the agent creates no job in its own namespace 'vg'": ("Failed", "namespace-refused"),
            'creating staging Job a/x: namespaces "a" not found': ("Failed", "namespace-missing"),
            'creating staging Job a/x: jobs.batch is forbidden: User "u" cannot create resource '
            '"jobs" in API group "batch" in the namespace "a"': ("Failed", "forbidden"),
            "its job was cancelled": ("Stopped", None),
        }
        rows = [
            {"id": uuid.uuid4(), "data_source": "corpus", "source_cluster_id": west}
            | {"destination_cluster_id": east, "bytes": 1, "gbps": 1.0, "purpose": "prefetch"}
            | {"namespace": "a", "item": {}, "state": state, "staged_bytes": 0, "message": ""}
            | {"reason": reason, "created_at": now, "ended_at": now}
            for reason, (state, _) in reasons.items()
        ]
        await conn.execute(before.insert(), rows)
    await migrate.upgrade(empty_engine)
    async with empty_engine.connect() as conn:
        found = dict((await conn.execute(sa.select(copies.c.reason, copies.c.cause))).all())
    assert found == {reason: cause for reason, (_, cause) in reasons.items()}


async def test_the_node_change_log_of_a_cluster_starts_at_its_sequence(
    empty_engine: AsyncEngine,
) -> None:
    """0028_node_changes: the log holds nothing of what was written before it, so each cluster's
    log covers nothing at or below its sequence (a reader behind it reads the cluster whole)."""
    await migrate.upgrade(empty_engine, "0027_node_update_type")
    clusters, now = Base.metadata.tables["clusters"], utcnow()
    rows = [
        _cluster(uuid.uuid4(), name, now, nodes_total=0, nodes_ready=0) | {"inventory_seq": seq}
        for name, seq in (("east", 41), ("west", 0))
    ]
    async with empty_engine.begin() as conn:
        await _insert_clusters(conn, rows)
    await migrate.upgrade(empty_engine)
    async with empty_engine.connect() as conn:
        found = await conn.execute(
            sa.select(clusters.c.name, clusters.c.node_changes_floor, clusters.c.node_changes_seq)
        )
        bounds = {name: (floor, seq) for name, floor, seq in found}
    assert bounds == {"east": (41, 41), "west": (0, 0)}


async def test_the_node_change_log_is_counted(empty_engine: AsyncEngine) -> None:
    """0033_node_changes_count: each row's nodes counted, and each cluster's sum."""
    await migrate.upgrade(empty_engine, "0032_node_usage_type")
    clusters, now = Base.metadata.tables["clusters"], utcnow()
    ids = {name: uuid.uuid4() for name in ("east", "west")}
    rows = [
        _cluster(cid, name, now, nodes_total=0, nodes_ready=0) | {"inventory_seq": 3}
        for name, cid in ids.items()
    ]
    log = sa.table(
        "node_changes",
        sa.column("cluster_id", sa.Uuid()),
        sa.column("seq", sa.BigInteger()),
        sa.column("nodes", Base.metadata.tables["node_changes"].c.nodes.type),
    )
    node = ["n", None, "H100", 8, 0, True, True]
    async with empty_engine.begin() as conn:
        await _insert_clusters(conn, rows)
        await conn.execute(
            log.insert(),
            [
                {"cluster_id": ids["east"], "seq": 2, "nodes": [node] * 3},
                {"cluster_id": ids["east"], "seq": 3, "nodes": [node] * 2},
            ],
        )
    await migrate.upgrade(empty_engine)
    changes = Base.metadata.tables["node_changes"]
    async with empty_engine.connect() as conn:
        counts = dict((await conn.execute(sa.select(changes.c.seq, changes.c.node_count))).all())
        held = (await conn.execute(sa.select(clusters.c.name, clusters.c.node_changes_nodes))).all()
    assert counts == {2: 3, 3: 2}
    assert dict(held) == {"east": 5, "west": 0}


async def test_a_downgrade_refills_the_domain_capacities_from_the_nodes(
    empty_engine: AsyncEngine,
) -> None:
    """0029_drop_domain_capacities, undone: the release before reads its per-domain GPUs again,
    each node's added to its domain and every domain above it (free only on a ready,
    schedulable node; a node without a model under "unknown"; a GPU-less node adds nothing)."""
    await migrate.upgrade(empty_engine)
    tables, now = Base.metadata.tables, utcnow()
    cluster_id = uuid.uuid4()
    spine, tor1, tor2, lone = (uuid.uuid4() for _ in range(4))
    domains = [(spine, "spine", 2, None), (tor1, "tor1", 1, spine), (tor2, "tor2", 1, spine)]
    domains.append((lone, "lone", 1, None))
    nodes = [  # name, domain, model, allocatable, used, ready, schedulable
        ("a", tor1, "H100", 8, 2, True, True),
        ("b", tor1, "H100", 8, 0, False, True),
        ("c", tor2, "H100", 8, 1, True, False),
        ("d", tor2, None, 4, 1, True, True),
        ("e", tor2, "A100", 0, 0, True, True),
        ("f", lone, "A100", 8, 8, True, True),
        ("g", None, "H100", 8, 0, True, True),
    ]
    async with empty_engine.begin() as conn:
        await _insert_clusters(conn, [_cluster(cluster_id, "east", now)])
        await conn.execute(
            tables["topology_domains"].insert(),
            [
                {"id": i, "cluster_id": cluster_id, "name": n, "tier": t, "parent_id": p}
                for i, n, t, p in domains
            ],
        )
        await conn.execute(
            tables["nodes"].insert(),
            [
                {"id": uuid.uuid4(), "cluster_id": cluster_id, "name": name, "domain_id": domain}
                | {"gpu_model": model, "gpu_allocatable": gpus}
                | {"ready": ready, "schedulable": schedulable}
                for name, domain, model, gpus, _, ready, schedulable in nodes
            ],
        )
        await conn.execute(
            tables["node_usages"].insert(),
            [
                {"cluster_id": cluster_id, "name": name, "gpu_used": used}
                for name, _, _, _, used, _, _ in nodes
            ],
        )
    await migrate.downgrade(empty_engine, "0028_node_changes")
    async with empty_engine.connect() as conn:
        rows = await conn.execute(sa.text("SELECT * FROM domain_gpu_capacities"))
        found = {(uuid.UUID(str(r[0])), r[1]): (r[2], r[3]) for r in rows}
    assert found == {
        (tor1, "H100"): (16, 6),
        (tor2, "H100"): (8, 0),
        (tor2, "unknown"): (4, 3),
        (spine, "H100"): (24, 6),
        (spine, "unknown"): (4, 3),
        (lone, "A100"): (8, 0),
    }


async def test_usages_move_to_their_own_rows_and_back(empty_engine: AsyncEngine) -> None:
    """0034_node_usages copies each node's usages into its node_usages row before dropping the
    columns; its downgrade puts them back."""
    await migrate.upgrade(empty_engine, "0033_node_changes_count")
    ids = {name: uuid.uuid4() for name in ("east", "west")}
    nodes, now = _nodes_before_usages(), utcnow()
    used = {("east", "a"): (3, 1_500, 2 << 30), ("east", "b"): (0, 0, 0), ("west", "a"): (8, 7, 9)}
    async with empty_engine.begin() as conn:
        await _insert_clusters(
            conn,
            [_cluster(cid, name, now, nodes_total=0, nodes_ready=0) for name, cid in ids.items()],
        )
        await conn.execute(
            nodes.insert(),
            [
                {
                    "id": uuid.uuid4(),
                    "cluster_id": ids[c],
                    "name": n,
                    "gpu_allocatable": 8,
                    "seq": 4,
                }
                | dict(zip(("gpu_used", "cpu_used_millis", "memory_used_bytes"), u, strict=True))
                for (c, n), u in used.items()
            ],
        )
    await migrate.upgrade(empty_engine)
    usages = Base.metadata.tables["node_usages"]
    names = {cid: name for name, cid in ids.items()}
    read = sa.select(
        usages.c.cluster_id,
        usages.c.name,
        usages.c.gpu_used,
        usages.c.cpu_used_millis,
        usages.c.memory_used_bytes,
        usages.c.seq,
    )
    async with empty_engine.connect() as conn:
        found = {(names[r[0]], r[1]): (r[2], r[3], r[4], r[5]) for r in await conn.execute(read)}
    assert found == {key: (*u, 4) for key, u in used.items()}
    async with empty_engine.begin() as conn:  # b removed, as the delta writer removes a node
        for table in ("nodes", "node_usages"):
            await conn.execute(sa.text(f"DELETE FROM {table} WHERE name = 'b'"))
    await migrate.downgrade(empty_engine, "0033_node_changes_count")
    async with empty_engine.connect() as conn:
        back = await conn.execute(
            sa.select(
                nodes.c.cluster_id,
                nodes.c.name,
                nodes.c.gpu_used,
                nodes.c.cpu_used_millis,
                nodes.c.memory_used_bytes,
            )
        )
        restored = {(names[r[0]], r[1]): tuple(r[2:]) for r in back}
    assert restored == {key: u for key, u in used.items() if key != ("east", "b")}
