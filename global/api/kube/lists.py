"""A list of a kind, as the API server answers it, in bounded memory: streamed, read and
encoded a page at a time (each page in its own session after the first, the encoding in a
worker thread, pages sized to `kube.list_page_bytes`), up to its `limit` if any (`limit=0`
or none: every object), its `metadata` (resourceVersion, continue) after the items. A JSON
client reads it the same; what the server holds is a page, whatever the number of objects."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import AsyncIterator
from typing import Any

from fastapi import Request
from sqlalchemy.ext.asyncio import AsyncSession

from volcano_global.api.kube.paging import (
    BoundedStream,
    PageSize,
    encoded_items,
    page_size_of,
    pages_of,
)
from volcano_global.api.kube.registry import Kind
from volcano_global.api.kube.tables import columns, table, wants_table
from volcano_global.db.engine import reading
from volcano_global.services.kube import store


@dataclasses.dataclass
class _Listing:
    request: Request
    kind: Kind
    as_table: bool
    include: str

    def head(self) -> bytes:
        if self.as_table:
            head = {"kind": "Table", "apiVersion": "meta.k8s.io/v1"}
            head["columnDefinitions"] = columns(self.kind)  # type: ignore[assignment]
            key = "rows"
        else:
            head = {"apiVersion": self.kind.group_version, "kind": f"{self.kind.kind}List"}
            key = "items"
        text = json.dumps(head, separators=(",", ":"))
        return f'{text[:-1]},"{key}":['.encode()

    def shown(self, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        if not self.as_table:
            return items
        rows: list[dict[str, Any]] = table(self.kind, items, metadata={}, include=self.include)[
            "rows"
        ]
        return rows

    async def read(self, query: store.ListQuery) -> tuple[list[dict[str, Any]], str | None]:
        app = self.request.app
        async with pages_of(app), reading(app.state.sessions) as session:
            return await self.kind.adapter.list(session, kind=self.kind, query=query)


async def list_response(
    request: Request, session: AsyncSession, kind: Kind, query: store.ListQuery
) -> Any:
    """The list, streamed: the first page read here (a refusal, e.g. a bad continue token,
    is an error response), the rest as the client takes them."""
    settings = request.app.state.settings
    as_table = wants_table(request.headers.get("accept", ""))
    listing = _Listing(
        request, kind, as_table, request.query_params.get("includeObject", "Metadata")
    )
    # The version before the read: a change committed in between is then newer than the
    # list's version, and a watch from it sees it (perhaps again).
    metadata: dict[str, Any] = {"resourceVersion": str(await store.watermark(session))}
    pages = page_size_of(request.app)
    first = dataclasses.replace(query, limit=min(query.limit or pages.rows, pages.rows))
    async with pages_of(request.app):
        items, token = await kind.adapter.list(session, kind=kind, query=first)
    lines = _stream(listing, query, pages, (items, token), metadata)
    del items
    return BoundedStream(lines, send_timeout_s=settings.kube.watch_send_timeout_s)


async def _stream(
    listing: _Listing,
    query: store.ListQuery,
    pages: PageSize,
    first: tuple[list[dict[str, Any]], str | None],
    metadata: dict[str, Any],
) -> AsyncIterator[bytes]:
    """The list's pages until its end or its `limit`, then its metadata (with the continue
    token of what is left)."""
    wanted = query.limit
    items, token = first
    del first
    sent, chunk = len(items), await encoded_items(listing.shown(items), first=True)
    pages.measured(len(items), len(chunk))
    separate = bool(items)
    del items
    yield listing.head() + chunk
    while token is not None and (wanted is None or sent < wanted):
        limit = pages.rows if wanted is None else min(pages.rows, wanted - sent)
        items, token = await listing.read(
            dataclasses.replace(query, limit=limit, continue_token=token)
        )
        sent += len(items)
        chunk = await encoded_items(listing.shown(items), first=not separate)
        pages.measured(len(items), len(chunk))
        separate = separate or bool(items)
        del items
        yield chunk
    if token is not None:
        metadata["continue"] = token
    yield b'],"metadata":' + json.dumps(metadata, separators=(",", ":")).encode() + b"}"
