"""Watches whose clients never read, on a real `vglobal server` process: the server's memory
stays bounded and it closes them (issue 38 item 5). Before: each watch from resourceVersion 0
listed every job at once and held it until read (these 8 watches over 30 jobs of 0.9 MB took
the server from 220 to 556 MiB, and none ended); now a watch holds a page of
about `kube.list_page_bytes` while its client does not read, and a client that takes nothing
for `kube.watch_send_timeout_s` is dropped."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import ADMIN_TOKEN
from tests.factories import job_document
from tests.server_process import ServerProcess

JOBS = "/k8s/apis/batch.volcano.sh/v1alpha1/namespaces/ml/jobs"
JOB_COUNT, WATCHES = 30, 8


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def big_job(name: str) -> dict[str, object]:
    """A job of about 0.9 MB (environment variables)."""
    document = job_document(name)
    container = document["spec"]["tasks"][0]["template"]["spec"]["containers"][0]
    container["env"] = [{"name": f"V{i}", "value": "x" * 1000} for i in range(880)]
    return document


def unread_watch(port: int) -> socket.socket:
    """A watch from resourceVersion 0 whose client never reads (a small receive buffer)."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", port))
    sock.sendall(
        f"GET {JOBS}?watch=true&resourceVersion=0 HTTP/1.1\r\nHost: t\r\n"
        f"Authorization: Bearer {ADMIN_TOKEN}\r\n\r\n".encode()
    )
    return sock


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    process = ServerProcess(f"sqlite+aiosqlite:///{tmp_path}/watch.db", tmp_path)
    process.env["VGLOBAL_KUBE__WATCH_SEND_TIMEOUT_S"] = "2"
    # The feed would otherwise hand the jobs just created to every watch as recent changes
    # (held once, shared): this measures what the watches themselves hold.
    process.env["VGLOBAL_KUBE__WATCH_SETTLE_S"] = "0"
    process.start()
    try:
        yield process
    finally:
        process.stop()


def _drops(server: ServerProcess) -> set[str]:
    """The server's log lines of dropped clients (a line may be logged twice)."""
    return {line for line in server.log.read_text().splitlines() if "dropped a client" in line}


def _drained(sock: socket.socket) -> bool:
    """Whether the server ends the stream (EOF once what it sent is read)."""
    sock.settimeout(10)
    try:
        while sock.recv(1 << 20):
            pass
        return True
    except TimeoutError:
        return False
    finally:
        sock.close()


def test_unread_watches_stay_bounded_and_are_dropped(server: ServerProcess) -> None:
    headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    with httpx.Client(base_url=server.url, headers=headers, timeout=60) as api:
        for i in range(JOB_COUNT):
            assert api.post(JOBS, json=big_job(f"big-{i:02d}")).status_code == 201
    assert server.proc is not None
    pid = server.proc.pid
    before = rss_mib(pid)
    socks = [unread_watch(server.port) for _ in range(WATCHES)]
    peak, deadline = before, time.monotonic() + 120
    while len(_drops(server)) < WATCHES:
        assert time.monotonic() < deadline, ("the unread watches were not dropped", before, peak)
        peak = max(peak, rss_mib(pid))
        time.sleep(0.1)
    assert all(_drained(sock) for sock in socks)
    # The bound leaves room for one page and the socket buffers per watch (docs/kubectl.md).
    assert peak - before < 150, (before, peak)


def test_a_client_that_disconnects_frees_its_watch(server: ServerProcess) -> None:
    # kubectl get -w ended with Ctrl-C: its place among the token's watches is free again.
    socks = [unread_watch(server.port) for _ in range(20)]  # the token's limit
    headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    watch = {"watch": "true", "timeoutSeconds": "1"}
    with httpx.Client(base_url=server.url, headers=headers, timeout=30) as api:
        deadline = time.monotonic() + 120
        while (refused := api.get(JOBS, params=watch)).status_code != 429:
            assert time.monotonic() < deadline, refused.text  # the 20 are being admitted
        assert "kube.watches_per_token" in refused.json()["message"]
        for sock in socks:
            sock.close()
        deadline = time.monotonic() + 120
        while (answer := api.get(JOBS, params=watch)).status_code != 200:
            assert time.monotonic() < deadline, answer.text
