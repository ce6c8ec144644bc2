"""Hostile input from valid tokens against a real `vglobal server` process (SQLite and Postgres),
with the scheduler running: deep nesting in YAML and JSON, extreme numbers (1e18, 1e308, 2^63,
NaN, infinity, negative zero) in every quantity, timestamps without a zone or at the ends of
time, forged continue tokens, huge and many headers - sent with every role's token, none, and a
forged one. No answer may be a 5xx or plain text, no traceback may reach the server's log, and
the scheduler must keep recording rounds."""

from __future__ import annotations

import base64
import copy
import itertools
import json
import socket
import time
from collections.abc import Iterator
from typing import Any

import httpx

from tests.conftest import ADMIN_TOKEN
from tests.factories import inventory, job_document
from tests.server_process import ServerProcess

EXTREMES: list[Any] = [1e18, 9e18, 1e308, 2**63, 2**64, -1, -0.0, "NaN", "Infinity", "1e400"]
QUANTITIES = ["1e18", "9e18", "1e308", "1e400", "9" * 400, "-0", "0.0000001", "1e-400", "NaN"]
TIMES = [
    "2030-01-01T00:00:00",
    "2030-01-01",
    "9999-12-31T23:59:59-23:59",
    "0001-01-01T00:00:00+23:59",
    "1969-12-31T23:59:59Z",
    "2030-02-30T00:00:00Z",
    "",
]


def _encode(raw: Any) -> str:
    return base64.urlsafe_b64encode(json.dumps(raw).encode()).decode().rstrip("=")


CONTINUES = [
    _encode(["9999-12-31T23:59:59-23:59", "3fa85f64-5717-4562-b3fc-2c963f66afa6"]),
    _encode(["0001-01-01T00:00:00+23:59", "3fa85f64-5717-4562-b3fc-2c963f66afa6"]),
    _encode(["2030-01-01T00:00:00", "x"]),
    _encode([1e308, None]),
    _encode({"a": 1}),
    _encode("[" * 5000),
    "%%%",
    "A" * 511,
]


def deep(depth: int) -> list[tuple[str, bytes]]:
    """Nesting as YAML (flow, block, mappings) and as JSON."""
    return [
        ("application/yaml", b"[" * depth),
        ("application/yaml", b"- " * depth),
        ("application/yaml", b"{a: " * depth),
        ("application/json", b"[" * depth + b"]" * depth),
        ("application/json", b'{"a":' * depth + b"1" + b"}" * depth),
    ]


def job_variants() -> Iterator[dict[str, Any]]:
    """The shipped job with one quantity made extreme at a time."""
    for value in EXTREMES:
        for field in ("replicas", "minAvailable", "maxRetry", "minSuccess"):
            doc = job_document(f"x-{field.lower()}")
            if field == "replicas":
                doc["spec"]["tasks"][0]["replicas"] = value
            else:
                doc["spec"][field] = value
            yield doc
    for quantity, resource in itertools.product(
        QUANTITIES, ["nvidia.com/gpu", "cpu", "memory", "ephemeral-storage"]
    ):
        doc = job_document("x-resource")
        container = doc["spec"]["tasks"][0]["template"]["spec"]["containers"][0]
        container["resources"] = {"limits": {resource: quantity, "nvidia.com/gpu": "1"}}
        if resource == "nvidia.com/gpu":
            container["resources"]["limits"][resource] = quantity
        yield doc
    annotations = {
        "global.volcano.sh/crossing-gbps": ["1e308", "nan", "inf", "-0", "1e18"],
        "global.volcano.sh/gang-start-timeout": [str(2**63), "1e18", "-1", "99999999999"],
        "global.volcano.sh/max-clusters": [str(2**63), "0"],
        "global.volcano.sh/unit-pods": [str(2**31), str(2**63)],
        "global.volcano.sh/communication": [
            "{modelParameters: 1e400, tensorParallel: 8}",
            "{modelParameters: .nan, tensorParallel: 8}",
            "{targetStepTimeSeconds: .inf, tensorParallel: 8}",
            "{tensorParallel: 9223372036854775808}",
            "{gradientBytesPerParameter: 1e308, tensorParallel: 8}",
            "[" * 10000,
            "{a: " * 100,
        ],
    }
    for key, values in annotations.items():
        for value in values:
            doc = job_document("x-annotation")
            doc["metadata"]["annotations"] = {key: value}
            yield doc
    for estimate in ["9" * 400 + "h", "1e308h", "-1h", "8785h"]:
        yield job_document("x-estimate", runningEstimate=estimate)
    doc = job_document("x-containers")
    spec = doc["spec"]["tasks"][0]["template"]["spec"]
    spec["containers"] = [copy.deepcopy(spec["containers"][0]) for _ in range(3)]
    spec["containers"][1]["name"] = "Not A Name"
    yield doc


def node_variants() -> Iterator[dict[str, Any]]:
    fields = [
        "gpuAllocatable",
        "gpuUsed",
        "cpuAllocatableMillis",
        "cpuUsedMillis",
        "memoryAllocatableBytes",
        "memoryUsedBytes",
    ]
    for field, value in itertools.product(fields, EXTREMES):
        body = inventory("gpu-east")
        body["nodes"][0][field] = value
        yield body


