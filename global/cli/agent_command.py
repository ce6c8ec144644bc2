"""The `vglobal agent` command line a newly added cluster runs, from the Global's address."""

from __future__ import annotations

import shlex
from urllib.parse import urlsplit

DEFAULT_GRPC_PORT = 8081  # VGLOBAL_GRPC_PORT's default: the REST API does not say the port


def agent_command(server: str, cluster: str, token: str) -> str:
    url = urlsplit(server)
    host = url.hostname or "127.0.0.1"
    words = [
        "VGLOBAL_AGENT_TOKEN=" + shlex.quote(token),
        "vglobal",
        "agent",
        "--cluster",
        shlex.quote(cluster),
        "--global",
        f"{host}:{DEFAULT_GRPC_PORT}",
        "--source",
        "kubernetes",
    ]
    return " ".join(words)


NOTE = (
    f"({DEFAULT_GRPC_PORT} is the default VGLOBAL_GRPC_PORT; add --ca-file CA.pem when the "
    "Global's agent port speaks TLS)"
)
