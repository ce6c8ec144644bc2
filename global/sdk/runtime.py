"""Inside the training container: where this process sits in the whole job, and what
torch.distributed needs to build its groups so that tensor- and pipeline-parallel traffic
stays inside a cluster (and TP inside a node) and only data-parallel traffic crosses clusters.

The agent injects (see docs/agents.md): VGLOBAL_WORLD_PODS, VGLOBAL_SHARE_PODS,
VGLOBAL_RANK_OFFSET (global index of this share's first pod), VGLOBAL_CLUSTER_INDEX,
VGLOBAL_CLUSTER_COUNT, VGLOBAL_RENDEZVOUS_ADDR (host:port of rank 0) and VGLOBAL_PARALLELISM
(`tp=8,pp=4,cp=1,dp=16`, from the job's communication declaration). Volcano's `env` plugin
gives each pod VC_TASK_INDEX (its index in its task), the agent each task
VGLOBAL_TASK_POD_OFFSET (the place in the share of the task's first pod); torchrun gives each
process LOCAL_RANK.

    rt = Runtime.from_env()                  # or Runtime.from_env(tensor_parallel=8, ...)
    rt.rank, rt.world_size, rt.master_addr, rt.master_port
    groups = rt.init_torch("nccl")           # init_process_group + every TP/PP/CP/DP group

or with torchrun (static rendezvous; one torchrun per pod):

    torchrun $(python -m volcano_global.sdk.runtime torchrun-args --nproc-per-node 8) train.py

Global rank of a process: (VGLOBAL_RANK_OFFSET + VGLOBAL_TASK_POD_OFFSET + VC_TASK_INDEX) *
procs_per_pod + LOCAL_RANK, and within the job rank = ((dp * PP + pp) * CP + cp) * TP + tp:
TP innermost, DP outermost.
Shares hold whole data-parallel replicas in rank order, so every TP, CP and PP group lies in
one cluster and each DP group has one member per replica, across the clusters as placed.
"""

from __future__ import annotations

import json
import os
import sys
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


class LayoutError(ValueError):
    """The environment or the sizes do not describe a valid layout."""


class ReportError(RuntimeError):
    """A measurement could not be reported (missing environment, refused by the Global)."""


def _pod_index(env: Mapping[str, str]) -> int:
    """This pod's place in its share: its task's first pod's place (VGLOBAL_TASK_POD_OFFSET,
    0 for an agent from before it, which was right for a share of one task) plus its index in
    the task (Volcano's VC_TASK_INDEX); VGLOBAL_POD_INDEX outside Volcano."""
    if "VC_TASK_INDEX" in env:
        return int(env.get("VGLOBAL_TASK_POD_OFFSET", "0")) + int(env["VC_TASK_INDEX"])
    return int(env.get("VGLOBAL_POD_INDEX", "0"))


@dataclass(frozen=True)
class Share:
    """This pod's share of the job, as the agent injected it."""

    world_pods: int
    share_pods: int
    rank_offset: int
    cluster_index: int
    cluster_count: int
    master_addr: str
    master_port: int

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Share:
        def number(key: str) -> int:
            value = env.get(key)
            if value is None:
                raise LayoutError(f"{key} is not set: is this pod part of a Volcano Global job?")
            try:
                return int(value)
            except ValueError:
                raise LayoutError(f"{key} must be an integer, got {value!r}") from None

        address = env.get("VGLOBAL_RENDEZVOUS_ADDR", "")
        host, _, port = address.rpartition(":")
        if not host or not port.isdigit():
            raise LayoutError(f"VGLOBAL_RENDEZVOUS_ADDR must be host:port, got {address!r}")
        return cls(
            world_pods=number("VGLOBAL_WORLD_PODS"),
            share_pods=number("VGLOBAL_SHARE_PODS"),
            rank_offset=number("VGLOBAL_RANK_OFFSET"),
            cluster_index=number("VGLOBAL_CLUSTER_INDEX"),
            cluster_count=number("VGLOBAL_CLUSTER_COUNT"),
            master_addr=host,
            master_port=int(port),
        )


