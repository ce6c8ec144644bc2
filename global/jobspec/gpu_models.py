"""GPU model names as the Global keeps them. GPU Feature Discovery labels a node
`nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3` (the product name, spaces as dashes); docs,
simulated clusters and most users say `H100`. Both enter here and leave as one name, so a job
pinned to either runs on nodes labelled with either: a job's `global.volcano.sh/gpu-model`
annotation and model `nodeSelector`, and a node's model (the agent's reading of its labels, and
what the Global stores from any agent).

Memory and form factor stay apart where they change what fits (a 40 GB A100 is not an 80 GB
one): the SXM part of 80 GB or more takes the bare name, other variants keep a suffix. A name
not in the table is kept as written (after trimming), so an unknown or custom label still
matches itself exactly; MIG slices (`...-MIG-1g.10gb`) are not whole GPUs and are never mapped.
The table is documented in docs/jobs.md ("GPU model names"). Pure."""

from __future__ import annotations

import re

# GFD product label (case-insensitive, spaces and underscores read as dashes) -> model.
KNOWN: dict[str, str] = {
    # Blackwell
    "NVIDIA-B200": "B200",
    "NVIDIA-B100": "B100",
    "NVIDIA-GB200": "GB200",
    "NVIDIA-B300": "B300",
    # Hopper
    "NVIDIA-H200": "H200",
    "NVIDIA-H200-141GB-HBM3e": "H200",
    "NVIDIA-H200-NVL": "H200-NVL",
    "NVIDIA-GH200-480GB": "GH200",
    "NVIDIA-H100-80GB-HBM3": "H100",
    "NVIDIA-H100-SXM5-80GB": "H100",
    "NVIDIA-H100-PCIe": "H100-PCIe",
    "NVIDIA-H100-NVL": "H100-NVL",
    "NVIDIA-H800": "H800",
    "NVIDIA-H800-80GB-HBM3": "H800",
    "NVIDIA-H20": "H20",
    # Ampere
    "NVIDIA-A100-SXM4-80GB": "A100",
    "NVIDIA-A100-80GB-PCIe": "A100-PCIe",
    "NVIDIA-A100-SXM4-40GB": "A100-40GB",
    "NVIDIA-A100-PCIE-40GB": "A100-40GB-PCIe",
    "NVIDIA-A800-SXM4-80GB": "A800",
    "NVIDIA-A10G": "A10G",
    "NVIDIA-A10": "A10",
    "NVIDIA-A30": "A30",
    # Ada
    "NVIDIA-L40S": "L40S",
    "NVIDIA-L40": "L40",
    "NVIDIA-L4": "L4",
    # Volta, Turing
    "Tesla-V100-SXM2-32GB": "V100",
    "Tesla-V100-SXM2-16GB": "V100-16GB",
    "Tesla-V100-PCIE-32GB": "V100-PCIe",
    "Tesla-T4": "T4",
    # AMD (amd.com/gpu.product-name)
    "AMD-Instinct-MI300X": "MI300X",
    "AMD-Instinct-MI250X": "MI250X",
    "AMD-Instinct-MI210": "MI210",
}

_SEPARATORS = re.compile(r"[\s_]+")
_BY_KEY = {_SEPARATORS.sub("-", k).casefold(): v for k, v in KNOWN.items()}


def canonical_model(name: str) -> str:
    """The Global's name for a GPU model: the table's, else `name` trimmed."""
    trimmed = name.strip()
    return _BY_KEY.get(_SEPARATORS.sub("-", trimmed).casefold(), trimmed)


def canonical_or_none(name: str | None) -> str | None:
    """`canonical_model`, keeping None and '' as they are (no model)."""
    return canonical_model(name) if name else name
