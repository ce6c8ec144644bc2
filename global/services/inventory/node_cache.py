"""SQLite: the stored nodes' capacity columns (`stored_nodes.StoredRow`) of each cluster as the
last committed transaction of deltas left them, kept in this process for the next: a delta's
usages then need no read of the nodes they name, which on SQLite's one connection holds every
other writer back (docs/benchmarks.md, "SQLite's deltas and the node change log, session
20"). Postgres, whose writers are many processes and whose read runs beside the event loop,
reads as before.

A cluster's rows are exact at the generation and sequence they were kept at: every writer of
nodes stores a new sequence (a delta) or generation (a snapshot), so rows kept at another
than the one the transaction reads under the cluster's row lock are dropped, whoever wrote
since (another process on the same file, a release that does not keep them). A transaction
takes a cluster's rows out of the cache, changes them as it writes, and puts them back when
it commits; one that rolls back leaves the cluster uncached (its next delta reads)."""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import Session, SessionTransaction

from volcano_global.db.models import Cluster

Rows = dict[str, dict[str, Any]]  # name -> the node's StoredRow
_At = tuple[int, int]  # (inventory generation, inventory sequence)

_KEPT = "stored_nodes_kept"  # session.info key: what the transaction leaves, by cluster id
_cache: dict[uuid.UUID, tuple[_At, Rows]] = {}


def caches(session: AsyncSession) -> bool:
    """Whether this session's database keeps stored nodes here (SQLite)."""
    return session.get_bind().dialect.name == "sqlite"


def take(cluster: Cluster) -> Rows | None:
    """The cluster's cached rows if they are of its state as the caller's transaction reads
    it (None: read them), out of the cache until that transaction commits them back (`keep`)."""
    entry = _cache.pop(cluster.id, None)
    if entry is None or entry[0] != (cluster.inventory_generation, cluster.inventory_seq):
        return None
    return entry[1]


def keep(session: AsyncSession, cluster: Cluster, seq: int, rows: Rows) -> None:
    """`rows` are what the cluster's named nodes hold once the session's transaction commits
    with `seq` stored: cached then (the last call for a cluster counts)."""
    kept = session.sync_session.info.setdefault(_KEPT, {})
    kept[cluster.id] = ((cluster.inventory_generation, seq), rows)


def forget(session: AsyncSession, cluster_id: uuid.UUID) -> None:
    """The session rewrites the cluster's nodes otherwise (a snapshot): nothing of it stays
    cached, before or after the commit."""
    _cache.pop(cluster_id, None)
    session.sync_session.info.setdefault(_KEPT, {})[cluster_id] = None


@event.listens_for(Session, "after_commit")
def _committed(session: Session) -> None:
    if not session.info or session.in_nested_transaction():  # a SAVEPOINT released
        return
    for cluster_id, entry in (session.info.pop(_KEPT, None) or {}).items():
        if entry is None:
            _cache.pop(cluster_id, None)
        else:
            _cache[cluster_id] = entry


@event.listens_for(Session, "after_rollback")
def _rolled_back(session: Session) -> None:
    """Any rollback, a SAVEPOINT's too: rows kept before it may hold what it undid."""
    if session.info:
        session.info.pop(_KEPT, None)


@event.listens_for(Session, "after_transaction_end")
def _ended(session: Session, transaction: SessionTransaction) -> None:
    """A session closed without commit or rollback keeps nothing for a later transaction."""
    if transaction.parent is None and session.info:
        session.info.pop(_KEPT, None)
