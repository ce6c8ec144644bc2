"""A share's staging in a Kubernetes member cluster: before its Volcano Jobs exist, one batch/v1
Job copies the share's data into the cluster, one container per item, with the copier the
agent is configured with (image, command, arguments, a Secret of credentials, a volume to write
to). Each container gets its item as environment (`VGLOBAL_STAGING_*`, below), which Kubernetes
also expands in the command and arguments (`$(VGLOBAL_STAGING_SOURCE)`).

The Job is labelled with the placement (a cancellation deletes it with the share's other
objects, cleanup.py) and found again by its name after an agent restart. A watch keeps the
staging Jobs (`store`); `stage()` waits on it for the Job's Complete or Failed condition. The
copy is bounded twice: `activeDeadlineSeconds` makes Kubernetes stop it (Failed,
DeadlineExceeded), and the agent gives up itself a grace period later (deleting the Job) in a
cluster that does not enforce it. A copier that knows how far it is may write the bytes copied
so far to the Job's `global.volcano.sh/staged-bytes` annotation: the agent reports it."""

from __future__ import annotations

import asyncio
import dataclasses
import functools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

import yaml

from core_agent.kubernetes.adapter import BATCH_JOBS, AlreadyExists, Kind, KubeApi, Refused
from core_agent.kubernetes.retry import Abandoned
from core_agent.kubernetes.watcher import Store
from volcano_global.jobspec.members import JOB_UID_LABEL, LABEL_PREFIX, PLACEMENT_LABEL
from volcano_global.rpc.copies import MAX_BYTES
from volcano_global.rpc.shares import ShareAssignment, StagingItem

STAGING_LABEL = LABEL_PREFIX + "staging"
STAGING_JOBS = Kind(BATCH_JOBS, label_selector=STAGING_LABEL)
STAGED_BYTES_ANNOTATION = LABEL_PREFIX + "staged-bytes"
T = TypeVar("T")


@dataclass(frozen=True)
class StagingConfig:
    """The copier a staging Job runs. The default is s5cmd copying from object storage
    (`source_uri`, e.g. `s3://corpora/v3/*`) to the destination path, credentials from the
    Secret `secret` (e.g. AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, S3_ENDPOINT_URL), the
    destination on the PersistentVolumeClaim `volume_claim` mounted at `mount_path`."""

    image: str = "peakcom/s5cmd:v2.3.0"
    command: tuple[str, ...] = ()  # empty: the image's entrypoint
    args: tuple[str, ...] = ("cp", "$(VGLOBAL_STAGING_SOURCE)", "$(VGLOBAL_STAGING_DESTINATION)")
    secret: str = ""  # a Secret in the share's namespace, as the copier's environment
    volume_claim: str = ""  # a PVC in the share's namespace holding the destinations
    mount_path: str = "/data"
    timeout_s: float = 6 * 3600.0  # the Job's activeDeadlineSeconds
    grace_s: float = 60.0  # then the agent gives up itself
    backoff_limit: int = 2  # pod retries of a failed copy

    @classmethod
    def from_yaml(cls, path: Path) -> StagingConfig:
        """The fields above by their names (`volume_claim: corpora`); others are refused."""
        data = yaml.safe_load(path.read_text()) or {}
        known = {f.name for f in dataclasses.fields(cls)}
        if not isinstance(data, dict) or set(data) - known:
            unknown = ", ".join(sorted(set(data) - known)) if isinstance(data, dict) else data
            raise ValueError(f"{path}: not a staging configuration (unknown: {unknown})")
        lists = {k: tuple(str(v) for v in data[k]) for k in ("command", "args") if k in data}
        return cls(**{**data, **lists})


class Persist(Protocol):
    """Run a call until it is answered, stopping when the share is cancelled (MemberJobs)."""

    async def __call__(self, what: str, call: Callable[[], Awaitable[T]]) -> T: ...


