"""Typed settings for the Global server, read from the environment (prefix `VGLOBAL_`).

Nested groups use a double underscore: `VGLOBAL_LIMITS__MAX_JOB_BYTES=2097152`.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from pydantic import BaseModel, Field, IPvAnyNetwork, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from volcano_global.policy_settings import (
    DataSettings,
    ElasticSettings,
    LongWorkSettings,
    PreemptionSettings,
    TimeSharingSettings,
)

DEFAULT_DATA_DIR = Path("vglobal-data")


class LimitSettings(BaseModel):
    """Sizes beyond which input is refused before it is parsed."""

    max_job_bytes: int = Field(1 << 20, description="Largest job document accepted (413 above).")
    max_inventory_bytes: int = Field(
        64 << 20, description="Largest inventory snapshot accepted over REST (413 above)."
    )
    max_document_nodes: int = Field(
        200_000, description="Most YAML/JSON nodes a job document may expand to (aliases count)."
    )
    max_document_depth: int = Field(64, description="Deepest nesting a job document may have.")
    max_total_pods: int = Field(100_000, description="Most pods one job may ask for.")
    max_cluster_nodes: int = Field(
        20_000,
        ge=1,
        le=20_000,  # what one snapshot may carry: a cluster must fit in one
        description="Most nodes one cluster's inventory may hold, over all its deltas "
        "(RESOURCE_EXHAUSTED / 413 above).",
    )
    max_page_size: int = Field(500, description="Largest page a list endpoint returns.")
    max_header_bytes: int = Field(
        64 << 10, description="Largest request line and headers of a request (431 above)."
    )
    max_headers: int = Field(100, description="Most header fields of a request (431 above).")
    header_timeout_s: float = Field(
        10.0, gt=0, description="Time a request's line and headers may take to arrive (408)."
    )
    max_pending_jobs: int | None = Field(
        20_000,
        ge=1,
        description="Most pending jobs per queue; a submission over it is refused (403, "
        "exceeded quota). Per queue: annotation global.volcano.sh/max-pending-jobs. Null: none.",
    )
    max_pending_bytes: int | None = Field(
        256 << 20,
        ge=1,
        description="Most stored document bytes of a queue's pending jobs (403 above). Per "
        "queue: annotation global.volcano.sh/max-pending-bytes. Null: no limit.",
    )
    pending_refresh_s: float = Field(
        1.0,
        gt=0,
        description="How old a queue's pending count may be when a submission is admitted "
        "(within 10% of a limit it is read afresh).",
    )


class RateLimitSettings(BaseModel):
    """Requests per token over /api/v1 and /k8s (a token bucket per token and server process;
    the admin is not limited; agents' gRPC streams are not counted)."""

    enabled: bool = Field(True, description="Limit each token's request rate (429 above).")
    rate_per_s: float = Field(
        20.0,
        gt=0,
        description="Requests a second a token may make on average, per server process.",
    )
    burst: int = Field(100, ge=1, description="Requests a token may make at once.")


class SchedulingDefaults(BaseModel):
    """The scheduling loop, and the defaults applied to a job that does not say."""

    max_clusters: int = Field(4, ge=1, description="Most clusters a split job may span.")
    priority_classes: dict[str, int] = Field(
        default_factory=lambda: {
            "high-priority": 1_000,
            "medium-priority": 500,
            "low-priority": 100,
        },
        description="PriorityClasses (name -> value) stored on the first start only; after it, "
        "classes are resources (/api/v1/priorityclasses). The built-in system-cluster-critical "
        "and system-node-critical always exist; a name with the system- prefix is not seeded.",
    )
    default_queue: str = Field("default", description="Queue of a job that names none.")
    policy: str = Field(
        "cpsat",
        description="Placement policy: cpsat, backfill, first-fit, proportional, greedy.",
    )
    interval_s: float = Field(2.0, gt=0, description="Longest wait between scheduling rounds.")
    round_time_limit_s: float = Field(1.0, gt=0, description="Time limit of one round.")
    min_interval_s: float = Field(
        0.2,
        ge=0,
        description="Shortest time between the starts of two rounds: under a burst of "
        "submissions, rounds take them in batches instead of one round per submission. A "
        "round that took longer than this delays the next by its own duration (rounds use at "
        "most about half of the leader's time; the rest serves requests and streams).",
    )
    window: int = Field(
        200, ge=1, description="Pending jobs the solver plans per round (the first in line)."
    )
    whole_queue: bool = Field(
        True,
        description="Consider every waiting job each round: beyond the window, a job starts "
        "whole in one cluster where it fits within the round's reservations (backfill), or is "
        "told why it waits. False: only the window is considered.",
    )
    backfill_limit: int = Field(
        1000, ge=0, description="Most jobs beyond the window one round may start (whole_queue)."
    )
    reserve_after_s: float = Field(
        1800.0,
        ge=0,
        description="A job that waited this long is owed a reservation (cpsat, backfill).",
    )
    enabled: bool = Field(True, description="Run the scheduling loop in this replica.")
    gang_start_timeout_s: float = Field(
        300.0,
        gt=0,
        description="A placement not running everywhere this long after it was made is "
        "withdrawn and the job requeued (per job: the annotation "
        "global.volcano.sh/gang-start-timeout).",
    )
    gang_sweep_interval_s: float = Field(
        1.0,
        ge=0,
        description="Shortest time between two sweeps for gangs not started within their "
        "timeout or on a cluster no longer Ready (a sweep reads every active placement; "
        "rounds come every 0.2 s under load). 0: every round.",
    )
    preemption: PreemptionSettings = Field(default_factory=PreemptionSettings)
    time_sharing: TimeSharingSettings = Field(default_factory=TimeSharingSettings)
    elastic: ElasticSettings = Field(default_factory=ElasticSettings)
    data: DataSettings = Field(default_factory=DataSettings)
    long_work: LongWorkSettings = Field(default_factory=LongWorkSettings)


class TlsSettings(BaseModel):
    """TLS with the server's certificate, on each port unless turned off for it: with a
    certificate and key set, both the REST port (https) and the agent port speak TLS, as
    before `rest` and `agents` existed; without them, neither does."""

    cert_file: Path | None = Field(None, description="PEM certificate (chain) of the server.")
    key_file: Path | None = Field(None, description="PEM private key of the certificate.")
    client_ca_file: Path | None = Field(
        None,
        description="PEM CA bundle: when set, agents must present a client certificate it "
        "signed (mutual TLS on the gRPC port).",
    )
    rest: bool = Field(
        True, description="https on the REST port when a certificate is set (false: plain http)."
    )
    agents: bool = Field(
        True,
        description="TLS on the agent gRPC port when a certificate is set (false: plaintext; "
        "agents then run without --ca-file).",
    )

    @property
    def certificate(self) -> bool:
        return self.cert_file is not None and self.key_file is not None

    @property
    def enabled(self) -> bool:
        """https on the REST port."""
        return self.certificate and self.rest

    @property
    def agents_enabled(self) -> bool:
        """TLS on the agent gRPC port."""
        return self.certificate and self.agents


class AuditSettings(BaseModel):
    """Who the audit trail says called (SECURITY.md, Audit)."""

    trusted_proxies: list[IPvAnyNetwork] = Field(
        default_factory=list,
        description="Addresses (or networks) of reverse proxies whose X-Forwarded-For the "
        "audit trail believes. Empty: the socket peer is recorded, X-Forwarded-For ignored.",
    )


class AgentSettings(BaseModel):
    """The agent stream (gRPC)."""

    address: str | None = Field(
        None,
        description="host:port the agents dial (the load balancer or Service in front of the "
        "gRPC port), as `vglobal clusters add` prints it; unset: the host the CLI reached the "
        "REST API at, with the gRPC port.",
    )
    heartbeat_interval_s: int = Field(5, ge=1, description="Heartbeat period asked of agents.")
    heartbeat_timeout_s: float = Field(
        30.0, gt=0, description="A cluster silent this long becomes NotReady."
    )
    max_message_bytes: int = Field(
        64 << 20, description="Largest agent message (RESOURCE_EXHAUSTED above)."
    )
    outbox_poll_s: float = Field(
        0.5,
        gt=0,
        description="How often a stream looks for new dispatch messages when commits of other "
        "processes cannot wake it (SQLite, or the notification connection is down).",
    )
    outbox_safety_poll_s: float = Field(
        10.0,
        gt=0,
        description="How often a stream looks anyway while Postgres notifications wake it.",
    )
    shutdown_grace_s: float = Field(
        2.0, ge=0, description="On shutdown, how long open agent streams may finish a message."
    )
    stream_check_s: float = Field(
        2.0,
        gt=0,
        description="How often an open agent stream re-reads its token and whether it is "
        "still its cluster's stream (a rotation, a deletion or a newer stream wakes it at once).",
    )
    share_inventory_interval_s: int = Field(
        180,
        ge=1,
        le=86_400,
        description="How often agents list every share their cluster holds (besides on every "
        "connect), for the Global to reconcile with its placements.",
    )

    @field_validator("address")
    @classmethod
    def _host_and_port(cls, address: str | None) -> str | None:
        if address is None:
            return None
        host, sep, port = address.rpartition(":")
        bracketed = host.startswith("[") and host.endswith("]")  # an IPv6 address
        bad_host = not host or "/" in host or (":" in host and not bracketed)
        if not sep or bad_host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"expected host:port (an IPv6 host in brackets), got {address!r}")
        return address


