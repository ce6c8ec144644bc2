"""The adapter's HTTP transport: limits on every request and TCP keepalive on every connection.
kubernetes-asyncio sends `aiohttp.ClientTimeout()` (no limit at all) unless told otherwise, so a
server that accepts a request and goes silent, or a connection whose peer vanished, would block
a watch, and the inventory with it, for ever."""

from __future__ import annotations

import socket
import ssl
from dataclasses import dataclass
from typing import Any

import aiohttp
from kubernetes_asyncio import client
from kubernetes_asyncio.client import rest

# The kernel probes an idle connection after 30 s (Go's net.Dialer default, which client-go
# uses), every 10 s, and drops it after 3 unanswered probes: a vanished peer shows in ~60 s.
KEEPALIVE_IDLE_S = 30
KEEPALIVE_INTERVAL_S = 10
KEEPALIVE_PROBES = 3


@dataclass(frozen=True)
class Timeouts:
    """`connect_s` to open a connection; `read_s` of silence ends any request but a watch; a
    watch, which the server ends after its `timeoutSeconds`, may be silent that long plus
    `watch_grace_s` (the API server sends a bookmark 2 s before the end to watches that allow
    them, and bookmarks about every minute)."""

    connect_s: float = 10.0
    read_s: float = 60.0
    watch_grace_s: float = 15.0

    def request(self) -> aiohttp.ClientTimeout:
        return aiohttp.ClientTimeout(sock_connect=self.connect_s, sock_read=self.read_s)

    def watch(self, timeout_s: float) -> aiohttp.ClientTimeout:
        return aiohttp.ClientTimeout(
            sock_connect=self.connect_s, sock_read=timeout_s + self.watch_grace_s
        )


def keepalive_socket(addr_info: Any) -> socket.socket:
    family, type_, proto, _, _ = addr_info
    sock = socket.socket(family=family, type=type_, proto=proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    if hasattr(socket, "TCP_KEEPIDLE"):  # Linux; macOS names only the interval and count
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, KEEPALIVE_IDLE_S)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL, KEEPALIVE_INTERVAL_S)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT, KEEPALIVE_PROBES)
    return sock


class TimedRestClient(rest.RESTClientObject):  # type: ignore[misc]
    """kubernetes-asyncio's REST client with a default timeout for every request and a session
    whose connections have TCP keepalive; TLS as the configuration says."""

    def __init__(self, configuration: client.Configuration, timeouts: Timeouts) -> None:
        super().__init__(configuration)
        self.timeouts = timeouts
        self._unused = self.pool_manager  # the library's session, closed with ours
        self.pool_manager = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(
                limit=configuration.connection_pool_maxsize,
                ssl=_ssl_context(configuration),
                socket_factory=keepalive_socket,
            ),
            trust_env=True,
            read_bufsize=2**21,  # an event is one line; etcd allows objects of 1.5 MiB
        )

    async def request(self, *args: Any, _request_timeout: Any = None, **kwargs: Any) -> Any:
        return await super().request(
            *args, _request_timeout=_request_timeout or self.timeouts.request(), **kwargs
        )

    async def close(self) -> None:
        await self._unused.close()
        await super().close()


async def install(api: client.ApiClient, timeouts: Timeouts) -> client.ApiClient:
    """Give `api` the timed, keepalive transport in place of its own (which never connected)."""
    library = api.rest_client
    api.rest_client = TimedRestClient(api.configuration, timeouts)
    await library.close()
    return api


def _ssl_context(configuration: client.Configuration) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=configuration.ssl_ca_cert)
    if configuration.cert_file:
        context.load_cert_chain(configuration.cert_file, keyfile=configuration.key_file)
    if not configuration.verify_ssl:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if configuration.disable_strict_ssl_verification:
        context.verify_flags &= ~ssl.VERIFY_X509_STRICT
    return context
