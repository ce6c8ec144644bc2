"""An independent checker of solver decisions: rebuilds the nodes from the snapshot and
verifies gang, units, split policy, topology tiers, node capacity, links and quotas. It shares
no code with the solver beyond the input/output types."""

from __future__ import annotations

from collections import defaultdict

from volcano_global.solver import Decision, JobRequest, Policy, Snapshot
from volcano_global.solver.traffic import pair_demand_gbps

RESPECTS_SPLIT_POLICY = {Policy.CPSAT, Policy.FIRST_FIT, Policy.GREEDY}
RESPECTS_LINKS = {Policy.CPSAT, Policy.FIRST_FIT, Policy.GREEDY, Policy.BACKFILL}


def check(snapshot: Snapshot, decision: Decision) -> list[str]:
    problems: list[str] = []
    jobs = {j.id: j for j in snapshot.jobs}
    if sorted(d.job_id for d in decision.jobs) != sorted(jobs):
        return ["the decision does not list every job exactly once"]
    leaves = {
        (c.name, leaf.path[0] if leaf.path else c.name, leaf.gpu_model): leaf
        for c in snapshot.clusters
        for leaf in c.leaves
    }
    placed: dict[tuple[str, str, str], list[int]] = defaultdict(list)  # leaf -> pod sizes
    link_load: dict[frozenset[str], float] = defaultdict(float)
    queue_gpus: dict[str, int] = defaultdict(int)
    for d in decision.jobs:
        job = jobs[d.job_id]
        if not d.admitted:
            if d.shares or not d.reason:
                problems.append(f"{job.id}: pending but has shares or no reason")
            continue
        problems += _check_job(job, d.shares, decision.policy)
        queue_gpus[job.queue] += sum(share.gpus for share in d.shares)  # elastic: its width
        for share in d.shares:
            for leaf_name, pods in share.domains:
                model = _leaf_model(leaves, share.cluster, leaf_name, job)
                if model is None:
                    problems.append(f"{job.id}: unknown leaf {share.cluster}/{leaf_name}")
                    continue
                placed[(share.cluster, leaf_name, model)].extend([job.gpus_per_pod] * pods)
        problems += _check_tiers(job, d.shares, snapshot)
        clusters = [s.cluster for s in d.shares]
        if len(clusters) > 1 and decision.policy in RESPECTS_LINKS:
            demand = pair_demand_gbps(job.allreduce_gbps, len(clusters))
            reserved = {frozenset((r.a, r.b)): r.gbps for r in d.reservations}
            for i, a in enumerate(clusters):
                for b in clusters[i + 1 :]:
                    if not any({link.a, link.b} == {a, b} for link in snapshot.links):
                        problems.append(f"{job.id}: split over unlinked {a}, {b}")
                    if reserved.get(frozenset((a, b)), 0.0) + 1e-6 < demand:
                        problems.append(f"{job.id}: reserves too little on {a}<->{b}")
        for r in d.reservations:
            link_load[frozenset((r.a, r.b))] += r.gbps
    for (cluster, leaf_name, model), pods in placed.items():
        leaf = leaves[(cluster, leaf_name, model)]
        if not _fits(leaf.free_nodes, pods):
            problems.append(f"{cluster}/{leaf_name}: pods {sorted(pods)} do not fit its nodes")
    if decision.policy in RESPECTS_LINKS:
        for link in snapshot.links:
            used = link_load[frozenset((link.a, link.b))]
            if used > link.capacity_gbps - link.reserved_gbps + 1e-6:
                problems.append(f"link {link.a}<->{link.b} oversubscribed: {used} Gbps")
    for queue in snapshot.queues:
        if (
            queue.quota_gpus is not None
            and queue.used_gpus + queue_gpus[queue.name] > queue.quota_gpus
        ):
            problems.append(f"queue {queue.name} over quota")
    return problems


def _check_job(job: JobRequest, shares, policy: Policy) -> list[str]:  # type: ignore[no-untyped-def]
    problems = []
    if not job.fewest_units <= sum(s.units for s in shares) <= job.units:
        problems.append(
            f"{job.id}: {sum(s.units for s in shares)} of {job.units} units placed (gang)"
        )
    for s in shares:
        if s.pods != s.units * job.unit or s.gpus != s.pods * job.gpus_per_pod:
            problems.append(f"{job.id}: share in {s.cluster} is not whole units")
        if sum(p for _, p in s.domains) != s.pods:
            problems.append(f"{job.id}: domains of the {s.cluster} share do not add up")
        if job.allowed_clusters is not None and s.cluster not in job.allowed_clusters:
            problems.append(f"{job.id}: placed in disallowed {s.cluster}")
    if len({s.cluster for s in shares}) != len(shares):
        problems.append(f"{job.id}: two shares in one cluster")
    if policy in RESPECTS_SPLIT_POLICY:
        limit = job.max_clusters if job.splittable else 1
        if len(shares) > limit:
            problems.append(f"{job.id}: {len(shares)} clusters, limit {limit}")
        if len(shares) > 1 and any(s.units < job.min_share_units for s in shares):
            problems.append(f"{job.id}: a share below the minimum")
    return problems


def _check_tiers(job: JobRequest, shares, snapshot: Snapshot) -> list[str]:  # type: ignore[no-untyped-def]
    paths = {
        (c.name, leaf.path[0] if leaf.path else c.name): leaf.path
        for c in snapshot.clusters
        for leaf in c.leaves
    }
    problems = []
    for s in shares:
        if job.gpus_per_pod == 0:
            continue
        if job.unit_tier is not None:
            per_domain: dict[str, int] = defaultdict(int)
            for leaf_name, pods in s.domains:
                path = paths[(s.cluster, leaf_name)]
                if len(path) < job.unit_tier:
                    problems.append(f"{job.id}: unit outside any tier-{job.unit_tier} domain")
                    continue
                per_domain[path[job.unit_tier - 1]] += pods
            if any(p % job.unit for p in per_domain.values()):
                problems.append(
                    f"{job.id}: a unit straddles tier-{job.unit_tier} domains in {s.cluster}"
                )
        if job.share_tier is not None:
            tops = {
                paths[(s.cluster, leaf)][job.share_tier - 1]
                if len(paths[(s.cluster, leaf)]) >= job.share_tier
                else None
                for leaf, _ in s.domains
            }
            if len(tops) != 1 or None in tops:
                problems.append(
                    f"{job.id}: share in {s.cluster} spans tier-{job.share_tier} domains {tops}"
                )
    return problems


def _leaf_model(leaves, cluster: str, leaf_name: str, job: JobRequest) -> str | None:  # type: ignore[no-untyped-def]
    models = [m for (c, name, m) in leaves if c == cluster and name == leaf_name]
    if job.gpu_model is not None:
        return job.gpu_model if job.gpu_model in models else None
    return models[0] if models else None


def _fits(free_nodes: tuple[int, ...], pods: list[int]) -> bool:
    """First-fit decreasing into the nodes; exact when pod sizes divide each other (1, 2, 4, 8)."""
    nodes = sorted((v for v, n in enumerate(free_nodes) for _ in range(n)), reverse=True)
    for size in sorted(pods, reverse=True):
        if size == 0:
            continue
        for i, free in enumerate(nodes):
            if free >= size:
                nodes[i] -= size
                break
        else:
            return False
    return True
