"""Copies that belong to no share, in a Kubernetes member cluster: the same staging Job a
share's copy runs as (staging.py), one container, named after the copy (`<name>-stage-<copy
id>`) and labelled with it. Applying a copy twice (resent on each stream, or after an agent
restart) creates nothing twice: the Job is found by its label on the API server and waited
for again, or its end reported again. A cancellation deletes the Job (the copy stops), found
the same way; a copy that ended first reports its end again instead."""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from core_agent.kubernetes.adapter import BATCH_JOBS, Gone, Kind, Missing, NotFound, Refused
from core_agent.kubernetes.namespaces import namespace_refusal
from core_agent.kubernetes.retry import Abandoned, RetryPolicy, persistently
from core_agent.kubernetes.staging import Persist, Stager, job_outcome, staging_job_name
from core_agent.sources import CopyReport
from volcano_global.jobspec.members import PLACEMENT_LABEL
from volcano_global.rpc.copies import (
    CopyCause,
    CopyPhase,
    CopyStatus,
    DataCopyAssignment,
    DataCopyCancellation,
)
from volcano_global.rpc.shares import ShareAssignment

log = logging.getLogger(__name__)
T = TypeVar("T")
# What the API server answers that trying again will not change (RBAC's 403, a 404 on the
# type, an expired continue token): the copy fails with it.
_REFUSALS = (Refused, NotFound, Missing, Gone)


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
        total = copy.item.bytes
        if (refusal := namespace_refusal(copy.namespace, self.own_namespace)) is not None:
            self._end(report, _failed(copy.copy_id, refusal, CopyCause.NAMESPACE_REFUSED))
            return

        def progress(staged: int) -> None:
            status = CopyStatus(
                copy_id=copy.copy_id, phase=CopyPhase.COPYING, staged_bytes=staged, bytes=total
            )
            report(status)

        try:
            why, cause = await self._copy(copy, self._persist(stop), stop, progress)
        except Abandoned:
            return  # cancelled: the cancellation reports
        except _REFUSALS as exc:  # unreported, the copy would stay Pending, its bandwidth held
            why, cause = f"staging Job of copy {copy.copy_id}: {exc}", CopyCause.DESTINATION
        if why:
            self._end(report, _failed(copy.copy_id, why, cause, total=total))
        else:
            done = CopyStatus(copy_id=copy.copy_id, phase=CopyPhase.SUCCEEDED, bytes=total)
            self._end(report, done)

    async def _copy(
        self,
        copy: DataCopyAssignment,
        persist: Persist,
        stop: asyncio.Event,
        progress: Callable[[int], None],
    ) -> tuple[str, CopyCause]:
        """The copy's staging Job created (or adopted) and waited for: "" once the data is
        there, else why not and what that blames."""
        share = as_share(copy)
        # Its Job, if one runs already, is found by the copy's label, not by its name: the
        # name follows the job's, and a copy whose job was deleted since is sent with its
        # data source's name instead (a Job by that name would be a second copier).
        name = await self._adopt(copy, persist)  # its refusals, of a list: the cluster's
        try:
            name = name or await self.stager.create(share, persist=persist)
        except Refused as exc:  # a write in the job's namespace
            what = f"creating staging Job {copy.namespace}/{staging_job_name(share)}"
            cause = CopyCause.of_refusal(status=exc.status, message=str(exc), kind=exc.kind)
            return f"{what}: {exc}", cause
        why = await self.stager.wait(share, name, persist=persist, stop=stop, progress=progress)
        return why, CopyCause.DESTINATION

    async def _delete(self, cancel: DataCopyCancellation, report: CopyReport) -> None:
        """Its staging Job deleted, listed by its label from the API server (the watch's
        cache may not have seen a Job just created; an agent restarted since the copy began
        finds it too). A copy that ended before its stop came reports that end again: a stop
        after a success would say the data is not there, when it is."""
        task = self._running.get(cancel.copy_id)
        if task is not None:
            await asyncio.gather(task, return_exceptions=True)
        ended = self._ended.get(cancel.copy_id)
        if ended is not None and ended.phase is not CopyPhase.STOPPED:
            report(ended)
            return
        persist = self._persist(None)
        for job in await self._jobs(cancel.copy_id, persist):
            namespace, name = _namespace(job), job["metadata"]["name"]
            if (outcome := job_outcome(job)) is not None:  # it ended while no agent ran
                if outcome:
                    why = f"staging Job {namespace}/{name} failed: {outcome}"
                    self._end(report, _failed(cancel.copy_id, why, CopyCause.DESTINATION))
                else:
                    done = CopyStatus(copy_id=cancel.copy_id, phase=CopyPhase.SUCCEEDED)
                    self._end(report, done)
                return
            await persist(
                f"deleting staging Job {namespace}/{name}",
                functools.partial(self.stager.api.delete_batch_job, namespace, name),
            )
        stopped = CopyStatus(copy_id=cancel.copy_id, phase=CopyPhase.STOPPED, message=cancel.reason)
        self._end(report, stopped)

    async def _adopt(self, copy: DataCopyAssignment, persist: Persist) -> str:
        """The name of the copy's Job already on the API server ("": none). Of several (two
        agents raced), the newest is waited for and the others deleted: one copier writes."""
        found = [
            j for j in await self._jobs(copy.copy_id, persist) if _namespace(j) == copy.namespace
        ]
        found.sort(
            key=lambda j: (j["metadata"].get("creationTimestamp") or "", j["metadata"]["name"])
        )
        for job in found[:-1]:
            name = job["metadata"]["name"]
            log.warning("copy %s: deleting its second staging Job %s", copy.copy_id, name)
            try:
                await persist(
                    f"deleting staging Job {copy.namespace}/{name}",
                    functools.partial(self.stager.api.delete_batch_job, copy.namespace, name),
                )
            except _REFUSALS as exc:
                log.warning("copy %s: staging Job %s not deleted: %s", copy.copy_id, name, exc)
        return found[-1]["metadata"]["name"] if found else ""

    async def _jobs(self, copy_id: str, persist: Persist) -> list[dict[str, Any]]:
        """The copy's staging Jobs (one, or none), as the API server has them now."""
        kind = Kind(BATCH_JOBS, label_selector=f"{PLACEMENT_LABEL}={copy_id}")
        found: list[dict[str, Any]] = []
        token: str | None = None
        while True:
            page = await persist(
                f"listing the staging Jobs of copy {copy_id}",
                functools.partial(self.stager.api.list_page, kind, limit=50, token=token),
            )
            found += page.get("items", [])
            token = page["metadata"].get("continue") or None
            if not token:
                return found

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


def _failed(copy_id: str, why: str, cause: CopyCause, *, total: int = 0) -> CopyStatus:
    return CopyStatus(
        copy_id=copy_id, phase=CopyPhase.FAILED, bytes=total, message=why, cause=cause
    )


def _namespace(job: dict[str, Any]) -> str:
    return str(job["metadata"].get("namespace", ""))
