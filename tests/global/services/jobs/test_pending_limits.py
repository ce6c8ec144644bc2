"""Per-queue limits on pending jobs and bytes (issue 38 item 3): a submission over its queue's
limit is refused with 403 "exceeded quota", naming the limit, the queue and the count, in
every API; the count includes what this server is still writing."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator

import httpx
import pytest
import yaml
from fastapi import FastAPI
from sqlalchemy import event

from tests.backlog import clone_jobs
from tests.conftest import app_settings, running
from tests.factories import job_document, submit
from tests.factories import queue_document as queue
from volcano_global.db.group_commit import GroupCommit
from volcano_global.services.jobs import pending_limits
from volcano_global.services.jobs.pending_limits import (
    PENDING_BYTES_ANNOTATION,
    PENDING_JOBS_ANNOTATION,
)

KUBE_JOBS = "/k8s/apis/batch.volcano.sh/v1alpha1/namespaces/ml/jobs"
YAML = {"Content-Type": "application/yaml"}
JSON = {"Content-Type": "application/json"}


async def apply(
    api: httpx.AsyncClient, *documents: object, status: int = 200
) -> list[dict[str, object]]:
    response = await api.post("/api/v1/apply", content=yaml.safe_dump_all(documents), headers=YAML)
    assert response.status_code == status, response.text
    return list(response.json()["items"])


@pytest.fixture
async def limited(database_url: str) -> AsyncIterator[tuple[FastAPI, httpx.AsyncClient]]:
    """A server whose default is 5 pending jobs per queue."""
    async with running(app_settings(database_url, limits={"max_pending_jobs": 5})) as both:
        yield both


async def test_a_submission_over_the_queue_s_annotated_limit_is_refused_in_every_api(
    api: httpx.AsyncClient,
) -> None:
    await apply(api, queue("capped", **{PENDING_JOBS_ANNOTATION: "2"}))
    for name in ("a", "b"):
        assert (await submit(api, job_document(name, queue="capped"))).status_code == 201
    refused = await submit(api, job_document("c", queue="capped"))
    assert refused.status_code == 403, refused.text
    assert refused.json()["message"] == (
        "exceeded quota: queue 'capped' has 2 pending jobs, its limit max-pending-jobs is 2 "
        f"(the queue's annotation {PENDING_JOBS_ANNOTATION} or the server's default); "
        "wait for some to start or cancel some"
    )
    kubectl = await api.post(KUBE_JOBS, json=job_document("c", queue="capped"))
    assert kubectl.status_code == 403, kubectl.text
    assert kubectl.json()["reason"] == "Forbidden"
    assert "max-pending-jobs is 2" in kubectl.json()["message"]
    # A refused document makes the whole apply a 403, with each document's result.
    (applied,) = await apply(api, job_document("c", queue="capped"), status=403)
    assert applied["code"] == 403 and "exceeded quota" in str(applied["message"])
    # Another queue is not affected, and a cancelled job makes room at once.
    assert (await submit(api, job_document("d", queue="default"))).status_code == 201
    first = (await api.get("/api/v1/jobs", params={"queue": "capped"})).json()["items"][0]
    assert (await api.post(f"/api/v1/jobs/{first['uid']}/cancel")).status_code == 200
    assert (await submit(api, job_document("c", queue="capped"))).status_code == 201


async def test_the_stored_bytes_of_a_queue_s_pending_jobs_are_limited(
    api: httpx.AsyncClient,
) -> None:
    bodies = {n: json.dumps(job_document(n, queue="bytes")).encode() for n in ("a", "b", "c")}
    size = len(bodies["a"])
    await apply(api, queue("bytes", **{PENDING_BYTES_ANNOTATION: str(2 * size + 10)}))
    sent = {
        name: await api.post("/api/v1/jobs", content=body, headers=JSON)
        for name, body in bodies.items()
    }
    assert [r.status_code for r in sent.values()] == [201, 201, 403]
    refused = sent["c"]
    assert f"queue 'bytes' has 2 pending jobs of {2 * size} bytes" in refused.json()["message"]
    assert f"max-pending-bytes is {2 * size + 10}" in refused.json()["message"]


async def test_the_setting_is_the_default_and_an_annotation_lifts_or_sets_it(
    limited: tuple[FastAPI, httpx.AsyncClient],
) -> None:
    _, api = limited
    await apply(api, queue("free", **{PENDING_JOBS_ANNOTATION: "none"}))
    statuses = [
        (await submit(api, job_document(f"j{n}", queue="default"))).status_code for n in range(6)
    ]
    assert statuses == [201] * 5 + [403]
    for n in range(6):
        assert (await submit(api, job_document(f"f{n}", queue="free"))).status_code == 201


async def test_concurrent_submissions_do_not_take_a_queue_over_its_limit(
    limited: tuple[FastAPI, httpx.AsyncClient],
) -> None:
    """Submissions in the job writer's batch, not yet committed, count."""
    _, api = limited
    answers = await asyncio.gather(
        *(submit(api, job_document(f"j{n}", queue="default")) for n in range(20))
    )
    assert sorted(a.status_code for a in answers) == [201] * 5 + [403] * 15
    listed = (await api.get("/api/v1/jobs", params={"queue": "default"})).json()["items"]
    assert len(listed) == 5


