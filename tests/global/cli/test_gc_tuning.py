"""The server process freezes what startup built and raises the first GC threshold (the load
benchmark's latency tail was full collections over the startup objects)."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from volcano_global.cli import serve
from volcano_global.cli.gc_tuning import FIRST_GENERATION_THRESHOLD
from volcano_global.settings import Settings


@pytest.fixture
def restored_gc() -> Iterator[None]:
    thresholds = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*thresholds)


def test_the_server_app_is_built_with_the_collector_tuned(
    restored_gc: None, tmp_path: object
) -> None:
    gc.unfreeze()
    app = serve.server_app(Settings(database_url=f"sqlite+aiosqlite:///{tmp_path}/x.db"))
    assert app.title == "Volcano Global"
    assert gc.get_freeze_count() > 10_000  # the imported modules, models and routes
    assert gc.get_threshold()[0] == FIRST_GENERATION_THRESHOLD
