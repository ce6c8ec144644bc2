"""/api/v1/jobs: the unified job API (Volcano Job or HyperJob, YAML or JSON, unchanged)."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from sqlalchemy.ext.asyncio import AsyncSession

from volcano_global.api import audit
from volcano_global.api.deps import (
    AppSettings,
    Caller,
    LoneSubmitter,
    Reader,
    Session,
    Submitter,
)
from volcano_global.api.documents import body_format, document_body
from volcano_global.db.models import JobCheckpointLocation, JobState, TokenRole
from volcano_global.errors import Busy, Forbidden, Invalid
from volcano_global.jobspec import ParseOptions
from volcano_global.jobspec.tenancy import TenancyDefaults, TenancyRules
from volcano_global.schemas.common import ListMeta, error_responses
from volcano_global.schemas.jobs import (
    Checkpoint,
    CheckpointIn,
    EventList,
    EventOut,
    JobDetail,
    JobList,
    JobPreview,
    JobSummary,
    JobTimestamps,
    LinkReservationOut,
    MeasurementIn,
    Measurements,
    PlacementOut,
    PreviewShare,
    ShareOut,
)
from volcano_global.services import events
from volcano_global.services.data import checkpoints as data_checkpoints
from volcano_global.services.jobs import cancel, measurements, names
from volcano_global.services.jobs import submission as submissions
from volcano_global.services.jobs import views as job_views
from volcano_global.services.jobs.views import PlacementView
from volcano_global.services.scheduling import preview
from volcano_global.services.tenancy.boundary import tenancy_rules
from volcano_global.services.tenancy.submission_rules import (
    SubmissionRules,
    last_rules,
    submission_rules,
)
from volcano_global.services.tenancy.tokens import Principal
from volcano_global.settings import Settings

router = APIRouter(prefix="/api/v1/jobs", tags=["jobs"])
RULE_CHANGES = 3  # a submission checked again this often at most, then answered 503

DOCUMENT_BODY = document_body(
    "A Volcano Job (batch.volcano.sh/v1alpha1) or HyperJob (training.volcano.sh/v1alpha1), "
    "unchanged.",
    required=["apiVersion", "kind", "metadata", "spec"],
    properties={
        "apiVersion": {"type": "string"},
        "kind": {"type": "string", "enum": ["Job", "HyperJob"]},
        "metadata": {"type": "object"},
        "spec": {"type": "object"},
    },
)


@router.post(
    "",
    status_code=201,
    operation_id="submitJob",
    responses=error_responses(401, 403, 409, 413, 415, 422),
    openapi_extra=DOCUMENT_BODY,
)
async def submit_job(request: Request, caller: LoneSubmitter) -> JobDetail:
    """Submit a Volcano Job or HyperJob as YAML (`Content-Type: application/yaml`) or JSON."""
    job = await _submit_checked(request, caller)
    request.app.state.scheduler.wake.set()  # a new job: schedule without waiting for the period
    return present_job(job, None)


async def _submit_checked(request: Request, caller: Principal) -> dict[str, Any]:
    """The job checked and written without a statement of its own: checked against the rules
    this process read last, whose mark the writer's batch compares with the fingerprint where
    it writes the job. If they moved (RulesMoved), or refuse the job and may have moved, they
    are read again and the job checked anew: a change on any replica applies to it."""
    settings: Settings = request.app.state.settings
    defaults = tenancy_defaults(settings)
    rules = last_rules(request.app.state.engine.sync_engine, defaults)
    current = rules is None  # read just now, or not yet known to be
    if rules is None:
        rules = await _read_rules(request, defaults)
    for _ in range(RULE_CHANGES):
        try:
            return await submissions.submit_job(
                await _submission(request, settings, caller, rules, rules_mark=rules.mark),
                submitted_by=caller.name,
                writer=request.app.state.job_writer,
                events=[audit.audit_row(request, caller)],
                refuse_finished=True,
            )
        except submissions.RulesMoved:
            rules = await _read_rules(request, defaults)
        except (Invalid, Forbidden):
            if current:
                raise
            fresh = await _read_rules(request, defaults)
            if fresh.mark == rules.mark:
                raise
            rules = fresh
        current = True
    raise Busy("queues or priority classes changed throughout the submission: retry it")


async def _read_rules(request: Request, defaults: TenancyDefaults) -> SubmissionRules:
    async with request.app.state.sessions() as own:
        return await submission_rules(own, defaults)


@router.post(
    "/preview",
    operation_id="previewJob",
    responses=error_responses(401, 403, 409, 413, 415, 422),
    openapi_extra=DOCUMENT_BODY,
)
async def preview_job(
    request: Request, session: Session, settings: AppSettings, caller: Submitter
) -> JobPreview:
    """Check a document as submit does and show where it would run if it were first in line
    now (current free GPUs, link reservations and quotas; other pending jobs ignored). Nothing
    is stored. A name a job not deleted holds is a 409, as on submit."""
    result = await preview.preview_job(
        session,
        await submission_for(request, settings, caller, session),
        time_limit_s=settings.scheduling.round_time_limit_s,
    )
    job, decision = result.job, result.decision
    return JobPreview(
        name=job.name,
        namespace=job.namespace,
        queue=result.queue,
        total_pods=job.gang.total_pods,
        total_gpus=job.gang.total_gpus,
        gpu_model=job.gang.gpu_model,
        split_policy=job.split_policy,
        communication=job.communication,
        admitted=decision.admitted,
        shares=[
            PreviewShare(cluster=s.cluster, pods=s.pods, gpus=s.gpus, domains=dict(s.domains))
            for s in decision.shares
        ],
        link_reservations=[
            LinkReservationOut(cluster_a=r.a, cluster_b=r.b, gbps=r.gbps)
            for r in decision.reservations
        ],
        reason=decision.reason,
    )


async def submission_for(
    request: Request, settings: Settings, caller: Principal, session: AsyncSession | None = None
) -> submissions.Submission:
    """`session`: the request's own, if it has one (SQLite's pool has one connection: a second
    session would wait for it)."""
    # Read afresh when they changed: a class or queue annotation changed a moment ago (on any
    # replica) applies to this job.
    if session is not None:
        rules = await submission_rules(session, tenancy_defaults(settings))
    else:
        rules = await _read_rules(request, tenancy_defaults(settings))
    return await _submission(request, settings, caller, rules)


async def _submission(
    request: Request,
    settings: Settings,
    caller: Principal,
    rules: SubmissionRules,
    *,
    rules_mark: str | None = None,
) -> submissions.Submission:
    """The request's document and what it is checked against. `rules_mark`: the job writer
    writes the job only if the rules' fingerprint is still this one."""
    return submissions.Submission(
        body=await request.body(),
        fmt=body_format(request),
        options=ParseOptions(
            priority_classes=rules.classes,
            default_priority_class=rules.default_class,
            default_max_clusters=settings.scheduling.max_clusters,
            max_total_pods=settings.limits.max_total_pods,
        ),
        limits=submissions.SubmitLimits(
            max_nodes=settings.limits.max_document_nodes,
            max_depth=settings.limits.max_document_depth,
        ),
        default_queue=settings.scheduling.default_queue,
        tenancy=rules.tenancy,
        allowed_queues=caller.visible_queues(),
        rules_mark=rules_mark,
    )


