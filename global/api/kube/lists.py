"""A list of a kind, as the API server answers it, in bounded memory: a list with a small
`limit` is one page as before; a list without one (or `limit=0`, or a limit above
`kube.list_page_size`) is streamed, read and encoded a page at a time (each page in its own
session, the encoding in a worker thread), its `metadata` (resourceVersion, continue) after
the items. A JSON client reads it the same; what the server holds is one page, whatever the
number of objects."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import AsyncIterator
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse
from sqlalchemy.ext.asyncio import AsyncSession

from volcano_global.api.kube.paging import BoundedStream, encoded_items, pages_of
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
    settings = request.app.state.settings
    page_size = settings.kube.list_page_size
    params = request.query_params
    as_table = wants_table(request.headers.get("accept", ""))
    include = params.get("includeObject", "Metadata")
    # The version before the read: a change committed in between is then newer than the
    # list's version, and a watch from it sees it (perhaps again).
    version = str(await store.watermark(session))
    wanted = query.limit
    first_query = dataclasses.replace(query, limit=min(wanted or page_size, page_size))
    items, token = await kind.adapter.list(session, kind=kind, query=first_query)
    metadata: dict[str, Any] = {"resourceVersion": version}
    if wanted is not None and wanted <= page_size:
        if token:
            metadata["continue"] = token
        if as_table:
            return JSONResponse(table(kind, items, metadata=metadata, include=include))
        body = {
            "apiVersion": kind.group_version,
            "kind": f"{kind.kind}List",
            "metadata": metadata,
            "items": items,
        }
        return JSONResponse(body)
    listing = _Listing(request, kind, as_table, include)
    lines = _stream(listing, query, (items, token), wanted, metadata)
    return BoundedStream(lines, send_timeout_s=settings.kube.watch_send_timeout_s)


async def _stream(
    listing: _Listing,
    query: store.ListQuery,
    first: tuple[list[dict[str, Any]], str | None],
    wanted: int | None,
    metadata: dict[str, Any],
) -> AsyncIterator[bytes]:
    page_size = listing.request.app.state.settings.kube.list_page_size
    items, token = first
    sent = len(items)
    chunk = listing.head() + await encoded_items(listing.shown(items), first=True)
    separate = bool(items)
    del items, first
    yield chunk
    while token is not None and (wanted is None or sent < wanted):
        limit = page_size if wanted is None else min(page_size, wanted - sent)
        items, token = await listing.read(
            dataclasses.replace(query, limit=limit, continue_token=token)
        )
        sent += len(items)
        chunk = await encoded_items(listing.shown(items), first=not separate)
        separate = separate or bool(items)
        del items
        yield chunk
    if token is not None:
        metadata["continue"] = token
    yield b'],"metadata":' + json.dumps(metadata, separators=(",", ":")).encode() + b"}"
