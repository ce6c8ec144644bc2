"""The agent's side of the share list, against a stand-in Global on a real gRPC socket: the list
goes right after the Welcome (before the inventory) and then every period the Welcome names;
a Global whose Welcome names none (the release before, which would refuse the message) never
gets it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import grpc

from core_agent.client import AgentClient
from core_agent.simulated.cluster import SimulatedCluster
from tests.core_agent.test_dispatch_end_to_end import SPEC
from tests.factories import REPLY_S, eventually, share_assignment
from volcano_global.rpc.shares import SharePhase, ShareStatus
from volcano_global.rpc.v1 import agent_pb2 as pb
from volcano_global.rpc.v1 import agent_pb2_grpc


class StandIn(agent_pb2_grpc.AgentServiceServicer):
    """Welcomes with `interval` and records the kinds of what the agent sends."""

    def __init__(self, interval: int) -> None:
        self.interval = interval
        self.kinds: list[str] = []
        self.lists: list[pb.ShareInventory] = []

    async def Connect(
        self, request_iterator: AsyncIterator[pb.AgentMessage], context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.GlobalMessage]:
        welcome = pb.Welcome(
            snapshot_required=True,
            heartbeat_interval_seconds=1,
            share_inventory_interval_seconds=self.interval,
        )
        async for message in request_iterator:
            kind = message.WhichOneof("body")
            self.kinds.append(kind)
            if kind == "hello":
                yield pb.GlobalMessage(welcome=welcome)
            elif kind == "shares":
                self.lists.append(message.shares)
            elif kind == "snapshot":
                yield pb.GlobalMessage(ack=pb.Ack(seq=message.snapshot.seq))


async def run_agent(interval: int, seconds: float, unacked: ShareStatus | None = None) -> StandIn:
    stand_in = StandIn(interval)
    server = grpc.aio.server()
    agent_pb2_grpc.add_AgentServiceServicer_to_server(stand_in, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    cluster = SimulatedCluster.from_spec("east", SPEC)
    cluster.apply_share(
        share_assignment(domains={"east-tor0000": 2}, duration_seconds=3600), lambda status: None
    )
    agent = AgentClient(cluster="east", target=f"127.0.0.1:{port}", token="t", source=cluster)
    if unacked is not None:  # a report the last stream did not get acknowledged
        agent.report(unacked)
    stop = asyncio.Event()
    task = asyncio.create_task(agent.run(stop=stop))
    try:
        await eventually(lambda: "snapshot" in stand_in.kinds)
        await asyncio.sleep(seconds)  # what the agent sends on its own meanwhile
    finally:
        stop.set()
        await asyncio.wait_for(task, timeout=REPLY_S)
        await server.stop(None)
    return stand_in


async def test_the_agent_lists_its_shares_first_and_then_every_period() -> None:
    stand_in = await run_agent(interval=1, seconds=2.5)
    assert stand_in.kinds[:3] == ["hello", "shares", "snapshot"]
    assert [s.reason for s in stand_in.lists][:3] == ["connect", "periodic", "periodic"]
    (held,) = stand_in.lists[0].shares
    assert held.placement_id == share_assignment().placement_id
    assert held.phase == pb.SHARE_PHASE_RUNNING


async def test_a_global_that_does_not_ask_for_the_list_never_gets_it() -> None:
    stand_in = await run_agent(interval=0, seconds=1.5)
    assert "shares" not in stand_in.kinds
    assert stand_in.kinds[:2] == ["hello", "snapshot"]


async def test_unacknowledged_reports_go_before_the_list() -> None:
    """A share that succeeded while the stream was down and was then deleted from the cluster
    (a TTL) is not in the list: the Global must read that it ended before the list, or it
    takes the share for lost and fails its job."""
    ended = ShareStatus(
        placement_id="7b0c6f61-3c1c-4a55-9a49-8f5a4b7f2e10", job_uid="u", phase=SharePhase.SUCCEEDED
    )
    stand_in = await run_agent(interval=60, seconds=0.2, unacked=ended)
    assert stand_in.kinds[:3] == ["hello", "job_status", "shares"]
    assert ended.placement_id not in {s.placement_id for s in stand_in.lists[0].shares}