def other_bodies() -> Iterator[tuple[str, str, dict[str, Any]]]:
    for value in EXTREMES:
        yield (
            "POST",
            "/api/v1/links",
            {"clusterA": "gpu-east", "clusterB": "b", "capacityGbps": value},
        )
        yield (
            "POST",
            "/api/v1/links",
            {"clusterA": "gpu-east", "clusterB": "b", "capacityGbps": 1, "latencyMs": value},
        )
        yield "POST", "/api/v1/queues", {"name": "q", "weight": value}
        yield "POST", "/api/v1/queues", {"name": "q", "gpuQuota": value}
        yield "POST", "/api/v1/queues", {"name": "q", "priority": value}
        yield (
            "POST",
            "/api/v1/jobs/00000000-0000-0000-0000-000000000000/measurements",
            {"stepTimeSeconds": value, "bytesPerStep": value},
        )
    for when in TIMES:
        yield "POST", "/api/v1/tokens", {"name": "t", "role": "reader", "expiresAt": when}


class Fuzz:
    def __init__(self, server: ServerProcess, tokens: dict[str, str]) -> None:
        self.server = server
        self.tokens = tokens
        self.cases = 0
        self.failures: list[str] = []
        self.client = httpx.Client(base_url=server.url, timeout=60)

    def send(
        self,
        method: str,
        path: str,
        *,
        json_body: Any = None,
        content: bytes | None = None,
        content_type: str = "application/json",
        params: dict[str, str] | None = None,
    ) -> None:
        if json_body is not None:  # as Python writes it: NaN and Infinity unquoted
            content = json.dumps(json_body).encode()
        for role, token in self.tokens.items():
            headers = {"Content-Type": content_type} if content is not None else {}
            if token:
                headers["Authorization"] = f"Bearer {token}"
            response = self.client.request(
                method,
                path,
                headers=headers,
                content=content,
                params=params,
                timeout=60,
            )
            self.cases += 1
            self.judge(f"{role} {method} {path}", response.status_code, response.headers)

    def judge(self, what: str, code: int, headers: Any) -> None:
        if code >= 500 or "json" not in headers.get("content-type", ""):
            self.failures.append(f"{what}: {code} {headers.get('content-type')}")


def raw_request(port: int, data: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        try:
            sock.sendall(data)
        except OSError:  # refused while sending: the answer is still there to read
            pass
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    return answer


def test_hostile_input_never_gets_a_server_error(server: ServerProcess) -> None:
    server.stop()
    server.env["VGLOBAL_SCHEDULING__ENABLED"] = "true"
    server.env["VGLOBAL_LIMITS__HEADER_TIMEOUT_S"] = "1"
    server.start()
    admin = server.admin_with_cluster()
    assert admin.post("/api/v1/queues", json={"name": "llm"}).status_code == 201
    agent = admin.post("/api/v1/clusters", json={"name": "gpu-west"}).json()["agentToken"]

    def token(role: str, **extra: Any) -> str:
        issued = admin.post("/api/v1/tokens", json={"name": role, "role": role, **extra})
        assert issued.status_code == 201, issued.text
        return str(issued.json()["token"])

    tokens = {
        "admin": ADMIN_TOKEN,
        "reader": token("reader"),
        "queue-user": token("queue-user", queues=["llm", "default"]),
        "agent": agent,
        "none": "",
        "forged": "vg_" + "x" * 40,
    }
    fuzz = Fuzz(server, tokens)

    for content_type, body in deep(1000) + deep(100_000):
        for path in ("/api/v1/jobs", "/api/v1/jobs/preview"):
            fuzz.send("POST", path, content=body, content_type=content_type)
    for doc in job_variants():
        fuzz.send("POST", "/api/v1/jobs/preview", json_body=doc)
        fuzz.send("POST", "/api/v1/jobs", json_body=doc)
    for body in node_variants():
        fuzz.send("PUT", "/api/v1/clusters/gpu-east/inventory", json_body=body)
    for method, path, body in other_bodies():
        fuzz.send(method, path, json_body=body)
    for cursor in CONTINUES:
        fuzz.send("GET", "/api/v1/jobs", params={"continue": cursor, "limit": 1})
    for limit in ["0", "-1", str(2**63), "1e308", "NaN"]:
        fuzz.send("GET", "/api/v1/jobs", params={"limit": limit})
    fuzz.send("POST", "/api/v1/jobs", content=b"{bad")

    # Headers: too large, too many, too slow (before any authentication).
    too_large = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-A: " + b"a" * 5_000_000 + b"\r\n\r\n"
    too_many = b"GET /healthz HTTP/1.1\r\nHost: x\r\n" + b"X-A: 1\r\n" * 500 + b"\r\n"
    for data, expected in ((too_large, b" 431 "), (too_many, b" 431 "), (b"GET /", b" 408 ")):
        answer = raw_request(server.port, data)
        fuzz.cases += 1
        if expected not in answer.split(b"\r\n")[0] or b'"kind": "Status"' not in answer:
            fuzz.failures.append(f"raw {data[:40]!r}: {answer[:200]!r}")

    time.sleep(1.5)  # rounds ran meanwhile
    rounds = admin.get("/api/v1/scheduling/rounds").json()["items"]
    assert rounds, "the scheduler recorded no round"
    log = server.log.read_text()
    print(f"{fuzz.cases} hostile requests over {len(tokens)} tokens")
    assert fuzz.failures == []
    assert fuzz.cases >= 2000
    assert "Traceback" not in log, log[log.find("Traceback") - 500 :][:4000]
    assert "scheduling round failed" not in log
