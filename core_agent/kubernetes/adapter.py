"""The one module that talks to kubernetes-asyncio (with its transport, transport.py).
Everything comes back as plain JSON dicts: lists and watch events are read as JSON, never
deserialised into models (a V1Pod costs ~100 times the JSON of its event).

Every failure comes out as one of the exceptions below, classified as client-go's callers do:
429 (API Priority and Fairness), any 5xx (an unreachable admission webhook, an API server
restarting) and no answer at all are `Transient`; a 404 is a missing resource type only when
the API's discovery no longer lists the type (a 404 on one object, or on a namespace, is not)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator, Awaitable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import aiohttp
import orjson
from kubernetes_asyncio import client, config
from kubernetes_asyncio.client.exceptions import ApiException

from core_agent.kubernetes.transport import Timeouts, install

HYPERNODE = ("topology.volcano.sh", "v1alpha1", "hypernodes")
VOLCANO_JOB = ("batch.volcano.sh", "v1alpha1", "jobs")
SERVICE_EXPORT = ("multicluster.x-k8s.io", "v1alpha1", "serviceexports")
VOLCANO_QUEUE = ("scheduling.volcano.sh", "v1beta1", "queues")  # cluster-scoped
FLUID_DATASET = ("data.fluid.io", "v1alpha1", "datasets")  # data a cluster holds (presence.py)
CUSTOM = {
    "hypernodes": HYPERNODE,
    "vcjobs": VOLCANO_JOB,
    "serviceexports": SERVICE_EXPORT,
    "queues": VOLCANO_QUEUE,
    "fluiddatasets": FLUID_DATASET,
}
BATCH_JOBS = "jobs"  # batch/v1 Jobs (a share's staging copies), always served
PVCS = "persistentvolumeclaims"  # always served
RETRY_AFTER_CAP_S = 300.0  # a Retry-After beyond this is a misconfigured proxy, not advice

T = TypeVar("T")


class Gone(Exception):
    """The resourceVersion is too old (HTTP 410): list again."""


class Missing(Exception):
    """The resource type does not exist in this cluster (e.g. no HyperNode CRD): discovery,
    asked after a 404, does not list it."""


class Transient(Exception):
    """Worth trying again: 429, a 5xx, a 404 on a type discovery still lists, or no answer.
    `retry_after` is the server's Retry-After in seconds, when it sent one."""

    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class NotFound(Exception):
    """HTTP 404. `named` when the API server named what it did not find (the object, or the
    namespace it would go in); an unknown path ("the server could not find the requested
    resource", e.g. a CRD not installed) names nothing."""

    def __init__(self, message: str, *, named: bool, kind: str = "") -> None:
        super().__init__(message)
        self.named = named
        self.kind = kind  # the Status' `details.kind`: what is not there ("namespaces")


class AlreadyExists(Exception):
    """Create refused: an object of that name exists (HTTP 409)."""


