"""Which errors of a batch of delta runs have it written again one run at a time."""

from __future__ import annotations

import sqlite3

from sqlalchemy.exc import DataError, IntegrityError, OperationalError

from volcano_global.errors import Busy, Invalid
from volcano_global.services.inventory.delta_writer import _alone


def test_any_error_but_the_database_unavailable_is_written_again_run_by_run() -> None:
    # A run's content may cause errors other than the refusals foreseen (a driver's DataError,
    # a bug's ValueError): they fail that run's stream alone, as on a transaction per stream.
    assert _alone(Invalid.one("nodeUpserts[0].domain", "unknown domain 'x'"))
    assert _alone(IntegrityError("INSERT", {}, sqlite3.IntegrityError("UNIQUE")))
    assert _alone(DataError("SELECT", {}, ValueError("value out of range")))
    assert _alone(ValueError("a bug met by one run's content"))
    # The database away or busy: a rewrite would meet it once a run.
    assert not _alone(OperationalError("SELECT", {}, sqlite3.OperationalError("locked")))
    assert not _alone(ConnectionResetError())
    assert not _alone(Busy("the database is busy"))
