"""Group commit of several agent streams' inventory deltas (`services/inventory/delta_writer.py`)
over real loopback gRPC, on SQLite and Postgres: while every writer's transaction of deltas is
held up by another client, the deltas of three more streams queue, then go in one
transaction; each stream is answered only after it committed, and a bad delta or a gap
concerns its own stream alone."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import AsyncIterator, Callable

import grpc
import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import func, select, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import OperationalError

from tests.conftest import app_settings
from tests.factories import REPLY_S, create_cluster
from tests.grpc_stream import Stream, capacity, node, snapshot
from tests.sqlite_limits import limit_variables
from volcano_global.db.engine import create_engine, transaction
from volcano_global.db.models import Cluster, Node
from volcano_global.errors import TooLarge
from volcano_global.grpc.convert import delta_from
from volcano_global.rpc.v1 import agent_pb2 as pb
from volcano_global.services.inventory.delta_writer import DeltaRun
from volcano_global.services.inventory.sequence import DeltasOutcome, NumberedDelta
from volcano_global.settings import Settings

QUEUED = ["gpu-b", "gpu-c", "gpu-d"]


@pytest.fixture
def settings(database_url: str) -> Settings:
    # The streams read nothing on their own meanwhile: on SQLite (one connection) such a read
    # would wait behind the held transaction and keep its delta from queueing.
    return app_settings(
        database_url,
        agents={"stream_check_s": 600, "outbox_poll_s": 600, "outbox_safety_poll_s": 600},
    )


@contextlib.asynccontextmanager
async def writes_held(database_url: str) -> AsyncIterator[None]:
    """Another client holds what a write of deltas needs: on Postgres the clusters' rows, on
    SQLite the database's write lock."""
    url = make_url(database_url)
    if url.get_backend_name() == "sqlite":
        holder = sqlite3.connect(str(url.database), isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")
        try:
            yield
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        return
    engine = create_engine(database_url)
    try:
        async with engine.connect() as connection:
            await connection.execute(text("SELECT id FROM clusters FOR UPDATE"))
            try:
                yield
            finally:
                await connection.rollback()
    finally:
        await engine.dispose()


async def until(condition: Callable[[], bool]) -> None:
    for _ in range(1000):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("condition not reached in 10 s")


def holders(app: FastAPI) -> list[str]:
    """A cluster per writer of deltas (one on SQLite, several on Postgres), whose deltas
    occupy them all."""
    return [f"gpu-a{i}" for i in range(app.state.delta_writer.writers)]


async def synced(app: FastAPI, api: httpx.AsyncClient) -> dict[str, Stream]:
    """A stream per cluster, each with its snapshot (seq 1) applied."""
    streams = {}
    for name in holders(app) + QUEUED:
        token = str((await create_cluster(api, name))["agentToken"])
        streams[name] = Stream(app, token)
        await streams[name].hello(name)
        assert (await streams[name].send(snapshot(1))).ack.seq == 1
    return streams


def delta(seq: int, *nodes: pb.Node) -> pb.AgentMessage:
    return pb.AgentMessage(delta=pb.InventoryDelta(seq=seq, node_upserts=list(nodes)))


async def grouped(
    app: FastAPI, streams: dict[str, Stream], messages: dict[str, pb.AgentMessage]
) -> dict[str, asyncio.Task[pb.GlobalMessage]]:
    """The holders' deltas (seq 2) held up in their transactions, then `messages` queued
    behind them; returns each stream's first reply (a task), not yet answered."""
    writer = app.state.delta_writer
    for n, name in enumerate(holders(app), start=1):
        await streams[name].call.write(delta(2, node("n0", used=1)))
        await until(lambda n=n: writer.writing == n)  # its own transaction
    for name, message in messages.items():
        await streams[name].call.write(message)
    await until(lambda: writer.waiting == len(messages))
    replies = {name: asyncio.create_task(s.call.read()) for name, s in streams.items()}
    await asyncio.sleep(0.2)
    assert not any(r.done() for r in replies.values()), "answered before the commit"
    return replies


async def updated_at(app: FastAPI) -> dict[str, object]:
    async with transaction(app.state.sessions) as session:
        rows = await session.execute(select(Cluster.name, Cluster.inventory_updated_at))
        return {name: at for name, at in rows}


async def test_several_streams_deltas_are_one_transaction_acked_after_it(
    app: FastAPI, api: httpx.AsyncClient, database_url: str
) -> None:
    streams = await synced(app, api)
    async with writes_held(database_url):
        replies = await grouped(
            app,
            streams,
            {name: delta(2, node("n1", used=i + 2)) for i, name in enumerate(QUEUED)},
        )
    for task in replies.values():
        reply = await asyncio.wait_for(task, timeout=REPLY_S)
        assert (reply.WhichOneof("body"), reply.ack.seq) == ("ack", 2), reply
    for name in holders(app):
        assert await capacity(api, name) == [
            {"gpuModel": "H100", "total": 32, "free": 31, "used": 1}
        ]
    for used, name in enumerate(QUEUED, start=2):
        assert await capacity(api, name) == [
            {"gpuModel": "H100", "total": 32, "free": 32 - used, "used": used}
        ]
    # One transaction stamps its clusters alike; the holders' were others.
    stamps = await updated_at(app)
    assert stamps["gpu-b"] == stamps["gpu-c"] == stamps["gpu-d"]
    assert not {stamps[name] for name in holders(app)} & {stamps["gpu-b"]}
    for stream in streams.values():
        await stream.close()


async def test_a_bad_delta_fails_alone_and_a_gap_still_asks_for_a_resync(
    app: FastAPI, api: httpx.AsyncClient, database_url: str
) -> None:
    streams = await synced(app, api)
    async with writes_held(database_url):
        replies = await grouped(
            app,
            streams,
            {
                "gpu-b": delta(2, node("n1", used=3)),
                "gpu-c": delta(2, node("n1", used=5), node("n2", domain="nowhere")),
                "gpu-d": delta(3, node("n1", used=7)),  # seq 2 never sent
            },
        )
    for name in [*holders(app), "gpu-b"]:
        assert (await asyncio.wait_for(replies[name], timeout=REPLY_S)).ack.seq == 2
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await asyncio.wait_for(replies["gpu-c"], timeout=REPLY_S)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert caught.value.details() == "nodeUpserts[1].domain: unknown domain 'nowhere'"
    resync = (await asyncio.wait_for(replies["gpu-d"], timeout=REPLY_S)).resync
    assert (resync.reason, resync.applied_seq) == ("gap: expected seq 2, got 3", 1)

    assert await capacity(api, "gpu-b") == [
        {"gpuModel": "H100", "total": 32, "free": 29, "used": 3}
    ]
    for name in ("gpu-c", "gpu-d"):  # nothing of theirs applied
        assert await capacity(api, name) == [
            {"gpuModel": "H100", "total": 32, "free": 32, "used": 0}
        ]
    again = Stream(app, str((await api.post("/api/v1/clusters/gpu-c/token")).json()["agentToken"]))
    assert (await again.hello("gpu-c")).applied_seq == 1
    await again.close()
    for stream in streams.values():
        await stream.close()


def many(prefix: str, count: int) -> list[pb.Node]:
    return [node(f"{prefix}{i}", domain="") for i in range(count)]


async def written_together(
    app: FastAPI, database_url: str, runs: dict[str, list[pb.InventoryDelta]]
) -> dict[str, DeltasOutcome | BaseException]:
    """Each cluster's run of deltas, written in one batch of the app's delta writer (queued
    while another client holds what a write needs): each run's outcome or error."""
    writer = app.state.delta_writer
    first = [pb.InventoryDelta(seq=2, node_upserts=[node("n0", used=1)])]
    tasks = {}

    def add(name: str, run: list[pb.InventoryDelta]) -> None:
        deltas = [NumberedDelta(m.seq, delta_from(m)) for m in run]
        tasks[name] = asyncio.create_task(writer.add(DeltaRun(name, deltas)))

    async with writes_held(database_url):
        for n, name in enumerate(holders(app), start=1):
            add(name, first)
            await until(lambda n=n: writer.writing == n)  # its own transaction
        for name, run in runs.items():
            add(name, run)
        await until(lambda: writer.waiting == len(runs))
    done = await asyncio.gather(*tasks.values(), return_exceptions=True)
    return {name: outcome for name, outcome in zip(tasks, done, strict=True) if name in runs}


async def test_a_run_above_the_node_cap_is_refused_alone_before_its_nodes_are_read(
    app: FastAPI, api: httpx.AsyncClient, database_url: str
) -> None:
    """Two deltas of 20,000 new nodes each merge into one run of 40,000 names: on SQLite, read
    as bind parameters they were more than a statement takes ('too many SQL variables', an
    error that failed every run of the batch)."""
    await limit_variables(app.state.sessions.kw["bind"])
    streams = await synced(app, api)
    outcomes = await written_together(
        app,
        database_url,
        {
            "gpu-b": [
                pb.InventoryDelta(seq=2, node_upserts=many("a", 20_000)),
                pb.InventoryDelta(seq=3, node_upserts=many("b", 20_000)),
            ],
            "gpu-c": [pb.InventoryDelta(seq=2, node_upserts=[node("n1", used=2)])],
        },
    )
    assert isinstance(outcomes["gpu-b"], TooLarge), outcomes["gpu-b"]
    assert "cap of 20,000 nodes per cluster" in str(outcomes["gpu-b"])
    assert outcomes["gpu-c"] == DeltasOutcome(acked_seq=2, resync=None)
    assert await capacity(api, "gpu-c") == [
        {"gpuModel": "H100", "total": 32, "free": 30, "used": 2}
    ]
    for stream in streams.values():
        await stream.close()


async def test_a_run_naming_more_nodes_than_a_statement_takes_applies(
    app: FastAPI, api: httpx.AsyncClient, database_url: str
) -> None:
    """19,996 new nodes and 20,000 removals in one run (40,000 names, under the node cap): its
    names are read and removed in parts."""
    await limit_variables(app.state.sessions.kw["bind"])
    streams = await synced(app, api)
    outcomes = await written_together(
        app,
        database_url,
        {
            "gpu-b": [
                pb.InventoryDelta(seq=2, node_upserts=many("a", 19_996)),
                pb.InventoryDelta(seq=3, node_removals=[f"gone{i}" for i in range(20_000)]),
            ],
            "gpu-c": [pb.InventoryDelta(seq=2, node_upserts=[node("n1", used=2)])],
        },
    )
    assert outcomes == {
        "gpu-b": DeltasOutcome(acked_seq=3, resync=None),
        "gpu-c": DeltasOutcome(acked_seq=2, resync=None),
    }
    async with transaction(app.state.sessions) as session:
        count = await session.execute(
            select(func.count()).select_from(Node).join(Cluster).where(Cluster.name == "gpu-b")
        )
        assert count.scalar_one() == 20_000
    for stream in streams.values():
        await stream.close()


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)  # SQLite's own limit
async def test_a_run_whose_statement_sqlite_refuses_fails_alone(
    app: FastAPI, api: httpx.AsyncClient, database_url: str
) -> None:
    """A statement SQLite refuses for what it holds (here the read of a run's 300 names, over a
    limit of 200 bind parameters: 'too many SQL variables') is the run's fault, not the
    database's being unavailable: the batch is written again one run at a time and only that
    run fails (it failed every run of the batch)."""
    await limit_variables(app.state.sessions.kw["bind"], 200)
    streams = await synced(app, api)
    outcomes = await written_together(
        app,
        database_url,
        {
            "gpu-b": [pb.InventoryDelta(seq=2, node_removals=[f"gone{i}" for i in range(300)])],
            "gpu-c": [pb.InventoryDelta(seq=2, node_upserts=[node("n1", used=2)])],
        },
    )
    assert isinstance(outcomes["gpu-b"], OperationalError), outcomes["gpu-b"]
    assert "too many SQL variables" in str(outcomes["gpu-b"])
    assert outcomes["gpu-c"] == DeltasOutcome(acked_seq=2, resync=None)
    assert await capacity(api, "gpu-c") == [
        {"gpuModel": "H100", "total": 32, "free": 30, "used": 2}
    ]
    for stream in streams.values():
        await stream.close()
