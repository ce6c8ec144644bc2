"""SQLite's WAL checkpoints in a thread of their own, for a server writing a file database.

A checkpoint copies the pages committed to the write-ahead log back into the database file and
syncs it. SQLite runs one by default inside the commit that grows the log past 1,000 pages:
in the writer's thread, so the server's one connection waits for every page copy, read and
sync (docs/benchmarks.md, "SQLite's checkpoints in a thread of their own"). Here a second connection
copies the log in the background, outside the GIL (SQLite's C code), while the server's
connection keeps writing.

The server's connection keeps an automatic checkpoint at `BACKSTOP_PAGES` (`engine.py`): a
background checkpoint cannot copy frames appended while it runs, and the log restarts from
its beginning only once it has all been copied, so under constant writes the log would grow
without bound. The backstop's checkpoint, in the writer, finds most of the log already
copied: it copies the rest, and the next transaction restarts the log (its file cut back to
`LOG_SIZE_LIMIT`)."""

from __future__ import annotations

import logging
import os
import sqlite3
import threading

from sqlalchemy.engine import make_url
from sqlalchemy.util import asbool

log = logging.getLogger(__name__)

BACKSTOP_PAGES = 20_000  # 80 MB of log at SQLite's 4 KiB pages
LOG_SIZE_LIMIT = 64 << 20  # bytes: the log file cut back to this when it restarts
PERIOD_S = 0.2


def sqlite_file(url: str) -> str | None:
    """The database file of an SQLite URL (absolute); None for another database or one in
    memory."""
    parsed = make_url(url)
    database = parsed.database or ""
    if parsed.get_backend_name() != "sqlite" or database in ("", ":memory:"):
        return None
    if database.startswith("file:") or asbool(parsed.query.get("uri", False)):
        return None  # a URI database (e.g. shared memory): left to SQLite's own checkpoints
    return os.path.abspath(database)


class Checkpointer:
    """Checkpoints `path`'s log every `period_s` in a daemon thread with its own connection,
    until `stop`. PASSIVE: it never waits for the writer or blocks it."""

    def __init__(self, path: str, *, period_s: float = PERIOD_S) -> None:
        self.path = path
        self.period_s = period_s
        self.copied_pages = 0  # how many pages the background checkpoints copied, about
        self._backfilled = 0
        self._failing = False
        self._stopping = threading.Event()
        self._lock = threading.Lock()  # the connection is closed, or interrupted, by one side
        self._connection: sqlite3.Connection | None = None
        self._thread = threading.Thread(target=self._run, name="sqlite-checkpoints", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop, interrupting the checkpoint under way if any (the pages it copied stay
        copied; the log keeps every committed page), waiting at most `timeout_s`."""
        self._stopping.set()
        with self._lock:
            if self._connection is not None:
                self._connection.interrupt()
        if self._thread.is_alive():
            self._thread.join(timeout_s)

    def _run(self) -> None:
        try:
            connection = sqlite3.connect(self.path, timeout=1.0, isolation_level=None)
        except sqlite3.Error:
            log.exception("no background checkpoints of %s: the writer's backstop", self.path)
            return
        self._connection = connection
        try:
            while not self._stopping.wait(self.period_s):
                self._checkpoint(connection)
        except Exception:
            log.exception("background checkpoints of %s ended: the writer's backstop", self.path)
        finally:
            with self._lock:
                self._connection = None
                connection.close()

    def _checkpoint(self, connection: sqlite3.Connection) -> None:
        try:
            _, _, backfilled = connection.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        except sqlite3.Error as exc:  # e.g. locked by a schema change: the next period
            if not self._failing and not self._stopping.is_set():
                log.warning("background checkpoint of %s failed (again: debug): %s", self.path, exc)
            else:
                log.debug("background checkpoint of %s failed: %s", self.path, exc)
            self._failing = True
            return
        self._failing = False
        if backfilled < 0:
            return  # not (yet) in WAL mode, or another checkpoint (the backstop's) under way
        # `backfilled` counts the log's pages copied since the log last restarted.
        restarted = backfilled < self._backfilled
        self.copied_pages += backfilled if restarted else backfilled - self._backfilled
        self._backfilled = backfilled