class Refused(Exception):
    """The API server refused a write; the message says why (for the user), `status` with
    which HTTP status (403: RBAC, or an admission plugin or webhook: the message tells which;
    404: what `kind` names is not there, e.g. "namespaces")."""

    def __init__(self, message: str, *, status: int | None = None, kind: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.kind = kind


@dataclass(frozen=True)
class Kind:
    name: str  # "nodes", "pods", a key of CUSTOM, BATCH_JOBS or PVCS
    field_selector: str | None = None
    label_selector: str | None = None


async def api_client(
    *, kubeconfig: str | None = None, host: str | None = None, timeouts: Timeouts | None = None
) -> client.ApiClient:
    """In-cluster config, else a kubeconfig, else an explicit host (tests, emulators); every
    request it makes has `timeouts` (transport.py's defaults unless given)."""
    timeouts = timeouts or Timeouts()
    if host is not None:
        return await install(client.ApiClient(client.Configuration(host=host)), timeouts)
    try:
        config.load_incluster_config()
    except config.ConfigException:
        await config.load_kube_config(config_file=kubeconfig)
    return await install(client.ApiClient(), timeouts)


class KubeApi:
    def __init__(self, api: client.ApiClient, *, rediscover_s: float = 60.0) -> None:
        self.core = client.CoreV1Api(api)
        self.batch = client.BatchV1Api(api)
        self.custom = client.CustomObjectsApi(api)
        self.rediscover_s = rediscover_s  # how often to look again for a type not served
        self.timeouts: Timeouts = getattr(api.rest_client, "timeouts", Timeouts())

    def _list_call(self, kind: Kind):  # type: ignore[no-untyped-def]
        if kind.name == "nodes":
            return self.core.list_node
        if kind.name == "pods":
            return self.core.list_pod_for_all_namespaces
        if kind.name == "services":
            return self.core.list_service_for_all_namespaces
        if kind.name == BATCH_JOBS:
            return self.batch.list_job_for_all_namespaces
        if kind.name == PVCS:
            return self.core.list_persistent_volume_claim_for_all_namespaces
        group, version, plural = CUSTOM[kind.name]

        async def custom(**kwargs: Any) -> Any:
            return await self.custom.list_cluster_custom_object(group, version, plural, **kwargs)

        return custom

    def _selectors(self, kind: Kind) -> dict[str, str]:
        selectors = {}
        if kind.field_selector:
            selectors["field_selector"] = kind.field_selector
        if kind.label_selector:
            selectors["label_selector"] = kind.label_selector
        return selectors

    # -- discovery ----------------------------------------------------------------------------
    async def served(self, kind: Kind) -> bool:
        """Whether the API's discovery lists the type now (core types always are). Raises
        Transient when discovery itself does not answer."""
        if kind.name not in CUSTOM:
            return True
        group, version, plural = CUSTOM[kind.name]
        try:
            resources = await _answer(self.custom.get_api_resources(group, version))
        except NotFound:
            return False  # the group/version is not served at all
        return any(r.name == plural for r in resources.resources or [])

    async def wait_until_served(self, kind: Kind) -> None:
        """Return once discovery lists the type (a CRD installed after the agent started),
        asking every `rediscover_s` (first after one period: the caller has just been told
        it is missing)."""
        while True:
            await asyncio.sleep(self.rediscover_s)
            try:
                if await self.served(kind):
                    return
            except Transient:
                pass  # discovery did not answer: ask again at the next period

    async def _raise_unless_gone(self, kind: Kind, exc: NotFound) -> None:
        """Return when a 404 means the object is not there (it names the object, or the type
        is not served: no CRD, no object either); raise Transient when it cannot say."""
        if exc.named:
            return
        failure = await self._missing_or_transient(kind, exc)
        if not isinstance(failure, Missing):
            raise failure from exc

    async def _refusal(self, kind: Kind, exc: NotFound) -> Exception:
        """A 404 on a create: Refused when it names what is missing (a namespace), else
        Missing or Transient by discovery."""
        if exc.named:
            return Refused(str(exc), status=404, kind=exc.kind)
        return await self._missing_or_transient(kind, exc)

    async def _missing_or_transient(self, kind: Kind, exc: NotFound) -> Exception:
        """A 404 without an object's name: the type is missing only if discovery says so."""
        if await self.served(kind):
            return Transient(f"404 from a type discovery lists: {exc}")
        group, version, plural = CUSTOM[kind.name]
        return Missing(f"{group}/{version} {plural} is not served by this cluster (no CRD)")

    # -- list and watch -----------------------------------------------------------------------
    async def list_page(self, kind: Kind, *, limit: int, token: str | None) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "limit": limit,
            **self._selectors(kind),
            "_preload_content": False,
        }
        if token:
            kwargs["_continue"] = token
        try:
            response = await _answer(self._list_call(kind)(**kwargs))
            body = await response.read()
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            raise Transient(f"no answer from the API server: {exc!r}") from exc
        except NotFound as exc:
            raise await self._missing_or_transient(kind, exc) from exc
        if response.status >= 400:  # unread content is not checked by the client
            failure = _failure(response.status, response.reason, body, response.headers)
            if isinstance(failure, NotFound):
                raise await self._missing_or_transient(kind, failure)
            raise failure
        return dict(orjson.loads(body))

    async def watch(
        self, kind: Kind, *, resource_version: str, timeout_s: int
    ) -> AsyncGenerator[tuple[str, dict[str, Any]], None]:
        """(event type, object) from `resource_version` on, BOOKMARKs included, until the server
        ends the watch after `timeout_s`. Raises Gone for 410 (HTTP or an in-stream ERROR),
        Transient when the stream breaks or is silent past `timeout_s` and the grace, Missing
        or another of the module's exceptions as a list would. The lines are read here, not by
        kubernetes_asyncio.watch.Watch, which turns every node and pod into a model first."""
        try:
            response = await self._list_call(kind)(
                watch=True,
                resource_version=resource_version,
                timeout_seconds=timeout_s,
                allow_watch_bookmarks=True,
                **self._selectors(kind),
                _preload_content=False,
                _request_timeout=self.timeouts.watch(timeout_s),
            )
        except ApiException as exc:
            failure = _translated(exc)
            if isinstance(failure, NotFound):
                raise await self._missing_or_transient(kind, failure) from exc
            raise failure from exc
        except (aiohttp.ClientError, OSError) as exc:  # TimeoutError is an OSError
            raise Transient(f"no answer from the API server: {exc!r}") from exc
        ended = False
        try:
            if response.status >= 400:
                body = await response.read()
                failure = _failure(response.status, response.reason, body, response.headers)
                if isinstance(failure, NotFound):
                    raise await self._missing_or_transient(kind, failure)
                raise failure
            # Whatever has arrived, split into lines here: one read for many events.
            pending = b""
            async for chunk in response.content.iter_any():
                *lines, pending = (pending + chunk).split(b"\n")
                for line in lines:
                    if line.strip():
                        yield _event(orjson.loads(line))
            if pending.strip():
                yield _event(orjson.loads(pending))
            ended = True
        except (aiohttp.ClientError, OSError) as exc:  # dropped, or silent past its timeout
            raise Transient(f"watch stream broken: {exc!r}") from exc
        finally:
            # A watch read to its end leaves a reusable connection; one left midway does not.
            if ended:
                response.release()
            else:
                response.close()

    # -- Volcano Jobs (the shares this cluster runs) -----------------------------------------
    async def create_volcano_job(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        """Raises AlreadyExists, Refused (invalid, or no such namespace), Missing (no Volcano
        Job CRD) or Transient."""
        return await self._create_custom(Kind("vcjobs"), namespace, body)

    async def get_volcano_job(self, namespace: str, name: str) -> dict[str, Any] | None:
        group, version, plural = VOLCANO_JOB
        try:
            return dict(
                await _answer(
                    self.custom.get_namespaced_custom_object(
                        group, version, namespace, plural, name
                    )
                )
            )
        except NotFound as exc:
            await self._raise_unless_gone(Kind("vcjobs"), exc)
            return None

    async def delete_volcano_job(self, namespace: str, name: str) -> bool:
        """Delete it and, in the background, its pods; False when it was already gone."""
        group, version, plural = VOLCANO_JOB
        call = self.custom.delete_namespaced_custom_object(
            group, version, namespace, plural, name, propagation_policy="Background"
        )
        return await self._deleted(Kind("vcjobs"), call)

    # -- batch/v1 Jobs (the copies a share stages its data with) ----------------------------
    async def create_batch_job(self, namespace: str, body: dict[str, Any]) -> None:
        """Raises AlreadyExists, Refused (invalid, forbidden, no such namespace) or
        Transient. (The watch of staging Jobs shows it: its model is not read here.)"""
        try:
            await _answer(self.batch.create_namespaced_job(namespace, body))
        except NotFound as exc:
            raise await self._refusal(Kind(BATCH_JOBS), exc) from exc

    async def delete_batch_job(self, namespace: str, name: str) -> bool:
        """Delete it and, in the background, its pods (the copy stops); False when it was
        already gone."""
        call = self.batch.delete_namespaced_job(name, namespace, propagation_policy="Background")
        return await self._deleted(Kind(BATCH_JOBS), call)

    # -- Volcano Queues (the queue a member job names must exist and be Open) ---------------
    async def get_volcano_queue(self, name: str) -> dict[str, Any] | None:
        group, version, plural = VOLCANO_QUEUE
        try:
            return dict(
                await _answer(self.custom.get_cluster_custom_object(group, version, plural, name))
            )
        except NotFound as exc:
            await self._raise_unless_gone(Kind("queues"), exc)
            return None

    async def create_volcano_queue(self, body: dict[str, Any]) -> dict[str, Any]:
        """Raises AlreadyExists, Refused (forbidden by RBAC, invalid), Missing (no Queue CRD)
        or Transient."""
        group, version, plural = VOLCANO_QUEUE
        try:
            return dict(
                await _answer(
                    self.custom.create_cluster_custom_object(group, version, plural, body)
                )
            )
        except NotFound as exc:
            raise await self._refusal(Kind("queues"), exc) from exc

    # -- events on the cluster's own objects --------------------------------------------------
    async def create_event(self, namespace: str, body: dict[str, Any]) -> None:
        """Create a core/v1 Event (what `kubectl describe` shows on its object)."""
        await _answer(self.core.create_namespaced_event(namespace, body))

    # -- the rendezvous endpoint of a split job ---------------------------------------------
    async def create_service(self, namespace: str, body: dict[str, Any]) -> None:
        """Create a Service; one already there is left as it is."""
        try:
            await _answer(self.core.create_namespaced_service(namespace, body))
        except AlreadyExists:
            pass
        except NotFound as exc:
            raise await self._refusal(Kind("services"), exc) from exc

    async def delete_service(self, namespace: str, name: str) -> bool:
        call = self.core.delete_namespaced_service(name, namespace)
        return await self._deleted(Kind("services"), call)

    async def create_service_export(self, namespace: str, body: dict[str, Any]) -> None:
        """Export a Service to the cluster set (Multi-Cluster Services). Raises Missing when
        the ServiceExport API is not installed in this cluster."""
        try:
            await self._create_custom(Kind("serviceexports"), namespace, body)
        except AlreadyExists:
            pass

    async def delete_service_export(self, namespace: str, name: str) -> bool:
        group, version, plural = SERVICE_EXPORT
        call = self.custom.delete_namespaced_custom_object(group, version, namespace, plural, name)
        return await self._deleted(Kind("serviceexports"), call)

    async def _deleted(self, kind: Kind, call: Awaitable[Any]) -> bool:
        """False when the object was already gone (or its type is: a CRD removed). A 404
        naming nothing on a type discovery lists is Transient: the object may still be there."""
        try:
            await _answer(call)
            return True
        except NotFound as exc:
            await self._raise_unless_gone(kind, exc)
            return False

    async def _create_custom(
        self, kind: Kind, namespace: str, body: dict[str, Any]
    ) -> dict[str, Any]:
        group, version, plural = CUSTOM[kind.name]
        try:
            return dict(
                await _answer(
                    self.custom.create_namespaced_custom_object(
                        group, version, namespace, plural, body
                    )
                )
            )
        except NotFound as exc:
            raise await self._refusal(kind, exc) from exc


def _event(event: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    if event["type"] == "ERROR":  # a Status: 410 Expired for a version the server forgot
        status = event.get("object") or {}
        raise _failure(status.get("code"), status.get("reason"), orjson.dumps(status), None)
    return event["type"], event["object"]


async def _answer(call: Awaitable[T]) -> T:
    """The call's result, its failure translated (see the module's docstring)."""
    try:
        return await call
    except ApiException as exc:
        raise _translated(exc) from exc
    except (aiohttp.ClientError, TimeoutError, OSError) as exc:
        raise Transient(f"no answer from the API server: {exc!r}") from exc


def _translated(exc: ApiException) -> Exception:
    return _failure(exc.status, exc.reason, exc.body, exc.headers)


def _failure(
    status: int | None, reason: object, body: object, headers: Mapping[str, str] | None
) -> Exception:
    """The exception for an HTTP failure, from its status and its Status body."""
    status_body = _status_body(body)
    message = str(status_body.get("message") or f"{status} {reason}")
    if status == 409:
        return AlreadyExists(message)
    if status == 410:
        return Gone(message)
    # (status 0 is kubernetes-asyncio refusing to build the request: not worth repeating)
    if status == 429 or (status or 0) >= 500:
        return Transient(f"{status} {reason}: {message}", retry_after=_retry_after(headers))
    details = status_body.get("details") or {}
    kind = str(details.get("kind") or "")
    if status == 404:
        return NotFound(message, named=bool(details.get("name")), kind=kind)
    return Refused(message, status=status, kind=kind)


def _status_body(body: object) -> dict[str, Any]:
    try:
        parsed = json.loads(body or "{}")  # type: ignore[arg-type]
    except (ValueError, TypeError):
        return {}
    return parsed if isinstance(parsed, dict) else {}


def _retry_after(headers: Mapping[str, str] | None) -> float | None:
    """Retry-After in seconds, as client-go reads it (an integer; an HTTP date is ignored)."""
    value = (headers or {}).get("Retry-After", "")
    try:
        return min(max(float(int(value)), 0.0), RETRY_AFTER_CAP_S)
    except ValueError:
        return None
