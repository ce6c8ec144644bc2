"""The watcher as client-go's reflector, through kubernetes-asyncio over HTTP against the
emulator: a watch that ends is resumed from the last version without a list; bookmarks move
that version on; 410 means exactly one list; a silent stream is given up and recovered; events
stay JSON."""

from __future__ import annotations

import asyncio
import random
import socket
from collections.abc import AsyncIterator
from urllib.parse import parse_qs, urlsplit

import pytest
from kubernetes_asyncio import client

from core_agent.kubernetes.adapter import KubeApi, Transient, api_client
from core_agent.kubernetes.source import BOUND_PODS, NODES
from core_agent.kubernetes.transport import KEEPALIVE_IDLE_S, Timeouts
from core_agent.kubernetes.watcher import Progress, Store, watch_forever
from tests.core_agent.kube_objects import node, pod
from tests.factories import eventually
from tests.k8s_emulator.server import NODES as NODE_GVR
from tests.k8s_emulator.server import PODS, KubeEmulator

FAST = Timeouts(connect_s=2, read_s=2, watch_grace_s=0.3)


@pytest.fixture
async def small() -> AsyncIterator[tuple[KubeEmulator, KubeApi]]:
    """An emulator whose watch history holds 5 events per resource type."""
    emulator = KubeEmulator(history=5)
    host = await emulator.start()
    api = await api_client(host=host, timeouts=FAST)
    yield emulator, KubeApi(api)
    await api.close()
    await emulator.stop()


def requests(emulator: KubeEmulator, path: str, *, watch: bool) -> list[dict[str, str]]:
    """The query of each list (or watch) request on `path`."""
    found = []
    for line in emulator.requests:
        url = urlsplit(line.split(" ", 1)[1])
        query = {k: v[0] for k, v in parse_qs(url.query).items()}
        if url.path == path and ("watch" in query) == watch:
            found.append(query)
    return found


class Watching:
    """watch_forever as a task, with what it keeps."""

    def __init__(self, api: KubeApi, kind, **options) -> None:  # type: ignore[no-untyped-def]
        self.store: Store = {}
        self.progress = Progress()
        self.task = asyncio.create_task(
            watch_forever(api, kind, self.store, lambda: None, progress=self.progress, **options)
        )

    async def stop(self) -> None:
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)


def names(store: Store) -> set[str]:
    return {key.split("/", 1)[1] for key in store}


async def test_a_watch_that_ends_is_resumed_from_its_last_version_without_a_list(small) -> None:  # type: ignore[no-untyped-def]
    emulator, api = small
    for i in range(3):
        emulator.create(NODE_GVR, node(f"n{i}"))
    watching = Watching(api, NODES, watch_timeout_s=10, rng=random.Random(7))
    try:
        for round_ in range(4):
            await eventually(lambda r=round_: watching.progress.watches == r + 1, 5)
            await eventually(lambda: len(emulator.watch_cache.watchers) == 1, 5)
            emulator.create(NODE_GVR, node(f"late{round_}"))
            await eventually(lambda r=round_: f"/late{r}" in watching.store, 5)
            emulator.watch_cache.end_watches()  # what the server does at timeoutSeconds
        await eventually(lambda: watching.progress.watches == 5, 5)
    finally:
        await watching.stop()
    assert len(requests(emulator, "/api/v1/nodes", watch=False)) == 1
    watches = requests(emulator, "/api/v1/nodes", watch=True)
    versions = [int(w["resourceVersion"]) for w in watches]
    assert versions == sorted(versions) and len(set(versions)) == 5  # each from the last seen
    assert all(w["allowWatchBookmarks"].lower() == "true" for w in watches)
    timeouts = {int(w["timeoutSeconds"]) for w in watches}
    assert all(10 <= t < 20 for t in timeouts) and len(timeouts) > 1  # randomised
    assert names(watching.store) == {f"n{i}" for i in range(3)} | {f"late{i}" for i in range(4)}


async def test_watches_that_time_out_on_the_server_are_resumed_without_a_list(small) -> None:  # type: ignore[no-untyped-def]
    emulator, api = small
    emulator.create(NODE_GVR, node("n0"))
    watching = Watching(api, NODES, watch_timeout_s=1)
    try:
        await eventually(lambda: watching.progress.watches >= 3, 10)
        emulator.create(NODE_GVR, node("n1"))
        await eventually(lambda: "/n1" in watching.store, 5)
    finally:
        await watching.stop()
    assert len(requests(emulator, "/api/v1/nodes", watch=False)) == 1


