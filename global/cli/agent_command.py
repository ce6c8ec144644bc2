"""The `vglobal agent` command line a newly added cluster runs, from where the Global says its
agents connect (`agentEndpoint` of the registration's answer)."""

from __future__ import annotations

import shlex
from typing import Any
from urllib.parse import urlsplit

# What a Global that does not say its agent endpoint is taken to have: the default port.
OLD_SERVER_ENDPOINT = {"address": None, "port": 8081, "tls": False, "clientCertificate": False}


def agent_command(server: str, cluster: str, token: str, endpoint: dict[str, Any]) -> str:
    """The command, with the Global's advertised agent address, else the REST API's host with
    the agent port the server listens on; `--ca-file` when that port speaks TLS."""
    host = urlsplit(server).hostname or "127.0.0.1"
    host = f"[{host}]" if ":" in host else host  # an IPv6 address, as gRPC targets write it
    address = endpoint["address"] or f"{host}:{endpoint['port']}"
    words = [
        "VGLOBAL_AGENT_TOKEN=" + shlex.quote(token),
        "vglobal",
        "agent",
        "--cluster",
        shlex.quote(cluster),
        "--global",
        address,
        "--source",
        "kubernetes",
    ]
    if endpoint["tls"]:
        words += ["--ca-file", "CA.pem"]
    return " ".join(words)


def agent_note(endpoint: dict[str, Any]) -> str:
    """What the printed command leaves to the reader."""
    notes = []
    if endpoint["address"] is None:
        notes.append(
            f"the Global's host as this CLI reached it, with its agent port {endpoint['port']}; "
            "set VGLOBAL_AGENTS__ADDRESS on the server to print the address agents dial"
        )
    if endpoint["tls"]:
        notes.append("CA.pem: the CA that signed the Global's certificate")
    if endpoint["clientCertificate"]:
        notes.append("the agent port asks for a client certificate: add --cert-file and --key-file")
    return "(" + "; ".join(notes) + ")" if notes else ""
