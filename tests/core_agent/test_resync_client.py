"""The agent answers a run of resync requests with one snapshot, against a stand-in Global on a
real gRPC socket: when the Global refuses a delta (a gap, a usage of a node it does not hold),
each delta queued behind it is answered with a request of its own, all made before the
snapshot was applied; one snapshot answers them all, and a request made after it is answered
again."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import grpc

from core_agent.simulated.cluster import SimulatedCluster
from tests.core_agent.stand_in import agent_streaming_to
from tests.core_agent.test_dispatch_end_to_end import SPEC
from tests.factories import eventually
from volcano_global.rpc.v1 import agent_pb2 as pb
from volcano_global.rpc.v1 import agent_pb2_grpc

HELD = 3  # deltas the stand-in holds before refusing them all


class StandIn(agent_pb2_grpc.AgentServiceServicer):
    """Acknowledges snapshots and refuses deltas. The first `HELD` deltas: the first refused
    once all have come, the others only after the agent's next snapshot has come (what a
    Global working through its queue in order answers, read by the agent after its snapshot
    went). Later deltas: each refused as it comes. A request names the applied sequence."""

    def __init__(self) -> None:
        self.kinds: list[str] = []
        self.held: list[int] = []
        self.applied = 0
        self.late = 0  # requests still owed for deltas before the snapshot

    def _request(self) -> pb.GlobalMessage:
        return pb.GlobalMessage(resync=pb.ResyncRequest(reason="gap", applied_seq=self.applied))

    async def Connect(
        self, request_iterator: AsyncIterator[pb.AgentMessage], context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.GlobalMessage]:
        async for message in request_iterator:
            kind = message.WhichOneof("body")
            if kind != "heartbeat":
                self.kinds.append(str(kind))
            if kind == "hello":
                welcome = pb.Welcome(snapshot_required=True, heartbeat_interval_seconds=1)
                yield pb.GlobalMessage(welcome=welcome)
            elif kind == "snapshot":
                for _ in range(self.late):  # made before the snapshot was applied
                    yield self._request()
                self.late = 0
                self.applied = message.snapshot.seq
                yield pb.GlobalMessage(ack=pb.Ack(seq=self.applied))
            elif kind == "delta":
                self.held.append(message.delta.seq)
                if len(self.held) >= HELD:
                    self.late = HELD - 1 if len(self.held) == HELD else 0
                    yield self._request()


async def test_one_snapshot_answers_the_requests_made_before_it() -> None:
    stand_in = StandIn()
    cluster = SimulatedCluster.from_spec("east", SPEC)
    nodes = sorted(cluster.nodes)
    async with agent_streaming_to(stand_in, cluster) as agent:
        await eventually(lambda: agent.acked == 1)
        for n in range(HELD):
            cluster.update_node(nodes[n], ready=False)
            await eventually(lambda n=n: len(stand_in.held) == n + 1)
        await eventually(lambda: stand_in.kinds.count("snapshot") >= 2)
        await asyncio.sleep(0.5)  # the other requests read meanwhile: none is answered
        assert stand_in.kinds.count("snapshot") == 2
        cluster.update_node(nodes[HELD], ready=False)  # refused after the snapshot: answered
        await eventually(lambda: stand_in.kinds.count("snapshot") >= 3)
        await asyncio.sleep(0.5)
        assert stand_in.kinds.count("snapshot") == 3
