"""The agent's Kubernetes watches against the API emulator at cluster scale (5,000 nodes,
50,000 bound pods by default): initial sync time, agent CPU per 1,000 pod watch events, the
agent's peak memory, and list calls at rest with short watch timeouts, for the implementation
on `main` and the one in this worktree, measured in the same run.

    .venv/bin/python bench/kube_watch_bench.py                       # 5,000 x 50,000, both
    .venv/bin/python bench/kube_watch_bench.py --nodes 500 --pods 5000 --rest 10   # quick

Three processes, so that each CPU and memory figure is the agent's own: this one; the emulator
(`--role emulator`, driven over its stdin); and the agent (`--role agent`, once per
implementation; `main`'s core_agent and volcano_global come from `git archive` of the commit
where this branch left main, or `--baseline`, first on PYTHONPATH). The
agent runs KubernetesSource alone (no gRPC stream to a Global) on uvloop, as `vglobal agent`
does, so the CPU is the watch path: reading, decoding and storing events.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent


# -- the emulator process ------------------------------------------------------------------
def node(i: int) -> dict[str, Any]:
    name = f"node-{i:05d}"
    return {
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
                "topology.kubernetes.io/zone": f"zone-{i % 4}",
                "topology.kubernetes.io/rack": f"rack-{i // 16}",
                "node.kubernetes.io/instance-type": "p5.48xlarge",
            },
            "annotations": {"node.alpha.kubernetes.io/ttl": "0"},
            "managedFields": [
                managed("kubelet", "Update", {"f:status": {"f:conditions": {}, "f:images": {}}}),
            ],
        },
        "spec": {"podCIDR": f"10.{i // 256}.{i % 256}.0/24", "providerID": f"aws:///{name}"},
        "status": {
            "capacity": {"cpu": "192", "memory": "2Ti", "nvidia.com/gpu": "8", "pods": "110"},
            "allocatable": {"cpu": "190", "memory": "1900Gi", "nvidia.com/gpu": "8"},
            "conditions": [
                {"type": t, "status": "False", "reason": f"Kubelet{t}", "message": "ok"}
                for t in ("MemoryPressure", "DiskPressure", "PIDPressure")
            ]
            + [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "ok"}],
            "addresses": [
                {"type": "InternalIP", "address": f"10.1.{i // 256}.{i % 256}"},
                {"type": "Hostname", "address": name},
            ],
            "nodeInfo": {
                "kubeletVersion": "v1.31.2",
                "containerRuntimeVersion": "containerd://1.7.22",
                "kernelVersion": "6.1.0",
                "osImage": "Ubuntu 22.04.5 LTS",
                "architecture": "amd64",
            },
            "images": [
                {"names": [f"registry.example.com/train/image-{k}:v{k}"], "sizeBytes": 10**9}
                for k in range(8)
            ],
        },
    }


def managed(manager: str, operation: str, fields: dict[str, Any]) -> dict[str, Any]:
    return {
        "manager": manager,
        "operation": operation,
        "apiVersion": "v1",
        "time": "2026-12-01T20:00:05Z",
        "fieldsType": "FieldsV1",
        "fieldsV1": fields,
    }


def pod(i: int, nodes: int) -> dict[str, Any]:
    job = f"train-{i // 64:04d}"
    return {
        "metadata": {
            "name": f"{job}-worker-{i % 64}",
            "namespace": f"team-{i % 10}",
            "labels": {"volcano.sh/job-name": job, "volcano.sh/task-spec": "worker"},
            "annotations": {"scheduling.k8s.io/group-name": job, "volcano.sh/task-index": "0"},
            "managedFields": [
                managed("volcano", "Update", {"f:metadata": {"f:labels": {}}, "f:spec": {}}),
                managed("kubelet", "Update", {"f:status": {"f:conditions": {}, "f:podIP": {}}}),
            ],
            "ownerReferences": [
                {
                    "apiVersion": "batch.volcano.sh/v1alpha1",
                    "kind": "Job",
                    "name": job,
                    "uid": f"00000000-0000-4000-8000-{i // 64:012d}",
                    "controller": True,
                }
            ],
        },
        "spec": {
            "nodeName": f"node-{i % nodes:05d}",
            "schedulerName": "volcano",
            "containers": [
                {
                    "name": "worker",
                    "image": "registry.example.com/train/llm:2025.1",
                    "command": ["torchrun", "--nnodes=64", "train.py"],
                    "env": [{"name": f"VAR_{k}", "value": str(k)} for k in range(6)],
                    "resources": {
                        "requests": {"cpu": "20", "memory": "200Gi", "nvidia.com/gpu": "1"},
                        "limits": {"nvidia.com/gpu": "1"},
                    },
                    "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                }
            ],
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}],
        },
        "status": {
            "phase": "Running",
            "podIP": f"10.2.{i // 256 % 256}.{i % 256}",
            "startTime": "2026-12-01T20:00:00Z",
            "conditions": [
                {"type": t, "status": "True", "lastTransitionTime": "2026-12-01T20:00:05Z"}
                for t in ("Initialized", "Ready", "ContainersReady", "PodScheduled")
            ],
            "containerStatuses": [
                {
                    "name": "worker",
                    "image": "registry.example.com/train/llm:2025.1",
                    "imageID": "registry.example.com/train/llm@sha256:" + "0" * 64,
                    "containerID": f"containerd://{i:064x}",
                    "ready": True,
                    "started": True,
                    "restartCount": 0,
                    "state": {"running": {"startedAt": "2026-12-01T20:00:04Z"}},
                }
            ],
        },
    }


async def emulator_role(args: argparse.Namespace) -> None:
    sys.path.insert(0, str(REPO))
    from tests.k8s_emulator.server import NODES, PODS, KubeEmulator

    emulator = KubeEmulator()
    emulator.register(("batch.volcano.sh", "v1alpha1", "jobs"), "Job", namespaced=True)
    for i in range(args.nodes):
        emulator.create(NODES, node(i))
    pods = [pod(i, args.nodes) for i in range(args.pods)]
    for obj in pods:
        emulator.create(PODS, obj)
    print("ready", await emulator.start(), flush=True)
    loop = asyncio.get_running_loop()
    seq = 0
    while line := (await loop.run_in_executor(None, sys.stdin.readline)).split():
        command = line[0]
        if command == "churn":  # N label changes of bound pods: N MODIFIED events
            for k in range(int(line[1])):
                seq += 1
                meta = pods[k % len(pods)]["metadata"]
                emulator.patch(
                    PODS,
                    meta["name"],
                    {"metadata": {"labels": {"seq": str(seq)}}},
                    meta["namespace"],
                )
                if k % 200 == 0:
                    await asyncio.sleep(0)  # let the watches stream
            print(
                json.dumps({"last": seq, "pod": f"{meta['namespace']}/{meta['name']}"}), flush=True
            )
        elif command == "counts":
            counts: dict[str, int] = {}
            for request in emulator.requests:
                path, _, query = request.split(" ", 1)[1].partition("?")
                if "watch=" in query:
                    kinds = ["watches"]
                elif "limit=" in query:  # the agent pages every list (discovery is no list)
                    kinds = ["pages"] if "continue=" in query else ["pages", "lists"]
                else:
                    kinds = ["other"]
                for what in kinds:
                    counts[f"{what} {path}"] = counts.get(f"{what} {path}", 0) + 1
            print(json.dumps(counts), flush=True)
    await emulator.stop()


# -- the agent process ---------------------------------------------------------------------
def peak_rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def sizes(args: argparse.Namespace) -> list[str]:
    return ["--nodes", str(args.nodes), "--pods", str(args.pods)]


class Emulator:
    def __init__(self, args: argparse.Namespace) -> None:
        self.process = subprocess.Popen(
            [sys.executable, __file__, "--role", "emulator", *sizes(args)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": ""},
        )
        self.url = self.process.stdout.readline().split()[1]  # type: ignore[union-attr]

    async def ask(self, command: str) -> Any:
        self.process.stdin.write(command + "\n")  # type: ignore[union-attr]
        self.process.stdin.flush()  # type: ignore[union-attr]
        line = await asyncio.to_thread(self.process.stdout.readline)  # type: ignore[union-attr]
        return json.loads(line)

    def close(self) -> None:
        self.process.stdin.close()  # type: ignore[union-attr]
        self.process.wait(30)


def total(counts: dict[str, int], what: str) -> int:
    return sum(n for key, n in counts.items() if key.startswith(what))


async def agent_role(args: argparse.Namespace) -> None:
    import core_agent
    from core_agent.kubernetes.adapter import KubeApi, api_client
    from core_agent.kubernetes.source import KubernetesSource

    emulator = Emulator(args)
    api = await api_client(host=emulator.url)
    result: dict[str, Any] = {"core_agent": str(Path(core_agent.__file__).parent)}
    try:
        source = KubernetesSource(KubeApi(api), page_size=500, watch_timeout_s=300)
        started, cpu = time.perf_counter(), time.process_time()
        await source.start()
        result["sync_s"] = time.perf_counter() - started
        result["sync_cpu_s"] = time.process_time() - cpu
        assert len(source.nodes) == args.nodes and len(source.pods) == args.pods

        cpu = time.process_time()
        done = await emulator.ask(f"churn {args.events}")
        while source.pods[done["pod"]]["metadata"]["labels"].get("seq") != str(done["last"]):
            source.changed.clear()
            await source.changed.wait()
        result["cpu_ms_per_1000_events"] = (time.process_time() - cpu) * 1000 / args.events * 1000
        result["peak_rss_mib"] = peak_rss_mib()
        await source.stop()

        # At rest, with watches the server ends every second or two.
        resting = KubernetesSource(KubeApi(api), page_size=500, watch_timeout_s=1)
        await resting.start()
        before = await emulator.ask("counts")
        await asyncio.sleep(args.rest)
        after = await emulator.ask("counts")
        await resting.stop()
        result["rest_s"] = args.rest
        for what in ("lists", "pages", "watches"):
            result[f"rest_{what}"] = total(after, what) - total(before, what)
        result["rest_full_lists"] = result.pop("rest_lists")
        result["rest_list_requests"] = result.pop("rest_pages")
        result["rest_watch_requests"] = result.pop("rest_watches")
        result["rest_by_path"] = {
            key: after[key] - before.get(key, 0) for key in after if after[key] != before.get(key)
        }
    finally:
        await api.close()
        emulator.close()
    print(json.dumps(result), flush=True)


# -- both implementations ------------------------------------------------------------------
def run_agent(args: argparse.Namespace, impl: str, pythonpath: str) -> dict[str, Any]:
    command = [sys.executable, __file__, "--role", "agent", *sizes(args)]
    command += ["--events", str(args.events), "--rest", str(args.rest)]
    output = subprocess.run(
        command, env={**os.environ, "PYTHONPATH": pythonpath}, capture_output=True, text=True
    )
    if output.returncode:
        sys.exit(f"{impl}: agent failed\n{output.stderr[-3000:]}")
    return dict(json.loads(output.stdout.strip().splitlines()[-1]))


def projected_per_hour(result: dict[str, Any], mean_watch_s: float) -> float:
    """Full lists an hour at rest with the default watch timeouts: the full lists made per watch
    in the measured interval, times the watches the 4 kinds make in an hour."""
    per_watch = result["rest_full_lists"] / max(result["rest_watch_requests"], 1)
    return per_watch * 4 * 3600 / mean_watch_s


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--role", choices=["compare", "emulator", "agent"], default="compare")
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=50_000)
    parser.add_argument("--events", type=int, default=20_000, help="pod events to time")
    parser.add_argument("--rest", type=float, default=30.0, help="seconds at rest, measured")
    parser.add_argument("--only", choices=["main", "branch"], default=None)
    parser.add_argument(
        "--baseline", default=None, help="commit of 'main' (default: where HEAD left main)"
    )
    args = parser.parse_args()
    if args.role == "emulator":
        asyncio.run(emulator_role(args))
        return
    if args.role == "agent":
        import uvloop

        uvloop.run(agent_role(args))  # as `vglobal agent` runs
        return
    results = {}
    git = ["git", "-C", str(REPO)]
    base = (
        args.baseline
        or subprocess.run(
            [*git, "merge-base", "main", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
    )
    print(f"main: core_agent of {base[:10]}")
    with tempfile.TemporaryDirectory() as old:
        # The agent with the job-spec and protocol code of its own commit (`global/` is the
        # importable package `volcano_global`), so a baseline never mixes two versions.
        archive = subprocess.run(
            [*git, "archive", base, "core_agent", "global"], capture_output=True, check=True
        )
        subprocess.run(["tar", "-x", "-C", old], input=archive.stdout, check=True)
        os.rename(os.path.join(old, "global"), os.path.join(old, "volcano_global"))
        for impl, path in (("main", old), ("branch", "")):
            if args.only in (None, impl):
                results[impl] = run_agent(args, impl, path)
    print(json.dumps(results, indent=1))
    mean_watch_s = {"main": 300.0, "branch": 450.0}  # main: 300 s; branch: 300-600 s
    for impl, r in results.items():
        hourly = r["rest_full_lists"] * 3600 / r["rest_s"]
        print(
            f"{impl}: sync {r['sync_s']:.1f} s ({r['sync_cpu_s']:.1f} s CPU); "
            f"{r['cpu_ms_per_1000_events']:.0f} ms CPU / 1,000 pod events; "
            f"peak RSS {r['peak_rss_mib']:.0f} MiB; at rest with 1-2 s watches, in "
            f"{r['rest_s']:g} s: {r['rest_full_lists']} full lists ({r['rest_list_requests']} "
            f"pages), {r['rest_watch_requests']} watches = {hourly:,.0f} lists/h; at the "
            f"default timeouts {projected_per_hour(r, mean_watch_s[impl]):,.0f} lists/h"
        )


if __name__ == "__main__":
    main()
