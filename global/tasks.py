"""Long-lived background tasks of the server: named, started from the app lifespan, and
guarded so an unexpected exit is logged and the loop restarted after a pause."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from volcano_global.db.engine import is_unavailable

log = logging.getLogger(__name__)


def start_guarded(
    name: str, step: Callable[[], Awaitable[None]], *, every_s: float
) -> asyncio.Task[None]:
    """Run `step` every `every_s` seconds until cancelled; a failing step is logged and the
    loop goes on."""

    async def loop() -> None:
        while True:
            try:
                await step()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                pause = max(every_s, 1.0)
                if is_unavailable(exc):  # expected while the database restarts: no traceback
                    log.warning(
                        "background task %s: database unavailable (%s); retrying in %.1f s",
                        name,
                        str(exc).splitlines()[0],
                        pause,
                    )
                else:
                    log.exception("background task %s failed; retrying in %.1f s", name, pause)
                await asyncio.sleep(pause)
                continue
            await asyncio.sleep(every_s)

    return asyncio.create_task(loop(), name=name)


async def stop(tasks: list[asyncio.Task[None]]) -> None:
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
