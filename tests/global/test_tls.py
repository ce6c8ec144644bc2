"""TLS on both ports of a real `vglobal server` process: the REST API over https, the agent
stream over TLS with mutual authentication (an agent without a client certificate the CA
signed is refused during the handshake); a stop not held up by an idle https client."""

from __future__ import annotations

import asyncio
import os
import ssl
import subprocess
import sys
import time
from pathlib import Path

import grpc
import httpx
import pytest

from core_agent.cli import tls_credentials
from core_agent.client import AgentClient
from core_agent.simulated.cluster import ClusterSpec, SimulatedCluster
from tests.certificates import issue, write
from tests.conftest import ADMIN_TOKEN
from tests.factories import REPLY_S, eventually
from tests.server_process import ServerProcess
from volcano_global.rpc.v1 import agent_pb2 as pb
from volcano_global.rpc.v1 import agent_pb2_grpc


@pytest.fixture
def pki(tmp_path: Path) -> dict[str, Path]:
    ca_cert, ca_key = issue("volcano-global test CA", None, ca=True)
    server_cert, server_key = issue("global", (ca_cert.subject, ca_key), ip="127.0.0.1")
    agent_cert, agent_key = issue("agent gpu-east", (ca_cert.subject, ca_key))
    paths = {}
    paths["ca"], _ = write(tmp_path / "ca", ca_cert, ca_key)
    paths["server_cert"], paths["server_key"] = write(tmp_path / "server", server_cert, server_key)
    paths["agent_cert"], paths["agent_key"] = write(tmp_path / "agent", agent_cert, agent_key)
    return paths


async def test_https_and_mutual_tls_for_agents(tmp_path: Path, pki: dict[str, Path]) -> None:
    server = ServerProcess(f"sqlite+aiosqlite:///{tmp_path}/tls.db", tmp_path)
    server.url = server.url.replace("http://", "https://")
    server.env |= {
        "VGLOBAL_TLS__CERT_FILE": str(pki["server_cert"]),
        "VGLOBAL_TLS__KEY_FILE": str(pki["server_key"]),
        "VGLOBAL_TLS__CLIENT_CA_FILE": str(pki["ca"]),
    }
    trust = ssl.create_default_context(cafile=str(pki["ca"]))
    server.ready_verify = trust
    server.start()
    try:
        api = httpx.AsyncClient(
            timeout=REPLY_S,
            base_url=server.url,
            headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
            verify=trust,
        )
        assert (await api.get("/readyz")).status_code == 200
        with pytest.raises(httpx.HTTPError):  # plain http on the same port is refused
            await httpx.AsyncClient(timeout=REPLY_S).get(
                server.url.replace("https://", "http://") + "/readyz"
            )
        token = (await api.post("/api/v1/clusters", json={"name": "gpu-east"})).json()["agentToken"]
        target = server.grpc_target

        # Without a client certificate the handshake fails: the stream never opens.
        async with grpc.aio.secure_channel(
            target, grpc.ssl_channel_credentials(root_certificates=pki["ca"].read_bytes())
        ) as channel:
            call = agent_pb2_grpc.AgentServiceStub(channel).Connect(
                metadata=(("authorization", f"Bearer {token}"),)
            )
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await call.write(pb.AgentMessage(hello=pb.Hello(cluster="gpu-east")))
                await asyncio.wait_for(call.read(), timeout=REPLY_S)
            assert refused.value.code() == grpc.StatusCode.UNAVAILABLE

        # With one the CA signed, the agent streams its inventory.
        spec = ClusterSpec.model_validate({"nodeGroups": [{"count": 2, "gpusPerNode": 8}]})
        agent = AgentClient(
            cluster="gpu-east",
            target=target,
            token=token,
            source=SimulatedCluster.from_spec("gpu-east", spec),
            coalesce_s=0.05,
            credentials=tls_credentials(pki["ca"], pki["agent_cert"], pki["agent_key"]),
        )
        stop = asyncio.Event()
        task = asyncio.create_task(agent.run(stop=stop))

        async def arrived() -> bool:
            cluster = (await api.get("/api/v1/clusters/gpu-east")).json()
            # Ready may be seen a moment before the inventory's capacity is.
            totals = [c["total"] for c in cluster["capacity"]]
            return cluster["state"] == "Ready" and totals == [16]

        try:
            await eventually(arrived)
        finally:
            stop.set()
            await task

        # The CLI trusts a private CA through VGLOBAL_CA_FILE.
        result = await asyncio.to_thread(
            subprocess.run,
            [sys.executable, "-m", "volcano_global.cli.main", "clusters"],
            env={
                **os.environ,
                "VGLOBAL_SERVER": server.url,
                "VGLOBAL_TOKEN": ADMIN_TOKEN,
                "VGLOBAL_CA_FILE": str(pki["ca"]),
            },
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert result.returncode == 0, result.stderr
        assert "gpu-east" in result.stdout, result.stderr
        await api.aclose()
    finally:
        server.stop()


def test_an_idle_https_client_does_not_hold_up_the_stop(
    tmp_path: Path, pki: dict[str, Path]
) -> None:
    # Closing a TLS connection waits for the client's close_notify, which a client idle on its
    # kept-alive connection never sends: the stop waited out its graceful budget (10 s here).
    server = ServerProcess(f"sqlite+aiosqlite:///{tmp_path}/tls.db", tmp_path)
    server.url = server.url.replace("http://", "https://")
    server.env |= {
        "VGLOBAL_TLS__CERT_FILE": str(pki["server_cert"]),
        "VGLOBAL_TLS__KEY_FILE": str(pki["server_key"]),
        "VGLOBAL_SHUTDOWN_BUDGET_S": "20",
    }
    trust = ssl.create_default_context(cafile=str(pki["ca"]))
    server.ready_verify = trust
    server.start()
    with httpx.Client(base_url=server.url, verify=trust, timeout=REPLY_S) as idle:
        assert idle.get("/readyz").status_code == 200  # its connection kept for the next
        started = time.monotonic()
        server.stop()
        assert time.monotonic() - started < 5
        with pytest.raises(httpx.TransportError):
            idle.get("/readyz")  # the connection is gone (and so is the server)