class Stager:
    def __init__(self, api: KubeApi, config: StagingConfig | None = None) -> None:
        self.api = api
        self.config = config or StagingConfig()
        self.store: Store = {}  # the staging Jobs, kept by the source's watch
        self._waiting: set[asyncio.Event] = set()  # one per copy being waited for

    def refresh(self) -> None:
        """A staging Job changed (called by the watch): the waiting copies look again."""
        for moved in self._waiting:
            moved.set()

    async def stage(
        self,
        a: ShareAssignment,
        *,
        persist: Persist,
        stop: asyncio.Event,
        progress: Callable[[int], None],
    ) -> str:
        """Run the share's copies; "" once the data is there, else why not. Raises Abandoned
        when `stop` is set (the share was cancelled: the cancellation deletes the Job)."""
        try:
            name = await self.create(a, persist=persist)
        except Refused as exc:
            return f"creating staging Job {a.namespace}/{staging_job_name(a)}: {exc}"
        return await self.wait(a, name, persist=persist, stop=stop, progress=progress)

    async def create(self, a: ShareAssignment, *, persist: Persist) -> str:
        """The share's staging Job created (one created before an agent restart is kept);
        its name. Raises Refused when the API server refuses it."""
        name = staging_job_name(a)
        try:
            await persist(
                f"creating staging Job {a.namespace}/{name}",
                functools.partial(self.api.create_batch_job, a.namespace, self.job(a)),
            )
        except AlreadyExists:
            pass  # created before an agent restart (or it is not ours: `wait` sees it)
        return name

    async def wait(
        self,
        a: ShareAssignment,
        name: str,
        *,
        persist: Persist,
        stop: asyncio.Event,
        progress: Callable[[int], None],
    ) -> str:
        """The staging Job `name` waited for: "" once Complete, else why not (Abandoned when
        `stop` is set)."""
        moved = asyncio.Event()
        self._waiting.add(moved)
        try:
            return await self._wait(a, name, moved, persist=persist, stop=stop, progress=progress)
        finally:
            self._waiting.discard(moved)

    async def _wait(
        self,
        a: ShareAssignment,
        name: str,
        moved: asyncio.Event,
        *,
        persist: Persist,
        stop: asyncio.Event,
        progress: Callable[[int], None],
    ) -> str:
        what = f"staging Job {a.namespace}/{name}"
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.config.timeout_s + self.config.grace_s
        reported = -1
        while True:
            moved.clear()
            job = self.store.get(f"{a.namespace}/{name}")
            if job is not None and _labels(job).get(PLACEMENT_LABEL) != a.placement_id:
                return f"{what} exists and is not this share's"
            if job is not None and (outcome := job_outcome(job)) is not None:
                return outcome and f"{what} failed: {outcome}"
            staged = staged_bytes(job)
            if staged != reported:
                reported = staged
                progress(staged)
            if stop.is_set():
                raise Abandoned
            if loop.time() >= deadline:
                await persist(
                    f"deleting {what}",
                    functools.partial(self.api.delete_batch_job, a.namespace, name),
                )
                return f"{what} did not finish within {self.config.timeout_s:g} s"
            await _first(moved, stop, within=deadline - loop.time())

    def job(self, a: ShareAssignment) -> dict[str, Any]:
        """The staging Job of the share: one container per item."""
        c = self.config
        labels = {PLACEMENT_LABEL: a.placement_id, JOB_UID_LABEL: a.job_uid, STAGING_LABEL: "true"}
        pod: dict[str, Any] = {
            "restartPolicy": "Never",
            "containers": [self._container(i, item) for i, item in enumerate(a.staging)],
        }
        if c.volume_claim:
            pod["volumes"] = [
                {"name": "data", "persistentVolumeClaim": {"claimName": c.volume_claim}}
            ]
        return {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": staging_job_name(a), "namespace": a.namespace, "labels": labels},
            "spec": {
                "backoffLimit": c.backoff_limit,
                "activeDeadlineSeconds": max(1, int(c.timeout_s)),
                "template": {"metadata": {"labels": labels}, "spec": pod},
            },
        }

    def _container(self, index: int, item: StagingItem) -> dict[str, Any]:
        c = self.config
        env = {
            "VGLOBAL_STAGING_DATA_SOURCE": item.data_source,
            "VGLOBAL_STAGING_SOURCE": item.source_uri,
            "VGLOBAL_STAGING_SOURCE_CLUSTER": item.source_cluster,
            "VGLOBAL_STAGING_DESTINATION": item.destination,
            "VGLOBAL_STAGING_BYTES": str(item.bytes),
            "VGLOBAL_STAGING_GBPS": f"{item.gbps:g}",
        }
        container: dict[str, Any] = {
            "name": f"copy-{index}",
            "image": c.image,
            "env": [{"name": k, "value": v} for k, v in env.items()],
        }
        if c.command:
            container["command"] = list(c.command)
        if c.args:
            container["args"] = list(c.args)
        if c.secret:
            container["envFrom"] = [{"secretRef": {"name": c.secret}}]
        if c.volume_claim:
            container["volumeMounts"] = [{"name": "data", "mountPath": c.mount_path}]
        return container


def staging_job_name(a: ShareAssignment) -> str:
    """Unique per placement, and short enough for the `job-name` label of its pods."""
    return f"{a.job_name[:17].rstrip('-.')}-stage-{a.placement_id[:36]}"


def job_outcome(job: dict[str, Any]) -> str | None:
    """None while the Job runs; "" once Complete; why it failed once Failed."""
    for condition in (job.get("status") or {}).get("conditions") or []:
        if condition.get("status") != "True":
            continue
        if condition.get("type") == "Complete":
            return ""
        if condition.get("type") == "Failed":
            parts = (condition.get("reason"), condition.get("message"))
            return ": ".join(p for p in parts if p) or "Failed"
    return None


def staged_bytes(job: dict[str, Any] | None) -> int:
    """What the copier says it has copied (0: nothing said, or no count in ASCII digits), at
    most what the Global stores: a larger count made the report one it refuses, which ends
    the agent's stream (and `int("²")` raises, though `"²".isdigit()`)."""
    value = ((job or {}).get("metadata", {}).get("annotations") or {}).get(STAGED_BYTES_ANNOTATION)
    if not isinstance(value, str) or not value.isascii() or not value.isdigit():
        return 0
    digits = value.lstrip("0") or "0"  # 20 digits are past the most (int() refuses 4,301)
    return min(int(digits[:20]), MAX_BYTES)


async def _first(*events: asyncio.Event, within: float) -> None:
    """Return when one of `events` is set, or after `within` seconds."""
    waits = [asyncio.ensure_future(e.wait()) for e in events]
    try:
        await asyncio.wait(waits, timeout=max(within, 0.0), return_when=asyncio.FIRST_COMPLETED)
    finally:
        for wait in waits:
            wait.cancel()


def _labels(obj: dict[str, Any]) -> dict[str, str]:
    return obj["metadata"].get("labels") or {}