def tenancy_defaults(settings: Settings) -> TenancyDefaults:
    """What a queue's annotations leave out, from the settings."""
    group = settings.tenancy
    return TenancyDefaults(
        namespaces=tuple(group.default_namespaces),
        reserved_namespaces=tuple(group.reserved_namespaces),
        pod_security=group.default_pod_security,
        service_accounts=tuple(group.default_service_accounts),
    )


async def read_tenancy(session: AsyncSession, settings: Settings) -> TenancyRules:
    """The queues' tenancy rules, with the settings' defaults for what a queue leaves out."""
    return await tenancy_rules(session, defaults=tenancy_defaults(settings))


@router.get("", operation_id="listJobs", responses=error_responses(401, 403, 422))
async def list_jobs(
    session: Session,
    settings: AppSettings,
    caller: Reader,
    queue: str | None = None,
    state: JobState | None = None,
    cluster: str | None = None,
    namespace: str | None = None,
    name: str | None = None,
    text: Annotated[
        str | None, Query(max_length=63, description="Part of the name or namespace")
    ] = None,
    limit: Annotated[int, Query(ge=1, le=10_000)] = 50,
    continue_: Annotated[str | None, Query(alias="continue", max_length=512)] = None,
    updated_since: Annotated[
        datetime | None,
        Query(
            alias="updatedSince",
            description="Only jobs changed at or after this time (`timestamps.updatedAt` of "
            "an earlier answer): what `vglobal get jobs -w` polls with",
        ),
    ] = None,
) -> JobList:
    """Jobs, newest first, one page at a time; pass `metadata.continue` back for the next."""
    if updated_since is not None and updated_since.tzinfo is None:
        updated_since = updated_since.replace(tzinfo=UTC)  # a time without offset is UTC
    rows, clusters, token = await job_views.job_page(
        session,
        filters=job_views.JobFilter(
            queue=queue,
            state=state,
            cluster=cluster,
            namespace=namespace,
            name=name,
            text=text,
            queues=caller.visible_queues(),
            updated_since=updated_since,
        ),
        limit=min(limit, settings.limits.max_page_size),
        continue_token=continue_,
    )
    return JobList(
        items=[JobSummary(**_summary_fields(row, clusters.get(row["id"], []))) for row in rows],
        metadata=ListMeta(continue_=token),
    )


