"""Refuse oversized requests before they are read into memory: bodies (413), request lines
and headers (431), headers that trickle in (408)."""

from __future__ import annotations

import asyncio
import json

import httptools
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from volcano_global.api.errors import status_response


class BodyTooLarge(HTTPException):
    """An HTTP exception, so that FastAPI's body reading passes it on (it turns any other
    error while reading into a 400) and the error handlers answer 413."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, f"request body larger than {limit} bytes")


class BodyLimitMiddleware:
    """Guards every request before the app sees it: a URL holding a NUL character is refused
    (400); bodies are capped at `default_limit` bytes, inventory snapshots at
    `inventory_limit` - a declared Content-Length over the cap is refused at once, a chunked
    body is counted as it streams in."""

    def __init__(self, app: ASGIApp, *, default_limit: int, inventory_limit: int) -> None:
        self.app = app
        self.default_limit = default_limit
        self.inventory_limit = inventory_limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        raw_path = scope.get("raw_path") or scope["path"].encode()
        if (
            b"%00" in raw_path
            or b"%00" in scope.get("query_string", b"")
            or "\x00" in scope["path"]
        ):
            # Postgres cannot hold a NUL character in text; refuse it before any query.
            response = status_response(
                400, "BadRequest", "the URL contains a NUL (%00) character, which is not allowed"
            )
            await response(scope, receive, send)
            return
        limit = self.inventory_limit if scope["path"].endswith("/inventory") else self.default_limit
        headers = dict(scope.get("headers") or [])
        declared = headers.get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > limit):
            await self._refuse(scope, receive, send, limit)
            return
        received = 0
        response_started = False

        async def counting_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise BodyTooLarge(limit)
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal response_started
            response_started = response_started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counting_receive, tracking_send)
        except BodyTooLarge:
            if not response_started:
                await self._refuse(scope, receive, send, limit)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send, limit: int) -> None:
        response = status_response(
            413, "RequestEntityTooLarge", f"request body larger than {limit} bytes"
        )
        await response(scope, receive, send)


class BoundedHttpProtocol(HttpToolsProtocol):
    """uvicorn's HTTP/1.1 protocol with the header bounds a Go server has (MaxHeaderBytes,
    ReadHeaderTimeout) and uvicorn's httptools protocol lacks: the request line and headers
    are refused (431) past `max_header_bytes` or `max_headers` fields - counted as they
    arrive, so unfinished headers cannot pile up in memory - and a request whose headers take
    longer than `header_timeout_s` from its first byte is answered 408 and closed. The
    bounds are class attributes, set from the settings before uvicorn starts
    (`configure`). On a stop, an idle connection is dropped at once (`shutdown`)."""

    max_header_bytes = 64 << 10
    max_headers = 100
    header_timeout_s = 10.0

    @classmethod
    def configure(cls, *, max_header_bytes: int, max_headers: int, header_timeout_s: float) -> None:
        cls.max_header_bytes = max_header_bytes
        cls.max_headers = max_headers
        cls.header_timeout_s = header_timeout_s

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self._awaiting_headers = True
        self._header_bytes = 0
        self._header_count = 0
        self._header_timer: asyncio.TimerHandle | None = None
        super().connection_made(transport)

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_header_timer()
        super().connection_lost(exc)

    def shutdown(self) -> None:
        """As uvicorn's (an idle connection closed, a busy one closed after its response),
        but an idle TLS connection is aborted: closing it waits for the client's close_notify,
        which a client keeping the connection alive for its next request never sends, so a stop
        waited out its whole graceful budget (half of `shutdown_budget_s`) for each such
        client. The client sees its idle connection closed, as after a plain close."""
        idle = self.cycle is None or self.cycle.response_complete
        super().shutdown()
        if idle and self.transport.get_extra_info("ssl_object") is not None:
            self.transport.abort()

    def data_received(self, data: bytes) -> None:
        if not self._awaiting_headers:
            super().data_received(data)
            return
        if self._header_timer is None:
            self._header_timer = self.loop.call_later(self.header_timeout_s, self._too_slow)
        room = self.max_header_bytes - self._header_bytes
        head, rest = data[:room], data[room:]
        self._header_bytes += len(head)
        super().data_received(head)
        if self._awaiting_headers and rest and not self.transport.is_closing():
            self._refuse(431, f"request headers larger than {self.max_header_bytes} bytes")
        elif rest and not self.transport.is_closing():
            super().data_received(rest)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._awaiting_headers = True
        self._header_count = 0

    def on_header(self, name: bytes, value: bytes) -> None:
        self._header_count += 1
        if self._header_count > self.max_headers:
            self._refuse(431, f"more than {self.max_headers} request header fields")
            raise httptools.HttpParserError("too many headers")
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self._awaiting_headers = False
        self._header_bytes = 0
        self._stop_header_timer()
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._awaiting_headers = True  # the next request on this connection

    def _too_slow(self) -> None:
        self._header_timer = None
        if self._awaiting_headers and not self.transport.is_closing():
            self._refuse(408, f"request headers not received within {self.header_timeout_s:g} s")

    def _stop_header_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _refuse(self, code: int, message: str) -> None:
        """A Status body, then close: the rest of the request is never read."""
        if self.transport.is_closing():
            return
        body = json.dumps(
            {
                "kind": "Status",
                "apiVersion": "v1",
                "status": "Failure",
                "reason": _REFUSALS[code],
                "message": message,
                "code": code,
            }
        ).encode()
        self.transport.write(
            b"HTTP/1.1 %d %s\r\ncontent-type: application/json\r\ncontent-length: %d\r\n"
            b"connection: close\r\n\r\n%s" % (code, _REFUSALS[code].encode(), len(body), body)
        )
        self.transport.close()
        self._stop_header_timer()


_REFUSALS = {408: "RequestTimeout", 431: "RequestHeaderFieldsTooLarge"}
