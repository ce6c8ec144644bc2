"""The emulator's watches on the wire, as kube-apiserver's watch cache serves them: bookmarks only
when allowed (heartbeat and before the timeout), 410 for a version its bounded history no longer
holds (in-stream ERROR, or HTTP 410 when injected), selector exits with the old object, and a
stream that goes silent after its headers."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from tests.factories import REPLY_S
from tests.k8s_emulator.server import NODES, PODS, KubeEmulator

Events = list[tuple[str, dict[str, Any]]]


@pytest.fixture
async def kube() -> AsyncIterator[tuple[KubeEmulator, aiohttp.ClientSession, str]]:
    emulator = KubeEmulator(history=4)
    host = await emulator.start()
    async with aiohttp.ClientSession() as session:
        yield emulator, session, host
    await emulator.stop()


def pod(name: str, phase: str = "Running") -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ml", "labels": {"app": "x"}},
        "spec": {"nodeName": "n0", "containers": [{"name": "c"}]},
        "status": {"phase": phase},
    }


async def read_events(response: aiohttp.ClientResponse, until: int | None = None) -> Events:
    events: Events = []
    async for line in response.content:
        event = json.loads(line)
        events.append((event["type"], event["object"]))
        if until is not None and len(events) == until:
            break
    return events


async def test_bookmarks_only_when_allowed_and_ahead_of_filtered_events(kube) -> None:  # type: ignore[no-untyped-def]
    emulator, session, host = kube
    emulator.watch_cache.bookmark_interval_s = 0.2
    url = f"{host}/api/v1/pods?watch=true&timeoutSeconds=1&fieldSelector=status.phase%3DRunning"
    since = emulator.rv
    async with session.get(f"{url}&resourceVersion={since}&allowWatchBookmarks=true") as allowed:
        emulator.create(PODS, pod("done", phase="Succeeded"))  # filtered out of this watch
        events = await read_events(allowed, until=1)
    assert events[0][0] == "BOOKMARK"
    assert events[0][1]["kind"] == "Pod"
    assert int(events[0][1]["metadata"]["resourceVersion"]) == emulator.rv > since
    async with session.get(f"{url}&resourceVersion={emulator.rv}") as plain:
        assert await read_events(plain) == []  # 1 s, no bookmark without allowWatchBookmarks


async def test_a_bookmark_comes_before_the_timeout(kube) -> None:  # type: ignore[no-untyped-def]
    emulator, session, host = kube
    emulator.watch_cache.bookmark_before_deadline_s = 0.5
    loop = asyncio.get_running_loop()
    started = loop.time()
    url = f"{host}/api/v1/nodes?watch=1&timeoutSeconds=1&allowWatchBookmarks=true"
    async with session.get(f"{url}&resourceVersion={emulator.rv}") as response:
        events = await read_events(response)
    assert [kind for kind, _ in events] == ["BOOKMARK"]
    assert 0.9 < loop.time() - started < 3


async def test_a_version_the_history_no_longer_holds_is_410(kube) -> None:  # type: ignore[no-untyped-def]
    emulator, session, host = kube
    first = emulator.rv
    for i in range(6):  # history=4 per resource type: the first events fall out
        emulator.create(NODES, {"metadata": {"name": f"n{i}"}})
    recent = emulator.rv - 2
    for i in range(6):
        emulator.create(PODS, pod(f"p{i}"))  # another resource type's history
    url = f"{host}/api/v1/nodes?watch=true&timeoutSeconds=1"
    async with session.get(f"{url}&resourceVersion={first}") as response:
        assert response.status == 200
        [(kind, status)] = await read_events(response)
    assert (kind, status["code"], status["reason"]) == ("ERROR", 410, "Expired")
    async with session.get(f"{url}&resourceVersion={recent}") as response:
        events = await read_events(response, until=2)
    assert [obj["metadata"]["name"] for _, obj in events] == ["n4", "n5"]
    emulator.watch_cache.faults.expired_as_http = True
    async with session.get(f"{url}&resourceVersion={first}") as response:
        assert response.status == 410
        assert (await response.json())["reason"] == "Expired"


async def test_leaving_the_selector_sends_the_old_object(kube) -> None:  # type: ignore[no-untyped-def]
    emulator, session, host = kube
    emulator.create(PODS, pod("p"))
    url = (
        f"{host}/api/v1/pods?watch=true&timeoutSeconds=2&fieldSelector=status.phase%21%3DSucceeded"
    )
    async with session.get(f"{url}&resourceVersion={emulator.rv}") as response:
        emulator.patch(PODS, "p", {"status": {"phase": "Succeeded"}}, "ml")
        [(kind, obj)] = await read_events(response, until=1)
    assert kind == "DELETED"
    assert obj["status"]["phase"] == "Running"  # as it last matched
    assert obj["metadata"]["resourceVersion"] == str(emulator.rv)  # at the change's version


async def test_a_silent_stream_sends_headers_then_nothing(kube) -> None:  # type: ignore[no-untyped-def]
    emulator, session, host = kube
    emulator.watch_cache.faults.silent = 1
    url = f"{host}/api/v1/nodes?watch=true&timeoutSeconds=1&resourceVersion={emulator.rv}"
    silent = aiohttp.ClientTimeout(sock_read=0.5)
    async with session.get(url, timeout=silent) as response:
        assert response.status == 200  # the headers arrived
        emulator.create(NODES, {"metadata": {"name": "n0"}})
        with pytest.raises(asyncio.TimeoutError):
            await response.content.readline()
    async with session.get(url, timeout=silent) as response:  # the next watch is served
        [(kind, obj)] = await read_events(response, until=1)
    assert (kind, obj["metadata"]["name"]) == ("ADDED", "n0")


async def test_ending_watches_closes_them_cleanly(kube) -> None:  # type: ignore[no-untyped-def]
    emulator, session, host = kube
    url = f"{host}/api/v1/nodes?watch=true&timeoutSeconds=30&resourceVersion={emulator.rv}"
    async with session.get(url) as response:
        emulator.watch_cache.end_watches()
        assert await asyncio.wait_for(read_events(response), REPLY_S) == []
