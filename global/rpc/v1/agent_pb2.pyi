from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class SharePhase(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SHARE_PHASE_UNSPECIFIED: _ClassVar[SharePhase]
    SHARE_PHASE_ACCEPTED: _ClassVar[SharePhase]
    SHARE_PHASE_RUNNING: _ClassVar[SharePhase]
    SHARE_PHASE_SUCCEEDED: _ClassVar[SharePhase]
    SHARE_PHASE_FAILED: _ClassVar[SharePhase]
    SHARE_PHASE_CANCELLED: _ClassVar[SharePhase]
    SHARE_PHASE_RESTARTING: _ClassVar[SharePhase]
    SHARE_PHASE_STAGING: _ClassVar[SharePhase]

class CopyPhase(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    COPY_PHASE_UNSPECIFIED: _ClassVar[CopyPhase]
    COPY_PHASE_COPYING: _ClassVar[CopyPhase]
    COPY_PHASE_SUCCEEDED: _ClassVar[CopyPhase]
    COPY_PHASE_FAILED: _ClassVar[CopyPhase]
    COPY_PHASE_STOPPED: _ClassVar[CopyPhase]

class CopyCause(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    COPY_CAUSE_UNSPECIFIED: _ClassVar[CopyCause]
    COPY_CAUSE_DESTINATION: _ClassVar[CopyCause]
    COPY_CAUSE_NAMESPACE_REFUSED: _ClassVar[CopyCause]
    COPY_CAUSE_NAMESPACE_MISSING: _ClassVar[CopyCause]
    COPY_CAUSE_FORBIDDEN: _ClassVar[CopyCause]
SHARE_PHASE_UNSPECIFIED: SharePhase
SHARE_PHASE_ACCEPTED: SharePhase
SHARE_PHASE_RUNNING: SharePhase
SHARE_PHASE_SUCCEEDED: SharePhase
SHARE_PHASE_FAILED: SharePhase
SHARE_PHASE_CANCELLED: SharePhase
SHARE_PHASE_RESTARTING: SharePhase
SHARE_PHASE_STAGING: SharePhase
COPY_PHASE_UNSPECIFIED: CopyPhase
COPY_PHASE_COPYING: CopyPhase
COPY_PHASE_SUCCEEDED: CopyPhase
COPY_PHASE_FAILED: CopyPhase
COPY_PHASE_STOPPED: CopyPhase
COPY_CAUSE_UNSPECIFIED: CopyCause
COPY_CAUSE_DESTINATION: CopyCause
COPY_CAUSE_NAMESPACE_REFUSED: CopyCause
COPY_CAUSE_NAMESPACE_MISSING: CopyCause
COPY_CAUSE_FORBIDDEN: CopyCause

class AgentMessage(_message.Message):
    __slots__ = ("hello", "snapshot", "delta", "heartbeat", "job_status", "shares", "data", "copy_report")
    HELLO_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_FIELD_NUMBER: _ClassVar[int]
    DELTA_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_FIELD_NUMBER: _ClassVar[int]
    JOB_STATUS_FIELD_NUMBER: _ClassVar[int]
    SHARES_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    COPY_REPORT_FIELD_NUMBER: _ClassVar[int]
    hello: Hello
    snapshot: InventorySnapshot
    delta: InventoryDelta
    heartbeat: Heartbeat
    job_status: JobStatusReport
    shares: ShareInventory
    data: DataPresence
    copy_report: DataCopyReport
    def __init__(self, hello: _Optional[_Union[Hello, _Mapping]] = ..., snapshot: _Optional[_Union[InventorySnapshot, _Mapping]] = ..., delta: _Optional[_Union[InventoryDelta, _Mapping]] = ..., heartbeat: _Optional[_Union[Heartbeat, _Mapping]] = ..., job_status: _Optional[_Union[JobStatusReport, _Mapping]] = ..., shares: _Optional[_Union[ShareInventory, _Mapping]] = ..., data: _Optional[_Union[DataPresence, _Mapping]] = ..., copy_report: _Optional[_Union[DataCopyReport, _Mapping]] = ...) -> None: ...

class GlobalMessage(_message.Message):
    __slots__ = ("welcome", "ack", "resync", "assignment", "cancellation", "report_ack", "copy", "copy_cancellation")
    WELCOME_FIELD_NUMBER: _ClassVar[int]
    ACK_FIELD_NUMBER: _ClassVar[int]
    RESYNC_FIELD_NUMBER: _ClassVar[int]
    ASSIGNMENT_FIELD_NUMBER: _ClassVar[int]
    CANCELLATION_FIELD_NUMBER: _ClassVar[int]
    REPORT_ACK_FIELD_NUMBER: _ClassVar[int]
    COPY_FIELD_NUMBER: _ClassVar[int]
    COPY_CANCELLATION_FIELD_NUMBER: _ClassVar[int]
    welcome: Welcome
    ack: Ack
    resync: ResyncRequest
    assignment: ShareAssignment
    cancellation: ShareCancellation
    report_ack: ReportAck
    copy: DataCopyAssignment
    copy_cancellation: DataCopyCancellation
    def __init__(self, welcome: _Optional[_Union[Welcome, _Mapping]] = ..., ack: _Optional[_Union[Ack, _Mapping]] = ..., resync: _Optional[_Union[ResyncRequest, _Mapping]] = ..., assignment: _Optional[_Union[ShareAssignment, _Mapping]] = ..., cancellation: _Optional[_Union[ShareCancellation, _Mapping]] = ..., report_ack: _Optional[_Union[ReportAck, _Mapping]] = ..., copy: _Optional[_Union[DataCopyAssignment, _Mapping]] = ..., copy_cancellation: _Optional[_Union[DataCopyCancellation, _Mapping]] = ...) -> None: ...

class Hello(_message.Message):
    __slots__ = ("cluster", "agent_version", "last_acked_seq", "source", "data_copies")
    CLUSTER_FIELD_NUMBER: _ClassVar[int]
    AGENT_VERSION_FIELD_NUMBER: _ClassVar[int]
    LAST_ACKED_SEQ_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    DATA_COPIES_FIELD_NUMBER: _ClassVar[int]
    cluster: str
    agent_version: str
    last_acked_seq: int
    source: str
    data_copies: bool
    def __init__(self, cluster: _Optional[str] = ..., agent_version: _Optional[str] = ..., last_acked_seq: _Optional[int] = ..., source: _Optional[str] = ..., data_copies: bool = ...) -> None: ...

class Welcome(_message.Message):
    __slots__ = ("applied_seq", "snapshot_required", "heartbeat_interval_seconds", "share_phases", "share_inventory_interval_seconds", "data_presence", "data_copies", "node_usages")
    APPLIED_SEQ_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_REQUIRED_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_INTERVAL_SECONDS_FIELD_NUMBER: _ClassVar[int]
    SHARE_PHASES_FIELD_NUMBER: _ClassVar[int]
    SHARE_INVENTORY_INTERVAL_SECONDS_FIELD_NUMBER: _ClassVar[int]
    DATA_PRESENCE_FIELD_NUMBER: _ClassVar[int]
    DATA_COPIES_FIELD_NUMBER: _ClassVar[int]
    NODE_USAGES_FIELD_NUMBER: _ClassVar[int]
    applied_seq: int
    snapshot_required: bool
    heartbeat_interval_seconds: int
    share_phases: _containers.RepeatedScalarFieldContainer[SharePhase]
    share_inventory_interval_seconds: int
    data_presence: bool
    data_copies: bool
    node_usages: bool
    def __init__(self, applied_seq: _Optional[int] = ..., snapshot_required: bool = ..., heartbeat_interval_seconds: _Optional[int] = ..., share_phases: _Optional[_Iterable[_Union[SharePhase, str]]] = ..., share_inventory_interval_seconds: _Optional[int] = ..., data_presence: bool = ..., data_copies: bool = ..., node_usages: bool = ...) -> None: ...

class Taint(_message.Message):
    __slots__ = ("key", "value", "effect")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    EFFECT_FIELD_NUMBER: _ClassVar[int]
    key: str
    value: str
    effect: str
    def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ..., effect: _Optional[str] = ...) -> None: ...

class Node(_message.Message):
    __slots__ = ("name", "gpu_model", "gpu_allocatable", "gpu_used", "cpu_allocatable_millis", "cpu_used_millis", "memory_allocatable_bytes", "memory_used_bytes", "ready", "schedulable", "domain", "labels", "taints")
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    GPU_MODEL_FIELD_NUMBER: _ClassVar[int]
    GPU_ALLOCATABLE_FIELD_NUMBER: _ClassVar[int]
    GPU_USED_FIELD_NUMBER: _ClassVar[int]
    CPU_ALLOCATABLE_MILLIS_FIELD_NUMBER: _ClassVar[int]
    CPU_USED_MILLIS_FIELD_NUMBER: _ClassVar[int]
    MEMORY_ALLOCATABLE_BYTES_FIELD_NUMBER: _ClassVar[int]
    MEMORY_USED_BYTES_FIELD_NUMBER: _ClassVar[int]
    READY_FIELD_NUMBER: _ClassVar[int]
    SCHEDULABLE_FIELD_NUMBER: _ClassVar[int]
    DOMAIN_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    TAINTS_FIELD_NUMBER: _ClassVar[int]
    name: str
    gpu_model: str
    gpu_allocatable: int
    gpu_used: int
    cpu_allocatable_millis: int
    cpu_used_millis: int
    memory_allocatable_bytes: int
    memory_used_bytes: int
    ready: bool
    schedulable: bool
    domain: str
    labels: _containers.ScalarMap[str, str]
    taints: _containers.RepeatedCompositeFieldContainer[Taint]
    def __init__(self, name: _Optional[str] = ..., gpu_model: _Optional[str] = ..., gpu_allocatable: _Optional[int] = ..., gpu_used: _Optional[int] = ..., cpu_allocatable_millis: _Optional[int] = ..., cpu_used_millis: _Optional[int] = ..., memory_allocatable_bytes: _Optional[int] = ..., memory_used_bytes: _Optional[int] = ..., ready: bool = ..., schedulable: bool = ..., domain: _Optional[str] = ..., labels: _Optional[_Mapping[str, str]] = ..., taints: _Optional[_Iterable[_Union[Taint, _Mapping]]] = ...) -> None: ...

class Domain(_message.Message):
    __slots__ = ("name", "tier", "tier_name", "parent")
    NAME_FIELD_NUMBER: _ClassVar[int]
    TIER_FIELD_NUMBER: _ClassVar[int]
    TIER_NAME_FIELD_NUMBER: _ClassVar[int]
    PARENT_FIELD_NUMBER: _ClassVar[int]
    name: str
    tier: int
    tier_name: str
    parent: str
    def __init__(self, name: _Optional[str] = ..., tier: _Optional[int] = ..., tier_name: _Optional[str] = ..., parent: _Optional[str] = ...) -> None: ...

class InventorySnapshot(_message.Message):
    __slots__ = ("seq", "domains", "nodes")
    SEQ_FIELD_NUMBER: _ClassVar[int]
    DOMAINS_FIELD_NUMBER: _ClassVar[int]
    NODES_FIELD_NUMBER: _ClassVar[int]
    seq: int
    domains: _containers.RepeatedCompositeFieldContainer[Domain]
    nodes: _containers.RepeatedCompositeFieldContainer[Node]
    def __init__(self, seq: _Optional[int] = ..., domains: _Optional[_Iterable[_Union[Domain, _Mapping]]] = ..., nodes: _Optional[_Iterable[_Union[Node, _Mapping]]] = ...) -> None: ...

class NodeUsage(_message.Message):
    __slots__ = ("name", "gpu_used", "cpu_used_millis", "memory_used_bytes")
    NAME_FIELD_NUMBER: _ClassVar[int]
    GPU_USED_FIELD_NUMBER: _ClassVar[int]
    CPU_USED_MILLIS_FIELD_NUMBER: _ClassVar[int]
    MEMORY_USED_BYTES_FIELD_NUMBER: _ClassVar[int]
    name: str
    gpu_used: int
    cpu_used_millis: int
    memory_used_bytes: int
    def __init__(self, name: _Optional[str] = ..., gpu_used: _Optional[int] = ..., cpu_used_millis: _Optional[int] = ..., memory_used_bytes: _Optional[int] = ...) -> None: ...

class InventoryDelta(_message.Message):
    __slots__ = ("seq", "node_upserts", "node_removals", "domain_upserts", "domain_removals", "node_usages")
    SEQ_FIELD_NUMBER: _ClassVar[int]
    NODE_UPSERTS_FIELD_NUMBER: _ClassVar[int]
    NODE_REMOVALS_FIELD_NUMBER: _ClassVar[int]
    DOMAIN_UPSERTS_FIELD_NUMBER: _ClassVar[int]
    DOMAIN_REMOVALS_FIELD_NUMBER: _ClassVar[int]
    NODE_USAGES_FIELD_NUMBER: _ClassVar[int]
    seq: int
    node_upserts: _containers.RepeatedCompositeFieldContainer[Node]
    node_removals: _containers.RepeatedScalarFieldContainer[str]
    domain_upserts: _containers.RepeatedCompositeFieldContainer[Domain]
    domain_removals: _containers.RepeatedScalarFieldContainer[str]
    node_usages: _containers.RepeatedCompositeFieldContainer[NodeUsage]
    def __init__(self, seq: _Optional[int] = ..., node_upserts: _Optional[_Iterable[_Union[Node, _Mapping]]] = ..., node_removals: _Optional[_Iterable[str]] = ..., domain_upserts: _Optional[_Iterable[_Union[Domain, _Mapping]]] = ..., domain_removals: _Optional[_Iterable[str]] = ..., node_usages: _Optional[_Iterable[_Union[NodeUsage, _Mapping]]] = ...) -> None: ...

class Heartbeat(_message.Message):
    __slots__ = ("sent_unix_millis",)
    SENT_UNIX_MILLIS_FIELD_NUMBER: _ClassVar[int]
    sent_unix_millis: int
    def __init__(self, sent_unix_millis: _Optional[int] = ...) -> None: ...

class Ack(_message.Message):
    __slots__ = ("seq",)
    SEQ_FIELD_NUMBER: _ClassVar[int]
    seq: int
    def __init__(self, seq: _Optional[int] = ...) -> None: ...

class ResyncRequest(_message.Message):
    __slots__ = ("reason", "applied_seq")
    REASON_FIELD_NUMBER: _ClassVar[int]
    APPLIED_SEQ_FIELD_NUMBER: _ClassVar[int]
    reason: str
    applied_seq: int
    def __init__(self, reason: _Optional[str] = ..., applied_seq: _Optional[int] = ...) -> None: ...

class ShareAssignment(_message.Message):
    __slots__ = ("placement_id", "generation", "job_uid", "job_name", "namespace", "pods", "rank_offset", "manifest_json", "gpus_per_pod", "gpu_model", "domains", "duration_seconds", "world_pods", "cluster_index", "cluster_count", "rendezvous_address", "member_job_name", "job_token", "queue_json", "staging")
    class DomainsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    PLACEMENT_ID_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    JOB_UID_FIELD_NUMBER: _ClassVar[int]
    JOB_NAME_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    PODS_FIELD_NUMBER: _ClassVar[int]
    RANK_OFFSET_FIELD_NUMBER: _ClassVar[int]
    MANIFEST_JSON_FIELD_NUMBER: _ClassVar[int]
    GPUS_PER_POD_FIELD_NUMBER: _ClassVar[int]
    GPU_MODEL_FIELD_NUMBER: _ClassVar[int]
    DOMAINS_FIELD_NUMBER: _ClassVar[int]
    DURATION_SECONDS_FIELD_NUMBER: _ClassVar[int]
    WORLD_PODS_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_INDEX_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_COUNT_FIELD_NUMBER: _ClassVar[int]
    RENDEZVOUS_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    MEMBER_JOB_NAME_FIELD_NUMBER: _ClassVar[int]
    JOB_TOKEN_FIELD_NUMBER: _ClassVar[int]
    QUEUE_JSON_FIELD_NUMBER: _ClassVar[int]
    STAGING_FIELD_NUMBER: _ClassVar[int]
    placement_id: str
    generation: int
    job_uid: str
    job_name: str
    namespace: str
    pods: int
    rank_offset: int
    manifest_json: str
    gpus_per_pod: int
    gpu_model: str
    domains: _containers.ScalarMap[str, int]
    duration_seconds: float
    world_pods: int
    cluster_index: int
    cluster_count: int
    rendezvous_address: str
    member_job_name: str
    job_token: str
    queue_json: str
    staging: _containers.RepeatedCompositeFieldContainer[StagingItem]
    def __init__(self, placement_id: _Optional[str] = ..., generation: _Optional[int] = ..., job_uid: _Optional[str] = ..., job_name: _Optional[str] = ..., namespace: _Optional[str] = ..., pods: _Optional[int] = ..., rank_offset: _Optional[int] = ..., manifest_json: _Optional[str] = ..., gpus_per_pod: _Optional[int] = ..., gpu_model: _Optional[str] = ..., domains: _Optional[_Mapping[str, int]] = ..., duration_seconds: _Optional[float] = ..., world_pods: _Optional[int] = ..., cluster_index: _Optional[int] = ..., cluster_count: _Optional[int] = ..., rendezvous_address: _Optional[str] = ..., member_job_name: _Optional[str] = ..., job_token: _Optional[str] = ..., queue_json: _Optional[str] = ..., staging: _Optional[_Iterable[_Union[StagingItem, _Mapping]]] = ...) -> None: ...

class StagingItem(_message.Message):
    __slots__ = ("data_source", "bytes", "source_cluster", "source_uri", "destination", "gbps")
    DATA_SOURCE_FIELD_NUMBER: _ClassVar[int]
    BYTES_FIELD_NUMBER: _ClassVar[int]
    SOURCE_CLUSTER_FIELD_NUMBER: _ClassVar[int]
    SOURCE_URI_FIELD_NUMBER: _ClassVar[int]
    DESTINATION_FIELD_NUMBER: _ClassVar[int]
    GBPS_FIELD_NUMBER: _ClassVar[int]
    data_source: str
    bytes: int
    source_cluster: str
    source_uri: str
    destination: str
    gbps: float
    def __init__(self, data_source: _Optional[str] = ..., bytes: _Optional[int] = ..., source_cluster: _Optional[str] = ..., source_uri: _Optional[str] = ..., destination: _Optional[str] = ..., gbps: _Optional[float] = ...) -> None: ...

class ShareCancellation(_message.Message):
    __slots__ = ("placement_id", "job_uid", "reason")
    PLACEMENT_ID_FIELD_NUMBER: _ClassVar[int]
    JOB_UID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    placement_id: str
    job_uid: str
    reason: str
    def __init__(self, placement_id: _Optional[str] = ..., job_uid: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class JobStatusReport(_message.Message):
    __slots__ = ("placement_id", "phase_name", "job_uid", "phase", "running", "succeeded", "failed", "message", "warning", "report_seq", "staged_bytes", "staging_bytes")
    PLACEMENT_ID_FIELD_NUMBER: _ClassVar[int]
    PHASE_NAME_FIELD_NUMBER: _ClassVar[int]
    JOB_UID_FIELD_NUMBER: _ClassVar[int]
    PHASE_FIELD_NUMBER: _ClassVar[int]
    RUNNING_FIELD_NUMBER: _ClassVar[int]
    SUCCEEDED_FIELD_NUMBER: _ClassVar[int]
    FAILED_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    WARNING_FIELD_NUMBER: _ClassVar[int]
    REPORT_SEQ_FIELD_NUMBER: _ClassVar[int]
    STAGED_BYTES_FIELD_NUMBER: _ClassVar[int]
    STAGING_BYTES_FIELD_NUMBER: _ClassVar[int]
    placement_id: str
    phase_name: str
    job_uid: str
    phase: SharePhase
    running: int
    succeeded: int
    failed: int
    message: str
    warning: str
    report_seq: int
    staged_bytes: int
    staging_bytes: int
    def __init__(self, placement_id: _Optional[str] = ..., phase_name: _Optional[str] = ..., job_uid: _Optional[str] = ..., phase: _Optional[_Union[SharePhase, str]] = ..., running: _Optional[int] = ..., succeeded: _Optional[int] = ..., failed: _Optional[int] = ..., message: _Optional[str] = ..., warning: _Optional[str] = ..., report_seq: _Optional[int] = ..., staged_bytes: _Optional[int] = ..., staging_bytes: _Optional[int] = ...) -> None: ...

class ReportAck(_message.Message):
    __slots__ = ("report_seq",)
    REPORT_SEQ_FIELD_NUMBER: _ClassVar[int]
    report_seq: int
    def __init__(self, report_seq: _Optional[int] = ...) -> None: ...

class ShareInventory(_message.Message):
    __slots__ = ("shares", "reason")
    SHARES_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    shares: _containers.RepeatedCompositeFieldContainer[HeldShare]
    reason: str
    def __init__(self, shares: _Optional[_Iterable[_Union[HeldShare, _Mapping]]] = ..., reason: _Optional[str] = ...) -> None: ...

class HeldShare(_message.Message):
    __slots__ = ("placement_id", "generation", "job_uid", "phase", "applying")
    PLACEMENT_ID_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    JOB_UID_FIELD_NUMBER: _ClassVar[int]
    PHASE_FIELD_NUMBER: _ClassVar[int]
    APPLYING_FIELD_NUMBER: _ClassVar[int]
    placement_id: str
    generation: int
    job_uid: str
    phase: SharePhase
    applying: bool
    def __init__(self, placement_id: _Optional[str] = ..., generation: _Optional[int] = ..., job_uid: _Optional[str] = ..., phase: _Optional[_Union[SharePhase, str]] = ..., applying: bool = ...) -> None: ...

class DataPresence(_message.Message):
    __slots__ = ("sources", "reason")
    SOURCES_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    sources: _containers.RepeatedScalarFieldContainer[str]
    reason: str
    def __init__(self, sources: _Optional[_Iterable[str]] = ..., reason: _Optional[str] = ...) -> None: ...

class DataCopyAssignment(_message.Message):
    __slots__ = ("copy_id", "namespace", "name", "job_uid", "item")
    COPY_ID_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    JOB_UID_FIELD_NUMBER: _ClassVar[int]
    ITEM_FIELD_NUMBER: _ClassVar[int]
    copy_id: str
    namespace: str
    name: str
    job_uid: str
    item: StagingItem
    def __init__(self, copy_id: _Optional[str] = ..., namespace: _Optional[str] = ..., name: _Optional[str] = ..., job_uid: _Optional[str] = ..., item: _Optional[_Union[StagingItem, _Mapping]] = ...) -> None: ...

class DataCopyCancellation(_message.Message):
    __slots__ = ("copy_id", "reason")
    COPY_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    copy_id: str
    reason: str
    def __init__(self, copy_id: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class DataCopyReport(_message.Message):
    __slots__ = ("copy_id", "phase", "staged_bytes", "bytes", "message", "cause")
    COPY_ID_FIELD_NUMBER: _ClassVar[int]
    PHASE_FIELD_NUMBER: _ClassVar[int]
    STAGED_BYTES_FIELD_NUMBER: _ClassVar[int]
    BYTES_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    CAUSE_FIELD_NUMBER: _ClassVar[int]
    copy_id: str
    phase: CopyPhase
    staged_bytes: int
    bytes: int
    message: str
    cause: CopyCause
    def __init__(self, copy_id: _Optional[str] = ..., phase: _Optional[_Union[CopyPhase, str]] = ..., staged_bytes: _Optional[int] = ..., bytes: _Optional[int] = ..., message: _Optional[str] = ..., cause: _Optional[_Union[CopyCause, str]] = ...) -> None: ...
