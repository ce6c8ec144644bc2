"""An elastic job's resized shares keep the GPU model their pods run on: for a job that names
none it was chosen when the share was placed, and a resize that dropped it wrote NULL, which
the books replay off the first leaf of the name (possibly another model's)."""

from __future__ import annotations

import uuid

from volcano_global.db.models import ClusterShare
from volcano_global.services.scheduling.elastic import grown, shrunk
from volcano_global.solver.model import Share

EAST = uuid.uuid4()


def _current() -> list[ClusterShare]:
    return [
        ClusterShare(
            cluster_id=EAST, pods=4, gpus=32, units=4, domains={"gpu-east": 4}, gpu_model="H100"
        )
    ]


def test_a_resized_share_keeps_its_gpu_model() -> None:
    names = {EAST: "gpu-east"}
    (smaller,) = shrunk(_current(), names, {"gpu-east": 2})
    assert (smaller.pods, smaller.gpu_model) == (2, "H100")
    added = [Share("gpu-east", 2, 2, 16, (("gpu-east", 2),), "H100")]
    (larger,) = grown(_current(), names, added)
    assert (larger.pods, larger.gpu_model) == (6, "H100")
