"""CPU per 1,000 node updates of agents' deltas, in-process and by side: the agent building
its delta message (`SimulatedCluster` changes, then what `AgentClient` does: the touched
nodes' view, the diff against what it sent, the sent view patched, the message serialised),
the Global parsing and checking it (`delta_from`) and writing it (the process's delta writer, several clusters' runs a
transaction, as the agent service does), and the Postgres backends. No gRPC and no stream
checks or heartbeats: the per-update work alone, which agent_sync_bench.py's per-update
figures mix with the per-second work of 100 open streams.

    .venv/bin/python bench/delta_cpu_bench.py --database-url postgresql+asyncpg://postgres@127.0.0.1/DB
    .venv/bin/python bench/delta_cpu_bench.py --clusters 10 --rounds 5     # SQLite, a fresh file

Each round changes `--batch` random nodes of every cluster (a GPU count each) and sends each
cluster's delta; after the last round every cluster's stored nodes are compared with its
agent's (a mismatch fails the run). `--view` adds what a scheduling round reads after each
round of deltas (every cluster's capacity view brought up to date).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import random
import tempfile
import time

from harness import (
    backends,  # bench/ is on the path when run as a script
    cpu_seconds,
)
from in_process import started_app
from sqlalchemy import select

from core_agent.inventory import delta_of_changes
from core_agent.simulated.cluster import ClusterSpec, SimulatedCluster
from volcano_global.db.engine import transaction
from volcano_global.db.models import Cluster, NodeUse
from volcano_global.grpc.convert import delta_from, snapshot_from
from volcano_global.rpc.v1 import agent_pb2 as pb
from volcano_global.services.inventory import clusters as cluster_service
from volcano_global.services.inventory.delta_writer import DeltaRun, DeltaWriter
from volcano_global.services.inventory.sequence import NumberedDelta
from volcano_global.services.inventory.snapshots import replace_inventory
from volcano_global.services.scheduling.capacity_view import free_histograms

SPEC = {
    "nodeGroups": [{"count": 5000, "gpusPerNode": 8, "gpuModel": "H100"}],
    "topology": {"tiers": [{"name": "tor", "size": 8}, {"name": "spine", "size": 25}]},
}


async def run(args: argparse.Namespace, url: str) -> dict[str, float]:
    spec = ClusterSpec.model_validate(SPEC)
    clusters = [SimulatedCluster.from_spec(f"bench-{i:02d}", spec) for i in range(args.clusters)]
    sent = [c.current() for c in clusters]  # what each agent sent: its snapshot
    cpu = {"agents": 0.0, "check": 0.0, "write": 0.0}
    if args.view:
        cpu |= {"view": 0.0, "view postgres": 0.0}
    async with started_app(url, "vg_bench") as app, backends(url) as backend_pids:
        sessions = app.state.sessions
        for cluster, view in zip(clusters, sent, strict=True):
            cluster.take_changes()
            async with transaction(sessions) as session:
                row, _ = await cluster_service.register_cluster(
                    session, name=cluster.name, description="", labels={}
                )
                await replace_inventory(
                    session, cluster=row, snapshot=snapshot_from(view.snapshot(seq=1)), seq=1
                )
        writer = DeltaWriter(sessions)
        # The 100,000 nodes' objects out of the collector's way: a full collection would charge
        # its pass over them to whichever side happened to cross the threshold.
        gc.collect()
        gc.freeze()
        rng = random.Random(1)
        database: dict[int, float] = {}
        for n in range(args.rounds + 1):  # round 0 prepares the statements: not counted
            if n == 1:
                database = cpu_seconds(pids=await backend_pids())
                cpu = dict.fromkeys(cpu, 0.0)
            started = time.thread_time()  # the agent's and the check's work: this thread's
            sent_bytes: list[tuple[str, bytes]] = []
            for cluster, view in zip(clusters, sent, strict=True):
                for name in rng.sample(list(cluster.nodes), args.batch):
                    cluster.update_node(name, used_gpus=rng.randrange(9))
                changes = cluster.take_changes()
                delta = delta_of_changes(view, cluster, changes, n + 2, usages=True)
                if delta is not None:  # what gRPC sends
                    sent_bytes.append((cluster.name, delta.SerializeToString()))
            cpu["agents"] += time.thread_time() - started
            started = time.thread_time()
            runs = []
            for name, data in sent_bytes:  # what gRPC receives, parsed as its deserializer does
                message = pb.InventoryDelta.FromString(data)
                runs.append(DeltaRun(name, [NumberedDelta(message.seq, delta_from(message))]))
            cpu["check"] += time.thread_time() - started
            # the whole process's: SQLite works in its driver's thread
            started = time.process_time()
            await asyncio.gather(*(writer.add(run) for run in runs))
            cpu["write"] += time.process_time() - started
            if args.view:
                await _read_view(sessions, await backend_pids(), cpu)
        after = cpu_seconds(pids=await backend_pids())
        await _require_stored(sessions, clusters)
    cpu["postgres"] = sum(v - database.get(pid, 0.0) for pid, v in after.items())
    if args.view:
        cpu["postgres"] -= cpu["view postgres"]
    updates = args.rounds * args.clusters * args.batch
    return {side: seconds * 1000 / updates for side, seconds in cpu.items()}


async def _read_view(sessions, pids: set[int], cpu: dict[str, float]) -> None:  # type: ignore[no-untyped-def]
    """What a scheduling round reads of the nodes after a round of deltas: every cluster's
    capacity view brought up to date (the process's CPU, and the backends' apart)."""
    database = cpu_seconds(pids=pids)
    started = time.process_time()
    async with transaction(sessions) as session:
        rows = list((await session.execute(select(Cluster))).scalars())
        await free_histograms(session, rows)
    cpu["view"] += time.process_time() - started
    after = cpu_seconds(pids=pids)
    cpu["view postgres"] += sum(v - database.get(pid, 0.0) for pid, v in after.items())


async def _require_stored(sessions, clusters: list[SimulatedCluster]) -> None:  # type: ignore[no-untyped-def]
    """Every cluster's stored nodes hold what its agent holds (the GPUs used, the counts)."""
    async with transaction(sessions) as session:
        rows = await session.execute(
            select(Cluster.name, NodeUse.name, NodeUse.gpu_used).join(
                NodeUse, NodeUse.cluster_id == Cluster.id
            )
        )
        stored: dict[str, dict[str, int]] = {}
        for cluster, node, used in rows:
            stored.setdefault(cluster, {})[node] = used
    for cluster in clusters:
        held = {name: node.used_gpus for name, node in cluster.nodes.items()}
        if stored.get(cluster.name) != held:
            raise SystemExit(f"{cluster.name}: the stored nodes differ from the agent's")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--clusters", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--batch", type=int, default=500, help="node updates per cluster a round")
    parser.add_argument("--database-url", default=None, help="default: a fresh SQLite file")
    parser.add_argument(
        "--view",
        action="store_true",
        help="after each round, bring the scheduler's capacity views of all clusters up to date "
        "(`view`: the process's CPU; `view postgres`: the backends', taken out of `postgres`)",
    )
    args = parser.parse_args()
    url = args.database_url or f"sqlite+aiosqlite:///{tempfile.mkdtemp()}/bench.db"
    result = asyncio.run(run(args, url))
    print(
        f"{url.split(':')[0]}: {args.clusters} clusters x 5,000 nodes, {args.rounds} rounds of "
        f"{args.batch} updates per cluster; CPU s per 1,000 node updates: "
        + ", ".join(f"{side} {seconds:.4f}" for side, seconds in result.items())
    )


if __name__ == "__main__":
    main()
