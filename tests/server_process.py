"""A real `vglobal server` process on free ports, for tests over real sockets."""

from __future__ import annotations

import os
import signal
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

import httpx

from tests.conftest import ADMIN_TOKEN
from tests.factories import inventory

VGLOBAL = [sys.executable, "-m", "volcano_global.cli.main"]
# A start costs ~2.5 s of CPU (imports, migrations): 40 s of wall time at a load of 16 on two
# cores, where the 30 s this waited once failed the replica-crash test. A stop may take the
# server's shutdown budget (20 s), and more on a loaded host.
READY_WITHIN_S = 180
STOP_WITHIN_S = 120
REQUEST_TIMEOUT_S = 60


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class ServerProcess:
    def __init__(self, database_url: str, tmp: Path, *, scheduling: bool = False) -> None:
        self.port = free_port()
        grpc_port = free_port()
        while grpc_port == self.port:  # each port was free when asked, not held: ask again
            grpc_port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = {
            **os.environ,
            "VGLOBAL_DATABASE_URL": database_url,
            "VGLOBAL_ADMIN_TOKEN": ADMIN_TOKEN,
            "VGLOBAL_LOG_LEVEL": "info",
            "VGLOBAL_CONFIG": str(tmp / "no-config.yaml"),
            "VGLOBAL_GRPC_PORT": str(grpc_port),
            # Off unless asked: tests of persistence and the CLI compare reads, which a
            # scheduling round would change in between.
            "VGLOBAL_SCHEDULING__ENABLED": "true" if scheduling else "false",
            "VGLOBAL_SCHEDULING__INTERVAL_S": "0.3",
        }
        self.log = tmp / f"server-{self.port}.log"
        self.ready_verify: ssl.SSLContext | bool = True  # the CA when the server speaks https
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def grpc_target(self) -> str:
        """Where its agents connect."""
        return f"127.0.0.1:{self.env['VGLOBAL_GRPC_PORT']}"

    def start(self) -> None:
        self.launch()
        self.wait_ready()

    def launch(self) -> None:
        """Start the process, without waiting for it to answer."""
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                [*VGLOBAL, "server", "--port", str(self.port), "--host", "127.0.0.1"],
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )

    def wait_ready(self) -> None:
        """Until /readyz answers 200, while the process lives (its log if it dies, or is not
        ready after READY_WITHIN_S)."""
        assert self.proc is not None
        deadline = time.monotonic() + READY_WITHIN_S
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, self.log.read_text()
            try:
                ready = httpx.get(f"{self.url}/readyz", timeout=10, verify=self.ready_verify)
                if ready.status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise AssertionError(f"server not ready after {READY_WITHIN_S} s:\n{self.log.read_text()}")

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=STOP_WITHIN_S)

    def stop(self) -> None:
        """SIGTERM, and wait for the exit; a process still there after STOP_WITHIN_S is killed
        (not left running into the next tests) and the test fails with its log."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout=STOP_WITHIN_S)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(
                f"server still running {STOP_WITHIN_S} s after SIGTERM:\n{self.log.read_text()}"
            ) from None

    def admin(self) -> httpx.Client:
        """An admin client, waiting for answers as long as a loaded host may need (httpx's
        default is 5 s)."""
        return httpx.Client(
            base_url=self.url,
            headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
            timeout=REQUEST_TIMEOUT_S,
        )

    def admin_with_cluster(self, name: str = "gpu-east") -> httpx.Client:
        """An admin client, after registering cluster `name` and pushing its inventory with
        the cluster's own agent token."""
        api = self.admin()
        token = api.post("/api/v1/clusters", json={"name": name}).json()["agentToken"]
        pushed = api.put(
            f"/api/v1/clusters/{name}/inventory",
            json=inventory(name),
            headers={"Authorization": f"Bearer {token}"},
        )
        assert pushed.status_code == 200, pushed.text
        return api

    def cli(self, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*VGLOBAL, *args],
            env=self._cli_env(),
            capture_output=True,
            text=True,
            input=stdin,
            timeout=60,
        )

    @contextmanager
    def watching(self, *args: str) -> Iterator[IO[str]]:
        """`vglobal *args` (a command that runs until stopped, such as `get jobs -w`) as the
        admin: its output, read line by line; the command is stopped after the block."""
        watcher = subprocess.Popen(
            [*VGLOBAL, *args], env=self._cli_env(), stdout=subprocess.PIPE, text=True
        )
        try:
            assert watcher.stdout is not None
            yield watcher.stdout
        finally:
            watcher.terminate()
            watcher.wait(timeout=10)

    def _cli_env(self) -> dict[str, str]:
        return {**self.env, "VGLOBAL_SERVER": self.url, "VGLOBAL_TOKEN": ADMIN_TOKEN}
