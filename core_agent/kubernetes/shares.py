"""Shares of global jobs run as Volcano Jobs in the member cluster.

An assignment becomes one Volcano Job (one per child for a HyperJob), labelled with its
placement; creating it again finds the one already there (at-least-once delivery, agent
restarts). A watch on the labelled Volcano Jobs turns Volcano's status into the share's phase
(Accepted, Running when every member job runs its gang, Succeeded, Failed), reported whenever it
moves and again after a restart. A share with staging items first copies its data into the
cluster (staging.py), reported Staging meanwhile; its Volcano Jobs are created once the copy is
complete, and a copy that fails or times out fails the share with the reason. A cancellation
deletes every Volcano Job of the placement, its staging Job, and the rendezvous Service and
ServiceExport, found by the placement's label (cleanup.py).

A transient failure (429, 5xx, no answer; see adapter.py) never fails a share: the call is tried
again until it is answered, and the user is warned when that takes long. Only the API server
refusing the object (invalid, forbidden, no such namespace) fails it, with the server's message.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
from collections import defaultdict
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from operator import attrgetter
from typing import Any, TypeVar

from core_agent.kubernetes.adapter import AlreadyExists, Kind, KubeApi, Missing, Refused, Transient
from core_agent.kubernetes.cleanup import remove_placement
from core_agent.kubernetes.model_pinning import label_values, pin_model
from core_agent.kubernetes.namespaces import namespace_refusal
from core_agent.kubernetes.namespaces import own_namespace as own_namespace_of_agent
from core_agent.kubernetes.queues import ensure_queue
from core_agent.kubernetes.retry import Abandoned, RetryPolicy, persistently
from core_agent.kubernetes.staging import Stager, StagingConfig
from core_agent.kubernetes.watcher import Store
from core_agent.sources import Report
from volcano_global.jobspec.members import (
    JOB_UID_LABEL,
    MEMBERS_ANNOTATION,
    PLACEMENT_LABEL,
    RENDEZVOUS_PORT,
    VOLCANO_API_VERSION,
    member_jobs,
    rank_0_task,
    share_member_name,
)
from volcano_global.jobspec.naming import rendezvous_service_name
from volcano_global.rpc.shares import ShareAssignment, ShareCancellation, SharePhase, ShareStatus

log = logging.getLogger(__name__)

VOLCANO_JOBS = Kind("vcjobs", label_selector=PLACEMENT_LABEL)
# Volcano's Job phases (batch.volcano.sh/v1alpha1 JobPhase) as a share's. Aborting and
# Terminating already kill the pods (AbortJob/TerminateJob): the share is lost, and Aborted
# is only resumed by hand. Restarting (any Restart* action) is its own share phase: the Global
# restarts the whole gang. Completing is CompleteJob (or minSuccess) on its way to Completed.
FAILED_PHASES = frozenset({"Failed", "Aborting", "Aborted", "Terminating", "Terminated"})
RUNNING_PHASES = frozenset({"Running", "Completing", "Completed"})
T = TypeVar("T")


class MemberJobs:
    def __init__(
        self,
        api: KubeApi,
        *,
        global_api: str = "",
        retry: RetryPolicy | None = None,
        page_size: int = 500,
        own_namespace: str | None = None,
        staging: StagingConfig | None = None,
        nodes: Callable[[], Iterable[dict[str, Any]]] | None = None,
    ) -> None:
        self.api = api
        self.nodes = nodes  # the cluster's nodes as watched (to pin a share's GPU model)
        self.stager = Stager(api, staging)
        self.own_namespace = own_namespace or own_namespace_of_agent()
        self.global_api = global_api  # the Global's REST address as pods reach it
        self.retry = retry or RetryPolicy()
        self.page_size = page_size  # of the lists a cancellation deletes from
        self._withdrawn: defaultdict[str, asyncio.Event] = defaultdict(asyncio.Event)
        self.store: Store = {}  # the labelled Volcano Jobs, kept by the source's watch
        self.report: Report | None = None
        self.reported: dict[str, SharePhase] = {}  # placement -> last phase reported
        self.job_uids: dict[str, str] = {}
        self.cancelled: set[str] = set()
        self.applying: dict[str, ShareAssignment] = {}  # received, being created
        self._locks: defaultdict[str, asyncio.Lock] = defaultdict(asyncio.Lock)
        self._tasks: set[asyncio.Task[None]] = set()

    def bind_reporter(self, report: Report) -> None:
        self.report = report

    # -- from the Global ------------------------------------------------------------------------
    def apply_share(self, assignment: ShareAssignment, report: Report) -> None:
        self.report = report
        self.applying[assignment.placement_id] = assignment  # listed as held from now on
        self._spawn(self._apply(assignment))

    def cancel_share(self, cancellation: ShareCancellation, report: Report) -> None:
        self.report = report
        self.cancelled.add(cancellation.placement_id)
        self._withdrawn[cancellation.placement_id].set()  # a creation still retrying stops
        self._spawn(self._cancel(cancellation))

    async def stop(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            # The Global redelivers the message (it was not acknowledged), so this is retried.
            log.error("applying a share failed", exc_info=task.exception())

    async def _apply(self, a: ShareAssignment) -> None:
        pid = a.placement_id
        self.job_uids[pid] = a.job_uid
        try:
            async with self._locks[pid]:
                if pid in self.cancelled:
                    return
                try:
                    await self._create(a)
                except Abandoned:
                    log.info("share %s cancelled while it was being created", pid)
        finally:
            # Listed as held until the watch shows its Volcano Jobs (or it failed, or was
            # cancelled): a list between the two must not tell the Global it is gone.
            seen = any(_placement(o) == pid for o in self.store.values())
            if seen or pid in self.cancelled or self.reported.get(pid) is SharePhase.FAILED:
                self.applying.pop(pid, None)

    def _pin_model(self, a: ShareAssignment, documents: list[dict[str, Any]]) -> None:
        """In a cluster of several GPU models, the share's GPU pods run on the model the
        Global counted them against (`model_pinning`)."""
        if not a.gpu_model or self.nodes is None:
            return
        models = label_values(self.nodes())
        if len(models) < 2:
            return
        requirement = models.get(a.gpu_model)
        if not requirement:
            log.warning("share %s: no node here has %s: not pinned", a.placement_id, a.gpu_model)
            return
        pin_model(documents, a.gpu_model, requirement)

    async def _create(self, a: ShareAssignment) -> None:
        pid = a.placement_id
        if (refusal := namespace_refusal(a.namespace, self.own_namespace)) is not None:
            self._send(pid, SharePhase.FAILED, refusal, force=True)
            return
        if a.staging and not any(_placement(o) == pid for o in self.store.values()):
            # (Its Volcano Jobs exist: staged before an agent restart, nothing to copy again.)
            if failure := await self._stage(a):
                self._send(pid, SharePhase.FAILED, failure, force=True)
                return
        try:
            documents = member_jobs(json.loads(a.manifest_json), a, api_url=self.global_api)
        except (ValueError, KeyError, TypeError) as exc:
            self._send(pid, SharePhase.FAILED, f"cannot build the Volcano Job: {exc}", force=True)
            return
        self._pin_model(a, documents)
        problem = await ensure_queue(self.api, a, documents, self._persist)
        if problem is not None:
            self._send(pid, SharePhase.FAILED, problem, force=True)
            return
        created: list[str] = []
        first: dict[str, Any] | None = None
        for doc in documents:
            name = doc["metadata"]["name"]
            what = f"creating Volcano Job {a.namespace}/{name}"
            try:
                # Missing too: Volcano's Job CRD may be installed after the agent started.
                made = await self._persist(
                    pid,
                    what,
                    functools.partial(self.api.create_volcano_job, a.namespace, doc),
                    retry_on=(Transient, Missing),
                )
                created.append(name)
            except AlreadyExists:
                made = (
                    await self._persist(
                        pid,
                        f"reading Volcano Job {a.namespace}/{name}",
                        functools.partial(self.api.get_volcano_job, a.namespace, name),
                    )
                    or {}
                )
                labels = (made.get("metadata") or {}).get("labels") or {}
                if labels.get(PLACEMENT_LABEL) != pid:
                    await self._delete(pid, a.namespace, created)
                    self._send(
                        pid,
                        SharePhase.FAILED,
                        f"Volcano Job {a.namespace}/{name} exists and is not this share's",
                        force=True,
                    )
                    return
            except Refused as exc:
                await self._delete(pid, a.namespace, created)
                self._send(pid, SharePhase.FAILED, f"{what}: {exc}", force=True)
                return
            first = first or made
        log.info("share %s: Volcano Jobs %s", pid, ", ".join(created) or "already there")
        warning = ""
        if a.cluster_count > 1 and a.cluster_index == 0 and first:
            warning = await self._export_rendezvous(a, documents[0], first)
        # Always answer an assignment, even one applied before: it comes again only when
        # the Global did not get the report (a cut stream), and the report is the ack.
        self._send(pid, self._accepted(pid), "", warning=warning, force=True)
        self.refresh()

    async def _stage(self, a: ShareAssignment) -> str:
        """Copy the share's data in; "" once it is there, else why not."""
        pid, total = a.placement_id, a.staging_bytes

        def progress(staged: int) -> None:
            self._send(pid, SharePhase.STAGING, "", staged=(staged, total), force=True)

        return await self.stager.stage(
            a,
            persist=functools.partial(self._persist, pid),
            stop=self._withdrawn[pid],
            progress=progress,
        )

    async def _export_rendezvous(
        self, a: ShareAssignment, document: dict[str, Any], created: dict[str, Any]
    ) -> str:
        """The rank-0 share of a split job publishes rank 0's endpoint to the other clusters:
        a Service `<member>-rdzv` selecting rank 0's pod, exported with a Multi-Cluster
        Services ServiceExport; both owned by the Volcano Job and labelled with the placement
        (a cancellation deletes them itself, not leaving them to the garbage collector).
        Returns a warning for the user when the cluster cannot export it."""
        pid = a.placement_id
        name = rendezvous_service_name(share_member_name(json.loads(a.manifest_json), a))
        job_name = document["metadata"]["name"]
        task = rank_0_task(document["spec"])  # the share of rank 0 holds it in its first job
        # No blockOwnerDeletion: the Job is deleted in the background and these are deleted
        # explicitly, so nothing needs to wait; setting it would need update on jobs/finalizers
        # under OwnerReferencesPermissionEnforcement.
        owner = {
            "apiVersion": VOLCANO_API_VERSION,
            "kind": "Job",
            "name": job_name,
            "uid": (created.get("metadata") or {}).get("uid", ""),
        }
        metadata = {
            "name": name,
            "namespace": a.namespace,
            "labels": {PLACEMENT_LABEL: pid},
            "ownerReferences": [owner],
        }
        service = {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": metadata,
            "spec": {
                "selector": {
                    "volcano.sh/job-name": job_name,
                    "volcano.sh/task-spec": task,
                    "volcano.sh/task-index": "0",
                },
                "ports": [{"name": "rendezvous", "port": RENDEZVOUS_PORT}],
            },
        }
        export = {
            "apiVersion": "multicluster.x-k8s.io/v1alpha1",
            "kind": "ServiceExport",
            "metadata": metadata,
        }
        try:
            await self._persist(
                pid,
                f"creating Service {a.namespace}/{name}",
                functools.partial(self.api.create_service, a.namespace, service),
            )
            await self._persist(
                pid,
                f"creating ServiceExport {a.namespace}/{name}",
                functools.partial(self.api.create_service_export, a.namespace, export),
            )
        except Missing:
            return (
                f"the Multi-Cluster Services API (multicluster.x-k8s.io ServiceExport) "
                f"is not installed in this cluster, so the other clusters cannot reach the "
                f"rendezvous {a.rendezvous_address}; install an MCS implementation or provide "
                f"the cross-cluster route yourself"
            )
        except Refused as exc:
            return f"could not export the rendezvous service {name}: {exc}"
        return ""

    async def _cancel(self, c: ShareCancellation) -> None:
        pid = c.placement_id
        async with self._locks[pid]:
            await remove_placement(
                self.api,
                pid,
                page_size=self.page_size,
                persist=functools.partial(self._persist, pid),
            )
        self.job_uids.setdefault(pid, c.job_uid)
        self._send(pid, SharePhase.CANCELLED, c.reason, force=True)

    async def _delete(self, pid: str, namespace: str, names: list[str]) -> None:
        for name in names:
            await self._persist(
                pid,
                f"deleting Volcano Job {namespace}/{name}",
                functools.partial(self.api.delete_volcano_job, namespace, name),
            )

    async def _persist(
        self,
        pid: str,
        what: str,
        call: Callable[[], Awaitable[T]],
        *,
        retry_on: tuple[type[Exception], ...] = (Transient,),
    ) -> T:
        """`call()` tried until answered; a share being created is warned about when slow
        and stops when cancelled (a cancellation's own calls run to the end)."""
        creating = bool(pid) and pid not in self.cancelled

        def slow(message: str) -> None:
            log.warning("share %s: %s", pid, message)
            if creating:
                self._send(pid, self._accepted(pid), "", warning=message, force=True)

        return await persistently(
            call,
            what=what,
            policy=self.retry,
            on_slow=slow,
            retry_on=retry_on,
            stop=self._withdrawn[pid] if creating else None,
        )

    def _accepted(self, pid: str) -> SharePhase:
        """Accepted, or the furthest phase reported (the watch may be ahead of a creation)."""
        return max(
            self.reported.get(pid, SharePhase.ACCEPTED),
            SharePhase.ACCEPTED,
            key=attrgetter("progress"),
        )

    # -- from the watch ------------------------------------------------------------------------
    def refresh(self) -> None:
        """Report every placement whose phase moved (called on each Volcano Job change)."""
        by_placement: defaultdict[str, list[dict[str, Any]]] = defaultdict(list)
        for obj in self.store.values():
            pid = (obj["metadata"].get("labels") or {}).get(PLACEMENT_LABEL)
            if pid:
                by_placement[pid].append(obj)
        for pid, jobs in by_placement.items():
            self.applying.pop(pid, None)  # the watch shows it: listed from the store now
            if pid in self.cancelled:
                continue
            uid = (jobs[0]["metadata"].get("labels") or {}).get(JOB_UID_LABEL, "")
            self.job_uids.setdefault(pid, uid)
            phase, message = share_phase(jobs)
            self._send(pid, phase, message)
        for pid, last in list(self.reported.items()):
            if pid not in by_placement and pid not in self.cancelled and last is SharePhase.RUNNING:
                self._send(pid, SharePhase.FAILED, "its Volcano Jobs were deleted in the cluster")

    def _send(
        self,
        pid: str,
        phase: SharePhase,
        message: str,
        *,
        warning: str = "",
        force: bool = False,
        staged: tuple[int, int] = (0, 0),  # Staging: bytes copied, of bytes to copy
    ) -> None:
        last = self.reported.get(pid)
        if not force and last is not None and phase.progress <= last.progress:
            return
        self.reported[pid] = phase
        if self.report is None:
            return
        jobs = [o for o in self.store.values() if _placement(o) == pid]
        running = sum(int((o.get("status") or {}).get("running", 0)) for o in jobs)
        succeeded = sum(int((o.get("status") or {}).get("succeeded", 0)) for o in jobs)
        failed = sum(int((o.get("status") or {}).get("failed", 0)) for o in jobs)
        self.report(
            ShareStatus(
                placement_id=pid,
                job_uid=self.job_uids.get(pid, ""),
                phase=phase,
                running=running,
                succeeded=succeeded,
                failed=failed,
                message=message,
                warning=warning,
                staged_bytes=staged[0],
                staging_bytes=staged[1],
            )
        )


