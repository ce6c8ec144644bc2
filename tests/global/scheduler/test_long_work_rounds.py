"""Long work held to its share of the fleet on the server (issue 34 item 3): a job whose
runningEstimate says it runs for hours waits, with the reason, while long work would pass
its share and a shorter job waits; the setting turns it off."""

from __future__ import annotations

import httpx
from fastapi import FastAPI

from tests.factories import create_cluster, create_queue, inventory, job_document, submit
from volcano_global.settings import LongWorkSettings
from volcano_global.solver.long_work import LongWork


async def test_a_long_job_waits_while_long_work_would_pass_its_share(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    for name in ("gpu-east", "gpu-west"):  # 2 x 320 GPUs: long work may hold 384 (60%)
        await create_cluster(api, name)
        body = inventory(name, tors=5, nodes_per_tor=8)
        assert (await api.put(f"/api/v1/clusters/{name}/inventory", json=body)).status_code == 200
    await create_queue(api, "llm")
    scheduling = app.state.scheduler.settings.scheduling
    scheduling.policy = "backfill"
    scheduling.long_work.enabled = True
    uids = {}
    for name, pods, estimate in (("l1", 30, "3h"), ("l2", 20, "3h"), ("short", 10, None)):
        extra = {"runningEstimate": estimate} if estimate else {}
        document = job_document(name, queue="llm", replicas=pods, **extra)
        uids[name] = (await submit(api, document)).json()["uid"]
    report = await app.state.scheduler.run_once()
    placed = {name for name, uid in uids.items() if uid in report.result.placed}
    assert "short" in placed and len(placed & {"l1", "l2"}) == 1, placed
    (held,) = {"l1", "l2"} - placed
    reason = (await api.get(f"/api/v1/jobs/{uids[held]}")).json()["pendingReason"]
    assert reason.startswith("long work: expected to run 3.0 h"), reason
    assert "of the fleet's 640 GPUs and may hold 60%" in reason
    scheduling.long_work.enabled = False
    assert (await app.state.scheduler.run_once()).result.placed == [uids[held]]


def test_the_servers_long_work_defaults_are_the_rounds() -> None:
    settings, rule = LongWorkSettings(), LongWork()
    assert (settings.long_s, settings.share) == (rule.long_s, rule.share)
    assert not settings.enabled  # as the round's and the simulator's default (None)
