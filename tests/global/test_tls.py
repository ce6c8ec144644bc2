"""TLS on both ports of a real `vglobal server` process: the REST API over https, the agent
stream over TLS with mutual authentication (an agent without a client certificate the CA
signed is refused during the handshake)."""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import os
import ssl
import subprocess
import sys
from pathlib import Path

import grpc
import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from core_agent.cli import tls_credentials
from core_agent.client import AgentClient
from core_agent.simulated.cluster import ClusterSpec, SimulatedCluster
from tests.conftest import ADMIN_TOKEN
from tests.factories import eventually
from tests.server_process import ServerProcess
from volcano_global.rpc.v1 import agent_pb2 as pb
from volcano_global.rpc.v1 import agent_pb2_grpc


def _issue(
    subject: str,
    issuer: tuple[x509.Name, ec.EllipticCurvePrivateKey] | None,
    *,
    ca: bool = False,
    ip: str | None = None,
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)])
    issuer_name, issuer_key = issuer or (name, key)
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(issuer_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if ip:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(ip))]), critical=False
        )
    return builder.sign(issuer_key, hashes.SHA256()), key


def _write(
    path: Path, cert: x509.Certificate, key: ec.EllipticCurvePrivateKey
) -> tuple[Path, Path]:
    cert_path, key_path = path.with_suffix(".crt"), path.with_suffix(".key")
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


@pytest.fixture
def pki(tmp_path: Path) -> dict[str, Path]:
    ca_cert, ca_key = _issue("volcano-global test CA", None, ca=True)
    server_cert, server_key = _issue("global", (ca_cert.subject, ca_key), ip="127.0.0.1")
    agent_cert, agent_key = _issue("agent gpu-east", (ca_cert.subject, ca_key))
    paths = {}
    paths["ca"], _ = _write(tmp_path / "ca", ca_cert, ca_key)
    paths["server_cert"], paths["server_key"] = _write(tmp_path / "server", server_cert, server_key)
    paths["agent_cert"], paths["agent_key"] = _write(tmp_path / "agent", agent_cert, agent_key)
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
            base_url=server.url,
            headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
            verify=trust,
        )
        assert (await api.get("/readyz")).status_code == 200
        with pytest.raises(httpx.HTTPError):  # plain http on the same port is refused
            await httpx.AsyncClient().get(server.url.replace("https://", "http://") + "/readyz")
        token = (await api.post("/api/v1/clusters", json={"name": "gpu-east"})).json()["agentToken"]
        target = f"127.0.0.1:{server.env['VGLOBAL_GRPC_PORT']}"

        # Without a client certificate the handshake fails: the stream never opens.
        async with grpc.aio.secure_channel(
            target, grpc.ssl_channel_credentials(root_certificates=pki["ca"].read_bytes())
        ) as channel:
            call = agent_pb2_grpc.AgentServiceStub(channel).Connect(
                metadata=(("authorization", f"Bearer {token}"),)
            )
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await call.write(pb.AgentMessage(hello=pb.Hello(cluster="gpu-east")))
                await asyncio.wait_for(call.read(), timeout=10)
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
            return cluster["state"] == "Ready" and cluster["capacity"][0]["total"] == 16

        try:
            await eventually(arrived, within=20)
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
