"""Liveness, readiness and Prometheus metrics."""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST
from sqlalchemy import text

from volcano_global.api.deps import Reader, Session
from volcano_global.api.errors import status_response
from volcano_global.errors import Forbidden
from volcano_global.metrics import exposition

router = APIRouter(tags=["health"])


@router.get("/healthz", operation_id="healthz")
async def healthz() -> dict[str, str]:
    """The process is up (no dependency is checked)."""
    return {"status": "ok"}


@router.get(
    "/readyz", operation_id="readyz", responses={503: {"description": "database unreachable"}}
)
async def readyz(request: Request) -> Response:
    """Ready to serve: the database answers within 2 seconds."""
    try:
        async with asyncio.timeout(2):
            async with request.app.state.engine.connect() as conn:
                await conn.execute(text("SELECT 1"))
    except Exception as exc:  # any failure to reach the database means not ready
        return status_response(
            503, "ServiceUnavailable", f"database unreachable: {type(exc).__name__}"
        )
    return Response('{"status":"ready"}', media_type="application/json")


@router.get(
    "/metrics",
    operation_id="metrics",
    response_class=Response,
    responses={200: {"content": {CONTENT_TYPE_LATEST: {}}}},
)
async def metrics(request: Request, session: Session, caller: Reader) -> Response:
    """Prometheus text format: HTTP traffic plus jobs, clusters, GPUs and queues from the
    database. For admin and reader tokens (a queue user would see every queue)."""
    if caller.visible_queues() is not None:
        raise Forbidden(f"{caller.name} may not read /metrics: it shows every queue (reader role)")
    body = await exposition(session, request.app.state.metrics)
    return Response(body, media_type=CONTENT_TYPE_LATEST)
