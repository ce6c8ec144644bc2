r"""The placement model CP-SAT solves (`cpsat`): its variables, the limits the jobs share, the
objective and the warm start's hints; the short-horizon reservations (h_o) are `cpsat_holds`.

Sets. J: the pending jobs of the round's window, in queue order. C: member clusters.
L: pairs of clusters joined by a link. For job j, C_j ⊆ C: clusters that have its GPU model,
are allowed for it, and could hold at least one share of it on their own.

Data. n_j units of u_j pods, g_j GPUs per pod (a unit is one data-parallel replica, or one
partition, and never leaves a cluster); U_jc: units of j cluster c could hold alone, from the
free-GPU histograms of its domains and j's topology tiers (every unit inside one domain of
tier t_j; the whole share inside one domain of tier s_j); F_cm: free GPUs of model m in c;
K_j: most clusters j may use (1 when j may not be split); m_j: smallest share in units;
B_l: free bandwidth of link l (per direction, in 0.1 Gbps, rounded down); A_j: j's
all-reduce rate V/tau (see `traffic`), so a pair of a k-cluster split needs D_jk = 2 A_j / k
(rounded up); Q_q: GPUs queue q may still take; v_j = f^level_j ceil(32 (N - π_j) / N): j's
value by the queue order (π_j its position in the window of N, level 0 for the lowest
priority in the window, f = 4 by default, levels above the fourth merged, which keeps every
coefficient far from 64 bits at any window), so earlier and higher-priority jobs
weigh more while two later jobs may outweigh one earlier; w_j = v_j for most jobs, and for a
job owed a reservation (`due`) w_j = V 2^k + v_j, V one more than the value of all jobs not
due, k its rank among the due (lexicographic). O_j: the reservation options of a due job that
does not fit now (`reservations`): for each, start time T_o, GPUs it holds per cluster, and
the spare S_oc (GPUs free at T_o beyond the hold) and L_ol (bandwidth); E_j: a run time j is
likely to end within (75th percentile, or the user's estimate).

Variables. a_j ∈ {0,1} (admitted); x_jc ∈ {0..U_jc} (units in c); z_jc ∈ {0,1} (c used);
y_jk ∈ {0,1} (j uses exactly k clusters); p_jl ∈ {0,1} (both ends of l used by j);
r_jl ≥ 0 (bandwidth j reserves on l); h_o ∈ {0,1} (reservation option o chosen).

Constraints.
    Σ_c x_jc = n_j a_j                                  all or nothing (gang); for an elastic
                                                        job e_j a_j ≤ Σ_c x_jc ≤ n_j a_j (e_j:
                                                        its fewest units, `min_units`)
    m_j z_jc ≤ x_jc ≤ U_jc z_jc,  z_jc ≤ a_j            shares are whole units, no tiny shares
    Σ_c z_jc = Σ_k k y_jk,  Σ_k y_jk = a_j,  k ≤ K_j    at most K_j clusters
    z_ja + z_jb ≤ 1              for a, b ∈ C_j not linked (parts must be pairwise linked)
    p_jl ≥ z_ja + z_jb - 1, p_jl ≤ z_ja, p_jl ≤ z_jb    for l = (a, b) ∈ L
    r_jl ≥ D_jk (p_jl + y_jk - 1)                       for k = 2..K_j
    Σ_j r_jl ≤ B_l                                      no link is oversubscribed
    Σ_{j: model m} u_j g_j x_jc ≤ F_cm                  GPU capacity per cluster and model
    Σ_{j: g_j ≥ s} (g_j / s) u_j x_jc ≤ S_cms           per pod size s: pods of s GPUs or more
                                                        need nodes with s free (S_cms: slots
                                                        in c's free-GPU histograms)
    Σ_{j ∈ q} u_j g_j n_j a_j ≤ Q_q                     queue quotas
    a_j + Σ_{o ∈ O_j} h_o ≤ 1                           start now, or one reservation
    h_o ⇒ Σ_{k ≠ j: E_k > T_o} u_k g_k x_kc ≤ S_oc      what still runs at T_o fits the spare
    h_o ⇒ Σ_{k ≠ j: E_k > T_o} r_kl ≤ L_ol              (GPUs and link bandwidth)
    h_o + h_o' ≤ 1                for options of different jobs sharing a cluster

Objective. The value of what starts now and of the reservations made first, strictly: W is
one more than the largest value the secondary terms can take, so no saving below buys a job.
    maximise  W (Σ_j w_j a_j + Σ_{j elastic} ⌊v_j / n_j⌋ Σ_c x_jc
                 + Σ_o (w_j(o) - v_j(o) T_o / T_max(j)) h_o)
            - 10^4 (Σ_jc z_jc - Σ_j a_j)          fewer clusters per job (10^4 ~ 1 Tbps)
            - Σ_jl r_jl                            less cross-cluster traffic (units of 0.1 Gbps)
            - Σ_jc ρ_c u_j g_j x_jc                stable fit: fill the small clusters first
where ρ_c ∈ {0..3} is the quartile of c's size (free GPUs plus what running jobs hold; 0 =
smallest), the same every round: the large clusters stay whole for the gangs that need them.
A reservation is worth as much as starting now less the job's order value for the wait, so a
later one is taken only where it lets more, or more important, work start now (the short
horizon a greedy plan cannot weigh). Between the secondary terms the weights are a documented
trade-off, not a strict order.

Scale. A splittable job considers its `candidates_per_job` clusters with most room (8 by
default), so pair variables stay bounded as clusters are added. Nodes never appear: capacities
are per (cluster, model) and U_jc comes from domain histograms.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass

from ortools.sat.python import cp_model

from volcano_global.solver.capacity import ClusterPool, job_models
from volcano_global.solver.model import Decision, JobRequest, Snapshot, link_key
from volcano_global.solver.packing import Pools
from volcano_global.solver.traffic import pair_demand_gbps
from volcano_global.solver.values import width_value

RES_PER_GBPS = 10  # link reservations are integers of 100 Mbps: demand rounded up, room down
CLUSTER_PENALTY = 10_000  # one more cluster for a job costs as much as 1 Tbps of traffic
FIT_RANKS = 4


def fit_ranks(rank: dict[str, int], pools: Pools) -> dict[str, int]:
    """Each cluster's ρ_c: the quartile of its place in the stable `rank` (0: smallest)."""
    return {name: rank.get(name, 0) * FIT_RANKS // max(len(rank), 1) for name in pools}


@dataclass
class JobVars:
    job: JobRequest
    admitted: cp_model.IntVar
    units: dict[str, cp_model.IntVar]
    used: dict[str, cp_model.IntVar]
    size: dict[int, cp_model.IntVar]
    reserve: dict[tuple[str, str], cp_model.IntVar]
    pairs: dict[tuple[str, str], cp_model.IntVar]
    demand: dict[int, int]
    model_in: dict[str, str]


def job_vars(
    model: cp_model.CpModel,
    job: JobRequest,
    pools: dict[str, ClusterPool],
    links: dict,  # type: ignore[type-arg]
    candidates: int,
    hinted: frozenset[str],
) -> JobVars:
    """The job's variables (a_j, x_jc, z_jc, y_jk, p_jl, r_jl) and its own constraints."""
    admitted = model.new_bool_var(f"a[{job.id}]")
    units: dict[str, cp_model.IntVar] = {}
    used: dict[str, cp_model.IntVar] = {}
    model_in: dict[str, str] = {}
    limit = job.cluster_limit
    min_share = job.fewest_units if limit == 1 else max(job.min_share_units, 1)
    for name, best_model, cap in _candidates(job, pools, min_share, candidates, hinted):
        x = model.new_int_var(0, cap, f"x[{job.id},{name}]")
        z = model.new_bool_var(f"z[{job.id},{name}]")
        model.add(x <= cap * z)
        model.add(x >= min_share * z)
        model.add_implication(z, admitted)
        units[name], used[name], model_in[name] = x, z, best_model
    if job.elastic:
        model.add(sum(units.values()) >= job.min_units * admitted)
        model.add(sum(units.values()) <= job.units * admitted)
    else:
        model.add(sum(units.values()) == job.units * admitted)
    size: dict[int, cp_model.IntVar] = {}
    for k in range(1, min(limit, len(used)) + 1):
        size[k] = model.new_bool_var(f"y[{job.id},{k}]")
    model.add(sum(size.values()) == admitted)
    model.add(sum(used.values()) == sum(k * y for k, y in size.items()))

    reserve: dict[tuple[str, str], cp_model.IntVar] = {}
    pairs: dict[tuple[str, str], cp_model.IntVar] = {}
    demands: dict[int, int] = {}
    names = sorted(used)
    if limit > 1:
        for i, a in enumerate(names):
            for b in names[i + 1 :]:
                key = link_key(a, b)
                if key not in links:
                    model.add(used[a] + used[b] <= 1)
                    continue
                pair = model.new_bool_var(f"p[{job.id},{a},{b}]")
                pairs[key] = pair
                model.add(pair >= used[a] + used[b] - 1)
                model.add(pair <= used[a])
                model.add(pair <= used[b])
                demands = {
                    k: math.ceil(pair_demand_gbps(job.allreduce_gbps, k) * RES_PER_GBPS)
                    for k in size
                    if k >= 2
                }
                top = max(demands.values(), default=0)
                if top == 0:
                    continue
                r = model.new_int_var(0, top, f"r[{job.id},{a},{b}]")
                for k, demand in demands.items():
                    model.add(r >= demand * (pair + size[k] - 1))
                reserve[key] = r
    return JobVars(job, admitted, units, used, size, reserve, pairs, demands, model_in)


def _candidates(
    job: JobRequest,
    pools: dict[str, ClusterPool],
    min_share: int,
    limit: int,
    hinted: frozenset[str],
) -> list[tuple[str, str, int]]:
    """(cluster, model, U_jc) for the clusters the model considers for the job, at most
    `limit`: for a splittable job those with most room (pair variables grow with the square of
    the candidates), for a whole job those it fits most tightly (best fit)."""
    found = []
    for name, pool in pools.items():
        if job.allowed_clusters is not None and name not in job.allowed_clusters:
            continue
        models = job_models(job, pool)
        if not models:
            continue
        best_model = max(models, key=lambda m: pool.max_units(job, m))
        cap = min(pool.max_units(job, best_model), job.units)
        if cap >= min_share:
            found.append((name, best_model, cap))
    if len(found) > limit:
        if job.cluster_limit > 1:
            ranked = sorted(found, key=lambda f: (-f[2], f[0]))
        else:
            ranked = sorted(found, key=lambda f: (pools[f[0]].free_gpus(f[1]), f[0]))
        found = ranked[:limit] + [f for f in ranked[limit:] if f[0] in hinted]
    return sorted(found)


def add_shared_limits(
    model: cp_model.CpModel,
    vars_: list[JobVars],
    snapshot: Snapshot,
    pools: Pools,
    links: dict,  # type: ignore[type-arg]
) -> None:
    """What the jobs share: GPUs per cluster and model, node slots per pod size, link
    bandwidth and queue quotas."""
    capacity: dict[tuple[str, str], list[tuple[int, cp_model.IntVar]]] = defaultdict(list)
    link_use: dict[tuple[str, str], list[cp_model.IntVar]] = defaultdict(list)
    quota_use: dict[str, list[tuple[int, cp_model.IntVar]]] = defaultdict(list)
    pod_terms: dict[tuple[str, str], list[tuple[int, int, cp_model.IntVar]]] = defaultdict(list)
    for v in vars_:
        job = v.job
        for c, x in v.units.items():
            capacity[(c, v.model_in[c])].append((job.unit_gpus, x))
            pod_terms[(c, v.model_in[c])].append((job.gpus_per_pod, job.unit, x))
        for key, r in v.reserve.items():
            link_use[key].append(r)
        quota_use[job.queue] += [(job.unit_gpus, x) for x in v.units.values()]

    for (c, m), terms in capacity.items():
        model.add(sum(g * x for g, x in terms) <= pools[c].free_gpus(m))
    for (c, m), entries in pod_terms.items():
        for size in sorted({g for g, _, _ in entries if g > 1}):
            # Pods of `size` GPUs or more need nodes with that much free: count in size-slots.
            big = [(g // size) * pods * x for g, pods, x in entries if g >= size]
            model.add(sum(big) <= pools[c].slots(m, size))
    for key, terms in link_use.items():
        model.add(sum(terms) <= math.floor(links[key].free_gbps * RES_PER_GBPS))
    for queue in snapshot.queues:
        if queue.quota_gpus is not None and quota_use.get(queue.name):
            room = max(queue.quota_gpus - queue.used_gpus, 0)
            model.add(sum(g * a for g, a in quota_use[queue.name]) <= room)


def maximise(
    model: cp_model.CpModel,
    vars_: list[JobVars],
    jobs: list[JobRequest],
    fit_rank: dict[str, int],
    weights: dict[str, int],
    normal: dict[str, int],
    held_value: cp_model.LinearExprT,
) -> int:
    """Set the objective (the module's docstring); returns W, the weight of the value of what
    starts now and of the reservations over the secondary terms."""
    extra_clusters = sum(sum(v.used.values()) - v.admitted for v in vars_)
    traffic = sum(r for v in vars_ for r in v.reserve.values())
    fit = sum(fit_rank[c] * v.job.unit_gpus * x for v in vars_ for c, x in v.units.items())
    secondary_max = (
        CLUSTER_PENALTY * sum(max(len(v.used) - 1, 0) for v in vars_)
        + sum(max(v.demand.values(), default=0) * len(v.reserve) for v in vars_)
        + (FIT_RANKS - 1) * sum(j.gpus for j in jobs)
    )
    admitted = sum(weights[v.job.id] * v.admitted for v in vars_) + held_value
    admitted += sum(width_value(v.job, sum(v.units.values()), normal) for v in vars_)
    model.maximize(
        (secondary_max + 1) * admitted - CLUSTER_PENALTY * extra_clusters - traffic - fit
    )
    return secondary_max + 1


def add_hints(model: cp_model.CpModel, vars_: list[JobVars], hint: Decision) -> None:
    """Hint every variable from the warm start, so CP-SAT has a complete solution at once."""
    decided = {d.job_id: d for d in hint.jobs}
    for v in vars_:
        d = decided.get(v.job.id)
        shares = {s.cluster: s.units for s in d.shares} if d and d.admitted else {}
        if any(c not in v.units for c in shares):
            shares = {}
        model.add_hint(v.admitted, 1 if shares else 0)
        for c, x in v.units.items():
            model.add_hint(x, shares.get(c, 0))
            model.add_hint(v.used[c], 1 if c in shares else 0)
        for k, y in v.size.items():
            model.add_hint(y, 1 if k == len(shares) else 0)
        for (a, b), pair in v.pairs.items():
            both = a in shares and b in shares
            model.add_hint(pair, 1 if both else 0)
            if (a, b) in v.reserve:
                model.add_hint(v.reserve[(a, b)], v.demand.get(len(shares), 0) if both else 0)
