"""All tables of the Global. Importing this package registers every model on `Base.metadata`."""

from volcano_global.db.models.clusters import Cluster, ClusterGpuCapacity, ClusterState
from volcano_global.db.models.copies import RUNNING_COPY, CopyState, DataCopy
from volcano_global.db.models.data import DataSourceClaimRow, DataSourceRow, JobCheckpointLocation
from volcano_global.db.models.events import Event, EventType
from volcano_global.db.models.inventory import (
    NODE_USE,
    NODES_FILLFACTOR,
    Node,
    NodeChange,
    NodeUse,
    TopologyDomain,
)
from volcano_global.db.models.jobs import ACTIVE_NAME_INDEX, TERMINAL_JOB_STATES, Job, JobState
from volcano_global.db.models.links import Link
from volcano_global.db.models.outbox import OutboxKind, OutboxMessage
from volcano_global.db.models.placements import (
    ClusterShare,
    LinkReservation,
    Placement,
    PlacementState,
)
from volcano_global.db.models.priority_classes import PriorityClassRow
from volcano_global.db.models.queues import Queue
from volcano_global.db.models.rounds import RoundSample, SchedulingRound
from volcano_global.db.models.tokens import ApiToken, TokenRole

__all__ = [
    "ACTIVE_NAME_INDEX",
    "NODES_FILLFACTOR",
    "NODE_USE",
    "RUNNING_COPY",
    "TERMINAL_JOB_STATES",
    "ApiToken",
    "Cluster",
    "ClusterGpuCapacity",
    "ClusterShare",
    "ClusterState",
    "CopyState",
    "DataCopy",
    "DataSourceClaimRow",
    "DataSourceRow",
    "Event",
    "EventType",
    "Job",
    "JobCheckpointLocation",
    "JobState",
    "Link",
    "LinkReservation",
    "Node",
    "NodeChange",
    "NodeUse",
    "OutboxKind",
    "OutboxMessage",
    "Placement",
    "PlacementState",
    "PriorityClassRow",
    "Queue",
    "RoundSample",
    "SchedulingRound",
    "TokenRole",
    "TopologyDomain",
]
