"""Which database errors are transient (`db.engine.is_unavailable`): the caller retries them
instead of failing (and logging a traceback for) what the database's restart caused."""

from __future__ import annotations

from asyncpg.exceptions._base import InternalClientError
from sqlalchemy.exc import InternalError

from volcano_global.db.engine import is_unavailable


def _as_sqlalchemy_raises_it(message: str) -> InternalError:
    driver = InternalClientError(message)
    adapted = RuntimeError(message)  # SQLAlchemy's adapter error, caused by the driver's
    adapted.__cause__ = driver
    return InternalError("BEGIN", {}, adapted)


def test_a_connection_left_mid_operation_by_a_restart_is_transient() -> None:
    left = "cannot switch to state 15; another operation (2) is in progress"
    assert is_unavailable(_as_sqlalchemy_raises_it(left))


def test_another_client_error_is_not() -> None:
    assert not is_unavailable(_as_sqlalchemy_raises_it("unexpected codec state"))