@router.get("/{uid}", operation_id="getJob", responses=error_responses(401, 403, 404, 422))
async def get_job(uid: uuid.UUID, session: Session, caller: Reader) -> JobDetail:
    job, placement = await job_views.job_view(session, uid=uid)
    caller.require_queue(job["queue_name"])
    where = None  # where its checkpoint is: read only for a job that reported one
    if job.get("checkpointed_at") is not None:
        where = await data_checkpoints.find_location(session, job_id=uid)
    return present_job(job, placement, checkpoint_location=where)


@router.post(
    "/{uid}/cancel", operation_id="cancelJob", responses=error_responses(401, 403, 404, 409, 422)
)
async def cancel_job(uid: uuid.UUID, session: Session, caller: Submitter) -> JobDetail:
    """Cancel a job (idempotent: cancelling a cancelled job returns it unchanged)."""
    caller.require_queue((await cancel.get_job(session, uid=uid)).queue.name)
    await cancel.cancel_job(session, uid=uid, by=caller.name)
    return present_job(*await job_views.job_view(session, uid=uid))


@router.delete("/{uid}", operation_id="deleteJob", responses=error_responses(401, 403, 404, 422))
async def delete_job(uid: uuid.UUID, session: Session, caller: Submitter) -> JobDetail:
    """Delete a job as `kubectl delete` does: cancel it if it has not finished and free its
    name for a new job (it stays readable by UID, with its events)."""
    caller.require_queue((await cancel.get_job(session, uid=uid)).queue.name)
    await names.delete_job(session, uid=uid, by=caller.name)
    return present_job(*await job_views.job_view(session, uid=uid))


@router.get(
    "/{uid}/events", operation_id="listJobEvents", responses=error_responses(401, 403, 404, 422)
)
async def job_events(uid: uuid.UUID, session: Session, caller: Reader) -> EventList:
    job = await cancel.get_job(session, uid=uid)
    caller.require_queue(job.queue.name)
    rows = await events.list_events(session, job_id=job.id)
    return EventList(items=[EventOut.model_validate(e) for e in rows])


def _summary_fields(job: Mapping[str, Any], clusters: list[str]) -> dict[str, Any]:
    """What a summary shows of `job` (a row of `job_views`: its columns and `queue_name`);
    `clusters`: those it runs in, or ran in once finished."""
    state = job["state"]
    return {
        "uid": job["id"],
        "name": job["name"],
        "namespace": job["namespace"],
        "kind": job["kind"],
        "queue": job["queue_name"],
        "priority": job["priority"],
        "priority_class_name": job["priority_class_name"],
        "preemption_policy": job.get("preemption_policy") or "PreemptLowerPriority",
        "state": state.value,
        "state_message": job["state_message"],
        "pending_reason": job["pending_reason"] if state is JobState.PENDING else None,
        "requeues": job["requeues"],
        "total_pods": job["total_pods"],
        "total_gpus": job["total_gpus"],
        "gpu_model": job["gpu_model"],
        "clusters": clusters,
        "timestamps": JobTimestamps(
            submitted_at=job["submitted_at"],
            placed_at=job["placed_at"],
            dispatched_at=job["dispatched_at"],
            started_at=job["started_at"],
            finished_at=job["finished_at"],
            updated_at=job.get("updated_at"),
        ),
    }


