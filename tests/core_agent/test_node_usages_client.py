"""The agent's node usages against a stand-in Global on a real gRPC socket: to a Global whose
Welcome takes them, a usage-only change goes as a usage; a delta of usages not acknowledged
is not resent to a Global that does not take them (the release before, which would drop them
unread): the agent sends a snapshot instead, and whole nodes from then on."""

from __future__ import annotations

from collections.abc import AsyncIterator

import grpc

from core_agent.simulated.cluster import SimulatedCluster
from tests.core_agent.stand_in import agent_streaming_to
from tests.core_agent.test_dispatch_end_to_end import SPEC
from tests.factories import eventually
from volcano_global.rpc.v1 import agent_pb2 as pb
from volcano_global.rpc.v1 import agent_pb2_grpc


class StandIn(agent_pb2_grpc.AgentServiceServicer):
    """The first stream takes usages and ends at the first delta, unacknowledged; the next
    ones do not take them. Records each stream's messages."""

    def __init__(self) -> None:
        self.streams: list[list[pb.AgentMessage]] = []

    async def Connect(
        self, request_iterator: AsyncIterator[pb.AgentMessage], context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.GlobalMessage]:
        first = not self.streams
        received: list[pb.AgentMessage] = []
        self.streams.append(received)
        applied = 0
        async for message in request_iterator:
            received.append(message)
            kind = message.WhichOneof("body")
            if kind == "hello":
                welcome = pb.Welcome(
                    applied_seq=applied if first else 1,
                    snapshot_required=first,
                    heartbeat_interval_seconds=1,
                    node_usages=first,
                )
                yield pb.GlobalMessage(welcome=welcome)
            elif kind == "snapshot":
                yield pb.GlobalMessage(ack=pb.Ack(seq=message.snapshot.seq))
            elif kind == "delta":
                if first:
                    return  # the stream ends with the delta unacknowledged
                yield pb.GlobalMessage(ack=pb.Ack(seq=message.delta.seq))


def _kinds(messages: list[pb.AgentMessage]) -> list[str]:
    return [str(m.WhichOneof("body")) for m in messages if m.WhichOneof("body") != "heartbeat"]


async def test_usages_go_only_to_a_global_that_takes_them() -> None:
    stand_in = StandIn()
    cluster = SimulatedCluster.from_spec("east", SPEC)
    node = sorted(cluster.nodes)[0]
    async with agent_streaming_to(stand_in, cluster) as agent:
        await eventually(lambda: agent.acked == 1)  # the first stream's snapshot
        cluster.update_node(node, used_gpus=3)
        await eventually(lambda: len(stand_in.streams) == 2 and agent.acked >= 2)
        cluster.update_node(node, used_gpus=5)
        await eventually(lambda: any(m.HasField("delta") for m in stand_in.streams[1]))
    first, second = stand_in.streams
    (usage_delta,) = [m.delta for m in first if m.HasField("delta")]
    assert [(u.name, u.gpu_used) for u in usage_delta.node_usages] == [(node, 3)]
    assert not usage_delta.node_upserts
    assert _kinds(second)[:2] == ["hello", "snapshot"]  # not the delta of usages again
    snapshot = next(m.snapshot for m in second if m.HasField("snapshot"))
    assert {n.name: n.gpu_used for n in snapshot.nodes}[node] == 3
    (whole,) = [m.delta for m in second if m.HasField("delta")]
    assert [(n.name, n.gpu_used) for n in whole.node_upserts] == [(node, 5)]
    assert not whole.node_usages
