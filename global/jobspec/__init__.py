"""The unified job API's parser: a Volcano Job or HyperJob document in, a normalized gang out.

Pure: no database, no I/O. Errors name the field path (`spec.tasks[1].replicas: must be >= 1`).
"""

from volcano_global.jobspec.documents import load_document
from volcano_global.jobspec.model import (
    Communication,
    Gang,
    Lifecycle,
    LifecyclePolicy,
    NormalizedJob,
    PodResources,
    SplitPolicy,
    SubJob,
    TaskGang,
    TopologyRequirement,
)
from volcano_global.jobspec.normalize import ParseOptions, normalize_job

__all__ = [
    "Communication",
    "Gang",
    "Lifecycle",
    "LifecyclePolicy",
    "NormalizedJob",
    "ParseOptions",
    "PodResources",
    "SplitPolicy",
    "SubJob",
    "TaskGang",
    "TopologyRequirement",
    "load_document",
    "normalize_job",
]
