"""CPU of the event loop's thread by stage, in-process: a wrapped coroutine function's every step
(from a resume to its next suspension) is timed with the thread's CPU clock and added to its
stage, less the wrapped work nested in it (counted to its own stage). Unlike cProfile it is
right with SQLAlchemy's asyncio layer, whose greenlets cProfile cannot follow, and unlike a
sampler it keeps a statement's work with the stage that ran it (a greenlet's stack does not
show the coroutine that started it)."""

from __future__ import annotations

import functools
import inspect
import time
from collections import defaultdict
from collections.abc import Callable, Coroutine, Generator
from typing import Any

CPU: defaultdict[str, float] = defaultdict(float)  # stage -> seconds of the loop's thread
_NESTED: list[float] = []  # per open step: the time of wrapped work nested in it


def _count(stage: str, started: float) -> None:
    spent = time.thread_time() - started
    CPU[stage] += spent - _NESTED.pop()
    if _NESTED:
        _NESTED[-1] += spent


class _Timed:
    def __init__(self, coroutine: Coroutine[Any, Any, Any], stage: str) -> None:
        self.coroutine, self.stage = coroutine, stage

    def __await__(self) -> Generator[Any, Any, Any]:
        coroutine, value, error = self.coroutine, None, None
        while True:
            _NESTED.append(0.0)
            started = time.thread_time()
            try:
                yielded = coroutine.send(value) if error is None else coroutine.throw(error)
            except StopIteration as stop:
                _count(self.stage, started)
                return stop.value
            except BaseException:
                _count(self.stage, started)
                raise
            _count(self.stage, started)
            try:
                value, error = (yield yielded), None
            except BaseException as exc:  # cancellation, or the awaited future's error
                value, error = None, exc


def staged(stage: str, function: Callable[..., Any]) -> Callable[..., Any]:
    """`function` (a coroutine function, or a plain one) with its CPU counted to `stage`."""
    if not inspect.iscoroutinefunction(function):

        @functools.wraps(function)
        def plain(*args: Any, **kwargs: Any) -> Any:
            _NESTED.append(0.0)
            started = time.thread_time()
            try:
                return function(*args, **kwargs)
            finally:
                _count(stage, started)

        return plain

    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> _Timed:
        return _Timed(function(*args, **kwargs), stage)

    return wrapper


def patch(owner: object, name: str, stage: str) -> None:
    """Count `owner.name` (a module's function or a class's method) to `stage`."""
    setattr(owner, name, staged(stage, getattr(owner, name)))


def snapshot() -> dict[str, float]:
    return dict(CPU)
