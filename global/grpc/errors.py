"""The one place where domain and database errors become gRPC statuses (api/errors.py is its
HTTP counterpart)."""

from __future__ import annotations

import grpc
from pydantic import ValidationError

from volcano_global.db.engine import is_unavailable
from volcano_global.errors import (
    Busy,
    Conflict,
    DomainError,
    Forbidden,
    Invalid,
    NotFound,
    Superseded,
    TooLarge,
    Unauthorized,
    field_error,
)

STATUS_BY_ERROR: dict[type[DomainError], grpc.StatusCode] = {
    Invalid: grpc.StatusCode.INVALID_ARGUMENT,
    NotFound: grpc.StatusCode.NOT_FOUND,
    Conflict: grpc.StatusCode.FAILED_PRECONDITION,
    Unauthorized: grpc.StatusCode.UNAUTHENTICATED,
    Forbidden: grpc.StatusCode.PERMISSION_DENIED,
    TooLarge: grpc.StatusCode.RESOURCE_EXHAUSTED,
    Busy: grpc.StatusCode.UNAVAILABLE,
    Superseded: grpc.StatusCode.ABORTED,
}
# Any other domain error: the agent's message does not fit the Global's state.
OTHER_DOMAIN_ERROR = grpc.StatusCode.FAILED_PRECONDITION
UNAVAILABLE = (grpc.StatusCode.UNAVAILABLE, "database busy or unreachable; reconnect and retry")


def grpc_status(exc: BaseException) -> tuple[grpc.StatusCode, str] | None:
    """The status (and its details) that ends a stream on this error; None: not one of ours
    (let it propagate)."""
    if isinstance(exc, DomainError):
        return STATUS_BY_ERROR.get(type(exc), OTHER_DOMAIN_ERROR), exc.message
    if isinstance(exc, ValidationError):  # one not turned into `Invalid` where it arose
        errors = [str(field_error(e["loc"], e["msg"])) for e in exc.errors()[:20]]
        return grpc.StatusCode.INVALID_ARGUMENT, "; ".join(errors) or "invalid message"
    if is_unavailable(exc):
        return UNAVAILABLE
    return None
