"""Faults a test injects into the emulator's answers, as a real cluster gives them: 429 from
API Priority and Fairness with Retry-After, 500 from an admission webhook that cannot be
reached, 503/504 from an API server restarting or an aggregated API down, a 404 on a collection
whose type is still served, and a connection dropped without an answer. Each fault matches a
method and a path (and, if given, whether the request is a watch) and is used `times` times."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aiohttp import web

REASONS = {
    403: "Forbidden",
    404: "NotFound",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}
MESSAGES = {
    # RBAC refusing the agent (what kube-apiserver says when no role grants the verb).
    403: 'queues.scheduling.volcano.sh is forbidden: User "system:serviceaccount:'
    'volcano-global:vglobal-agent" cannot create resource "queues" in API group '
    '"scheduling.volcano.sh" at the cluster scope',
    404: "the server could not find the requested resource",
    # The CRD's OpenAPI schema refusing a Volcano Job.
    422: 'Job.batch.volcano.sh "train" is invalid: spec.minAvailable: Invalid value: -1: '
    "spec.minAvailable in body should be greater than or equal to 0",
    429: "Too many requests, please try again later.",
    # What kube-apiserver answers when Volcano's admission webhook is down.
    500: 'Internal error occurred: failed calling webhook "mutatejob.volcano.sh": failed to '
    'call webhook: Post "https://volcano-admission-service.volcano-system.svc:443/jobs/mutate'
    '?timeout=10s": dial tcp 10.96.0.20:443: connect: connection refused',
    503: "the server is currently unable to handle the request",
    504: "the server was unable to return a response in the time allotted",
}
DISCONNECT = 0  # `status` of a fault that closes the connection without answering


@dataclass
class Fault:
    method: str
    path: str  # matches a request whose path contains it
    status: int
    times: int = 1
    retry_after: int | None = None
    watch: bool | None = None  # None: watches and other requests alike
    hits: int = 0
    message: str = ""  # the Status' message ("": the usual one for the status, MESSAGES)
    details: dict[str, Any] | None = None  # the Status' details


class Faults:
    def __init__(self) -> None:
        self.pending: list[Fault] = []

    def add(
        self,
        method: str,
        path: str,
        status: int,
        *,
        times: int = 1,
        retry_after: int | None = None,
        watch: bool | None = None,
        message: str = "",
        details: dict[str, Any] | None = None,
    ) -> Fault:
        fault = Fault(
            method, path, status, times, retry_after, watch, message=message, details=details
        )
        self.pending.append(fault)
        return fault

    def answer(self, request: web.Request) -> web.Response | None:
        """The injected answer to `request`, or None to serve it normally."""
        watching = request.query.get("watch") in ("1", "true", "True")
        for fault in self.pending:
            if (
                fault.hits < fault.times
                and fault.method == request.method
                and fault.path in request.path
                and fault.watch in (None, watching)
            ):
                fault.hits += 1
                return _respond(request, fault)
        return None


def _respond(request: web.Request, fault: Fault) -> web.Response:
    if fault.status == DISCONNECT:
        if request.transport is not None:
            request.transport.close()  # the client sees the connection end, no answer
        return web.Response(status=500)
    headers = {"Retry-After": str(fault.retry_after)} if fault.retry_after is not None else {}
    body = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "reason": REASONS.get(fault.status, "InternalError"),
        "message": fault.message or MESSAGES.get(fault.status, f"injected {fault.status}"),
        "code": fault.status,
    }
    if fault.details is not None:
        body["details"] = dict(fault.details)
    if fault.retry_after is not None:
        body["details"] = {**body.get("details", {}), "retryAfterSeconds": fault.retry_after}
    return web.json_response(body, status=fault.status, headers=headers)
