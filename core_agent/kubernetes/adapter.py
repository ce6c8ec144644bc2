"""The one module that talks to kubernetes-asyncio (with its transport, transport.py).
Everything comes back as plain JSON dicts: lists and watch events are read as JSON, never
deserialised into models (a V1Pod costs ~50 times the JSON of its event)."""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from typing import Any

import orjson
from kubernetes_asyncio import client, config
from kubernetes_asyncio.client.exceptions import ApiException

from core_agent.kubernetes.transport import Timeouts, install

HYPERNODE = ("topology.volcano.sh", "v1alpha1", "hypernodes")
VOLCANO_JOB = ("batch.volcano.sh", "v1alpha1", "jobs")
SERVICE_EXPORT = ("multicluster.x-k8s.io", "v1alpha1", "serviceexports")
CUSTOM = {"hypernodes": HYPERNODE, "vcjobs": VOLCANO_JOB}


class Gone(Exception):
    """The resourceVersion is too old (HTTP 410): list again."""


class Missing(Exception):
    """The resource type does not exist in this cluster (e.g. no HyperNode CRD)."""


class AlreadyExists(Exception):
    """Create refused: an object of that name exists (HTTP 409)."""


class Refused(Exception):
    """The API server refused a write; the message says why (for the user)."""


@dataclass(frozen=True)
class Kind:
    name: str  # "nodes", "pods", "hypernodes" or "vcjobs"
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
    def __init__(self, api: client.ApiClient) -> None:
        self.core = client.CoreV1Api(api)
        self.custom = client.CustomObjectsApi(api)
        self.timeouts: Timeouts = getattr(api.rest_client, "timeouts", Timeouts())

    def _list_call(self, kind: Kind):  # type: ignore[no-untyped-def]
        if kind.name == "nodes":
            return self.core.list_node
        if kind.name == "pods":
            return self.core.list_pod_for_all_namespaces
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

    async def list_page(self, kind: Kind, *, limit: int, token: str | None) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "limit": limit,
            **self._selectors(kind),
            "_preload_content": False,
        }
        if token:
            kwargs["_continue"] = token
        try:
            response = await self._list_call(kind)(**kwargs)
        except ApiException as exc:
            raise _translated(exc) from exc
        body = await response.read()
        if response.status >= 400:  # unread content is not checked by the client
            raise _translated(ApiException(status=response.status, reason=response.reason))
        return dict(orjson.loads(body))

    async def watch(
        self, kind: Kind, *, resource_version: str, timeout_s: int
    ) -> AsyncGenerator[tuple[str, dict[str, Any]], None]:
        """(event type, object) from `resource_version` on, BOOKMARKs included, until the server
        ends the watch after `timeout_s`. Raises Gone for 410 (HTTP or an in-stream ERROR),
        TimeoutError when the stream is silent past `timeout_s` and the grace, ApiException
        for another in-stream ERROR. The lines are read here rather than by
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
            raise _translated(exc) from exc
        ended = False
        try:
            if response.status >= 400:
                refused = ApiException(status=response.status, reason=response.reason)
                refused.body = await response.read()
                raise _translated(refused)
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
        finally:
            # A watch read to its end leaves a reusable connection; one left midway does not.
            if ended:
                response.release()
            else:
                response.close()

    # -- Volcano Jobs (the shares this cluster runs) -----------------------------------------
    async def create_volcano_job(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        group, version, plural = VOLCANO_JOB
        try:
            return dict(
                await self.custom.create_namespaced_custom_object(
                    group, version, namespace, plural, body
                )
            )
        except ApiException as exc:
            if exc.status == 409:
                raise AlreadyExists(body["metadata"]["name"]) from exc
            raise Refused(_message(exc)) from exc

    async def get_volcano_job(self, namespace: str, name: str) -> dict[str, Any] | None:
        group, version, plural = VOLCANO_JOB
        try:
            return dict(
                await self.custom.get_namespaced_custom_object(
                    group, version, namespace, plural, name
                )
            )
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise Refused(_message(exc)) from exc

    async def delete_volcano_job(self, namespace: str, name: str) -> bool:
        """Delete it and, in the background, its pods; False when it was already gone."""
        group, version, plural = VOLCANO_JOB
        try:
            await self.custom.delete_namespaced_custom_object(
                group,
                version,
                namespace,
                plural,
                name,
                propagation_policy="Background",
            )
            return True
        except ApiException as exc:
            if exc.status == 404:
                return False
            raise Refused(_message(exc)) from exc

    # -- the rendezvous endpoint of a split job ---------------------------------------------
    async def create_service(self, namespace: str, body: dict[str, Any]) -> None:
        """Create a Service; one already there is left as it is."""
        try:
            await self.core.create_namespaced_service(namespace, body)
        except ApiException as exc:
            if exc.status != 409:
                raise Refused(_message(exc)) from exc

    async def create_service_export(self, namespace: str, name: str, owner: dict[str, Any]) -> None:
        """Export a Service to the cluster set (Multi-Cluster Services). Raises Missing when
        the ServiceExport API is not installed in this cluster."""
        group, version, plural = SERVICE_EXPORT
        body = {
            "apiVersion": f"{group}/{version}",
            "kind": "ServiceExport",
            "metadata": {"name": name, "namespace": namespace, "ownerReferences": [owner]},
        }
        try:
            await self.custom.create_namespaced_custom_object(
                group, version, namespace, plural, body
            )
        except ApiException as exc:
            if exc.status == 404:
                raise Missing(f"{group}/{version} {plural}") from exc
            if exc.status != 409:
                raise Refused(_message(exc)) from exc


def _event(event: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    if event["type"] == "ERROR":
        status = event.get("object") or {}
        raise _translated(
            ApiException(
                status=status.get("code", 500),
                reason=f"{status.get('reason')}: {status.get('message')}",
            )
        )
    return event["type"], event["object"]


def _message(exc: ApiException) -> str:
    """The Status message of a refused call, else its HTTP reason."""
    try:
        return str(json.loads(exc.body or "{}").get("message") or exc.reason)
    except (ValueError, AttributeError):
        return f"{exc.status} {exc.reason}"


def _translated(exc: ApiException) -> Exception:
    if exc.status == 410:
        return Gone(str(exc.reason))
    if exc.status == 404:
        return Missing(str(exc.reason))
    return exc
