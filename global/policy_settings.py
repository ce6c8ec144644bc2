"""The scheduling policies' settings (`scheduling.preemption`, `.time_sharing`, `.elastic`,
`.data`, `.long_work`): each policy's knobs, with the defaults the round and the simulator use
(tests hold them equal)."""

from __future__ import annotations

from typing import Annotated, Literal, Self

from pydantic import BaseModel, Field, field_validator, model_validator

from volcano_global.bounds import BANDWIDTH_GBPS
from volcano_global.jobspec.fields import is_dns_label


class PreemptionSettings(BaseModel):
    """Preemption and reclaim (`solver/preemption.py` states the rule)."""

    enabled: bool = Field(
        True,
        description="Let a pending gang evict lower-priority gangs (preemption) and queues "
        "below their deserved share evict from reclaimable queues above theirs (reclaim).",
    )
    min_run_s: float = Field(
        600.0, ge=0, description="A job runs this long before it may be evicted."
    )
    max_jobs: int = Field(4, ge=1, description="Jobs evicted per round, in all.")
    max_gpus: int = Field(1024, ge=1, description="GPUs of the jobs evicted per round, in all.")
    wait_weight: float | None = Field(
        1.0,
        ge=0,
        description="Evict only when the preemptor's GPUs x its expected wait x this is at "
        "least the victims' lost GPU-hours (null: whenever the other rules allow).",
    )
    start_timeout_s: float = Field(
        600.0,
        gt=0,
        description="A preemptor whose victims are not all gone this long after their "
        "eviction loses the capacity held for it and waits as any other job.",
    )


class TimeSharingSettings(BaseModel):
    """Time-sharing by attained service, for the queues that opt in with the annotation
    global.volcano.sh/time-sharing (`solver/timesharing.py` states the rule)."""

    enabled: bool = Field(
        True, description="Let queues that opt in time-share (false: none does, whatever they say)."
    )
    min_run_s: float = Field(
        1800.0, ge=0, description="A queue's quantum is never shorter than this."
    )
    max_jobs: int = Field(2, ge=1, description="Jobs demoted per round, in all.")
    max_gpus: int = Field(1024, ge=1, description="GPUs of the jobs demoted per round, in all.")
    max_lost_s: float | None = Field(
        300.0,
        ge=0,
        description="A job yields only while its work since its last checkpoint plus its "
        "restore is at most this many seconds (null: whatever it loses).",
    )
    wait_weight: float | None = Field(
        1.0,
        ge=0,
        description="Demote only when the waiting job's GPUs x its expected wait x this is at "
        "least the demoted jobs' lost GPU-hours (null: whenever the other rules allow).",
    )


class ElasticSettings(BaseModel):
    """Resizing elastic jobs (docs/placement.md, "Elastic width"): each resize restarts the
    job from its checkpoint, so it must be worth it."""

    min_interval_s: float = Field(
        600.0,
        ge=0,
        description="An elastic job does not grow again within this long of its last start "
        "or resize (a shrink for a job that outranks it follows the preemption rules).",
    )
    min_growth: float = Field(
        0.25,
        ge=0,
        description="An elastic job grows only by at least this share of its width (and at "
        "least one replica).",
    )


class DataSettings(BaseModel):
    """Data gravity (`solver/gravity.py`, docs/staging.md): where a job's datasets and
    checkpoint are steers where it starts; a start where they are not waits for its copies."""

    mode: Literal["gravity", "holders", "oblivious"] = Field(
        "gravity",
        description="gravity: a job that reads data may start where it is, or where staging "
        "it ends sooner than a cluster that holds it has room; holders: only where it is "
        "(Volcano Global's DataDependencyAwareness); oblivious: placed by GPUs, then staged.",
    )
    staging_gbps: Annotated[float, BANDWIDTH_GBPS.field(strict_low=True)] = Field(
        100.0,
        description="Most link bandwidth one share's copies take (a copier's rate), reserved "
        "on the link while they run.",
    )
    min_staging_gbps: Annotated[float, BANDWIDTH_GBPS.field(strict_low=True)] = Field(
        10.0,
        description="Least bandwidth a copy starts with: below it on every link from a "
        "cluster holding the data, the job waits for bandwidth rather than crawl.",
    )
    cross_region_margin: float = Field(
        0.0,
        ge=0.0,
        le=100.0,
        description="A copy that leaves its region (the clusters' `region` or "
        "`topology.kubernetes.io/region` labels) is weighed as taking 1 + this times as long: "
        "it must save that much more over waiting for a cluster that holds the data (egress). "
        "0: weighed as any copy. Fewer bytes between regions, at some cost in JCT "
        "(docs/benchmarks.md 3e).",
    )
    prefetch: bool = Field(
        True,
        description="A job waiting for a busy cluster that holds its data has the data copied "
        "now, without GPUs, to the cluster expected to have room for it sooner (a copy that "
        "belongs to no share, its bandwidth reserved until it ends; docs/data.md). Off: only "
        "starts stage.",
    )

    replicate_readers: int = Field(
        0,
        ge=0,
        description="A dataset read by at least this many jobs submitted within "
        "`reads_window_s` gets a copy ahead of demand in each region that has no cluster "
        "holding it (a replica, belonging to no job; docs/data.md). 0: off.",
    )
    reads_window_s: float = Field(
        24 * 3600.0,  # solver.replication.READS_WINDOW_S, not imported: settings load light
        gt=0,
        description="How far back a job that read a dataset counts as one of its readers "
        "(`replicate_readers`).",
    )
    replica_namespace: str = Field(
        "volcano-global-data",
        description="Where replicas' staging Jobs run in every member cluster (a replica "
        "belongs to no job, so to no job's namespace): a DNS-1123 label, never kube-*, "
        "never the agent's own namespace; deploy/ creates it and grants the agent writes there.",
    )

    @field_validator("replica_namespace")
    @classmethod
    def _replica_namespace(cls, value: str) -> str:
        if not is_dns_label(value):
            raise ValueError(
                f"scheduling.data.replica_namespace {value!r} is not a namespace name (a "
                "DNS-1123 label: lowercase letters, digits and '-', at most 63 characters)"
            )
        if value == "volcano-global-agent":
            raise ValueError(
                f"scheduling.data.replica_namespace {value!r} is the agents' own namespace "
                "(deploy/base/agent): agents refuse to run copies there"
            )
        if value.startswith("kube-"):
            raise ValueError(
                f"scheduling.data.replica_namespace {value!r} is a system namespace (kube-*): "
                "agents refuse to run copies there"
            )
        return value

    @model_validator(mode="after")
    def _min_within_max(self) -> Self:
        if self.min_staging_gbps > self.staging_gbps:
            raise ValueError("min_staging_gbps must not exceed staging_gbps (nothing could stage)")
        return self


class LongWorkSettings(BaseModel):
    """Long work held to a share of the fleet (`solver/long_work.py`, docs/placement.md):
    only jobs whose runningEstimate says they run long are held back, and only while a
    shorter job of their priority waits."""

    enabled: bool = Field(
        False,
        description="Hold long jobs back while long work holds its share of the fleet (off: "
        "measured no better at the median, docs/benchmarks.md section 3h).",
    )
    long_s: float = Field(
        7200.0,
        gt=0,
        description="An expected run (the runningEstimate, corrected by how the queue's "
        "estimates held) this long or longer is long work.",
    )
    share: float = Field(
        0.6,
        gt=0,
        le=1,
        description="Of the fleet's GPUs, what long work may hold while shorter jobs wait.",
    )
