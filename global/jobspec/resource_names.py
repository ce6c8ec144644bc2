"""Resource names a pod may ask for, and the refusal of a misspelt accelerator: Kubernetes
accepts any extended resource name, so `nvidia.com/gpus: 8` would be stored as a job asking
for no GPU at all and wait for a node that never offers the typo."""

from __future__ import annotations

import difflib
import re

from volcano_global.jobspec.accelerators import AMD_GPU, NVIDIA_GPU, VOLCANO_VGPU, is_accelerator

# Names to suggest (Ascend names are chips, each its own: their siblings such as
# `huawei.com/Ascend910B-memory` are as close to one as a typo would be).
SUGGESTED = (NVIDIA_GPU, AMD_GPU, VOLCANO_VGPU, "cpu", "memory")
# Vendor domains whose names the Global knows: another name there is a typo or a device the
# Global does not count. What the device plugins also offer beside whole devices is accepted.
_VENDOR = re.compile(r"(nvidia\.com|amd\.com)/.*")
_KNOWN = re.compile(
    r"cpu|memory|ephemeral-storage|pods|hugepages-.+"  # Kubernetes' own
    r"|nvidia\.com/(mig-[0-9]+g\.[0-9]+gb(\.[a-z0-9+]+)?|gpu\.shared)"  # MIG, time-slicing
    r"|volcano\.sh/vgpu-(memory|memory-percentage|cores)"  # vGPU slices of a GPU
)


def unknown_resource(name: str) -> str | None:
    """Why a requested resource name is refused (None: accepted): a name in a GPU vendor's
    domain the Global does not know, or any name closer to a known GPU resource than a typo
    apart (`nvidia.com/gpus`, `nvidia.con/gpu`), with the nearest known name."""
    if is_accelerator(name) or _KNOWN.fullmatch(name):
        return None
    close = difflib.get_close_matches(name, SUGGESTED, n=1, cutoff=0.85)
    if not close and not _VENDOR.fullmatch(name):
        return None
    nearest = close or difflib.get_close_matches(name, SUGGESTED, n=1, cutoff=0.0)
    hint = (
        f" (GPUs are asked for as {NVIDIA_GPU}, {AMD_GPU}, {VOLCANO_VGPU} or huawei.com/<chip>)"
        if "/" in nearest[0]
        else ""
    )
    return f"unknown resource {name!r}: did you mean {nearest[0]}?{hint}"
