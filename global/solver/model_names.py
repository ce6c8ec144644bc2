"""GPU model names as two sources spell them: GPU Feature Discovery's product label
(`nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3`) and the short names of simulated clusters,
annotations and docs (`H100`). The Global matches models exactly (an 80 GB and a 40 GB A100
are not interchangeable); this only finds the fleet's name a job probably meant, for the
reason it waits. Pure."""

from __future__ import annotations

import re
from collections.abc import Iterable

_VENDOR = re.compile(r"^(NVIDIA|Tesla|AMD|Instinct)[-_ ]+", re.IGNORECASE)


def tokens(model: str) -> set[str]:
    """The words of a model name, case-folded, vendor prefix left out."""
    return {t for t in re.split(r"[-_ ]+", _VENDOR.sub("", model).casefold()) if t}


def same_family(a: str, b: str) -> bool:
    """Whether one name's words are all in the other's (`H100` and `NVIDIA-H100-80GB-HBM3`;
    not `A100-40GB` and `A100-80GB`)."""
    ta, tb = tokens(a), tokens(b)
    return bool(ta and tb) and (ta <= tb or tb <= ta)


def fleet_names_for(model: str, fleet: Iterable[str]) -> list[str]:
    """The fleet's models that are `model` under another name."""
    return sorted(m for m in set(fleet) if m != model and same_family(model, m))
