"""The server's scheduling loop and the simulator decide a round the same way: the same jobs,
fleet and clock give the same placements: both run `solver.round_plan.plan_round`, this test
guards that the server's read and the simulator's input agree."""

from __future__ import annotations

import uuid
from datetime import timedelta

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import select, update

from tests.factories import (
    create_cluster,
    create_queue,
    elastic_document,
    example,
    inventory,
    job_document,
    submit,
)
from volcano_global.db.base import utcnow
from volcano_global.db.engine import transaction
from volcano_global.db.models import Job
from volcano_global.services.scheduling.round_input import read_round
from volcano_global.simulation.engine import SimOptions, Simulation
from volcano_global.simulation.scenario import Scenario
from volcano_global.simulation.workload import TraceJob
from volcano_global.solver import Policy
from volcano_global.solver.round_plan import RoundOptions, order

FLEET = Scenario.model_validate(
    {
        "clusters": [
            {
                "name": name,
                "spec": {
                    "nodeGroups": [{"count": 40, "gpusPerNode": 8, "gpuModel": "H100"}],
                    "topology": {
                        "tiers": [{"name": "tor", "size": 8}, {"name": "spine", "size": 5}]
                    },
                },
            }
            for name in ("gpu-east", "gpu-west")
        ],
        "links": [{"a": "gpu-east", "b": "gpu-west", "gbps": 400}],
        "queues": [{"name": "llm", "weight": 2}],
    }
)
# name -> (pods of 8 GPUs, the user's runningEstimate in seconds or None)
JOBS = {"wide": (30, None), "quick": (10, 300), "steady": (20, None), "long": (4, 7200)}
# An elastic job (opted in, minAvailable below its replicas): 48 pods, at least 12.
ELASTIC = ("elastic", 48, 12)


@pytest.mark.parametrize("policy", [Policy.CPSAT, Policy.BACKFILL])
async def test_the_server_loop_places_as_the_simulator(
    app: FastAPI, api: httpx.AsyncClient, policy: Policy
) -> None:
    for name in ("gpu-east", "gpu-west"):
        await create_cluster(api, name)
        body = inventory(name, tors=5, nodes_per_tor=8)
        assert (await api.put(f"/api/v1/clusters/{name}/inventory", json=body)).status_code == 200
    await api.post(
        "/api/v1/links", json={"clusterA": "gpu-east", "clusterB": "gpu-west", "capacityGbps": 400}
    )
    await create_queue(api, "llm")
    ids = {"llm": (await submit(api, example("llm-pretrain-64x8.yaml"))).json()["uid"]}
    estimates: dict[str, float | None] = {ids["llm"]: None}
    for name, (pods, estimate) in JOBS.items():
        extra = {"runningEstimate": f"{estimate}s"} if estimate else {}
        document = job_document(name, queue="llm", replicas=pods, **extra)
        ids[name] = (await submit(api, document)).json()["uid"]
        estimates[ids[name]] = estimate
    name, pods, fewest = ELASTIC
    document = elastic_document(name, queue="llm", replicas=pods, minAvailable=fewest)
    ids[name] = (await submit(api, document)).json()["uid"]
    estimates[ids[name]] = None
    # "wide" has waited an hour: it is owed a reservation and goes first.
    async with transaction(app.state.sessions) as session:
        await session.execute(
            update(Job)
            .where(Job.id == uuid.UUID(ids["wide"]))
            .values(submitted_at=utcnow() - timedelta(hours=1))
        )
    app.state.scheduler.settings.scheduling.policy = policy.value
    async with transaction(app.state.sessions) as session:
        data, _ = await read_round(session, window=10, policy=policy)
        jobs = order(data, policy, RoundOptions())
        rows = await session.execute(
            select(Job.id, Job.submitted_at).where(Job.id.in_([uuid.UUID(i) for i in ids.values()]))
        )
        submitted = {str(uid): at for uid, at in rows}
    start = min(submitted.values())
    now = (utcnow() - start).total_seconds()
    trace = [
        TraceJob(
            r.id,
            (submitted[r.id] - start).total_seconds(),
            pods=r.pods,
            gpus_per_pod=r.gpus_per_pod,
            duration_s=3600.0,
            gpu_model=r.gpu_model,
            splittable=r.splittable,
            unit_pods=r.unit_pods,
            max_clusters=r.max_clusters,
            unit_tier=r.unit_tier,
            allreduce_gbps=r.allreduce_gbps,
            priority=r.priority,
            queue=r.queue,
            estimate_s=estimates[r.id],
            min_units=r.min_units,
        )
        for r in jobs
    ]
    simulated = Simulation(FLEET, trace, policy, SimOptions(time_limit_s=5.0)).decide(
        trace, {}, now
    )
    assert [r.id for r in jobs] == [j.job_id for j in simulated.decision.jobs]

    report = await app.state.scheduler.run_once()
    assert report is not None
    served = {}
    for uid in ids.values():
        job = (await api.get(f"/api/v1/jobs/{uid}")).json()
        shares = (job.get("placement") or {}).get("shares") or []
        served[uid] = sorted((s["cluster"], s["pods"]) for s in shares)
    expected = {
        d.job_id: sorted((s.cluster, s.pods) for s in d.shares) for d in simulated.decision.jobs
    }
    assert served == expected
    # The wide job (due) and the short work went first; the 512-GPU job did not fit after them.
    assert served[ids["wide"]] and served[ids["quick"]]
    assert served[ids["llm"]] == []
    # The elastic job started at the width that was left, as the simulator chose it.
    assert 0 < sum(pods for _, pods in served[ids["elastic"]]) < 48