class TenancySettings(BaseModel):
    """What a queue's jobs may do in the member clusters when its annotations say nothing
    (docs/job-documents.md, "Tenancy"); `kube-*` namespaces are always refused."""

    default_namespaces: list[str] = Field(
        ["{queue}"],
        description="Namespaces a queue without the global.volcano.sh/namespaces annotation "
        "may use; {queue} is the queue's name.",
    )
    reserved_namespaces: list[str] = Field(
        ["volcano-global", "volcano-global-agent"],
        description="Namespaces no job may use, whatever a queue's annotation says (besides "
        "kube-*): the Global's and the agents' own.",
    )
    default_pod_security: str = Field(
        "baseline",
        pattern="^(privileged|baseline|restricted)$",
        description="Pod Security Standard of a queue without global.volcano.sh/pod-security.",
    )
    default_service_accounts: list[str] = Field(
        ["default"],
        description="Service accounts the pods of a queue without "
        "global.volcano.sh/service-accounts may run as.",
    )


class KubeApiSettings(BaseModel):
    """The Kubernetes-compatible API (`/k8s`, docs/kubectl.md)."""

    watch_poll_s: float = Field(
        0.5, gt=0, description="How often the change feed behind all watches reads changes."
    )
    watch_settle_s: float = Field(
        2.0,
        ge=0,
        description="How far back each read of the change feed looks, for changes committed "
        "after a later-stamped one.",
    )
    watch_window_s: float = Field(
        300.0,
        gt=0,
        description="Oldest resourceVersion a watch may resume from (older: 410 Expired), "
        "as the API server compacts its history every 5 minutes.",
    )
    watch_timeout_s: float = Field(
        1800.0, gt=0, description="Longest a watch stays open when the client sets no timeout."
    )
    bookmark_s: float = Field(
        60.0, gt=0, description="Period of BOOKMARK events to watches that allow them."
    )
    watch_timeout_max_s: float = Field(
        3600.0,
        gt=0,
        description="Longest a watch stays open whatever its timeoutSeconds (the API server's "
        "longest default: twice its 1800 s min-request-timeout).",
    )
    watches_per_token: int = Field(
        20, ge=1, description="Watches one token may hold open at once (more: 429)."
    )
    watches_total: int = Field(
        1000, ge=1, description="Watches the server process holds open at once (more: 429)."
    )
    watch_buffer_bytes: int = Field(
        8 * 1024 * 1024,
        ge=1024,
        description="Changes one watch may have waiting for its client, in bytes of their "
        "documents; a watch further behind is closed (the client watches again).",
    )
    watch_buffer_events: int = Field(
        10_000,
        ge=10,
        description="Changes one watch may have waiting for its client; further behind: closed.",
    )
    watch_send_timeout_s: float = Field(
        30.0,
        gt=0,
        description="Longest a watch waits for its client to take the next event before the "
        "connection is closed (a client that stopped reading).",
    )
    watch_recheck_s: float = Field(
        5.0,
        gt=0,
        description="How often the tokens of open watches are checked (a revoked or expired "
        "token's watches end).",
    )
    list_page_size: int = Field(
        200,
        ge=1,
        description="Most objects read and encoded at a time for a list or a watch's "
        "catch-up (every list is streamed a page at a time, up to its limit).",
    )
    list_page_bytes: int = Field(
        1024 * 1024,
        ge=1024,
        description="About how many bytes of objects a page of a list or a watch's catch-up "
        "holds (fewer objects per page when they are large).",
    )
    selector_max_length: int = Field(
        4096, ge=16, description="Longest label or field selector accepted (longer: 400)."
    )
    selector_max_requirements: int = Field(
        100, ge=1, description="Most requirements in a label or field selector (more: 400)."
    )


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="VGLOBAL_", env_nested_delimiter="__", env_file=None, extra="ignore"
    )

    database_url: str = Field(
        f"sqlite+aiosqlite:///{DEFAULT_DATA_DIR}/vglobal.db",
        description="SQLAlchemy async URL: sqlite+aiosqlite:///path or postgresql+asyncpg://...",
    )
    admin_token: SecretStr | None = Field(
        None,
        description="Admin bearer token. Unset: one is generated on first start, stored hashed "
        "and printed once.",
    )
    host: str = Field("127.0.0.1", description="REST listen address.")
    port: int = Field(8080, description="REST listen port.")
    grpc_port: int = Field(8081, description="Agent gRPC listen port (0: any free port).")
    log_level: str = Field("info", description="Python log level of the server.")
    api_docs: bool = Field(
        False,
        description="Serve /docs and /redoc (their scripts come from a public CDN, so off "
        "unless asked; /openapi.json is always served).",
    )
    migrate_on_start: bool = Field(True, description="Run alembic upgrade head on start.")
    db_pool_size: int = Field(
        10, description="Postgres connections per server process (no overflow: beyond, work waits)."
    )
    workers: int = Field(
        1,
        ge=1,
        le=64,
        description="Server processes sharing the REST and gRPC ports (more than 1 needs "
        "Postgres and a fixed gRPC port); each is a replica, one of them schedules.",
    )
    worker_healthcheck_timeout_s: float = Field(
        5.0,
        gt=0,
        description="With workers > 1, how long a worker may take to answer its supervisor's "
        "health check before it is killed and replaced (uvicorn's 5 s; raise it on a loaded "
        "host, but it delays the handling of SIGTERM by up to workers x this).",
    )
    shutdown_budget_s: float = Field(
        20.0,
        gt=0,
        le=3600,
        description="On SIGTERM, the most the process takes to exit: open requests finish "
        "within half of it, then each stop step gets what is left (keep it below the pod's "
        "terminationGracePeriodSeconds, 30 s by default).",
    )
    limits: LimitSettings = Field(default_factory=LimitSettings)
    rate_limit: RateLimitSettings = Field(default_factory=RateLimitSettings)
    scheduling: SchedulingDefaults = Field(default_factory=SchedulingDefaults)
    agents: AgentSettings = Field(default_factory=AgentSettings)
    tls: TlsSettings = Field(default_factory=TlsSettings)
    kube: KubeApiSettings = Field(default_factory=KubeApiSettings)
    audit: AuditSettings = Field(default_factory=AuditSettings)
    tenancy: TenancySettings = Field(default_factory=TenancySettings)

    @field_validator("database_url")
    @classmethod
    def _async_driver(cls, url: str) -> str:
        """`postgresql://` and `postgres://` (what psql and most platforms print) mean
        asyncpg, `sqlite://` aiosqlite: the drivers the server ships with."""
        for plain, driver in (
            ("postgresql://", "postgresql+asyncpg://"),
            ("postgres://", "postgresql+asyncpg://"),
            ("sqlite://", "sqlite+aiosqlite://"),
        ):
            if url.startswith(plain):
                return driver + url.removeprefix(plain)
        return url

    @property
    def is_sqlite(self) -> bool:
        return self.database_url.startswith("sqlite")


@lru_cache
def get_settings() -> Settings:
    return Settings()
