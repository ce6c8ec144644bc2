"""Refuse oversized request bodies (413) before they are read into memory."""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from volcano_global.api.errors import status_response


class BodyTooLarge(Exception):
    pass


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
                    raise BodyTooLarge
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