async def test_bookmarks_move_the_version_past_what_the_selector_hides(small) -> None:  # type: ignore[no-untyped-def]
    emulator, api = small
    emulator.watch_cache.bookmark_interval_s = 0.1
    emulator.create(PODS, pod("bound", "n0", 1))
    watching = Watching(api, BOUND_PODS, watch_timeout_s=30)
    try:
        await eventually(lambda: watching.progress.watches == 1, 5)
        for i in range(8):  # unbound: none reaches this watch, and the list's version expires
            emulator.create(PODS, pod(f"pending{i}", "", 1, phase="Pending"))
        assert emulator.watch_cache.too_old(PODS, int(watching.progress.version))
        await eventually(lambda: watching.progress.version == str(emulator.rv), 5)
        emulator.watch_cache.end_watches()
        await eventually(lambda: watching.progress.watches == 2, 5)
        emulator.create(PODS, pod("bound2", "n0", 1))
        await eventually(lambda: "ml/bound2" in watching.store, 5)
    finally:
        await watching.stop()
    assert len(requests(emulator, "/api/v1/pods", watch=False)) == 1  # no 410, no list
    assert names(watching.store) == {"bound", "bound2"}


@pytest.mark.parametrize("as_http", [False, True], ids=["in-stream ERROR", "HTTP 410"])
async def test_an_expired_version_means_one_list_and_a_right_inventory(small, as_http) -> None:  # type: ignore[no-untyped-def]
    emulator, api = small
    emulator.watch_cache.faults.expired_as_http = as_http
    for i in range(3):
        emulator.create(NODE_GVR, node(f"n{i}"))
    watching = Watching(api, NODES, watch_timeout_s=1)
    try:
        await eventually(lambda: watching.progress.watches == 1, 5)
        emulator.watch_cache.faults.silent = 1  # the next watch hears nothing...
        await eventually(lambda: emulator.watch_cache.faults.silent == 0, 5)
        emulator.create(NODE_GVR, node("late"))  # ...of these, and they leave the history
        emulator.delete(NODE_GVR, "n1")
        emulator.patch(NODE_GVR, "n2", {"metadata": {"labels": {"rack": "r9"}}})
        emulator.compact()
        await eventually(lambda: watching.progress.lists == 2, 10)
        await eventually(lambda: names(watching.store) == {"n0", "n2", "late"}, 5)
        assert watching.store["/n2"]["metadata"]["labels"]["rack"] == "r9"
        emulator.watch_cache.end_watches()
        emulator.create(NODE_GVR, node("after"))
        await eventually(lambda: "/after" in watching.store, 5)
    finally:
        await watching.stop()
    assert len(requests(emulator, "/api/v1/nodes", watch=False)) == 2  # exactly one relist


async def test_a_silent_stream_is_given_up_within_its_timeout_and_recovered(small) -> None:  # type: ignore[no-untyped-def]
    emulator, api = small
    emulator.create(NODE_GVR, node("n0"))
    emulator.watch_cache.faults.silent = 1
    loop = asyncio.get_running_loop()
    watching = Watching(api, NODES, watch_timeout_s=1)  # asks timeoutSeconds=1
    try:
        await eventually(lambda: watching.progress.watches == 1, 5)
        silent_since = loop.time()
        emulator.create(NODE_GVR, node("n1"))  # sent to no one on the silent stream
        await eventually(lambda: "/n1" in watching.store, 5)
        # 1 s of the watch's timeout + 0.3 s grace, then a backoff of about 0.2 s
        assert loop.time() - silent_since < 1 + FAST.watch_grace_s + 1
    finally:
        await watching.stop()
    assert watching.progress.lists == 1  # the history still held n1: no list


async def test_watch_events_stay_json_and_never_become_models(small, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    emulator, api = small
    deserialised: list[str] = []
    real = client.ApiClient.deserialize

    def counting(self, response, response_type):  # type: ignore[no-untyped-def]
        deserialised.append(response_type)
        return real(self, response, response_type)

    monkeypatch.setattr(client.ApiClient, "deserialize", counting)
    nodes = Watching(api, NODES, watch_timeout_s=30)
    pods = Watching(api, BOUND_PODS, watch_timeout_s=30)
    try:
        await eventually(lambda: nodes.progress.watches == pods.progress.watches == 1, 5)
        for i in range(20):
            emulator.create(NODE_GVR, node(f"n{i}"))
            emulator.create(PODS, pod(f"p{i}", f"n{i}", 1))
        await eventually(lambda: len(nodes.store) == len(pods.store) == 20, 5)
    finally:
        await nodes.stop()
        await pods.stop()
    assert deserialised == []
    assert all(type(obj) is dict for obj in [*nodes.store.values(), *pods.store.values()])


async def test_a_silent_server_times_requests_out_and_connections_keep_alive(small) -> None:  # type: ignore[no-untyped-def]
    _, api = small
    accepted: list[asyncio.StreamWriter] = []

    async def never_answer(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(writer)  # reads the request, answers nothing

    server = await asyncio.start_server(never_answer, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    silent = await api_client(host=f"http://127.0.0.1:{port}", timeouts=FAST)
    try:
        started = asyncio.get_running_loop().time()
        with pytest.raises(Transient, match="Timeout"):
            await KubeApi(silent).list_page(NODES, limit=10, token=None)
        assert asyncio.get_running_loop().time() - started < FAST.read_s + 1
    finally:
        await silent.close()
        server.close()
    response = await api.core.list_node(watch=True, timeout_seconds=1, _preload_content=False)
    sock = response.connection.transport.get_extra_info("socket")
    try:
        assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) == 1
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE) == KEEPALIVE_IDLE_S
    finally:
        response.close()
