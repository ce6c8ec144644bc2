"""Group commit of agents' inventory deltas (`db/group_commit.py`): the runs of deltas of every
agent stream of this process that arrive while its transactions of deltas are being written
(one at a time on SQLite, up to four on Postgres) go into the next one. A transaction locks
its clusters' rows in name order (as every writer that locks several clusters does, so two of
them never wait on each other: `clusters.lock_clusters`), checks each stream's
standing, applies the runs (the node-only changes of all clusters together: one read, one
UPDATE, one INSERT and one upsert of the clusters' aggregates) and stores each cluster's sequence
number. A caller learns its run's outcome only once the transaction committed, so an
acknowledged delta is never lost.

A run refused for its own content or its stream's standing (an unknown domain, the node cap,
a revoked token, a newer stream), or any other error but the database's being unavailable (a
statement SQLite refuses for what it holds is the run's: `db.engine.is_unavailable`),
fails the batch, which is then written again one run at a time: only the run at fault fails.
The database unavailable fails every run of the batch (each stream ends; its agent reconnects
and resends from its last acknowledged number)."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from volcano_global.db.engine import is_unavailable, transaction
from volcano_global.db.group_commit import GroupCommit
from volcano_global.errors import Busy, DomainError, NotFound
from volcano_global.services.inventory.agent_streams import StreamClaim, require_standings
from volcano_global.services.inventory.clusters import lock_clusters
from volcano_global.services.inventory.sequence import (
    ClusterRun,
    DeltasOutcome,
    NumberedDelta,
    apply_runs_in_sequence,
)

# Runs per transaction. Grouping saves each transaction's fixed statements, which matter for
# small deltas (50 nodes: half the CPU at 20 runs a transaction) and not for large ones (500
# nodes: the same); a batch's rows are all in memory at once (100 runs of 500 nodes: ~200 MiB
# more peak RSS on Postgres).
MAX_BATCH = 25
# On Postgres, nodes per transaction and transactions at once: while one waits on the
# database the next is computed. One transaction at a time of up to 25 runs halved the
# 100 x 5,000 benchmark's updates/s against main's transaction per stream on a pool of 10
# (the Global's loop and Postgres took turns); four of at most 5,000 nodes matched it. SQLite
# has one connection and one writer: one transaction at a time, as large as it comes.
POSTGRES_WRITERS = 4
POSTGRES_MAX_NODES = 5_000


@dataclass(frozen=True)
class DeltaRun:
    """Consecutive deltas one stream received for its cluster; `claim`: the stream's standing,
    checked under the cluster's row lock (None: not an agent stream)."""

    cluster: str  # the cluster's name
    deltas: list[NumberedDelta]
    claim: StreamClaim | None = None


class _SameCluster(DomainError):
    """Two runs of one batch name the same cluster (an old stream and its replacement): they
    apply one after the other, where the old stream's is refused."""


def _alone(exc: BaseException) -> bool:
    """Whether the error may come from one run (so the others are written without it): any
    but the database's being unavailable or busy, which a rewrite one run at a time would
    only meet again once a run. The batch rolled back and each cluster's sequence number is
    checked again, so a rewrite applies nothing twice."""
    return not isinstance(exc, Busy) and not is_unavailable(exc)


def _nodes(run: DeltaRun) -> int:
    """The nodes a run names (what its transaction's statements carry)."""
    return sum(
        len(d.delta.node_upserts) + len(d.delta.node_removals) + len(d.delta.node_usages)
        for d in run.deltas
    )


class DeltaWriter:
    def __init__(
        self, sessions: async_sessionmaker[AsyncSession], *, max_nodes: int | None = None
    ) -> None:
        self.sessions = sessions
        self._max_nodes = max_nodes  # per cluster (`limits.max_cluster_nodes`)
        postgres = sessions.kw["bind"].dialect.name == "postgresql"
        self._group = GroupCommit[DeltaRun, DeltasOutcome](
            self._write,
            what="inventory delta runs",
            max_batch=MAX_BATCH,
            alone=_alone,
            writers=POSTGRES_WRITERS if postgres else 1,
            weight=_nodes,
            max_weight=POSTGRES_MAX_NODES if postgres else None,
        )

    @property
    def writers(self) -> int:
        """Transactions of deltas written at once."""
        return self._group.writers

    @property
    def waiting(self) -> int:
        """Runs queued for the next transaction."""
        return self._group.waiting

    @property
    def writing(self) -> int:
        """Runs of the transactions being written."""
        return self._group.writing

    async def add(self, run: DeltaRun) -> DeltasOutcome:
        """Apply the run in the next transaction of deltas and return its outcome (what to
        acknowledge, and whether the agent must resync), once committed. Raises what its write
        raised (then nothing of it applied)."""
        return await self._group.add(run)

    async def _write(self, runs: list[DeltaRun]) -> list[DeltasOutcome]:
        names = [run.cluster for run in runs]
        if len(set(names)) < len(names):
            raise _SameCluster("two runs of one batch name the same cluster")
        async with transaction(self.sessions) as session:
            clusters = await lock_clusters(session, names=names)
            for name in names:
                if name not in clusters:
                    raise NotFound(f"cluster {name!r} not found")
            held = [(clusters[r.cluster], r.claim) for r in runs if r.claim is not None]
            await require_standings(session, held)
            return await apply_runs_in_sequence(
                session,
                runs=[ClusterRun(clusters[r.cluster], r.deltas) for r in runs],
                max_nodes=self._max_nodes,
            )
