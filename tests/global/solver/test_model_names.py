"""A job pinned to a GPU model the fleet does not have says so, and names the fleet's model
when it is the same GPU under another name (GPU Feature Discovery's `NVIDIA-H100-80GB-HBM3`
for the fleet's `H100`), instead of "the most any cluster can take is 0 pods" (issue 37)."""

from __future__ import annotations

from tests.solver_support.instances import cluster, job
from volcano_global.solver import Policy, Snapshot, SolveOptions, solve
from volcano_global.solver.model_names import fleet_names_for, same_family

FLEET = (cluster("east", 4, model="H100"), cluster("west", 4, model="A100"))


def reason(gpu_model: str) -> str | None:
    snapshot = Snapshot(clusters=FLEET, jobs=(job("train", 2, gpu_model=gpu_model),))
    return solve(snapshot, Policy.CPSAT, SolveOptions(time_limit_s=2.0)).job("train").reason


def test_a_gfd_product_name_points_to_the_fleets_name() -> None:
    assert reason("NVIDIA-H100-80GB-HBM3") == (
        "needs 2 pods x 8 NVIDIA-H100-80GB-HBM3 (16 GPUs); no cluster has GPU model "
        "NVIDIA-H100-80GB-HBM3 (fleet: A100, H100); the fleet calls it H100: pin that "
        "(global.volcano.sh/gpu-model or the nodeSelector)"
    )


def test_a_model_nobody_has_lists_the_fleet() -> None:
    assert reason("L40S") == (
        "needs 2 pods x 8 L40S (16 GPUs); no cluster has GPU model L40S (fleet: A100, H100)"
    )


def test_families() -> None:
    assert same_family("H100", "NVIDIA-H100-80GB-HBM3")
    assert same_family("nvidia-a100-sxm4-80gb", "A100")
    assert not same_family("A100-40GB", "A100-80GB")
    assert not same_family("H100", "H800")
    assert fleet_names_for("NVIDIA-A100-SXM4-80GB", ["A100", "H100"]) == ["A100"]
