"""The training-framework SDK: describe a run as a parallelism plan and get its Volcano Job
(`plan`), and, inside the container, the rank layout and torch.distributed groups (`runtime`).
Pure: no database, no server; torch is imported only by `Runtime.init_torch`."""

from volcano_global.sdk.plan import Dataset, ParallelPlan, PlanFacts, job_document
from volcano_global.sdk.runtime import Layout, LayoutError, ReportError, Runtime, Share

__all__ = [
    "Dataset",
    "Layout",
    "LayoutError",
    "ParallelPlan",
    "PlanFacts",
    "ReportError",
    "Runtime",
    "Share",
    "job_document",
]
