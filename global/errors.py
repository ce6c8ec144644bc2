"""Domain errors. Each carries a code; the API (api/errors.py) and the agent stream
(grpc/errors.py) each map codes to statuses in one place. Services raise these and never an
HTTP exception."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class FieldError:
    """One invalid field, named by its path in the submitted document (`spec.tasks[1].replicas`)."""

    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.field}: {self.message}" if self.field else self.message


def field_error(loc: Iterable[str | int], message: str, *, prefix: str = "") -> FieldError:
    """A pydantic validation error (its `loc` and `msg`) as the field it names below `prefix`:
    `nodes[2].gpuUsed`, without pydantic's "Value error, " before the message."""
    path = prefix
    for part in loc:
        path = (
            f"{path}[{part}]"
            if isinstance(part, int)
            else (f"{path}.{part}" if path else str(part))
        )
    return FieldError(path, message.removeprefix("Value error, "))


class DomainError(Exception):
    code = "InternalError"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class NotFound(DomainError):
    code = "NotFound"


class Conflict(DomainError):
    code = "Conflict"


class Forbidden(DomainError):
    code = "Forbidden"


class Unauthorized(DomainError):
    code = "Unauthorized"


class Superseded(DomainError):
    """A newer agent stream took over the cluster this stream was acting for."""

    code = "Superseded"


class Busy(DomainError):
    """The database (or another dependency) cannot serve the request right now."""

    code = "ServiceUnavailable"


class UnsupportedMediaType(DomainError):
    code = "UnsupportedMediaType"


class TooLarge(DomainError):
    code = "RequestEntityTooLarge"


class Invalid(DomainError):
    """Input that fails validation. `errors` names every bad field found."""

    code = "Invalid"

    def __init__(self, errors: list[FieldError]) -> None:
        self.errors = errors
        super().__init__("; ".join(str(e) for e in errors) or "invalid input")

    @classmethod
    def one(cls, field: str, message: str) -> Invalid:
        return cls([FieldError(field, message)])


class BadRequest(Invalid):
    """A request parameter the server cannot read at all (a selector), answered 400 as the
    Kubernetes API server answers it; `errors` names the parameter."""

    code = "BadRequest"


class TooManyRequests(DomainError):
    """A limit on what one caller (or everyone) may hold open at once; the client retries
    after `retry_after_s`."""

    code = "TooManyRequests"

    def __init__(self, message: str, *, retry_after_s: int = 1) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s
