"""A small REST client for the CLI: one clear error line for every failure."""

from __future__ import annotations

import os
import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import yaml

DEFAULT_SERVER = "http://127.0.0.1:8080"
DEFAULT_CONFIG = Path.home() / ".config" / "vglobal" / "config.yaml"


class CliError(Exception):
    """A failure to report as one line, exiting non-zero."""


@dataclass(frozen=True)
class Connection:
    server: str
    token: str | None


def resolve_connection(server: str | None, token: str | None, config: Path | None) -> Connection:
    """Flags win over the environment (VGLOBAL_SERVER, VGLOBAL_TOKEN), which wins over the
    config file (`server:` and `token:` keys; default ~/.config/vglobal/config.yaml)."""
    path = config or Path(os.environ.get("VGLOBAL_CONFIG", DEFAULT_CONFIG))
    stored: dict[str, Any] = {}
    if path.exists():
        try:
            stored = yaml.safe_load(path.read_text()) or {}
        except yaml.YAMLError as exc:
            from volcano_global.jobspec.documents import yaml_problem

            raise CliError(f"config file {path}: {yaml_problem(exc)}") from None
        if not isinstance(stored, dict):
            raise CliError(f"config file {path}: expected a mapping with server and token")
    elif config is not None:
        raise CliError(f"config file {path} not found")
    return Connection(
        server=(
            server or os.environ.get("VGLOBAL_SERVER") or stored.get("server") or DEFAULT_SERVER
        ).rstrip("/"),
        token=token or os.environ.get("VGLOBAL_TOKEN") or stored.get("token"),
    )


class Client:
    def __init__(self, connection: Connection, timeout: float = 30.0) -> None:
        headers = {"Authorization": f"Bearer {connection.token}"} if connection.token else {}
        ca_file = os.environ.get("VGLOBAL_CA_FILE")  # a private CA for an https Global
        if ca_file and not Path(ca_file).is_file():
            raise CliError(f"VGLOBAL_CA_FILE {ca_file} not found")
        self._http = httpx.Client(
            base_url=connection.server,
            headers=headers,
            timeout=timeout,
            verify=ssl.create_default_context(cafile=ca_file) if ca_file else True,
        )
        self.server = connection.server

    def request(self, method: str, path: str, *, ok: tuple[int, ...] = (), **kwargs: Any) -> Any:
        """The answer's JSON; `ok`: error statuses whose body the caller reads itself."""
        try:
            response = self._http.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise CliError(f"cannot reach {self.server}: {exc}{_reach_hint(exc)}") from None
        if response.status_code >= 400 and response.status_code not in ok:
            raise CliError(_error_line(response) + _token_hint(response))
        if response.status_code == 204 or not response.content:
            return None
        return response.json()

    def close(self) -> None:
        self._http.close()


def _reach_hint(exc: httpx.HTTPError) -> str:
    """What to do about a Global the CLI could not reach: none listening there, or a
    certificate it could not verify (a private CA's)."""
    text = str(exc)
    if isinstance(exc, httpx.ConnectError) and "refused" in text.lower():
        return (
            " (no Global listening there: `vglobal server` starts one; --server or "
            "VGLOBAL_SERVER names another)"
        )
    if "CERTIFICATE_VERIFY_FAILED" in text or "certificate verify failed" in text:
        return (
            " (certificate verify failed: set VGLOBAL_CA_FILE to the CA that signed the "
            "server's certificate; `vglobal certs` writes a development one as ca.crt)"
        )
    if "WRONG_VERSION_NUMBER" in text or "wrong version number" in text:
        return " (the server speaks plain http here: use an http:// address)"
    return ""


def _token_hint(response: httpx.Response) -> str:
    if response.status_code != 401:
        return ""
    return (
        " (give a token by --token, VGLOBAL_TOKEN or the config file; a new server prints "
        "its admin token once, or takes VGLOBAL_ADMIN_TOKEN)"
    )


def _error_line(response: httpx.Response) -> str:
    try:
        body = response.json()
        message = body.get("message") or body
    except ValueError:
        message = response.text.strip() or response.reason_phrase
    return f"{response.status_code} {response.reason_phrase}: {message}"
