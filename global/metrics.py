"""Prometheus metrics of one server: HTTP traffic (middleware), the scheduling loop's counters,
and gauges read from the database at scrape time, so every replica reports the same truth.
With `--workers N` the server gives its processes one PROMETHEUS_MULTIPROC_DIR
(`cli/serve.py`): counters and histograms are summed over the processes, whichever answers."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    ProcessCollector,
    generate_latest,
    multiprocess,
)
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from sqlalchemy.ext.asyncio import AsyncSession
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from volcano_global.db.base import utcnow
from volcano_global.services.overview import cluster_counts, gpu_capacity, job_counts
from volcano_global.services.queue_metrics import placement_waits, waiting_by_queue

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"


@dataclass
class Metrics:
    registry: CollectorRegistry = field(default_factory=CollectorRegistry)

    def __post_init__(self) -> None:
        r = self.registry
        # process_cpu_seconds_total, process_resident_memory_bytes, process_start_time_seconds...
        # of a single process: with --workers they would be of whichever worker answers.
        if not os.environ.get(MULTIPROC_ENV):
            ProcessCollector(registry=r)
        self.requests = Counter(
            "vglobal_http_requests_total",
            "HTTP requests",
            ["method", "route", "status"],
            registry=r,
        )
        self.latency = Histogram(
            "vglobal_http_request_duration_seconds",
            "HTTP request latency",
            ["method", "route"],
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
            registry=r,
        )
        self.leader = Gauge(
            "vglobal_scheduler_leader",
            "1 while this replica runs the scheduling loop",
            registry=r,
            multiprocess_mode="max",  # the replica leads when one of its processes does
        )
        self.queue_wait = Histogram(
            "vglobal_queue_wait_seconds",
            "How long jobs waited, submission to placement, by queue (as Kueue's "
            "admission_wait_time_seconds per ClusterQueue)",
            ["queue"],
            buckets=(1, 5, 15, 30, 60, 300, 900, 1800, 3600, 4 * 3600, 12 * 3600, 86400),
            registry=r,
        )
        self.rounds = Counter(
            "vglobal_scheduling_rounds_total",
            "Scheduling rounds by outcome (committed|idle)",
            ["outcome"],
            registry=r,
        )
        self.round_seconds = Histogram(
            "vglobal_scheduling_round_seconds",
            "Wall time of a committed round: snapshot, solve and commit",
            buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10),
            registry=r,
        )
        self.loop_lag = Histogram(
            "vglobal_event_loop_lag_seconds",
            "How late a timer of the process's event loop fired (probed every 0.25 s): what a "
            "request or an agent message waits behind work that holds the loop",
            buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5),
            registry=r,
        )
        self.placed = Counter("vglobal_jobs_placed_total", "Jobs placed", registry=r)
        self.deferred = Counter(
            "vglobal_jobs_deferred_total",
            "Jobs a round admitted but left for the next: the inventory moved while it solved "
            "and they no longer fitted",
            registry=r,
        )
        self.preempted = Counter(
            "vglobal_preemptors_total",
            "Pending jobs for which a round evicted running jobs (preemption or reclaim)",
            registry=r,
        )
        self.evicted = Counter(
            "vglobal_jobs_evicted_total",
            "Running jobs evicted for a preemptor (requeued or failed by their policies)",
            registry=r,
        )
        self.gang = Counter(
            "vglobal_gang_outcomes_total",
            "Placements taken back (Withdrawn) and started jobs Requeued/Failed/Completed by "
            "gang supervision",
            ["action"],
            registry=r,
        )


async def observe_queue_waits(session: AsyncSession, metrics: Metrics, placed: list[str]) -> None:
    """How long each job a round placed waited, into its queue's histogram."""
    for queue, seconds in await placement_waits(session, placed):
        metrics.queue_wait.labels(queue).observe(max(0.0, seconds))


class _Snapshot(Collector):
    """Metric families already read: a scrape's database gauges, built fresh each time so a
    cluster or queue that is gone leaves no stale series (and no multiprocess files)."""

    def __init__(self, families: list[Metric]) -> None:
        self.families = families

    def collect(self) -> Iterator[Metric]:
        return iter(self.families)


async def database_families(session: AsyncSession) -> list[Metric]:
    jobs = GaugeMetricFamily("vglobal_jobs", "Jobs by state", labels=["state"])
    for state, count in (await job_counts(session)).items():
        jobs.add_metric([state.value], count)
    clusters = GaugeMetricFamily("vglobal_clusters", "Member clusters by state", labels=["state"])
    for cstate, count in (await cluster_counts(session)).items():
        clusters.add_metric([cstate.value], count)
    gpus = GaugeMetricFamily(
        "vglobal_cluster_gpus",
        "GPUs by cluster, model and kind (total|free)",
        labels=["cluster", "gpu_model", "kind"],
    )
    for name, model, total, free in await gpu_capacity(session):
        gpus.add_metric([name, model, "total"], total)
        gpus.add_metric([name, model, "free"], free)
    return [jobs, clusters, gpus, *(await _queue_families(session))]


async def _queue_families(session: AsyncSession) -> list[Metric]:
    pending = GaugeMetricFamily(
        "vglobal_queue_pending_jobs",
        "Jobs waiting in each queue (as Kueue's pending_workloads per ClusterQueue)",
        labels=["queue"],
    )
    oldest = GaugeMetricFamily(
        "vglobal_queue_oldest_pending_seconds",
        "How long the oldest waiting job of each queue has waited (0: none waits)",
        labels=["queue"],
    )
    now = utcnow()
    for queue, count, since in await waiting_by_queue(session):
        pending.add_metric([queue], count)
        oldest.add_metric([queue], (now - since).total_seconds() if since else 0.0)
    return [pending, oldest]


async def exposition(session: AsyncSession, metrics: Metrics) -> bytes:
    """The text of one scrape: this process's metrics, or every worker's summed when the
    server runs several, then the database gauges."""
    if os.environ.get(MULTIPROC_ENV):
        processes = CollectorRegistry()
        multiprocess.MultiProcessCollector(processes)
    else:
        processes = metrics.registry
    read = CollectorRegistry()
    read.register(_Snapshot(await database_families(session)))
    return generate_latest(processes) + generate_latest(read)


class MetricsMiddleware:
    """Counts requests and their latency by route template (bounded label cardinality)."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = 500

        async def record(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, record)
        finally:
            route = scope.get("route")
            template = getattr(route, "path", "unmatched")
            self.metrics.requests.labels(scope["method"], template, str(status)).inc()
            self.metrics.latency.labels(scope["method"], template).observe(
                time.perf_counter() - start
            )