async def test_a_backlog_stored_meanwhile_counts(
    limited: tuple[FastAPI, httpx.AsyncClient],
) -> None:
    """Jobs this server did not write (another replica's) count from its next read."""
    app, api = limited
    (deep,) = await apply(api, queue("deep", **{PENDING_JOBS_ANNOTATION: "3000"}))
    first = await submit(api, job_document("first", queue="default"))
    await clone_jobs(
        app.state.sessions, first.json()["uid"], 3_000, queue_id=uuid.UUID(str(deep["uid"]))
    )
    refused = await submit(api, job_document("late", queue="deep"))
    assert refused.status_code == 403
    assert "has 3000 pending jobs, its limit max-pending-jobs is 3000" in refused.json()["message"]


async def test_submissions_near_the_limit_share_one_count_at_a_time(
    limited: tuple[FastAPI, httpx.AsyncClient],
) -> None:
    app, api = limited
    counts = []

    def counted(*args: object) -> None:
        if "count(" in str(args[2]).lower() and "pending" in str(args[3]).lower():
            counts.append(1)

    event.listen(app.state.engine.sync_engine, "before_cursor_execute", counted)
    answers = await asyncio.gather(
        *(submit(api, job_document(f"j{n}", queue="default")) for n in range(40))
    )
    event.remove(app.state.engine.sync_engine, "before_cursor_execute", counted)
    assert sorted(a.status_code for a in answers) == [201] * 5 + [403] * 35
    assert 1 <= len(counts) < 10, len(counts)


async def test_a_write_committed_while_the_count_runs_is_counted_once(
    limited: tuple[FastAPI, httpx.AsyncClient],
) -> None:
    """A fresh count waits for this server's writes under way: one committed while the count
    ran, but not yet seen as done, would be counted twice and refuse a job under the limit."""
    app, api = limited
    (tight,) = await apply(api, queue("tight", **{PENDING_JOBS_ANNOTATION: "3"}))
    first = await submit(api, job_document("first", queue="default"))
    guard = pending_limits._GUARDS[app.state.job_writer]
    async with guard.admit("tight", 10):  # a write under way...
        await clone_jobs(
            app.state.sessions, first.json()["uid"], 1, queue_id=uuid.UUID(str(tight["uid"]))
        )  # ...that has committed
        second = asyncio.ensure_future(submit(api, job_document("second", queue="tight")))
        third = asyncio.ensure_future(submit(api, job_document("third", queue="tight")))
        await asyncio.sleep(0.3)  # the second's and third's count runs meanwhile
    assert [(await s).status_code for s in (second, third)] == [201, 201]
    refused = await submit(api, job_document("fourth", queue="tight"))
    assert "has 3 pending jobs, its limit max-pending-jobs is 3" in refused.json()["message"]


async def test_a_count_waits_only_for_the_writes_under_way_when_it_began(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Later submissions do not keep a fresh count waiting (review: a stream of small ones
    made a large document near its bytes limit wait the whole `SETTLE_S`)."""
    monkeypatch.setattr(pending_limits, "SETTLE_S", 60.0)
    ledger = pending_limits._Ledger()
    ledger.begin("q", 10)
    settling = asyncio.ensure_future(ledger.settle("q"))
    await asyncio.sleep(0)
    ledger.begin("q", 10)  # admitted after the count began
    ledger.end("q", 10)
    await asyncio.wait_for(settling, 30)  # well within SETTLE_S


async def test_a_cancelled_submission_is_counted_until_its_write_ends() -> None:
    """The writer still writes a job whose caller went away: `finished` lets the caller's
    cancellation through only once the write has ended, so the queue's count sees it."""
    release, ended = asyncio.Event(), []

    async def write() -> str:
        await release.wait()
        ended.append(True)
        return "stored"

    caller = asyncio.ensure_future(pending_limits.finished(write()))
    await asyncio.sleep(0)
    caller.cancel()
    await asyncio.sleep(0.05)
    assert not caller.done()  # still waiting for the write
    release.set()
    with pytest.raises(asyncio.CancelledError):
        await caller
    assert ended == [True]


async def test_a_cancelled_submission_queued_without_a_task_is_written_all_the_same() -> None:
    """As submit_job waits: on the future `GroupCommit.enqueue` returns (no task of its own).
    The caller's cancellation neither drops the item nor lets the caller go before its batch
    is written."""
    release, written = asyncio.Event(), []

    async def write(items: list[str]) -> list[str]:
        await release.wait()
        written.extend(items)
        return ["stored" for _ in items]

    group = GroupCommit[str, str](write, what="items", max_batch=10, alone=lambda exc: False)
    caller = asyncio.ensure_future(pending_limits.finished(group.enqueue("job")))
    await asyncio.sleep(0)
    caller.cancel()
    await asyncio.sleep(0.05)
    assert not caller.done()
    release.set()
    with pytest.raises(asyncio.CancelledError):
        await caller
    assert written == ["job"]
