"""An agent's stream cut (both ends see a reset) in the middle of its inventory snapshot, of a
delta, of an assignment's delivery and of a status report, and a network partition longer than
the NotReady timeout; a TCP proxy between the agent and the Global does the cutting. After each,
the Global's inventory equals the cluster's, and jobs end as they should with nothing run twice
or left held."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from core_agent.simulated.cluster import ClusterSpec
from tests.core_agent.federation import Federation, federation
from tests.factories import eventually, job_document
from tests.faults.invariants import RecordingCluster, check_invariants, write_report
from tests.faults.proxy import Proxy, carries_message
from volcano_global.rpc.v1 import agent_pb2 as pb

BIG = ClusterSpec.model_validate(  # 2,000 nodes: a snapshot of ~300 KB, many TCP chunks
    {
        "nodeGroups": [{"count": 2000, "gpusPerNode": 8, "gpuModel": "H100"}],
        "topology": {"tiers": [{"name": "tor", "size": 16}, {"name": "spine", "size": 25}]},
    }
)
SMALL = ClusterSpec.model_validate(
    {
        "nodeGroups": [{"count": 8, "gpusPerNode": 8, "gpuModel": "H100"}],
        "topology": {"tiers": [{"name": "tor", "size": 4}]},
    }
)


async def same_inventory(fed: Federation, cluster: RecordingCluster) -> None:
    """Wait until the Global's view of the cluster equals the cluster (nodes, readiness, GPUs
    in use) and the cluster is Ready."""
    nodes = cluster.nodes.values()
    want = {
        "state": "Ready",
        "nodes": {"total": len(nodes), "ready": sum(n.ready for n in nodes)},
        # the Global counts a node that is not ready as fully used (nothing can go there)
        "gpus": (
            sum(n.gpus for n in nodes),
            sum(n.used_gpus if n.ready else n.gpus for n in nodes),
        ),
    }
    seen: dict[str, Any] = {}

    async def check() -> bool:
        nonlocal seen
        body = (await fed.api.get(f"/api/v1/clusters/{cluster.name}")).json()
        capacity = body["capacity"]
        seen = {
            "state": body["state"],
            "nodes": body["nodes"],
            "gpus": (sum(c["total"] for c in capacity), sum(c["used"] for c in capacity)),
        }
        return seen == want

    try:
        await eventually(check)
    except AssertionError:
        raise AssertionError(f"Global sees {seen}, the cluster is {want}") from None


async def cut_and_recover(
    proxy: Proxy,
    direction: str,
    *,
    forward: bool,
    when: Callable[[bytes, int], bool],
    act: Callable[[], Awaitable[None]] | None = None,
) -> None:
    fired = proxy.cut_when(direction, when, forward=forward)
    if act is not None:
        await act()
    await asyncio.wait_for(fired.wait(), timeout=20)


def job(name: str, seconds: str) -> dict[str, Any]:
    return job_document(name, replicas=2, runningEstimate=seconds)


async def test_cuts_in_snapshot_delta_assignment_and_report(database_url: str) -> None:
    cuts: dict[str, int] = {}
    async with federation(database_url) as fed:
        proxy = Proxy(fed.grpc_address)
        target = await proxy.start()
        east = RecordingCluster.from_spec("east", BIG)
        east.time_scale = 0.05

        # 1. The first snapshot (113 KB) cut after its first 20 KB or more went through.
        fired = proxy.cut_when("up", lambda c, sent: sent + len(c) > 20_000, forward=True)
        agent = await fed.join("east", east, target=target)
        await asyncio.wait_for(fired.wait(), timeout=30)
        assert agent.acked == 0  # the Global never had all of it
        cuts["snapshot, mid-message"] = 1
        await same_inventory(fed, east)

        # 2. A delta lost on its way up; then a delta delivered but its ack lost on the way down.
        names = sorted(east.nodes)

        async def change(offset: int) -> None:
            for name in names[offset : offset + 50]:
                east.update_node(name, used_gpus=3, ready=offset % 2 == 0)

        first = names[0].encode()  # in the delta only (heartbeats do not name nodes)
        await cut_and_recover(
            proxy, "up", forward=False, when=lambda c, s: first in c, act=lambda: change(0)
        )
        cuts["delta, lost on the way up"] = 1
        await same_inventory(fed, east)
        await cut_and_recover(
            proxy,
            "down",
            forward=False,
            when=lambda c, s: carries_message(c),
            act=lambda: change(51),
        )
        assert agent.acked < agent.seq  # what was cut was the delta's ack
        cuts["delta applied, its ack lost"] = 1
        await same_inventory(fed, east)
        for name in names[:120]:
            east.update_node(name, used_gpus=0, ready=True)
        await same_inventory(fed, east)

        # 3. An assignment lost on its way down (it carries the job's name).
        accepted: dict[str, str] = {}
        marker = b"lost-assignment"
        fired = proxy.cut_when("down", lambda c, s: marker in c, forward=False)
        accepted["ml/lost-assignment"] = await fed.submit(job("lost-assignment", "20s"))
        await asyncio.wait_for(fired.wait(), timeout=20)
        cuts["assignment, lost on the way down"] = 1
        await fed.reach(accepted["ml/lost-assignment"], "Succeeded")

        # 4. An assignment delivered and the stream cut at once; then the agent's report about
        # it (it names the job's uid) cut on its way up on the next stream.
        marker = b"lost-report"
        delivered = proxy.cut_when("down", lambda c, s: marker in c, forward=True)
        uid = await fed.submit(job("lost-report", "20s"))
        accepted["ml/lost-report"] = uid
        reported = proxy.cut_when("up", lambda c, s: uid.encode() in c, forward=False)
        await asyncio.wait_for(delivered.wait(), timeout=20)
        cuts["assignment delivered, stream cut before the report"] = 1
        await asyncio.wait_for(reported.wait(), timeout=20)
        cuts["report, lost on the way up"] = 1
        await fed.reach(accepted["ml/lost-report"], "Succeeded")

        # 5. The report that the job succeeded, lost on its way up: no assignment is left to
        # redeliver, so only the agent's resending of unacknowledged reports can finish it.
        uid = await fed.submit(job("lost-success", "20s"))
        accepted["ml/lost-success"] = uid
        succeeded = pb.JobStatusReport(phase=pb.SHARE_PHASE_SUCCEEDED).SerializeToString()
        finished = proxy.cut_when(
            "up", lambda c, s: uid.encode() in c and succeeded in c, forward=False
        )
        await asyncio.wait_for(finished.wait(), timeout=20)
        cuts["report of success, lost on the way up"] = 1
        await fed.reach(uid, "Succeeded")
        await same_inventory(fed, east)

        await asyncio.sleep(0.5)  # the last acknowledgements
        checked = await check_invariants(database_url, {"east": east}, accepted=accepted)
        assert proxy.accepted >= 1 + len(cuts)  # the agent came back after every cut
    write_report(
        f"stream-cuts-{database_url.split('+')[0]}",
        {
            "cuts": cuts,
            "reconnections": proxy.accepted - 1,
            "invariants checked": dict(checked.counts),
        },
    )


async def test_partition_longer_than_the_notready_timeout(database_url: str) -> None:
    """East is cut off (no bytes either way, connections kept) while its share runs: it turns
    NotReady, the job is requeued and runs in west; when the partition heals, east's agent is
    back, gets the cancellation of its old share and frees its GPUs."""
    async with federation(database_url, agents={"heartbeat_timeout_s": 3}) as fed:
        proxy = Proxy(fed.grpc_address)
        target = await proxy.start()
        east, west = (
            RecordingCluster.from_spec("east", SMALL),
            RecordingCluster.from_spec("west", SMALL),
        )
        for cluster in (east, west):
            cluster.time_scale = 0.05
        await fed.join("east", east, target=target)
        await fed.ready("east")
        uid = await fed.submit(job("partitioned", "200s"))  # 10 s at this time scale
        running = await fed.reach(uid, "Running")
        assert [s["cluster"] for s in running["placement"]["shares"]] == ["east"]
        await fed.join("west", west)
        await fed.ready("west")

        proxy.partition()
        message = await fed.event(uid, "PodEvicted")
        assert "east" in message
        moved = await fed.reach(uid, "Running")
        assert [s["cluster"] for s in moved["placement"]["shares"]] == ["west"]
        assert any(n.used_gpus for n in east.nodes.values())  # east does not know yet
        proxy.heal()

        await eventually(lambda: not any(n.used_gpus for n in east.nodes.values()))
        await fed.reach(uid, "Succeeded")
        await same_inventory(fed, east)
        await asyncio.sleep(0.5)
        checked = await check_invariants(
            database_url,
            {"east": east, "west": west},
            accepted={"ml/partitioned": uid},
            runs_once=False,
        )
        reasons = await fed.reasons(uid)
        assert reasons.count("Succeeded") == 1
        assert reasons.count("PodEvicted") == 1
    write_report(
        f"partition-{database_url.split('+')[0]}",
        {"partitions": 1, "invariants checked": dict(checked.counts)},
    )
