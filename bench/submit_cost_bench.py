"""Server CPU per job submission (`POST /api/v1/jobs`), in-process, alone and 20 at once: the
submit rows of `request_cost_bench.py` without its other rows, repeated in rounds, so that two
trees can be compared side by side. It uses only what every tree since 2026-12-01 has
(`create_app`, `Settings`, `tune_gc`): run it with each tree's own interpreter, from that tree,
alternating the trees (issue 35):

    cd /path/to/other/tree && .venv/bin/python /path/to/this/bench/submit_cost_bench.py \\
        --database-url postgresql+asyncpg://postgres@127.0.0.1/DB

Prints process CPU milliseconds per submission for each round (the in-process client's share,
~0.5 ms, is included and is the same for both trees) and the load average. `--queue-user`:
submit with a stored queue-user token (made through `POST /api/v1/tokens`, the rate limit
raised so that it does not answer 429), as a real submitter does, instead of the settings'
admin token, which is recognised without the database."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time

import httpx

from volcano_global.app import create_app
from volcano_global.cli.gc_tuning import tune_gc
from volcano_global.settings import Settings

TOKEN = "vg_bench_submit_cost_0123456789"
TOGETHER = 20


def job(index: int) -> dict[str, object]:
    """bench/load_requests.py's one-GPU job (spelled out: older trees do not have that file)."""
    container = {"name": "c", "image": "i", "resources": {"limits": {"nvidia.com/gpu": "1"}}}
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": f"load-{index:09d}", "namespace": "default"},
        "spec": {
            "tasks": [
                {"name": "worker", "replicas": 1, "template": {"spec": {"containers": [container]}}}
            ]
        },
    }


async def measure(
    database_url: str, requests: int, rounds: int, queue_user: bool
) -> dict[str, list[float]]:
    settings = Settings(
        database_url=database_url,
        admin_token=TOKEN,
        grpc_port=0,
        log_level="warning",
        scheduling={"enabled": False},
        **({"rate_limit": {"rate_per_s": 1e6, "burst": 10**6}} if queue_user else {}),
    )
    app = create_app(settings)
    costs: dict[str, list[float]] = {"alone": [], f"{TOGETHER} at once": []}
    async with app.router.lifespan_context(app):
        tune_gc()
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app),
            base_url="http://t",
            headers={"Authorization": f"Bearer {TOKEN}"},
        ) as api:
            if queue_user:
                made = await api.post(
                    "/api/v1/tokens",
                    json={"name": "bench", "role": "queue-user", "queues": ["default"]},
                )
                assert made.status_code == 201, made.text
                api.headers["Authorization"] = f"Bearer {made.json()['token']}"
            for i in range(50):  # warm up
                assert (await api.post("/api/v1/jobs", json=job(i))).status_code == 201
            for round_ in range(1, rounds + 1):
                first = round_ * 10**6
                started = time.process_time()
                for i in range(requests):
                    answer = await api.post("/api/v1/jobs", json=job(first + i))
                    assert answer.status_code == 201, answer.text
                costs["alone"].append(_ms(started, requests))
                first += requests
                started = time.process_time()
                for start in range(0, requests, TOGETHER):
                    answers = await asyncio.gather(
                        *(
                            api.post("/api/v1/jobs", json=job(first + i))
                            for i in range(start, start + TOGETHER)
                        )
                    )
                    assert all(a.status_code == 201 for a in answers)
                costs[f"{TOGETHER} at once"].append(_ms(started, requests // TOGETHER * TOGETHER))
    return costs


def _ms(started: float, requests: int) -> float:
    return round((time.process_time() - started) / requests * 1000, 3)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database-url", required=True)
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--queue-user", action="store_true", help="a stored queue-user token")
    args = parser.parse_args()
    costs = asyncio.run(measure(args.database_url, args.requests, args.rounds, args.queue_user))
    print(json.dumps({"ms CPU per submission": costs, "load average": os.getloadavg()}))


if __name__ == "__main__":
    main()
