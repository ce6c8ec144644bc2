"""An agent whose shares start and end as it runs interleaves status reports with the deltas
that free ended shares' nodes. The messages that queued while the stream was busy are applied
as the run's deltas, then its reports, in one transaction each: not one transaction per change
of kind, awaited one after the other (a batch of 256 interleaved messages took seconds)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import pytest
from fastapi import FastAPI

from tests.factories import REPLY_S, eventually
from tests.grpc_stream import Stream, node, snapshot
from volcano_global.grpc import agent_service
from volcano_global.rpc.v1 import agent_pb2 as pb
from volcano_global.services.dispatch import reports
from volcano_global.services.dispatch.reports import ShareReport


def _report(seq: int) -> pb.AgentMessage:
    """A report about a placement the Global does not know (acknowledged, nothing else)."""
    status = pb.JobStatusReport(
        placement_id=str(uuid.uuid4()), phase=pb.SHARE_PHASE_RUNNING, report_seq=seq
    )
    return pb.AgentMessage(job_status=status)


def _delta(seq: int, used: int) -> pb.AgentMessage:
    return pb.AgentMessage(delta=pb.InventoryDelta(seq=seq, node_upserts=[node("n0", used=used)]))


async def test_a_mixed_run_of_deltas_and_reports_is_applied_in_two_transactions(
    app: FastAPI, east: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    applied: list[list[int]] = []  # the report numbers of each report transaction
    received = 0  # messages the stream has read off the wire (and queued)
    release = asyncio.Event()
    apply = reports.apply_reports

    async def held_apply(session: object, batch: list[ShareReport]) -> None:
        applied.append([seq_of[str(r.placement_id)] for r in batch])
        if len(applied) == 1:  # the stream is busy with its first report meanwhile
            await release.wait()
        await apply(session, batch)  # type: ignore[arg-type]

    decoded = agent_service._decoded

    async def counted(*args: object) -> AsyncIterator[pb.AgentMessage]:
        nonlocal received
        async for message in decoded(*args):  # type: ignore[arg-type]
            received += 1
            yield message

    monkeypatch.setattr(reports, "apply_reports", held_apply)
    monkeypatch.setattr(agent_service, "_decoded", counted)
    stream = Stream(app, east)
    await stream.hello()
    assert (await stream.send(snapshot(1, nodes=1))).ack.seq == 1
    first = _report(1)
    seq_of = {first.job_status.placement_id: 1}
    await stream.call.write(first)
    await eventually(lambda: len(applied) == 1)
    run = [_delta(2, used=1), _report(2), _delta(3, used=0), _report(3)]
    seq_of.update({m.job_status.placement_id: m.job_status.report_seq for m in run[1::2]})
    for message in run:
        await stream.call.write(message)
    await eventually(lambda: received == 2 + 1 + len(run))  # hello, snapshot, the first report
    release.set()
    replies = []
    while len(replies) < 3:
        reply = await asyncio.wait_for(stream.call.read(), timeout=REPLY_S)
        replies.append(reply)
    assert applied == [[1], [2, 3]]  # the run's reports in one transaction, in order
    assert [r.WhichOneof("body") for r in replies] == ["report_ack", "ack", "report_ack"]
    assert (replies[0].report_ack.report_seq, replies[1].ack.seq) == (1, 3)  # deltas: one ack
    assert replies[2].report_ack.report_seq == 3
    await stream.close()
