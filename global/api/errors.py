"""The one place where domain and database errors become HTTP statuses."""

from __future__ import annotations

import logging
import re
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy.exc import DBAPIError, IntegrityError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from starlette.exceptions import HTTPException as StarletteHTTPException

from volcano_global.api import audit
from volcano_global.api.deps import BEARER, MUTATING, bearer_caller
from volcano_global.db.engine import is_unavailable
from volcano_global.errors import (
    BadRequest,
    Busy,
    Conflict,
    DomainError,
    FieldError,
    Forbidden,
    Invalid,
    NotFound,
    TooLarge,
    TooManyRequests,
    Unauthorized,
    UnsupportedMediaType,
    field_error,
)
from volcano_global.jobspec.documents import shown_text
from volcano_global.schemas.common import Status, StatusCause, StatusDetails

log = logging.getLogger(__name__)

STATUS_BY_ERROR: dict[type[DomainError], int] = {
    Invalid: 422,
    NotFound: 404,
    Conflict: 409,
    Unauthorized: 401,
    Forbidden: 403,
    TooLarge: 413,
    Busy: 503,
    UnsupportedMediaType: 415,
    BadRequest: 400,
    TooManyRequests: 429,
}
_REASONS = {
    400: "BadRequest",
    413: "RequestEntityTooLarge",
    404: "NotFound",
    405: "MethodNotAllowed",
    415: "UnsupportedMediaType",
}
_PATH_MESSAGE = re.compile(r'^([A-Za-z_][\w]*(?:\[\d+\]|\["[^"]*"\]|\.[A-Za-z_]\w*)*): (.+)$', re.S)


def status_response(
    code: int, reason: str, message: str, causes: list[FieldError] | None = None, **headers: str
) -> JSONResponse:
    body = Status(
        reason=reason,
        message=_printable(message),
        code=code,
        details=StatusDetails(
            causes=[
                StatusCause(field=_printable(c.field), message=_printable(c.message))
                for c in causes
            ]
        )
        if causes
        else None,
    )
    return JSONResponse(
        body.model_dump(mode="json", by_alias=True, exclude_none=True),
        status_code=code,
        headers=headers or None,
    )


async def _audit_denied(request: Request, why: str) -> None:
    """A refused mutating call by a known caller goes to the audit trail too (callers without a
    valid token are only logged: recording them would let anyone fill the table)."""
    principal = getattr(request.state, "principal", None)
    if principal is not None and request.method in MUTATING:
        await audit.record_denied(request, principal, why)


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(DomainError)
    async def domain_error(request: Request, exc: DomainError) -> JSONResponse:
        code = STATUS_BY_ERROR.get(type(exc), 500)
        if code == 403:
            await _audit_denied(request, exc.message)
        causes = exc.errors if isinstance(exc, Invalid) else None
        headers = {"WWW-Authenticate": "Bearer"} if code == 401 else {}
        if isinstance(exc, TooManyRequests):
            headers["Retry-After"] = str(exc.retry_after_s)
        return status_response(code, exc.code, exc.message, causes, **headers)

    @app.exception_handler(RequestValidationError)
    async def request_invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        refused = await _unauthenticated(request)
        if refused is not None:  # who may call comes before what the call holds
            return refused
        causes = [_cause(error) for error in exc.errors()]
        message = "; ".join(str(c) for c in causes)
        return status_response(422, "Invalid", message, causes)

    @app.exception_handler(IntegrityError)
    async def integrity(_: Request, exc: IntegrityError) -> JSONResponse:
        log.info("integrity error mapped to 409: %s", exc.orig)
        return status_response(409, "Conflict", "the change conflicts with existing data")

    @app.exception_handler(PoolTimeout)
    @app.exception_handler(OSError)  # the driver could not connect (refused, reset, DNS)
    async def unavailable(_: Request, exc: Exception) -> JSONResponse:
        log.warning("database unavailable: %s", exc)
        return status_response(503, "ServiceUnavailable", "database busy or unreachable; retry")

    @app.exception_handler(DBAPIError)
    async def dbapi(_: Request, exc: DBAPIError) -> JSONResponse:
        if is_unavailable(exc):
            log.warning("database unavailable: %s", exc)
            return status_response(503, "ServiceUnavailable", "database busy or unreachable; retry")
        log.exception("database error")
        return status_response(500, "InternalError", "internal database error")

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        return status_response(
            exc.status_code, _REASONS.get(exc.status_code, "Error"), str(exc.detail)
        )

    @app.exception_handler(Exception)
    async def defect(request: Request, exc: Exception) -> JSONResponse:
        # The last resort: still a defect (the traceback is logged), never plain text.
        log.error("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
        return status_response(500, "InternalError", "internal error; the server logged it")


async def _unauthenticated(request: Request) -> JSONResponse | None:
    """The 401 a call to an authenticated route gets when its input failed validation before
    its caller was checked (FastAPI validates the body and query before the dependencies)."""
    route = request.scope.get("route")
    if getattr(request.state, "principal", None) is not None or not _needs_token(route):
        return None
    try:
        await bearer_caller(request)
    except Unauthorized as exc:
        return status_response(401, exc.code, exc.message, **{"WWW-Authenticate": "Bearer"})
    return None


def _needs_token(route: Any) -> bool:
    dependant = getattr(route, "dependant", None)
    stack = [dependant] if dependant is not None else []
    while stack:
        node = stack.pop()
        if node.call is BEARER:
            return True
        stack.extend(node.dependencies)
    return False


def _cause(error: dict[str, Any]) -> FieldError:
    loc = list(error.get("loc", ()))
    where = loc[0] if loc else ""
    parts = loc[1:] if where in ("body", "query", "path", "header") else loc
    raw = str(error.get("msg", "invalid"))
    cause = field_error(parts, raw)
    path, message = cause.field, cause.message
    if raw.startswith("Value error, "):  # a validator's message may name a field below
        match = _PATH_MESSAGE.match(message)
        if match:
            inner, message = match.groups()
            path = f"{path}.{inner}" if path else inner
    if where == "query" and path:
        path = f"{path} (query)"
    return FieldError(path, message)


def _printable(text: str) -> str:
    """Errors echo the caller's input; a NUL or a lone surrogate in it is shown escaped, never
    sent raw (a lone surrogate cannot even be encoded)."""
    return shown_text(text.replace("\x00", "\\u0000"))
