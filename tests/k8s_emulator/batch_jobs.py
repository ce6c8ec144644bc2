"""The emulator's job controller for batch/v1 Jobs (a share's staging copies): a created Job is
active at once and, `run_s` seconds later, Complete, or Failed when the test says so
(`fail_reason`) or when its `activeDeadlineSeconds` comes first (DeadlineExceeded, as the real
controller reports it; `deadlines` False plays a cluster that does not enforce it). A Job deleted
before then is left alone. A test that looks at what holds while a Job runs sets a long `run_s`
and ends the Jobs with `finish()` when it is done looking: a short `run_s` races a loaded
machine. Deviation: no pods are made; the status is what kube-controller-manager would write for
a one-pod Job."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tests.k8s_emulator.server import KubeEmulator

DEADLINE = ("DeadlineExceeded", "Job was active longer than specified deadline")
BACKOFF = "Job has reached the specified backoff limit"


@dataclass
class JobController:
    run_s: float = 0.05  # how long a Job runs before it ends
    fail_reason: str = ""  # e.g. "BackoffLimitExceeded": the Jobs created from now on fail
    deadlines: bool = True  # activeDeadlineSeconds enforced
    _ending: list[tuple[asyncio.TimerHandle, tuple[Any, ...]]] = field(default_factory=list)

    def started(self, emulator: KubeEmulator, gvr: Any, job: dict[str, Any]) -> None:
        """Run a Job just created (the caller holds the emulator's loop)."""
        meta = job["metadata"]
        emulator.patch(
            gvr, meta["name"], {"status": {"active": 1, "startTime": _now()}}, meta["namespace"]
        )
        deadline = job["spec"].get("activeDeadlineSeconds")
        if self.deadlines and deadline is not None and float(deadline) < self.run_s:
            after, ending = float(deadline), _failed(*DEADLINE)
        elif self.fail_reason:
            after, ending = self.run_s, _failed(self.fail_reason, BACKOFF)
        else:
            after, ending = self.run_s, _complete()
        args = (emulator, gvr, job, ending)
        self._ending.append((asyncio.get_running_loop().call_later(after, _end, *args), args))

    def finish(self) -> None:
        """End now every Job not ended yet, each as it would have ended."""
        ending, self._ending = self._ending, []
        for handle, args in ending:
            if not handle.cancelled() and handle.when() > asyncio.get_running_loop().time():
                handle.cancel()
                _end(*args)


def _end(emulator: KubeEmulator, gvr: Any, job: dict[str, Any], status: dict[str, Any]) -> None:
    meta = job["metadata"]
    now = emulator.objects[gvr].get((meta["namespace"], meta["name"]))
    if now is None or now["metadata"]["uid"] != meta["uid"]:
        return  # deleted (or deleted and made again) meanwhile
    emulator.patch(gvr, meta["name"], {"status": status}, meta["namespace"])


def _complete() -> dict[str, Any]:
    return {
        "active": 0,
        "succeeded": 1,
        "completionTime": _now(),
        "conditions": [{"type": "Complete", "status": "True", "lastTransitionTime": _now()}],
    }


def _failed(reason: str, message: str) -> dict[str, Any]:
    condition = {"type": "Failed", "status": "True", "reason": reason, "message": message}
    return {"active": 0, "failed": 1, "conditions": [{**condition, "lastTransitionTime": _now()}]}


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
