"""An agent's `DataPresence` over a real gRPC stream (SQLite and Postgres): the Global adds the
cluster to each named DataSource's locality, skips a name no DataSource has, changes nothing
on a repeated list, and refuses a message that breaks the rules naming the field."""

from __future__ import annotations

import grpc
import httpx
import pytest
import yaml
from fastapi import FastAPI

from tests.data_documents import data_source
from tests.grpc_stream import Stream, snapshot
from volcano_global.rpc.data import MAX_SOURCES
from volcano_global.rpc.v1 import agent_pb2 as pb


def presence(*sources: str, reason: str = "connect") -> pb.AgentMessage:
    return pb.AgentMessage(data=pb.DataPresence(sources=sources, reason=reason))


async def apply(api: httpx.AsyncClient, document: dict) -> None:
    response = await api.post(
        "/api/v1/apply",
        content=yaml.safe_dump(document),
        headers={"Content-Type": "application/yaml"},
    )
    assert response.status_code == 200, response.text


async def clusters(api: httpx.AsyncClient, name: str) -> list[str]:
    return list((await api.get(f"/api/v1/datasources/{name}")).json()["clusters"])


async def locality_events(api: httpx.AsyncClient) -> list[str]:
    items = (await api.get("/api/v1/clusters/gpu-east/events")).json()["items"]
    return sorted(e["message"] for e in items if e["reason"] == "DataLocality")


async def test_reported_data_grows_the_locality_of_known_sources_only(
    app: FastAPI, api: httpx.AsyncClient, east: str
) -> None:
    await apply(api, data_source("corpus-v3", clusters=("gpu-west",)))
    await apply(api, data_source("ckpt-7b", clusters=("gpu-east",)))
    stream = Stream(app, east)
    welcome = await stream.hello()
    assert welcome.data_presence  # an agent may send DataPresence to this Global
    await stream.call.write(presence("corpus-v3", "ckpt-7b", "not-a-source"))
    # Messages are handled in order: once the snapshot is acknowledged, the list is applied.
    assert (await stream.reply(snapshot(1), "ack")).ack.seq == 1
    assert await clusters(api, "corpus-v3") == ["gpu-west", "gpu-east"]
    assert await clusters(api, "ckpt-7b") == ["gpu-east"]  # held already: unchanged
    assert (await api.get("/api/v1/datasources/not-a-source")).status_code == 404
    assert await locality_events(api) == ["cluster gpu-east now holds data source corpus-v3"]

    # The same list again (a reconnect, a periodic list) changes nothing more.
    await stream.call.write(presence("corpus-v3", "ckpt-7b", reason="periodic"))
    assert (await stream.reply(snapshot(2), "ack")).ack.seq == 2
    assert await clusters(api, "corpus-v3") == ["gpu-west", "gpu-east"]
    assert len(await locality_events(api)) == 1
    await stream.close()


@pytest.mark.parametrize(
    ("sources", "details"),
    [
        (
            ("corpus-v3", "Corpus_V3"),
            "data.sources[1]: 'Corpus_V3' is not a DataSource name (a DNS subdomain, <= 253)",
        ),
        (("",), "data.sources[0]: '' is not a DataSource name (a DNS subdomain, <= 253)"),
        (("a" * 254,), "data.sources[0]: "),
        (
            tuple(f"d{i}" for i in range(MAX_SOURCES + 1)),
            f"data.sources: {MAX_SOURCES + 1} names: at most {MAX_SOURCES} a message",
        ),
    ],
)
async def test_a_list_that_breaks_the_rules_ends_the_stream_naming_the_field(
    app: FastAPI, api: httpx.AsyncClient, east: str, sources: tuple[str, ...], details: str
) -> None:
    await apply(api, data_source("corpus-v3", clusters=("gpu-west",)))
    stream = Stream(app, east)
    await stream.hello()
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stream.send(presence(*sources))
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert caught.value.details().startswith(details)
    await stream.close()
    # Nothing of a refused message is applied, not even its valid names.
    assert await clusters(api, "corpus-v3") == ["gpu-west"]
