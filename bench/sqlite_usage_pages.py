"""What a delta's usage UPDATE costs SQLite, by where the usage columns live: the `nodes` table
as it was before migration 0039, the usages in each node's row (the UPDATE
`copy_rows.update_tuples` issued then), against a narrow table of the usages alone, keyed by
cluster and name, WITHOUT ROWID (what `node_usages` is since), for nodes with as many labels
as you give them. No server: sqlite3 on a file, one
transaction per batch of `--clusters-a-batch` clusters x `--batch` random nodes each, as the
delta writer's group commit makes them.

    .venv/bin/python bench/sqlite_usage_pages.py                  # the benchmark's nodes: no labels
    .venv/bin/python bench/sqlite_usage_pages.py --labels 30      # nodes labelled like a GPU node

Reports CPU ms a 1,000 updates (this process: SQLite runs in it) and the pages each table
takes per cluster. Why it matters: a usage rewrites its node's row, and a delta of 500 random
nodes of 5,000 dirties most of a cluster's pages, each a 4 KiB frame in the WAL and again in
the checkpoint (docs/benchmarks.md, "Where SQLite's deltas go, session 21")."""

from __future__ import annotations

import argparse
import random
import sqlite3
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from sqlalchemy.dialects import sqlite
from sqlalchemy.schema import CreateIndex, CreateTable

from volcano_global.db import json_text
from volcano_global.db.models import Node

_NARROW = (
    "CREATE TABLE usages (cluster_id CHAR(32) NOT NULL, name VARCHAR(253) NOT NULL, "
    "gpu_used INTEGER NOT NULL, cpu_used_millis BIGINT NOT NULL, memory_used_bytes BIGINT "
    "NOT NULL, seq BIGINT NOT NULL, PRIMARY KEY (cluster_id, name)) WITHOUT ROWID"
)
_USED = ("gpu_used", "cpu_used_millis", "memory_used_bytes")
_SET = "gpu_used = ?, cpu_used_millis = ?, memory_used_bytes = ?, seq = ?"


def _labels(n: int, node: int) -> dict[str, str]:
    """`n` labels shaped like a GPU node's (kubernetes.io/*, nvidia.com/gpu.*, node feature
    discovery): prefixed keys, short values, one of them the node's own name."""
    labels = {"kubernetes.io/hostname": f"gpu-node-{node:05d}"}
    for i in range(n - 1):
        labels[f"feature.node.kubernetes.io/cpu-cpuid.feature-{i:02d}"] = "true"
    return labels


def _create(db: sqlite3.Connection, clusters: list[str], nodes: int, labels: int) -> None:
    dialect = sqlite.dialect()
    # The foreign keys name tables not made here: SQLite checks them only when asked to.
    db.execute(str(CreateTable(Node.__table__).compile(dialect=dialect)))
    for index in Node.__table__.indexes:
        db.execute(str(CreateIndex(index).compile(dialect=dialect)))
    for column, kind in zip(_USED, ("INTEGER", "BIGINT", "BIGINT"), strict=True):
        # `nodes` as it was before migration 0039: the usages in each node's row.
        db.execute(f"ALTER TABLE nodes ADD COLUMN {column} {kind} NOT NULL DEFAULT 0")
    db.execute(_NARROW)
    columns = [c.name for c in Node.__table__.columns] + list(_USED)
    insert = f"INSERT INTO nodes ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})"
    db.execute("BEGIN")
    for cluster in clusters:
        domains = [uuid.uuid4().hex for _ in range(nodes // 8 + 1)]
        rows = []
        for i in range(nodes):
            values: dict[str, Any] = {
                "id": uuid.uuid4().hex,
                "cluster_id": cluster,
                "name": f"node-{i:05d}",
                "gpu_model": "H100",
                "gpu_allocatable": 8,
                "gpu_used": 0,
                "cpu_allocatable_millis": 192_000,
                "cpu_used_millis": 0,
                "memory_allocatable_bytes": 2 << 40,
                "memory_used_bytes": 0,
                "ready": 1,
                "schedulable": 1,
                "domain_id": domains[i // 8],
                "labels": json_text.dumps(_labels(labels, i)) if labels else "{}",
                "taints": "[]",
                "updated_at": "2026-12-07 00:00:00.000000",
                "seq": 1,
            }
            rows.append(tuple(values[c] for c in columns))
        db.executemany(insert, rows)
    db.execute(
        "INSERT INTO usages SELECT cluster_id, name, gpu_used, cpu_used_millis, "
        "memory_used_bytes, seq FROM nodes"
    )
    db.execute("COMMIT")


def _batches(args: argparse.Namespace, clusters: list[str]) -> list[list[tuple[str, str, int]]]:
    rng = random.Random(1)
    return [
        [
            (cluster, f"node-{i:05d}", rng.randrange(9))
            for cluster in rng.sample(clusters, args.clusters_a_batch)
            for i in rng.sample(range(args.nodes), args.batch)
        ]
        for _ in range(args.batches)
    ]


def _run(db: sqlite3.Connection, sql: str, batches: list[Any], wide: bool) -> float:
    """CPU ms a 1,000 updates of the batches, each in its own transaction."""
    started = time.process_time()
    for seq, batch in enumerate(batches, 2):
        if wide:  # as update_tuples binds it: the constants after the changed columns
            params = [(u, 0, 0, seq, "2026-12-07 00:00:01.000000", c, n) for c, n, u in batch]
        else:
            params = [(u, 0, 0, seq, c, n) for c, n, u in batch]
        db.execute("BEGIN")
        db.executemany(sql, params)
        db.execute("COMMIT")
    return (time.process_time() - started) * 1000 / (sum(map(len, batches)) / 1000)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--clusters", type=int, default=100)
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--labels", type=int, default=0, help="labels a node (0: the benchmark's)")
    parser.add_argument("--batch", type=int, default=500, help="nodes a cluster a delta")
    parser.add_argument("--clusters-a-batch", type=int, default=25)
    parser.add_argument("--batches", type=int, default=10, help="transactions a measurement")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        db = sqlite3.connect(Path(tmp) / "usages.db", isolation_level=None)
        for pragma in ("journal_mode=wal", "synchronous=normal", "cache_size=-65536"):
            db.execute(f"PRAGMA {pragma}")
        clusters = [uuid.uuid4().hex for _ in range(args.clusters)]
        _create(db, clusters, args.nodes, args.labels)
        pages = dict(db.execute("SELECT name, count(*) FROM dbstat GROUP BY name").fetchall())
        wide = f"UPDATE nodes SET {_SET}, updated_at = ? WHERE cluster_id = ? AND name = ?"
        narrow = f"UPDATE usages SET {_SET} WHERE cluster_id = ? AND name = ?"
        for _ in range(args.repeat):
            on_nodes = _run(db, wide, _batches(args, clusters), wide=True)
            on_usages = _run(db, narrow, _batches(args, clusters), wide=False)
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            print(
                f"labels {args.labels}: CPU ms a 1,000 updates: nodes {on_nodes:.1f}, "
                f"narrow usages {on_usages:.1f} ({on_nodes / on_usages:.2f}x)"
            )
        print(
            f"pages a cluster: nodes {pages['nodes'] / args.clusters:.0f}, "
            f"narrow usages {pages['usages'] / args.clusters:.0f}"
        )


if __name__ == "__main__":
    main()
