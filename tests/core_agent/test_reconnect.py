"""The agent when the Global ends its stream on purpose (issue 38, item 6): refused (its token
rotated) it retries slowly and reads `--token-file` again; replaced by a second agent of its
cluster it waits instead of taking the stream back at once. Against the in-process Global on
SQLite and Postgres, with a simulated cluster."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import httpx
import pytest
from fastapi import FastAPI

from core_agent.client import AgentClient
from core_agent.reconnect import Reconnect
from core_agent.simulated.cluster import ClusterSpec, SimulatedCluster
from tests.factories import REPLY_S, create_cluster, eventually
from volcano_global.backoff import Backoff


def _agent(app: FastAPI, **kwargs: object) -> AgentClient:
    spec = ClusterSpec.model_validate({"nodeGroups": [{"count": 2, "gpusPerNode": 8}]})
    return AgentClient(
        cluster="gpu-east",
        target=f"127.0.0.1:{app.state.grpc_port}",
        source=SimulatedCluster.from_spec("gpu-east", spec),
        coalesce_s=0.05,
        **kwargs,  # type: ignore[arg-type]
    )


@pytest.fixture
async def running() -> AsyncIterator[list[tuple[asyncio.Event, asyncio.Task[None]]]]:
    """Agents started by a test, stopped after it."""
    agents: list[tuple[asyncio.Event, asyncio.Task[None]]] = []
    yield agents
    for stop, task in agents:
        stop.set()
        await asyncio.wait_for(task, timeout=REPLY_S)


def _start(agent: AgentClient, running: list[tuple[asyncio.Event, asyncio.Task[None]]]) -> None:
    stop = asyncio.Event()
    running.append((stop, asyncio.create_task(agent.run(stop=stop))))


def _lines(caplog: pytest.LogCaptureFixture, text: str) -> int:
    return sum(text in record.getMessage() for record in caplog.records)


async def test_a_refused_agent_backs_off_and_reads_its_rotated_token_file(
    app: FastAPI,
    api: httpx.AsyncClient,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    running: list[tuple[asyncio.Event, asyncio.Task[None]]],
) -> None:
    """Before: a rotation left the old stream working; an agent refused at connect raised
    and exited. After: its stream ends, it logs one error naming the remedy and waits (here
    1.5 s; 10 s doubling to 5 min by default) instead of retrying at once, then connects with
    the token it reads from its file again."""
    caplog.set_level(logging.INFO, logger="core_agent")
    token_file = tmp_path / "token"
    token_file.write_text((await create_cluster(api, "gpu-east"))["agentToken"] + "\n")
    agent = _agent(app, token="", token_file=token_file)
    agent.reconnect.refused = Backoff(initial=1.5, cap=1.5)
    _start(agent, running)
    await asyncio.wait_for(agent.connected.wait(), timeout=15)

    rotated = (await api.post("/api/v1/clusters/gpu-east/token")).json()["agentToken"]
    refused = "the Global refused the agent of cluster gpu-east: UNAUTHENTICATED"
    await eventually(lambda: _lines(caplog, refused) == 1)
    await asyncio.sleep(1.0)  # within its wait: no second attempt (a hot loop makes several)
    assert _lines(caplog, refused) == 1
    assert not agent.connected.is_set()

    token_file.write_text(rotated + "\n")
    await asyncio.wait_for(agent.connected.wait(), timeout=REPLY_S)
    assert _lines(caplog, refused) == 1


async def test_a_replaced_agent_waits_before_taking_the_stream_back(
    app: FastAPI,
    api: httpx.AsyncClient,
    caplog: pytest.LogCaptureFixture,
    running: list[tuple[asyncio.Event, asyncio.Task[None]]],
) -> None:
    """Before: two agents of one cluster streamed side by side. After: the second replaces the
    first, which logs a warning and waits 5 s or more before trying again (a reconnect at
    once would take the stream back and the two would alternate many times a second)."""
    caplog.set_level(logging.INFO, logger="core_agent")
    token = (await create_cluster(api, "gpu-east"))["agentToken"]
    first, second = _agent(app, token=token), _agent(app, token=token)
    _start(first, running)
    await asyncio.wait_for(first.connected.wait(), timeout=15)
    _start(second, running)
    await asyncio.wait_for(second.connected.wait(), timeout=15)
    taken = "stream of cluster gpu-east taken over: replaced by a newer stream"
    await eventually(lambda: _lines(caplog, taken) == 1)
    since = time.monotonic()
    while time.monotonic() - since < 2.0:  # the first agent stays off for a while
        assert second.connected.is_set() and not first.connected.is_set()
        await asyncio.sleep(0.1)


def test_reconnect_delays_by_how_the_stream_ended() -> None:
    """Refused: 10 s and more; replaced: 5 s and more; cut: soon, within the heartbeat."""

    def ended(code: grpc.StatusCode) -> grpc.aio.AioRpcError:
        return grpc.aio.AioRpcError(code, grpc.aio.Metadata(), grpc.aio.Metadata(), "why")

    reconnect = Reconnect("gpu-east", "global:8081")
    reconnect.ended(ended(grpc.StatusCode.UNAUTHENTICATED), was_up=True)
    assert 7.5 <= reconnect.next_delay(5.0) <= 12.5
    reconnect.ended(ended(grpc.StatusCode.PERMISSION_DENIED), was_up=False)
    assert 15 <= reconnect.next_delay(5.0) <= 25  # doubling while refused
    reconnect.ended(ended(grpc.StatusCode.ABORTED), was_up=True)
    assert 2.5 <= reconnect.next_delay(5.0) <= 7.5
    reconnect.ended(ConnectionError("the Global closed the stream"), was_up=True)
    assert reconnect.next_delay(5.0) <= 0.3
    reconnect.ended(ended(grpc.StatusCode.UNAVAILABLE), was_up=False)
    assert reconnect.next_delay(5.0) <= 0.6
