"""Copies that belong to no share, in a Kubernetes member cluster: the same staging Job a
share's copy runs as (staging.py), one container, named after the copy (`<name>-stage-<copy
id>`) and labelled with it. Applying a copy twice (resent on each stream, or after an agent
restart) creates nothing twice: the Job is found by its name and waited for again, or its end
reported again. A cancellation deletes the Job (the copy stops)."""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

from core_agent.kubernetes.namespaces import namespace_refusal
from core_agent.kubernetes.retry import Abandoned, RetryPolicy, persistently
from core_agent.kubernetes.staging import Stager
from core_agent.sources import CopyReport
from volcano_global.jobspec.members import PLACEMENT_LABEL
from volcano_global.rpc.copies import (
    CopyPhase,
    CopyStatus,
    DataCopyAssignment,
    DataCopyCancellation,
)
from volcano_global.rpc.shares import ShareAssignment

log = logging.getLogger(__name__)
T = TypeVar("T")


def as_share(copy: DataCopyAssignment) -> ShareAssignment:
    """The copy as the staging step reads a share with one item: its id in the place of a
    placement's (the staging Job's name and placement label)."""
    return ShareAssignment(
        placement_id=copy.copy_id,
        generation=0,
        job_uid=copy.job_uid,
        job_name=copy.name,
        namespace=copy.namespace,
        pods=0,
        rank_offset=0,
        world_pods=0,
        cluster_index=0,
        cluster_count=1,
        rendezvous_address="",
        staging=(copy.item,),
    )


class Copies:
    def __init__(
        self, stager: Stager, *, own_namespace: str, retry: RetryPolicy | None = None
    ) -> None:
        self.stager = stager
        self.own_namespace = own_namespace  # where it makes no Job, as for shares
        self.retry = retry or RetryPolicy()
        self._running: dict[str, asyncio.Task[None]] = {}
        self._stops: dict[str, asyncio.Event] = {}
        self._ended: dict[str, CopyStatus] = {}  # reported again if the copy is sent again
        self._deleting: set[asyncio.Task[None]] = set()

    def apply_copy(self, copy: DataCopyAssignment, report: CopyReport) -> None:
        ended = self._ended.get(copy.copy_id)
        if ended is not None:
            report(ended)
        elif copy.copy_id not in self._running:
            stop = self._stops.setdefault(copy.copy_id, asyncio.Event())
            task = asyncio.create_task(self._run(copy, report, stop))
            self._running[copy.copy_id] = task
            task.add_done_callback(lambda _: self._running.pop(copy.copy_id, None))

    def cancel_copy(self, cancel: DataCopyCancellation, report: CopyReport) -> None:
        self._stops.setdefault(cancel.copy_id, asyncio.Event()).set()
        task = asyncio.create_task(self._delete(cancel, report))
        self._deleting.add(task)
        task.add_done_callback(self._deleting.discard)

    async def stop(self) -> None:
        tasks = [*self._running.values(), *self._deleting]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _run(self, copy: DataCopyAssignment, report: CopyReport, stop: asyncio.Event) -> None:
        share, total = as_share(copy), copy.item.bytes
        if (refusal := namespace_refusal(copy.namespace, self.own_namespace)) is not None:
            failed = CopyStatus(copy_id=copy.copy_id, phase=CopyPhase.FAILED, message=refusal)
            self._end(report, failed)
            return

        def progress(staged: int) -> None:
            status = CopyStatus(
                copy_id=copy.copy_id, phase=CopyPhase.COPYING, staged_bytes=staged, bytes=total
            )
            report(status)

        try:
            why = await self.stager.stage(
                share, persist=self._persist(stop), stop=stop, progress=progress
            )
        except Abandoned:
            return  # cancelled: the cancellation reports
        phase = CopyPhase.FAILED if why else CopyPhase.SUCCEEDED
        self._end(report, CopyStatus(copy_id=copy.copy_id, phase=phase, bytes=total, message=why))

    async def _delete(self, cancel: DataCopyCancellation, report: CopyReport) -> None:
        """Its staging Job deleted, found by its label in the watched staging Jobs (an agent
        restarted since the copy began finds it too)."""
        task = self._running.get(cancel.copy_id)
        if task is not None:
            await asyncio.gather(task, return_exceptions=True)
        for key, job in list(self.stager.store.items()):
            if (job["metadata"].get("labels") or {}).get(PLACEMENT_LABEL) != cancel.copy_id:
                continue
            namespace, name = key.split("/", 1)
            await self._persist(None)(
                f"deleting staging Job {key}",
                functools.partial(self.stager.api.delete_batch_job, namespace, name),
            )
        stopped = CopyStatus(copy_id=cancel.copy_id, phase=CopyPhase.STOPPED, message=cancel.reason)
        self._end(report, stopped)

    def _end(self, report: CopyReport, status: CopyStatus) -> None:
        self._ended[status.copy_id] = status
        report(status)

    def _persist(self, stop: asyncio.Event | None):  # type: ignore[no-untyped-def]
        async def persist(what: str, call: Callable[[], Awaitable[T]]) -> T:
            return await persistently(
                call,
                what=what,
                policy=self.retry,
                on_slow=lambda message: log.warning("copy: %s", message),
                stop=stop,
            )

        return persist