def present_job(
    job: Mapping[str, Any],
    placement: PlacementView | None,
    *,
    checkpoint_location: JobCheckpointLocation | None = None,
) -> JobDetail:
    shown = placement is not None and job_views.shows_clusters(job["state"], placement.state)
    clusters = [s["cluster"] for s in placement.shares] if shown and placement else []
    return JobDetail(
        **_summary_fields(job, clusters),
        gang=job["gang"],
        split_policy=job["split_policy"],
        communication=job["communication"],
        measurements=Measurements.model_validate(job["measurements"])
        if job["measurements"]
        else None,
        checkpoint=Checkpoint(
            step=job["checkpoint_step"],
            checkpointed_at=job["checkpointed_at"],
            size_bytes=checkpoint_location.size_bytes if checkpoint_location else None,
            cluster=checkpoint_location.cluster if checkpoint_location else None,
        )
        if job.get("checkpointed_at") is not None
        else None,
        placement=_placement(placement) if placement else None,
        manifest=job["manifest"],
    )


def _placement(placement: PlacementView) -> PlacementOut:
    return PlacementOut(
        uid=placement.id,
        generation=placement.generation,
        state=placement.state.value,
        created_at=placement.created_at,
        shares=[ShareOut.model_validate(share) for share in placement.shares],
        link_reservations=[LinkReservationOut.model_validate(r) for r in placement.reservations],
    )


@router.post(
    "/{uid}/checkpoints",
    operation_id="reportJobCheckpoint",
    responses=error_responses(401, 403, 404, 409, 422),
)
async def report_checkpoint(
    uid: uuid.UUID, body: CheckpointIn, session: Session, caller: Caller
) -> Checkpoint:
    """A training process saved a checkpoint (with the job token the agent injected, or an
    admin token). Preemption counts the work an eviction would lose from the newest one of
    the job's current run, so a job that just saved one is evicted before one that has not.
    A job token of a run that has ended is revoked with it (401); one that escaped revocation
    (issued before the rule) is refused while a later run holds the job (409). The newest
    report's cluster and size are where the job's checkpoint is (docs/data.md)."""
    caller.require_job(uid)
    at = await measurements.record_checkpoint(
        session,
        uid=uid,
        step=body.step,
        run_token_issued_at=caller.issued_at if caller.role is TokenRole.JOB else None,
    )
    where = await data_checkpoints.record_location(
        session,
        job_id=uid,
        step=body.step,
        size_bytes=body.size_bytes,
        cluster=body.cluster,
        cluster_index=body.cluster_index,
    )
    return Checkpoint(
        step=body.step, checkpointed_at=at, size_bytes=where.size_bytes, cluster=where.cluster
    )


@router.post(
    "/{uid}/measurements",
    operation_id="reportJobMeasurements",
    responses=error_responses(401, 403, 404, 409, 422),
)
async def report_measurements(
    uid: uuid.UUID, body: MeasurementIn, session: Session, caller: Caller
) -> Measurements:
    """A training process reports its step time and the bytes its gradient all-reduce moved
    (with the job token the agent injected, or an admin token). Later placements of the job
    use the measured rate instead of the declared one. A job token of a run that has ended is
    refused (401 once revoked with its run, 409 for one issued before that)."""
    caller.require_job(uid)
    job = await measurements.record(
        session,
        uid=uid,
        step_time_s=body.step_time_seconds,
        bytes_per_step=body.bytes_per_step,
        run_token_issued_at=caller.issued_at if caller.role is TokenRole.JOB else None,
    )
    return Measurements.model_validate(job.measurements)