def share_phase(jobs: list[dict[str, Any]]) -> tuple[SharePhase, str]:
    """A share's phase from its Volcano Jobs' status: Failed if any failed (or is aborting or
    terminating), Restarting if any restarted, Succeeded when all completed, Running when all
    run their gang (or complete), else Accepted."""
    expected = max(int(_annotations(o).get(MEMBERS_ANNOTATION, "1")) for o in jobs)
    phases = []
    for obj in jobs:
        state = (obj.get("status") or {}).get("state") or {}
        phase = state.get("phase", "Pending")
        if phase in FAILED_PHASES:
            detail = state.get("message") or state.get("reason") or ""
            return SharePhase.FAILED, f"Volcano Job {obj['metadata']['name']} {phase}" + (
                f": {detail}" if detail else ""
            )
        phases.append(phase)
    for obj in jobs:
        # A member job is new with its placement, so any retry is Volcano restarting it alone;
        # the count also catches a Restarting already over when the agent was not watching.
        retries = int((obj.get("status") or {}).get("retryCount") or 0)
        phase = ((obj.get("status") or {}).get("state") or {}).get("phase", "Pending")
        if phase == "Restarting" or retries > 0:
            return SharePhase.RESTARTING, (
                f"Volcano Job {obj['metadata']['name']} restarted in the cluster "
                f"(retry {max(retries, 1)}): the job restarts in every cluster"
            )
    if len(jobs) < expected:
        return SharePhase.ACCEPTED, ""
    if all(p == "Completed" for p in phases):
        return SharePhase.SUCCEEDED, ""
    if all(p in RUNNING_PHASES for p in phases):
        return SharePhase.RUNNING, ""
    return SharePhase.ACCEPTED, ""


def _placement(obj: dict[str, Any]) -> str | None:
    return (obj["metadata"].get("labels") or {}).get(PLACEMENT_LABEL)


def _annotations(obj: dict[str, Any]) -> dict[str, str]:
    return obj["metadata"].get("annotations") or {}
