"""Each port's TLS on its own (issue 37): https for kubectl without TLS on the agent port,
certificates from `vglobal certs`, and the errors that name the fix when a client and a port
disagree (an agent without --ca-file, the CLI without VGLOBAL_CA_FILE)."""

from __future__ import annotations

import os
import ssl
import subprocess
from pathlib import Path

import httpx
import pytest

from tests.conftest import ADMIN_TOKEN
from tests.factories import REPLY_S
from tests.server_process import VGLOBAL, ServerProcess


def vglobal(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*VGLOBAL, *args], env={**os.environ, **env}, capture_output=True, text=True, timeout=60
    )


@pytest.fixture
def certs(tmp_path: Path) -> Path:
    out = tmp_path / "certs"
    made = vglobal("certs", "--out", str(out), "--host", "127.0.0.1", "--client", "gpu-east")
    assert made.returncode == 0, made.stderr
    assert f"export VGLOBAL_CA_FILE={out}/ca.crt" in made.stdout
    return out


def serve_tls(server: ServerProcess, certs: Path, **env: str) -> None:
    """Make the server's next start serve https with the certificates `vglobal certs` wrote."""
    server.url = server.url.replace("http://", "https://")
    server.env |= {
        "VGLOBAL_TLS__CERT_FILE": str(certs / "server.crt"),
        "VGLOBAL_TLS__KEY_FILE": str(certs / "server.key"),
        **env,
    }
    server.ready_verify = ssl.create_default_context(cafile=str(certs / "ca.crt"))


def https_server(tmp_path: Path, certs: Path, **env: str) -> ServerProcess:
    server = ServerProcess(f"sqlite+aiosqlite:///{tmp_path}/tls.db", tmp_path)
    serve_tls(server, certs, **env)
    server.start()
    return server


def agent_args(server: ServerProcess, token: str) -> list[str]:
    target = server.grpc_target
    return ["agent", "--cluster", "gpu-east", "--global", target, "--token", token]


def new_cluster(server: ServerProcess, certs: Path) -> str:
    api = httpx.Client(
        timeout=REPLY_S,
        base_url=server.url,
        headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
        verify=ssl.create_default_context(cafile=str(certs / "ca.crt")),
    )
    return str(api.post("/api/v1/clusters", json={"name": "gpu-east"}).json()["agentToken"])


def test_https_for_kubectl_and_a_plaintext_agent_port(tmp_path: Path, certs: Path) -> None:
    server = https_server(tmp_path, certs, VGLOBAL_TLS__AGENTS="false")
    try:
        token = new_cluster(server, certs)
        assert "(plaintext)" in server.log.read_text()
        # A plain agent passes the TLS check and gets as far as the stream: a wrong token is
        # what stops it then (the real token would stream; test_tls.py runs one).
        done = vglobal(*agent_args(server, "vg_wrong"), "--lingjun-block", "0")
        assert "refused the agent token" in done.stderr.strip().splitlines()[-1]
        assert token.startswith("vg_")
        # The CLI without the CA: the fix is named.
        cli = {"VGLOBAL_SERVER": server.url, "VGLOBAL_TOKEN": ADMIN_TOKEN}
        refused = vglobal("clusters", **cli)
        assert refused.returncode == 1
        assert "set VGLOBAL_CA_FILE to the CA that signed the server's certificate" in (
            refused.stderr
        )
        trusted = vglobal("clusters", **cli, VGLOBAL_CA_FILE=str(certs / "ca.crt"))
        assert trusted.returncode == 0 and "gpu-east" in trusted.stdout
    finally:
        server.stop()


def test_an_agent_without_the_ca_is_told_the_port_speaks_tls(tmp_path: Path, certs: Path) -> None:
    server = https_server(tmp_path, certs)  # the old meaning: a certificate turns on both ports
    try:
        token = new_cluster(server, certs)
        assert "(TLS: agents need --ca-file)" in server.log.read_text()
        done = vglobal(*agent_args(server, token), "--lingjun-block", "0")
        assert done.returncode == 1
        assert done.stderr.strip() == (
            f"error: the Global's agent port {server.grpc_target} speaks "
            "TLS: pass --ca-file (the CA that signed its certificate; `vglobal certs` writes a "
            "development one as ca.crt)"
        )
    finally:
        server.stop()


def test_an_agent_with_a_ca_against_a_plaintext_port_is_told_so(tmp_path: Path) -> None:
    server = ServerProcess(f"sqlite+aiosqlite:///{tmp_path}/plain.db", tmp_path)
    server.start()
    try:
        ca = tmp_path / "ca.crt"
        vglobal("certs", "--out", str(tmp_path))
        done = vglobal(*agent_args(server, "t"), "--lingjun-block", "0", "--ca-file", str(ca))
        assert done.returncode == 1
        assert "does not speak TLS: drop --ca-file" in done.stderr
    finally:
        server.stop()


def test_a_running_agent_ends_with_the_fix_when_the_port_turns_to_tls(
    tmp_path: Path, certs: Path
) -> None:
    server = ServerProcess(f"sqlite+aiosqlite:///{tmp_path}/turn.db", tmp_path)
    server.start()
    agent: subprocess.Popen[str] | None = None
    try:
        api = httpx.Client(
            timeout=REPLY_S, base_url=server.url, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}
        )
        token = api.post("/api/v1/clusters", json={"name": "gpu-east"}).json()["agentToken"]
        agent = subprocess.Popen(
            [*VGLOBAL, *agent_args(server, token), "--lingjun-block", "0"],
            env=os.environ,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert agent.stderr is not None
        for line in agent.stderr:  # until it has streamed its inventory
            if "inventory snapshot sent" in line:
                break
        server.stop()
        serve_tls(server, certs)
        server.start()
        assert agent.wait(timeout=60) == 1
        last = agent.stderr.read().strip().splitlines()[-1]
        assert last.startswith("error: the Global's agent port 127.0.0.1:")
        assert "speaks TLS: pass --ca-file" in last
    finally:
        if agent is not None and agent.poll() is None:
            agent.kill()
        server.stop()
