"""Why a job the empty fleet cannot take is left out: each rule on a tiny fleet."""

from __future__ import annotations

import pytest

from volcano_global.simulation.left_out import reasons
from volcano_global.simulation.nodes import Fleet
from volcano_global.simulation.scenario import Scenario
from volcano_global.simulation.workload import TraceJob

FLEET = Fleet(
    Scenario.model_validate(
        {
            "clusters": [
                {
                    "name": "a",
                    "spec": {"nodeGroups": [{"count": 2, "gpusPerNode": 8, "gpuModel": "H100"}]},
                },
                {
                    "name": "b",
                    "spec": {"nodeGroups": [{"count": 1, "gpusPerNode": 4, "gpuModel": "A100"}]},
                },
            ]
        }
    )
)


@pytest.mark.parametrize(
    ("job", "why"),
    [
        (
            TraceJob("v", 0, pods=1, gpus_per_pod=1, duration_s=1, gpu_model="V100"),
            "no cluster has GPU model V100 (fleet: A100, H100)",
        ),
        (
            TraceJob("huge", 0, pods=5, gpus_per_pod=8, duration_s=1),
            "asks 40 GPUs, the fleet has 20",
        ),
        (
            TraceJob("fat", 0, pods=1, gpus_per_pod=12, duration_s=1),
            "pods of 12 GPUs, the largest node has 8",
        ),
        (
            TraceJob("whole", 0, pods=5, gpus_per_pod=4, duration_s=1),
            "asks 20 GPUs, may not split, the largest cluster has 16",
        ),
        (
            TraceJob(
                "links", 0, pods=5, gpus_per_pod=4, duration_s=1, splittable=True, max_clusters=2
            ),
            "fits only across links it would oversubscribe (or across more than its 2 clusters)",
        ),
    ],
)
def test_each_rule_names_the_number_that_breaks_it(job: TraceJob, why: str) -> None:
    assert reasons(FLEET, [job], frozenset({job.id})) == {job.id: why}
