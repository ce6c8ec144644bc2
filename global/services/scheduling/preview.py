"""A job's placement if it were first in line now: the submission checked as on submit, then
the solver run on the current free capacity, link reservations and quotas with this job alone
(a name a job not deleted holds is a 409, as on submit).
Nothing is stored. Answers "which clusters could host it now" for `vglobal plan --check` and
`POST /api/v1/jobs/preview`."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncSession

from volcano_global.jobspec import NormalizedJob
from volcano_global.services.jobs.names import refuse_taken
from volcano_global.services.jobs.submission import Submission, parse_submission
from volcano_global.services.scheduling.round_input import read_round
from volcano_global.solver import JobDecision, Policy, Snapshot, SolveOptions, parts, solve
from volcano_global.solver.fair_share import quota_states
from volcano_global.solver.packing import pools_of
from volcano_global.solver.requests import job_request
from volcano_global.solver.reservations import HoldBook


@dataclass(frozen=True)
class Preview:
    job: NormalizedJob
    queue: str
    decision: JobDecision


async def preview_job(
    session: AsyncSession, submission: Submission, *, time_limit_s: float
) -> Preview:
    _, job, queue = await parse_submission(session, submission)
    await refuse_taken(session, namespace=job.namespace, name=job.name)
    # A job placed alone on the free capacity: no queue order, no plan over time to read.
    data, _ = await read_round(session, window=0, policy=Policy.FIRST_FIT)
    try:
        request = job_request(
            job_id="preview",
            gang=job.gang,
            split=job.split_policy,
            communication=job.communication,
            priority=job.priority,
            queue=queue.name,
        )
    except ValueError as exc:
        decision = JobDecision("preview", False, reason=f"cannot be placed yet: {exc}")
        return Preview(job, queue.name, decision)
    queues = quota_states(data.tree, {request.queue})
    if request.parts:  # a HyperJob whose children differ: as step 5c of a round places it
        room = parts.Room(
            pools_of(data.clusters),
            {x.key: x.free_gbps for x in data.links},
            HoldBook([]),
            {
                q.name: max(q.quota_gpus - q.used_gpus, 0)
                for q in queues
                if q.quota_gpus is not None
            },
        )
        return Preview(job, queue.name, parts.place_parted([request], room)[0])
    alone = Snapshot(data.clusters, data.links, (request,), queues)
    result = await asyncio.to_thread(
        solve, alone, Policy.CPSAT, SolveOptions(time_limit_s=time_limit_s)
    )
    return Preview(job, queue.name, result.jobs[0])
