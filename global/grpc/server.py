"""The Global's gRPC server: the agent service and the standard health service."""

from __future__ import annotations

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from volcano_global.grpc.agent_service import AgentService
from volcano_global.rpc.v1 import agent_pb2, agent_pb2_grpc
from volcano_global.services.inventory.delta_writer import DeltaWriter
from volcano_global.services.inventory.heartbeat_writer import HeartbeatWriter
from volcano_global.settings import Settings


async def start_grpc_server(
    *,
    sessions: async_sessionmaker[AsyncSession],
    settings: Settings,
    deltas: DeltaWriter,
    heartbeats: HeartbeatWriter,
) -> tuple[grpc.aio.Server, int]:
    """Start serving (the agents' inventory deltas written by `deltas`, their heartbeats by
    `heartbeats`); returns the server and the port it listens on."""
    limit = settings.agents.max_message_bytes
    server = grpc.aio.server(
        options=[
            ("grpc.max_receive_message_length", limit),
            ("grpc.max_send_message_length", limit),
            ("grpc.keepalive_time_ms", 30_000),
            # Agents ping every 15 s to notice a vanished Global; accept that (the default
            # minimum is 5 minutes, and more frequent pings would get the stream closed).
            ("grpc.http2.min_ping_interval_without_data_ms", 10_000),
        ]
    )
    agent_pb2_grpc.add_AgentServiceServicer_to_server(
        AgentService(sessions, settings, deltas=deltas, heartbeats=heartbeats), server
    )
    health_servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    address = f"{settings.host}:{settings.grpc_port}"
    tls = settings.tls
    if tls.agents_enabled:
        assert tls.cert_file is not None and tls.key_file is not None
        client_ca = tls.client_ca_file.read_bytes() if tls.client_ca_file else None
        credentials = grpc.ssl_server_credentials(
            [(tls.key_file.read_bytes(), tls.cert_file.read_bytes())],
            root_certificates=client_ca,
            require_client_auth=client_ca is not None,
        )
        port = server.add_secure_port(address, credentials)
    else:
        port = server.add_insecure_port(address)
    await server.start()
    full_name = agent_pb2.DESCRIPTOR.services_by_name["AgentService"].full_name
    for name in ("", full_name):
        await health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    return server, port
