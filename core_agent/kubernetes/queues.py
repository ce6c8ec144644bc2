"""The Volcano Queue a member job names, made to exist in the member cluster before the job:
Volcano's admission webhook refuses a Job whose queue is missing, and its scheduler never
starts one in a queue that is not Open.

The queue is created from the Global's Queue document, less what is fleet-wide: `parent`
(the hierarchy is the Global's; a member queue hangs under the cluster's root), `guarantee`
and `deserved` (copied to every member cluster they would reserve the fleet's amount in each
one). `weight`, `capability`, `reclaimable`, `priority` and the other fields go as written. A
queue already there is used as it is (the cluster's admins own it), unless it is not Open."""

from __future__ import annotations

import copy
import functools
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypeVar

from core_agent.kubernetes.adapter import AlreadyExists, KubeApi, Missing, Refused
from volcano_global.jobspec.queue_document import API_VERSION, KIND
from volcano_global.rpc.shares import ShareAssignment

log = logging.getLogger(__name__)
T = TypeVar("T")


class Persist(Protocol):
    """`MemberJobs._persist`: a call tried until answered, stopped if the share is cancelled."""

    def __call__(
        self,
        pid: str,
        what: str,
        call: Callable[[], Awaitable[T]],
        *,
        retry_on: tuple[type[Exception], ...] = ...,
    ) -> Awaitable[T]: ...


FLEET_WIDE = ("parent", "guarantee", "deserved")
MANAGED_BY = "global.volcano.sh/managed-by"


def member_queue(document: dict[str, Any]) -> dict[str, Any]:
    """The Volcano Queue to create in a member cluster for the Global's queue `document`."""
    metadata = document.get("metadata") or {}
    spec = {k: v for k, v in (document.get("spec") or {}).items() if k not in FLEET_WIDE}
    labels = {**(metadata.get("labels") or {}), MANAGED_BY: "volcano-global"}
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": metadata["name"], "labels": labels},
        "spec": copy.deepcopy(spec),
    }


def refusal(queue: dict[str, Any]) -> str | None:
    """Why jobs cannot go to this queue of the member cluster, or None. A queue without a
    state yet (Volcano's controller sets it just after creation) counts as Open."""
    state = (queue.get("status") or {}).get("state") or "Open"
    if state != "Open":
        name = (queue.get("metadata") or {}).get("name", "")
        return (
            f"Volcano Queue {name} is {state} in this cluster: it accepts no new jobs "
            f"(open it with `vcctl queue operate --name {name} --action open`)"
        )
    return None


async def ensure_queue(
    api: KubeApi, a: ShareAssignment, documents: list[dict[str, Any]], persist: Persist
) -> str | None:
    """Make the Volcano Queue the member jobs name exist and check it is Open; why the share
    cannot run, or None. A Global older than this agent sends no queue: nothing is checked."""
    if not a.queue_json:
        return None
    wanted = json.loads(a.queue_json)
    name = wanted["metadata"]["name"]
    if name not in {(d.get("spec") or {}).get("queue") or "default" for d in documents}:
        return None
    pid, read = a.placement_id, functools.partial(api.get_volcano_queue, name)
    found = await persist(pid, f"reading Volcano Queue {name}", read)
    if found is None:
        create = functools.partial(api.create_volcano_queue, member_queue(wanted))
        try:
            found = await persist(pid, f"creating Volcano Queue {name}", create)
            log.info("share %s: created Volcano Queue %s", pid, name)
        except AlreadyExists:  # made meanwhile (another share, or an admin)
            found = await persist(pid, f"reading Volcano Queue {name}", read) or {}
        except Missing:
            # No Queue CRD: nothing to make (Volcano, when installed, brings both CRDs; the
            # job's creation waits for its own).
            log.warning("share %s: Volcano Queues are not served; queue %s not made", pid, name)
            return None
        except Refused as exc:
            return f"cannot create Volcano Queue {name} in this cluster: {exc}"
    return refusal(found)
