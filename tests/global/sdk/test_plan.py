"""The SDK's plan: validation, the derived numbers against hand-computed cases, and the job
document the Global accepts."""

from __future__ import annotations

import httpx
import pytest
import yaml
from pydantic import ValidationError

from volcano_global.jobspec import ParseOptions, normalize_job
from volcano_global.sdk import Dataset, ParallelPlan, job_document

# Llama-class 70B: TP=8 inside a node, PP=4, DP=16 -> 512 GPUs; bf16 gradients (2 bytes);
# a 12 s step of which 10% may go to the cross-cluster exchange.
LLAMA_70B = ParallelPlan(
    tensor_parallel=8,
    pipeline_parallel=4,
    data_parallel=16,
    model_parameters=70e9,
    gradient_bytes_per_parameter=2,
    target_step_time_seconds=12,
)


def test_the_70b_plan_by_hand() -> None:
    facts = LLAMA_70B.facts()
    assert (facts.world_gpus, facts.world_pods) == (512, 64)
    assert (facts.unit_gpus, facts.unit_pods) == (32, 4)  # one DP replica: TP x PP
    assert facts.gradient_bytes == 140e9  # 70e9 parameters x 2 bytes
    assert facts.communication_budget_s == pytest.approx(1.2)  # tau = 0.1 x 12 s
    # V = 8 bits x 140e9 B = 1.12e12 bits; V / tau = 933.3 Gbps.
    assert facts.allreduce_gbps == pytest.approx(1.12e12 / 1.2 / 1e9)
    # Each pair of a k-way split carries 2V/k per step: 2 x 933.3 / k.
    assert facts.crossing_gbps[2] == pytest.approx(933.33, abs=0.01)
    assert facts.crossing_gbps[3] == pytest.approx(622.22, abs=0.01)
    assert facts.crossing_gbps[4] == pytest.approx(466.67, abs=0.01)


def test_fsdp_moves_half_again_as_much() -> None:
    fsdp = LLAMA_70B.model_copy(update={"optimizer_sharding": "fsdp"})
    assert fsdp.facts().allreduce_gbps == pytest.approx(1.5 * LLAMA_70B.facts().allreduce_gbps)


def test_without_model_size_or_step_time_nothing_is_needed() -> None:
    plan = ParallelPlan(tensor_parallel=8, data_parallel=2)
    assert plan.facts().allreduce_gbps == 0
    assert plan.facts().crossing_gbps == {2: 0.0}


@pytest.mark.parametrize(
    ("sizes", "message"),
    [
        ({"tensor_parallel": 16, "data_parallel": 2}, "tensorParallel (16) must divide gpusPerPod"),
        (
            {"tensor_parallel": 4, "pipeline_parallel": 3, "data_parallel": 2},
            "a data-parallel replica (TP x CP x PP = 12 GPUs) must be whole pods of 8",
        ),
        (
            {"tensor_parallel": 8, "data_parallel": 6, "expert_parallel": 4},
            "expertParallel (4) must divide dataParallel (6)",
        ),
        ({"tensor_parallel": 8, "data_parallel": 0}, "greater than or equal to 1"),
    ],
)
def test_invalid_plans_say_why(sizes: dict[str, int], message: str) -> None:
    with pytest.raises(ValidationError, match=message.replace("(", r"\(").replace(")", r"\)")):
        ParallelPlan(**sizes)


def test_the_document_is_a_job_the_parser_accepts_with_the_plans_unit() -> None:
    plan = LLAMA_70B.model_copy(update={"replica_in_tier1": True})
    doc = job_document(
        plan,
        name="llama-70b",
        image="nemo:25.02",
        namespace="llm",
        gpu_model="H100",
        max_clusters=2,
        queue="llm",
    )
    task = doc["spec"]["tasks"][0]
    assert task["replicas"] == 64
    assert doc["spec"]["minAvailable"] == 64
    assert task["partitionPolicy"] == {
        "totalPartitions": 16,
        "partitionSize": 4,
        "networkTopology": {"mode": "hard", "highestTierAllowed": 1},
    }
    job = normalize_job(doc, ParseOptions())
    assert job.split_policy.mode == "auto"
    assert job.split_policy.unit_pods == 4
    assert job.split_policy.max_clusters == 2
    assert job.communication == plan.communication()
    assert job.gang.total_gpus == 512
    assert job.gang.gpu_model == "H100"
    declared = yaml.safe_load(doc["metadata"]["annotations"]["global.volcano.sh/communication"])
    assert declared["tensorParallel"] == 8
    assert declared["dataParallel"] == 16


async def test_the_global_takes_the_document(api: httpx.AsyncClient) -> None:
    doc = job_document(LLAMA_70B, name="llama-70b", image="nemo:25.02")
    response = await api.post("/api/v1/jobs", json=doc)
    assert response.status_code == 201, response.text
    assert response.json()["splitPolicy"]["unitPods"] == 4


def test_the_datasets_and_checkpoint_ride_in_the_declaration() -> None:
    plan = LLAMA_70B.model_copy(
        update={
            "datasets": (
                Dataset(name="corpus-v3", size="40Ti", read_gbps=50),
                Dataset(name="eval-set", size=10**12),
            ),
            "checkpoint_size": "2Ti",
        }
    )
    facts = plan.facts()
    assert facts.dataset_bytes == 40 * 2**40 + 10**12
    assert facts.checkpoint_bytes == 2 * 2**40
    job = normalize_job(job_document(plan, name="llama", image="i"), ParseOptions())
    assert job.communication is not None
    assert [(d.name, d.size_bytes, d.read_gbps) for d in job.communication.datasets] == [
        ("corpus-v3", 40 * 2**40, 50.0),
        ("eval-set", 10**12, None),
    ]
    assert job.communication.checkpoint is not None
    assert job.communication.checkpoint.size_bytes == 2 * 2**40
    with pytest.raises(ValidationError, match="invalid quantity"):
        Dataset(name="corpus-v3", size="forty")
    # A plan without data declares none: its annotation is as before.
    assert (
        "datasets"
        not in job_document(LLAMA_70B, name="l", image="i")["metadata"]["annotations"][
            "global.volcano.sh/communication"
        ]
    )
