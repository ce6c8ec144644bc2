"""Copies that belong to no share over a real gRPC stream (SQLite and Postgres): the Global
offers copy reports in its Welcome, and a report that is not a copy's ends the stream naming
the field."""

from __future__ import annotations

import uuid

import grpc
import pytest
from fastapi import FastAPI
from sqlalchemy import select

from tests.grpc_stream import Stream, snapshot
from volcano_global.db.engine import transaction
from volcano_global.db.models import Cluster
from volcano_global.rpc.v1 import agent_pb2 as pb

UUID = uuid.UUID("0b9c6a4e-0000-0000-0000-000000000001")


@pytest.mark.parametrize(
    ("report", "details"),
    [
        (pb.DataCopyReport(copy_id="c1"), "copy_report.phase"),
        (pb.DataCopyReport(phase=pb.COPY_PHASE_COPYING), "copy_report.copy_id"),
        (pb.DataCopyReport(copy_id="c1", phase=pb.COPY_PHASE_COPYING), "copy_report.copy_id"),
        (
            pb.DataCopyReport(copy_id=str(UUID), phase=pb.COPY_PHASE_COPYING, staged_bytes=2**63),
            "copy_report.staged_bytes",
        ),
        (
            pb.DataCopyReport(copy_id=str(UUID), phase=pb.COPY_PHASE_SUCCEEDED, bytes=2**64 - 1),
            "copy_report.bytes",
        ),
    ],
    ids=["no-phase", "no-id", "not-a-uuid", "staged-beyond-bigint", "bytes-beyond-bigint"],
)
async def test_a_report_that_is_not_a_copys_ends_the_stream_naming_the_field(
    app: FastAPI, east: str, report: pb.DataCopyReport, details: str
) -> None:
    stream = Stream(app, east)
    welcome = await stream.hello()
    assert welcome.data_copies  # this Global takes copy reports
    await stream.call.write(pb.AgentMessage(copy_report=report))
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stream.reply(snapshot(1), "ack")
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert details in str(caught.value.details())


async def test_a_report_on_a_copy_this_cluster_does_not_run_is_ignored(
    app: FastAPI, east: str
) -> None:
    stream = Stream(app, east)
    await stream.hello()
    unknown = pb.DataCopyReport(copy_id="0b9c6a4e-0000-0000-0000-000000000000", phase=2)
    await stream.call.write(pb.AgentMessage(copy_report=unknown))
    assert (await stream.reply(snapshot(1), "ack")).ack.seq == 1  # the stream goes on


@pytest.mark.parametrize("runs", [False, True], ids=["old-agent", "new-agent"])
async def test_the_cluster_remembers_whether_its_agent_runs_copies(
    app: FastAPI, east: str, runs: bool
) -> None:
    # A round never prefetches into a cluster whose agent said no (`Cluster.runs_copies`).
    stream = Stream(app, east)
    hello = pb.Hello(cluster="gpu-east", data_copies=runs)
    assert (await stream.send(pb.AgentMessage(hello=hello))).welcome.data_copies
    async with transaction(app.state.sessions) as session:
        said = await session.scalar(select(Cluster.runs_copies).where(Cluster.name == "gpu-east"))
    assert said is runs
