"""The traffic model: what a job sends across cluster boundaries when it is split.

A split job runs whole data-parallel replicas in each cluster part (tensor and pipeline
groups never cross a cluster). Per training step, the gradient all-reduce is hierarchical:

1. inside each of the k cluster parts, a reduce-scatter over the part's replicas;
2. between the parts, each part owns 1/k of the gradient and exchanges it directly with every
   other part: for every pair of parts (a, b), G/k bytes of reduce-scatter and G/k bytes of
   all-gather flow in each direction;
3. inside each part, an all-gather.

So a pair of clusters carries 2G/k bytes per step in each direction, and each part's boundary
carries 2(k-1)/k * G, the same as a ring all-reduce over k participants. G is the gradient of
the whole model in bytes (parameters x gradient bytes per parameter), times 1.5 for ZeRO-3 /
FSDP, which also all-gathers parameters. The exchange must finish within the share of the step
time the job tolerates for communication, tau = s * T. So the bandwidth a pair of clusters
must reserve in each direction is

    demand(k) = 2 * V / (k * tau),   V = 8 * f * P * b bits,   for k >= 2 clusters,

and the parts of a split job must be pairwise connected. `allreduce_gbps` below is V / tau
in Gbps; a job may also declare it directly (`global.volcano.sh/crossing-gbps`). Modelled, not
measured: actual NCCL algorithms, overlap with compute and congestion differ.
"""

from __future__ import annotations

from volcano_global.jobspec import Communication

OPTIMIZER_TRAFFIC_FACTOR = {"none": 1.0, "zero1": 1.0, "zero2": 1.0, "zero3": 1.5, "fsdp": 1.5}


def allreduce_gbps(communication: Communication) -> float:
    """V / tau in Gbps, or 0 when the plan lacks the model size or the step time."""
    if not communication.model_parameters or not communication.target_step_time_seconds:
        return 0.0
    factor = OPTIMIZER_TRAFFIC_FACTOR[communication.optimizer_sharding]
    bits = 8 * factor * communication.model_parameters * communication.gradient_bytes_per_parameter
    budget = communication.tolerated_communication_share * communication.target_step_time_seconds
    return bits / budget / 1e9


def pair_demand_gbps(allreduce: float, clusters: int) -> float:
    """Bandwidth each pair of a k-cluster split reserves, per direction."""
    return 0.0 if clusters < 2 else 2.0 * allreduce / clusters
