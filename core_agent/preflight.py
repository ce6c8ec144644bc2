"""Checks an agent makes before it streams, so that a misconfiguration it cannot recover from
ends it with one line naming the fix instead of a reconnect loop on a bare UNAVAILABLE (and
a server log full of failed TLS handshakes)."""

from __future__ import annotations

import socket
import ssl


class TlsMismatch(Exception):
    """The agent's TLS setting and the Global's agent port disagree (the message says how)."""


def speaks_tls(target: str, timeout_s: float = 3.0) -> bool | None:
    """Whether HOST:PORT answers a TLS handshake (None: not reachable now, which the agent's
    retries are for). The certificate is not checked here: only the protocol."""
    host, _, port = target.rpartition(":")
    host = host.strip("[]")
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    try:
        with socket.create_connection((host, int(port)), timeout=timeout_s) as raw:
            with context.wrap_socket(raw, server_hostname=host or None):
                return True
    except ssl.SSLError as exc:
        # A TLS server's alert (it wants a client certificate, say) is still TLS; a plaintext
        # HTTP/2 server answers the hello with bytes TLS refuses, or hangs up.
        return "ALERT" in str(exc.reason or "").upper()
    except (ConnectionResetError, BrokenPipeError):
        return False  # or closes the connection
    except (OSError, ValueError):
        return None


def tls_mismatch(target: str, *, tls: bool, timeout_s: float = 3.0) -> str | None:
    """The error line when the agent's TLS setting and the Global's agent port disagree."""
    answer = speaks_tls(target, timeout_s)
    if answer is True and not tls:
        return (
            f"the Global's agent port {target} speaks TLS: pass --ca-file (the CA that signed "
            "its certificate; `vglobal certs` writes a development one as ca.crt)"
        )
    if answer is False and tls:
        return (
            f"the Global's agent port {target} does not speak TLS: drop --ca-file/--cert-file, "
            "or set VGLOBAL_TLS__CERT_FILE and VGLOBAL_TLS__KEY_FILE on the Global"
        )
    return None


def refusal_line(exc: object, cluster: str) -> str:
    """One line for the Global refusing the agent for good (its token, its name)."""
    code = exc.code()  # type: ignore[attr-defined]
    details = exc.details()  # type: ignore[attr-defined]
    if code.name == "UNAUTHENTICATED":
        return (
            f"the Global refused the agent token of cluster {cluster!r} ({details}): use the "
            "token `vglobal clusters add` printed for it (VGLOBAL_AGENT_TOKEN or --token)"
        )
    if code.name == "PERMISSION_DENIED":
        return f"the Global refused cluster {cluster!r}: {details}"
    return f"the stream to the Global failed: {code.name} {details}"
