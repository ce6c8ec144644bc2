"""What a failed prefetch copy blames (issue 33; SQLite and Postgres): its cause, recorded when
it fails and read by the destination's bar instead of its words; the API server's refusals of
jobs' namespaces, once they span namespaces; a bar that lasts until a copy into it succeeds."""

from __future__ import annotations

import httpx
import pytest
from fastapi import FastAPI

from tests.prefetch_support import (
    a_copy_ended,
    broken,
    copies,
    ended_ago,
    failed_before,
    failed_into,
    prefetching,
    report,
)
from volcano_global.db.engine import transaction
from volcano_global.db.models import CopyState
from volcano_global.rpc.copies import CopyCause, CopyPhase
from volcano_global.services.data import copy_backoff

FORBIDDEN = (
    'creating staging Job team-a/train-stage-1: jobs.batch is forbidden: User "system:'
    'serviceaccount:vg:agent" cannot create resource "jobs" in API group "batch" in the '
    'namespace "team-a"'
)


async def test_a_failure_keeps_the_cause_its_agent_said_or_its_words_said_once(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    # An agent from before causes says none: the Global reads its words once, at the report.
    # An agent that says one is believed, whatever its words.
    await prefetching(app, api)
    (first,) = await copies(app)
    await report(app, first, CopyPhase.FAILED, FORBIDDEN)
    await ended_ago(app, 301)
    await app.state.scheduler.run_once()
    second = (await copies(app))[-1]
    await report(app, second, CopyPhase.FAILED, FORBIDDEN, cause=CopyCause.DESTINATION)
    assert [(c.reason, c.cause) for c in await copies(app)] == [
        (FORBIDDEN, CopyCause.FORBIDDEN),
        (FORBIDDEN, CopyCause.DESTINATION),
    ]


async def test_the_bar_reads_the_cause_not_the_words(app: FastAPI, api: httpx.AsyncClient) -> None:
    # The 403's words in a failure the agent blames on the cluster (a copier refused by its
    # bucket, say) counted nothing against it: the words are no longer read.
    await prefetching(app, api)
    (copy,) = await copies(app)
    await report(app, copy, CopyPhase.FAILED, FORBIDDEN, cause=CopyCause.DESTINATION)
    await failed_into(app, copy, [(120.0, FORBIDDEN), (240.0, FORBIDDEN)])
    assert list((await broken(app)).barred) == ["gpu-a"]


@pytest.mark.parametrize("cause", [CopyCause.FORBIDDEN, CopyCause.NAMESPACE_MISSING])
async def test_refusals_count_once_they_span_two_namespaces_that_worked_there(
    app: FastAPI, api: httpx.AsyncClient, cause: CopyCause
) -> None:
    copy = await a_copy_ended(app, api, CopyPhase.STOPPED)
    # Jobs of two namespaces no copy ever worked in there, refused 2 min apart: an agent that
    # serves some namespaces on purpose (one RoleBinding each), not a broken cluster.
    for i, namespace in enumerate(("team-x", "team-x", "team-y")):
        failure = [(120.0 * i, "refused")]
        await failed_into(app, copy, failure, cause=cause, namespace=namespace)
    assert await broken(app) == ({}, {})
    # team-a and team-b worked there an hour ago. Three jobs of team-a refused since: team-a's
    # namespace (its RoleBinding gone, say). A job of team-b refused too: the agent's RBAC, or
    # the cluster's namespaces, are broken: gpu-a is barred (it was not, the 403 never counted).
    for namespace in ("team-a", "team-b"):
        await failed_into(app, copy, [(3600.0, "")], namespace=namespace, state=CopyState.SUCCEEDED)
    for i in range(3):
        failure = [(120.0 * i, "refused")]
        await failed_into(
            app, copy, failure, cause=cause, namespace="team-a", data_source=f"corpus-{i}"
        )
    assert await broken(app) == ({}, {})
    await failed_into(app, copy, [(30.0, "refused")], cause=cause, namespace="team-b")
    assert list((await broken(app)).barred) == ["gpu-a"]


async def test_a_bar_lasts_until_a_copy_into_the_cluster_succeeds(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    # Three incidents bar gpu-a; no job wants a copy there for 30 h. The bar lifted as its
    # incidents left the 24 h window (then every waiting job's copy went, three failed, and
    # the bar came back with its backoff started over): now one copy tries again (the probe).
    copy = await a_copy_ended(app, api, CopyPhase.FAILED, "ErrImagePull")
    await failed_before(app, copy, 2)
    await ended_ago(app, 30 * 3600.0)
    assert list((await broken(app)).probe) == ["gpu-a"]
    # The probe failing is one more incident: the backoff grows from where it was.
    await failed_into(app, copy, [(-30 * 3600.0, "ErrImagePull")])
    assert "failed 4 times in a row" in (await broken(app)).barred["gpu-a"]


async def test_failures_further_apart_than_the_window_make_no_bar(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    # The window still decides whether failures make a bar: three incidents for three jobs,
    # 13 h apart, are no three within 24 h.
    copy = await a_copy_ended(app, api, CopyPhase.FAILED, "ErrImagePull")
    await failed_into(app, copy, [(13 * 3600.0, "ErrImagePull"), (26 * 3600.0, "ErrImagePull")])
    assert await broken(app) == ({}, {})
    await failed_into(app, copy, [(12 * 3600.0, "ErrImagePull")])
    assert list((await broken(app)).barred) == ["gpu-a"]


async def test_failures_a_replica_from_before_causes_recorded_are_read_by_their_words(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    # In a rolling upgrade, a replica of the previous release records failures without a
    # cause after the migration ran: they were never read (`cause IN (...)`), and a cluster
    # broken meanwhile was not barred. Read by their words: the copier's failures count, a
    # lost cluster's and an unserved namespace's refusals do not.
    copy = await a_copy_ended(app, api, CopyPhase.STOPPED)
    lost = [(30.0 + 120.0 * i, "cluster gpu-a is NotReady") for i in range(3)]
    refused = [(60.0 + 120.0 * i, FORBIDDEN) for i in range(3)]
    await failed_into(app, copy, lost, cause=None)
    await failed_into(app, copy, refused, cause=None, namespace="team-a")
    assert await broken(app) == ({}, {})
    await failed_into(app, copy, [(120.0 * i, "ErrImagePull") for i in range(3)], cause=None)
    assert "the last: ErrImagePull" in (await broken(app)).barred["gpu-a"]


async def test_refusals_in_namespaces_never_served_there_are_not_read(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    # Every round read every failure since the cluster's last success, the refusals of
    # namespaces its agent does not serve too (one per job and backoff), to count none.
    copy = await a_copy_ended(app, api, CopyPhase.STOPPED)
    await failed_into(app, copy, [(3600.0, "")], namespace="team-a", state=CopyState.SUCCEEDED)
    for cause in (CopyCause.FORBIDDEN, CopyCause.NAMESPACE_MISSING):
        unserved = [(10.0 * i, "refused") for i in range(20)]
        await failed_into(app, copy, unserved, cause=cause, namespace="team-x")
        await failed_into(app, copy, [(5.0, "refused")], cause=cause, namespace="team-a")
    await failed_into(app, copy, [(7.0, "ErrImagePull")], namespace="team-x")
    async with transaction(app.state.sessions) as session:
        run = (await copy_backoff.failure_runs(session))["gpu-a"]
    assert sorted((f.namespace, f.cause, f.served) for f in run) == [
        ("team-a", CopyCause.FORBIDDEN, True),
        ("team-a", CopyCause.NAMESPACE_MISSING, True),
        ("team-x", CopyCause.DESTINATION, False),
    ]
