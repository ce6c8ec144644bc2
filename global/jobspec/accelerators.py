"""The accelerator resources a pod can ask for and a node can offer, as their device plugins
name them, and the model each one is known by: the Global counts every one of them as GPUs.

- `nvidia.com/gpu` (NVIDIA's device plugin), model from the `nvidia.com/gpu.product` label
  (GPU feature discovery);
- `amd.com/gpu` (AMD's device plugin), model from the `amd.com/gpu.product-name` label (its
  node labeller; older labellers write `beta.amd.com/gpu.product-name`);
- Huawei Ascend NPUs, `huawei.com/Ascend910`, `Ascend910A`, `Ascend910B2`, `Ascend910B4-1`,
  `Ascend910C`, `Ascend310`, `Ascend310P`, ... (Ascend's and HAMi's device plugins): the name is
  the chip, so it is the model. Their `-memory` and `-core` siblings, static vNPU templates
  (`Ascend910-2c`, `Ascend310P-4c.3cpu`) and `huawei.com/npu-core` are not whole devices;
- Volcano vGPU, `volcano.sh/vgpu-number` (volcano-vgpu-device-plugin on NVIDIA GPUs). A pod's
  vGPUs each sit on a different physical GPU, so a pod asking for N vGPUs is counted as N GPUs
  and its GPUs as in use: the Global plans whole GPUs and never counts on sharing one, which
  may leave a GPU's spare slices unused but never places more than fits.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from volcano_global.jobspec.gpu_models import canonical_model

NVIDIA_GPU = "nvidia.com/gpu"
AMD_GPU = "amd.com/gpu"
VOLCANO_VGPU = "volcano.sh/vgpu-number"
NVIDIA_MODEL_LABEL = "nvidia.com/gpu.product"
AMD_MODEL_LABELS = ("amd.com/gpu.product-name", "beta.amd.com/gpu.product-name")

# A chip name (digits, then letters and digits) with at most a numeric variant (`910B4-1`):
# this leaves out `Ascend910B2-memory`, `Ascend910-2c`, `Ascend310P-4c.3cpu` and `AscendReal`.
_ASCEND = re.compile(r"huawei\.com/(Ascend[0-9]+[A-Za-z0-9]*(?:-[0-9]+)?)")

_MODEL_LABELS: dict[str, tuple[str, ...]] = {
    NVIDIA_GPU: (NVIDIA_MODEL_LABEL,),
    VOLCANO_VGPU: (NVIDIA_MODEL_LABEL,),
    AMD_GPU: AMD_MODEL_LABELS,
}


def is_accelerator(resource: str) -> bool:
    return resource in _MODEL_LABELS or _ASCEND.fullmatch(resource) is not None


def resource_model(resource: str) -> str | None:
    """The model a resource name itself implies (an Ascend chip), else None: a pod asking for
    `huawei.com/Ascend910B2` can only run where that chip is."""
    match = _ASCEND.fullmatch(resource)
    return match.group(1) if match else None


def is_npu_model(model: str) -> bool:
    """Whether a model is an Ascend chip (what an Ascend node's model always is)."""
    return resource_model(f"huawei.com/{model}") is not None


def model_labels(resource: str) -> tuple[str, ...]:
    """Node labels that name the model of devices of this resource, first found wins."""
    return _MODEL_LABELS.get(resource, ())


def node_model(resource: str, labels: Mapping[str, str]) -> str:
    """A node's accelerator model: what its resource implies, else its labels say, as the
    Global names it (`gpu_models`; '' when unknown)."""
    implied = resource_model(resource)
    if implied:
        return implied
    label = next((labels[k] for k in model_labels(resource) if labels.get(k)), "")
    return canonical_model(label) if label else ""


def template_model(node_selector: Mapping[str, object], resource: str | None) -> str | None:
    """The model a pod template pins: its resource's own (Ascend), else its `nodeSelector` on
    a model label of its resource (of any vendor when it asks for no accelerator)."""
    implied = resource_model(resource) if resource else None
    if implied:
        return implied
    keys = model_labels(resource) if resource else _ANY_MODEL_LABEL
    return next(
        (
            canonical_model(str(node_selector[k]))
            for k in keys
            if isinstance(node_selector.get(k), str)
        ),
        None,
    )


_ANY_MODEL_LABEL = (NVIDIA_MODEL_LABEL, *AMD_MODEL_LABELS)