@dataclass(frozen=True)
class Layout:
    """Rank order of a TP x CP x PP x DP job: rank = ((dp * PP + pp) * CP + cp) * TP + tp."""

    tensor_parallel: int
    context_parallel: int
    pipeline_parallel: int
    data_parallel: int

    @property
    def world_size(self) -> int:
        return self.unit * self.data_parallel

    @property
    def unit(self) -> int:
        """Ranks of one data-parallel replica."""
        return self.tensor_parallel * self.context_parallel * self.pipeline_parallel

    def coordinates(self, rank: int) -> dict[str, int]:
        tp, rest = rank % self.tensor_parallel, rank // self.tensor_parallel
        cp, rest = rest % self.context_parallel, rest // self.context_parallel
        pp, dp = rest % self.pipeline_parallel, rest // self.pipeline_parallel
        return {"tp": tp, "cp": cp, "pp": pp, "dp": dp}

    def rank(self, *, tp: int = 0, cp: int = 0, pp: int = 0, dp: int = 0) -> int:
        return ((dp * self.pipeline_parallel + pp) * self.context_parallel + cp) * (
            self.tensor_parallel
        ) + tp

    def groups(self, kind: str) -> list[list[int]]:
        """Every group of one kind ("tp", "cp", "pp", "dp"): the ranks that differ only in that
        coordinate, in a fixed order (every process must create them in the same order)."""
        sizes = {
            "tp": self.tensor_parallel,
            "cp": self.context_parallel,
            "pp": self.pipeline_parallel,
            "dp": self.data_parallel,
        }
        if kind not in sizes:
            raise LayoutError(f"unknown group kind {kind!r}; one of tp, cp, pp, dp")
        found: dict[tuple[int, ...], list[int]] = {}
        for rank in range(self.world_size):
            c = self.coordinates(rank)
            key = tuple(v for k, v in c.items() if k != kind)
            found.setdefault(key, []).append(rank)
        return list(found.values())


