"""Prometheus metrics of one server: HTTP traffic (middleware) and gauges read from the
database at scrape time, so every replica reports the same truth."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, ProcessCollector
from sqlalchemy.ext.asyncio import AsyncSession
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from volcano_global.services.overview import cluster_counts, gpu_capacity, job_counts


@dataclass
class Metrics:
    registry: CollectorRegistry = field(default_factory=CollectorRegistry)

    def __post_init__(self) -> None:
        r = self.registry
        # process_cpu_seconds_total, process_resident_memory_bytes, process_start_time_seconds...
        # per server process (with --workers, each worker answers for itself).
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
        self.jobs = Gauge("vglobal_jobs", "Jobs by state", ["state"], registry=r)
        self.clusters = Gauge("vglobal_clusters", "Member clusters by state", ["state"], registry=r)
        self.leader = Gauge(
            "vglobal_scheduler_leader", "1 while this replica runs the scheduling loop", registry=r
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
        self.gpus = Gauge(
            "vglobal_cluster_gpus",
            "GPUs by cluster, model and kind (total|free)",
            ["cluster", "gpu_model", "kind"],
            registry=r,
        )


async def refresh_inventory_gauges(session: AsyncSession, metrics: Metrics) -> None:
    for state, count in (await job_counts(session)).items():
        metrics.jobs.labels(state.value).set(count)
    for cstate, count in (await cluster_counts(session)).items():
        metrics.clusters.labels(cstate.value).set(count)
    metrics.gpus.clear()
    for name, model, total, free in await gpu_capacity(session):
        metrics.gpus.labels(name, model, "total").set(total)
        metrics.gpus.labels(name, model, "free").set(free)


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
