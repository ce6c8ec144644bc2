"""One training process of the torch.distributed test: build the groups from the injected
environment with the runtime helper, all-reduce over them, write what came back as JSON."""

from __future__ import annotations

import json
import sys
from datetime import timedelta

import torch
import torch.distributed as dist

from volcano_global.sdk import Runtime


def main(out: str) -> None:
    runtime = Runtime.from_env()
    groups = runtime.init_torch("gloo", timeout=timedelta(seconds=60))
    mine = runtime.my_groups()
    result: dict[str, object] = {"rank": runtime.rank, "groups": mine}
    for kind in ("tp", "dp"):
        value = torch.tensor([float(runtime.rank)])
        dist.all_reduce(value, group=groups[kind])
        result[f"{kind}_sum"] = value.item()
    value = torch.tensor([float(runtime.rank)])
    dist.all_reduce(value)
    result["world_sum"] = value.item()
    dist.barrier()
    dist.destroy_process_group()
    with open(out, "w") as handle:
        json.dump(result, handle)


if __name__ == "__main__":
    main(sys.argv[1])