def _post(
    what: str, body: dict[str, Any], *, env: Mapping[str, str] | None, timeout_s: float
) -> dict[str, Any]:
    """POST `body` to the job's `what` (VGLOBAL_API, with the job token the agent injected as
    VGLOBAL_JOB_TOKEN)."""
    env = os.environ if env is None else env
    api, token, uid = (
        env.get("VGLOBAL_API"),
        env.get("VGLOBAL_JOB_TOKEN"),
        env.get("VGLOBAL_JOB_UID"),
    )
    if not api or not token or not uid:
        raise ReportError(
            "reporting needs VGLOBAL_API, VGLOBAL_JOB_TOKEN and VGLOBAL_JOB_UID "
            "(start the agent with --global-api)"
        )
    request = urllib.request.Request(
        f"{api.rstrip('/')}/api/v1/jobs/{uid}/{what}",
        data=json.dumps(body).encode(),
        method="POST",
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            return dict(json.loads(response.read()))
    except urllib.error.HTTPError as exc:
        detail = exc.read().decode(errors="replace")
        raise ReportError(f"the Global refused the report ({exc.code}): {detail}") from None
    except (urllib.error.URLError, OSError) as exc:  # down, unreachable, timed out
        raise ReportError(f"the Global could not be reached: {exc}") from None


def parse_parallelism(text: str) -> dict[str, int]:
    """`tp=8,pp=4,cp=1,dp=16` -> sizes."""
    sizes: dict[str, int] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, _, value = part.partition("=")
        if key not in ("tp", "pp", "cp", "dp", "ep") or not value.isdigit() or int(value) < 1:
            raise LayoutError(f"VGLOBAL_PARALLELISM: {part!r} is not tp|pp|cp|dp|ep=N (N >= 1)")
        sizes[key] = int(value)
    return sizes


@dataclass(frozen=True)
class Runtime:
    share: Share
    layout: Layout
    procs_per_pod: int
    pod_index: int  # in the share
    local_rank: int

    @classmethod
    def from_env(
        cls,
        env: Mapping[str, str] | None = None,
        *,
        tensor_parallel: int | None = None,
        pipeline_parallel: int | None = None,
        context_parallel: int | None = None,
        procs_per_pod: int | None = None,
    ) -> Runtime:
        """Read the injected environment; sizes given here win over VGLOBAL_PARALLELISM, and
        the data-parallel size is what the world leaves."""
        env = os.environ if env is None else env
        share = Share.from_env(env)
        declared = parse_parallelism(env.get("VGLOBAL_PARALLELISM", ""))
        tp = tensor_parallel or declared.get("tp", 1)
        pp = pipeline_parallel or declared.get("pp", 1)
        cp = context_parallel or declared.get("cp", 1)
        procs = procs_per_pod or int(
            env.get("LOCAL_WORLD_SIZE") or env.get("VGLOBAL_PROCS_PER_POD") or tp
        )
        world = share.world_pods * procs
        if world % (tp * pp * cp):
            raise LayoutError(
                f"the world ({share.world_pods} pods x {procs} processes = {world}) is not a "
                f"multiple of TP x CP x PP = {tp * cp * pp}"
            )
        layout = Layout(tp, cp, pp, world // (tp * cp * pp))
        if procs % tp:
            raise LayoutError(f"TP ({tp}) must divide the processes per pod ({procs})")
        last_pod = share.rank_offset + share.share_pods
        for edge in (share.rank_offset, last_pod):
            if (edge * procs) % layout.unit:
                raise LayoutError(
                    f"this share (pods {share.rank_offset}..{last_pod - 1}) cuts a "
                    f"data-parallel replica of {layout.unit} ranks"
                )
        if "dp" in declared and declared["dp"] != layout.data_parallel:
            raise LayoutError(
                f"VGLOBAL_PARALLELISM says dp={declared['dp']}, the world gives "
                f"{layout.data_parallel}"
            )
        pod_index = _pod_index(env)
        if not 0 <= pod_index < share.share_pods:
            raise LayoutError(f"pod index {pod_index} is outside this share of {share.share_pods}")
        local_rank = int(env.get("LOCAL_RANK", "0"))
        return cls(share, layout, procs, pod_index, local_rank)

    @property
    def rank(self) -> int:
        return (self.share.rank_offset + self.pod_index) * self.procs_per_pod + self.local_rank

    @property
    def world_size(self) -> int:
        return self.layout.world_size

    @property
    def master_addr(self) -> str:
        return self.share.master_addr

    @property
    def master_port(self) -> int:
        return self.share.master_port

    def my_groups(self) -> dict[str, list[int]]:
        return {
            kind: next(g for g in self.layout.groups(kind) if self.rank in g)
            for kind in ("tp", "cp", "pp", "dp")
        }

    def torchrun_args(self) -> list[str]:
        """torchrun's static rendezvous for this pod (one torchrun per pod)."""
        return [
            f"--nnodes={self.share.world_pods}",
            f"--node-rank={self.share.rank_offset + self.pod_index}",
            f"--nproc-per-node={self.procs_per_pod}",
            f"--master-addr={self.master_addr}",
            f"--master-port={self.master_port}",
        ]

    def report(
        self,
        *,
        step_time_s: float,
        bytes_per_step: float,
        env: Mapping[str, str] | None = None,
        timeout_s: float = 5.0,
    ) -> dict[str, Any]:
        """Send one measurement to the Global (VGLOBAL_API, with the job token the agent
        injected as VGLOBAL_JOB_TOKEN); returns the job's running figures. Call it from one
        rank (e.g. rank 0) every few hundred steps."""
        body = {"stepTimeSeconds": step_time_s, "bytesPerStep": bytes_per_step}
        return _post("measurements", body, env=env, timeout_s=timeout_s)

    def checkpointed(
        self,
        *,
        step: int,
        size_bytes: int | None = None,
        cluster: str | None = None,
        env: Mapping[str, str] | None = None,
        timeout_s: float = 5.0,
    ) -> dict[str, Any]:
        """Tell the Global a checkpoint of `step` was saved (call it from one rank once the
        save is complete). Preemption then counts only the work since it as lost, so this job
        is evicted before jobs that would lose more. With its size, the Global knows what a
        restore elsewhere moves and prefers the cluster that holds it (docs/data.md): written
        in this share's cluster unless `cluster` names another (e.g. shared storage of one
        cluster). Returns what the Global recorded."""
        body: dict[str, Any] = {"step": step}
        if size_bytes is not None:
            body["sizeBytes"] = size_bytes
        if cluster is not None:
            body["cluster"] = cluster
        else:
            body["clusterIndex"] = self.share.cluster_index
        return _post("checkpoints", body, env=env, timeout_s=timeout_s)

    def init_torch(self, backend: str = "nccl", **kwargs: Any) -> dict[str, Any]:
        """init_process_group over the rendezvous address, then every TP/CP/PP/DP group (all
        processes create all groups in the same order); returns this process's groups."""
        import torch.distributed as dist  # imported here: torch is optional for the package

        dist.init_process_group(
            backend,
            init_method=f"tcp://{self.master_addr}:{self.master_port}",
            rank=self.rank,
            world_size=self.world_size,
            **kwargs,
        )
        mine: dict[str, Any] = {}
        for kind in ("tp", "cp", "pp", "dp"):
            for ranks in self.layout.groups(kind):
                group = dist.new_group(ranks)
                if self.rank in ranks:
                    mine[kind] = group
        return mine


def main(argv: list[str] | None = None) -> int:
    """`python -m volcano_global.sdk.runtime torchrun-args [--nproc-per-node N]`."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] != "torchrun-args":
        print("usage: python -m volcano_global.sdk.runtime torchrun-args [--nproc-per-node N]")
        return 2
    procs = None
    if "--nproc-per-node" in args:
        procs = int(args[args.index("--nproc-per-node") + 1])
    try:
        runtime = Runtime.from_env(procs_per_pod=procs)
    except LayoutError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(" ".join(runtime.torchrun_args()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
