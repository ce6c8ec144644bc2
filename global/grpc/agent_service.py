"""`AgentService.Connect`: one stream per member-cluster agent. Authenticates the agent's
token, binds the stream to its cluster, applies inventory messages in order (each in its own
transaction, together with the sequence number; deltas that queued up while the previous
message was handled go in one transaction, with those of other streams: `delta_writer`; status
reports queued among them go after those deltas, `_units`), and answers with acks or resync
requests, each after its transaction committed."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import grpc
from google.protobuf.message import DecodeError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from volcano_global import failpoints
from volcano_global.db.engine import reading, transaction
from volcano_global.db.models import Cluster, OutboxKind, OutboxMessage
from volcano_global.errors import Forbidden, NotFound
from volcano_global.grpc import data_copies, dispatch_census
from volcano_global.grpc.batches import batches
from volcano_global.grpc.convert import delta_from, share_report_from, snapshot_from
from volcano_global.grpc.data_presence import record_presence
from volcano_global.grpc.errors import grpc_status
from volcano_global.grpc.share_inventory import reconcile_stream
from volcano_global.grpc.stream_guard import StreamGuard, current_claim, require_standing
from volcano_global.rpc.shares import ACCEPTED_PHASES, ShareAssignment, ShareCancellation
from volcano_global.rpc.v1 import agent_pb2 as pb
from volcano_global.rpc.v1 import agent_pb2_grpc
from volcano_global.services.dispatch import reports
from volcano_global.services.events import record_event
from volcano_global.services.inventory import clusters as cluster_service
from volcano_global.services.inventory import sequence
from volcano_global.services.inventory.agent_streams import claim_stream
from volcano_global.services.inventory.delta_writer import DeltaRun, DeltaWriter
from volcano_global.services.inventory.heartbeat_writer import HeartbeatWriter
from volcano_global.services.inventory.snapshots import replace_inventory
from volcano_global.services.lifecycle import outbox
from volcano_global.services.tenancy.tokens import (
    Principal,
    authenticate,
    configured_admin,
    hash_token,
)
from volcano_global.settings import Settings

log = logging.getLogger(__name__)
HELLO_TEXT = 128  # longest agent version or source name
OUTBOX_PAGE = 100  # dispatch messages loaded at once (each carries its job's document)
# The most messages a stream has sent and the agent has not reported on: bounds the ids read
# at every wake-up, and what one wake-up sends, when an agent stops reporting yet stays.
OUTBOX_WINDOW = 2000


def _outbox_message(message: OutboxMessage) -> pb.GlobalMessage:
    if message.kind is OutboxKind.CANCEL:
        cancellation = ShareCancellation.from_payload(message.payload)
        return pb.GlobalMessage(cancellation=cancellation.to_proto())
    return pb.GlobalMessage(assignment=ShareAssignment.from_payload(message.payload).to_proto())


class AgentService(agent_pb2_grpc.AgentServiceServicer):
    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        settings: Settings,
        *,
        deltas: DeltaWriter,
        heartbeats: HeartbeatWriter,
    ) -> None:
        self.sessions = sessions
        self.settings = settings
        self.reports = reports.report_writer(sessions)
        self._cap = settings.limits.max_cluster_nodes  # nodes per cluster, over all messages
        self.deltas = deltas  # inventory deltas, written with other streams'
        self.heartbeats = heartbeats

    async def Connect(
        self, request_iterator: AsyncIterator[pb.AgentMessage], context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.GlobalMessage]:
        try:
            async for message in self._connect(request_iterator, context):
                yield message
        except Exception as exc:  # a domain error or an unavailable database ends the stream
            status = grpc_status(exc)
            if status is None:
                raise
            if status[0] is grpc.StatusCode.UNAVAILABLE:
                log.warning("agent stream ended: database unavailable: %s", exc)
            await context.abort(*status)

    async def _connect(
        self, request_iterator: AsyncIterator[pb.AgentMessage], context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.GlobalMessage]:
        principal, token_hash = await self._authenticate(context)
        request_iterator = _decoded(request_iterator, context)
        first = await anext(aiter(request_iterator), None)
        if first is None:
            return
        if first.WhichOneof("body") != "hello":
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "the first message must be hello")
        for name in ("agent_version", "source"):  # shown in events and logs
            value = getattr(first.hello, name)
            if len(value) > HELLO_TEXT or not value.isprintable():
                await context.abort(
                    grpc.StatusCode.INVALID_ARGUMENT,
                    f"hello.{name}: must be at most {HELLO_TEXT} printable characters",
                )
        cluster_name = first.hello.cluster
        async with transaction(self.sessions) as session:
            cluster = await self._cluster(session, cluster_name, principal)
            claim = await claim_stream(session, cluster=cluster, token_hash=token_hash)
            await cluster_service.agent_seen(session, cluster=cluster, connected=True)
            cluster.runs_copies = first.hello.data_copies
            await record_event(
                session,
                cluster_id=cluster.id,
                reason="AgentConnected",
                message=f"agent {first.hello.agent_version or '?'} ({first.hello.source or '?'}) "
                f"connected, last acked seq {first.hello.last_acked_seq}",
            )
            applied, empty = cluster.inventory_seq, sequence.snapshot_required(cluster)
            cluster_id = cluster.id
        yield pb.GlobalMessage(
            welcome=pb.Welcome(
                applied_seq=applied,
                snapshot_required=empty,
                heartbeat_interval_seconds=self.settings.agents.heartbeat_interval_s,
                share_phases=ACCEPTED_PHASES,
                share_inventory_interval_seconds=self.settings.agents.share_inventory_interval_s,
                data_presence=True,
                data_copies=True,
                node_usages=True,
            )
        )
        log.info("agent of %s connected (applied seq %d)", cluster_name, applied)
        # Dispatch: the cluster's unacknowledged outbox messages follow at once when a commit
        # wrote some for this cluster (db/notifications), else every poll period, and
        # again on every new stream, until the agent's report acknowledges them; unwoken, a
        # stream reads its own only when the process's census says something may wait.
        # Copies that belong to no share come the same way (`data_copies`).
        sent = _Sent(runs_copies=first.hello.data_copies)
        guard = StreamGuard(self.sessions, claim, self.settings.agents.stream_check_s)
        with outbox.OUTBOX.watch(cluster_id) as woken, guard.held():
            polled = time.monotonic()
            async for item in self._outbox(cluster_id, sent):
                yield item
            # A tick costs no query: `_poll_s` and the guard decide.
            async for batch in batches(request_iterator, self._tick_s, wake=woken):
                await guard.verify()  # ends the stream of a revoked token or a replaced stream
                units = _units(batch)
                for unit in units:
                    for reply in await asyncio.shield(
                        self._handle(cluster_id, cluster_name, unit, context)
                    ):
                        yield reply
                # Acknowledgements wake no stream: a full window is read again after reports.
                reported = sent.full and any(u[0].HasField("job_status") for u in units)
                due = woken.is_set() or reported
                if due or time.monotonic() - polled >= self._poll_s():
                    woken.clear()
                    previous, polled = polled, time.monotonic()
                    if due or await dispatch_census.may_wait(
                        self.sessions, cluster_id, since=previous
                    ):
                        async for item in self._outbox(cluster_id, sent):
                            yield item

    def _tick_s(self) -> float:
        """How long a silent stream waits: while commits of every process wake it (dispatch
        and its standing alike, `streams_must_recheck`), half the standing's check period;
        else the outbox's poll."""
        agents = self.settings.agents
        if outbox.OUTBOX.listening:
            return min(agents.stream_check_s, agents.outbox_safety_poll_s) / 2
        return agents.outbox_poll_s

    def _poll_s(self) -> float:
        """How often a stream reads its outbox unwoken: rarely while commits of every process
        wake it, else often. While they wake it, every half `outbox_safety_poll_s`: the census
        a stream takes may have begun up to a period before (`dispatch_census`), and a message
        whose wake-up was lost must still arrive within the setting."""
        agents = self.settings.agents
        if outbox.OUTBOX.listening:
            return agents.outbox_safety_poll_s / 2
        return agents.outbox_poll_s

    async def _outbox(self, cluster_id: uuid.UUID, sent: _Sent) -> AsyncIterator[pb.GlobalMessage]:
        """The unacknowledged messages to the cluster this stream has not sent yet, oldest
        first (loaded a page at a time), among the oldest `OUTBOX_WINDOW` unacknowledged; then
        the copies due."""
        # Shielded: a stream cancelled mid-query must not leave a database connection half-used.
        unacked = await asyncio.shield(self._unacknowledged(cluster_id))
        sent.full = len(unacked) >= OUTBOX_WINDOW
        sent.outbox.intersection_update(unacked)  # the others are acknowledged, for good
        unsent = [message_id for message_id in unacked if message_id not in sent.outbox]
        for start in range(0, len(unsent), OUTBOX_PAGE):
            page = unsent[start : start + OUTBOX_PAGE]
            for message in await asyncio.shield(self._undelivered(page)):
                sent.outbox.add(message.id)
                yield _outbox_message(message)
                if message.kind is OutboxKind.ASSIGN:
                    failpoints.hit("dispatch-sent")
        due = data_copies.due(
            self.sessions, cluster_id=cluster_id, sent=sent.copies, runs_copies=sent.runs_copies
        )
        for item in await asyncio.shield(due):
            yield item

    async def _unacknowledged(self, cluster_id: uuid.UUID) -> list[uuid.UUID]:
        async with reading(self.sessions) as session:
            return await outbox.unacknowledged_ids(
                session, cluster_id=cluster_id, limit=OUTBOX_WINDOW
            )

    async def _undelivered(self, ids: list[uuid.UUID]) -> list[OutboxMessage]:
        async with reading(self.sessions) as session:
            return await outbox.undelivered(session, ids=ids)

    async def _handle(
        self,
        cluster_id: uuid.UUID,
        cluster_name: str,
        unit: list[pb.AgentMessage],
        context: grpc.aio.ServicerContext,
    ) -> list[pb.GlobalMessage]:
        """One message, or the deltas or the reports of a run of them (`_units`), applied
        together. A domain error ends the stream (`Connect` maps it to a status)."""
        kind = unit[0].WhichOneof("body")
        if kind == "delta":
            return await self._deltas(cluster_name, [m.delta for m in unit])
        if kind == "job_status":
            statuses = [m.job_status for m in unit]
            # each validated before any is applied
            await self.reports.add([share_report_from(cluster_id, m) for m in statuses])
            seq = max(r.report_seq for r in statuses)
            return [pb.GlobalMessage(report_ack=pb.ReportAck(report_seq=seq))] if seq else []
        (message,) = unit
        if kind == "snapshot":
            return [await self._snapshot(cluster_name, message.snapshot)]
        if kind == "shares":  # every share the cluster holds: reconcile (level-triggered)
            return await reconcile_stream(
                self.sessions, cluster_name=cluster_name, message=message.shares
            )
        if kind == "copy_report":  # a copy that belongs to no share: progress, or its end
            return await data_copies.record_report(
                self.sessions, cluster_id=cluster_id, message=message.copy_report
            )
        if kind == "data":  # data the cluster holds: its DataSources' locality grows
            return await record_presence(
                self.sessions, cluster_name=cluster_name, message=message.data
            )
        if kind == "heartbeat":  # written with other streams' within a second
            self.heartbeats.note(cluster_id, cluster_name)
            return []
        await context.abort(
            grpc.StatusCode.INVALID_ARGUMENT, f"unexpected message {kind or 'empty'}"
        )
        return []

    async def _snapshot(self, cluster_name: str, message: pb.InventorySnapshot) -> pb.GlobalMessage:
        snapshot = snapshot_from(message)
        async with transaction(self.sessions) as session:
            cluster = await cluster_service.lock_cluster(session, name=cluster_name)
            await require_standing(session, cluster)
            await replace_inventory(
                session, cluster=cluster, snapshot=snapshot, seq=message.seq, max_nodes=self._cap
            )
            await cluster_service.agent_seen(session, cluster=cluster)
        return pb.GlobalMessage(ack=pb.Ack(seq=message.seq))

    async def _deltas(
        self, cluster_name: str, messages: list[pb.InventoryDelta]
    ) -> list[pb.GlobalMessage]:
        """Consecutive deltas in one transaction, with other streams' (`services/inventory/
        delta_writer.py`): answered with one ack, a resync request, or both."""
        # each validated, before anything is applied
        deltas = [sequence.NumberedDelta(m.seq, delta_from(m)) for m in messages]
        # Written with other streams' deltas; answered once the transaction committed.
        run = DeltaRun(cluster=cluster_name, deltas=deltas, claim=current_claim())
        outcome = await self.deltas.add(run)
        replies = []
        if outcome.acked_seq is not None:
            replies.append(pb.GlobalMessage(ack=pb.Ack(seq=outcome.acked_seq)))
        if (resync := outcome.resync) is not None:
            request = pb.ResyncRequest(reason=resync.reason, applied_seq=resync.applied_seq)
            replies.append(pb.GlobalMessage(resync=request))
        return replies

    async def _authenticate(
        self, context: grpc.aio.ServicerContext
    ) -> tuple[Principal, str | None]:
        """The caller, and its token's hash (None: the settings' admin token, not stored)."""
        metadata = dict(context.invocation_metadata() or ())
        header = str(metadata.get("authorization", ""))
        token = header.removeprefix("Bearer ").strip() if header.startswith("Bearer ") else ""
        if not token:
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, "missing bearer token")
        admin = self.settings.admin_token.get_secret_value() if self.settings.admin_token else None
        async with transaction(self.sessions) as session:
            principal = await authenticate(session, token=token, admin_token=admin)
        return principal, None if configured_admin(token, admin) else hash_token(token)

    async def _cluster(self, session: AsyncSession, name: str, principal: Principal) -> Cluster:
        """The cluster the stream acts for; one it may not act for and one that does not exist
        are refused alike (a token does not learn which clusters exist)."""
        try:
            cluster = await cluster_service.get_cluster(session, name=name)
            principal.require_cluster(cluster.id)
        except (NotFound, Forbidden):
            raise Forbidden(f"{principal.name} may not act for cluster {name!r}") from None
        return cluster


@dataclass
class _Sent:
    """What a stream has sent: outbox messages not yet acknowledged, and copies (id, whether
    a stop); `full` when its last read found a whole window unacknowledged."""

    runs_copies: bool
    full: bool = False
    outbox: set[uuid.UUID] = field(default_factory=set)
    copies: set[tuple[uuid.UUID, bool]] = field(default_factory=set)


# Grouped, in the order a run of them mixed is applied (see `_units`).
_GROUPED = ("delta", "job_status")


def _units(batch: list[pb.AgentMessage]) -> list[list[pb.AgentMessage]]:
    """The batch cut into what is handled together: each run of consecutive deltas and status
    reports, in any mix, as its deltas then its reports (each in their order), and every other
    message on its own. An agent that reports as its shares start and end interleaves them
    (the delta that frees an ended share's nodes goes before its report): cut at each change
    of kind, a batch became one transaction of each writer after the other, awaited one by one
    (seconds a batch under load). Deltas first keeps what the agent's order is for, a share's
    freed nodes seen no later than its end; a delta that comes earlier than the reports before
    it only shows GPUs in use sooner, and a round's books hold a share's GPUs until it ends
    (`services/scheduling/books.py`) whatever the inventory says."""
    units: list[list[pb.AgentMessage]] = []
    run: dict[str, list[pb.AgentMessage]] = {}
    for message in batch:
        kind = message.WhichOneof("body")
        if kind in _GROUPED:
            run.setdefault(kind, []).append(message)
            continue
        units.extend(run[grouped] for grouped in _GROUPED if grouped in run)
        run = {}
        units.append([message])
    units.extend(run[grouped] for grouped in _GROUPED if grouped in run)
    return units


async def _decoded(
    requests: AsyncIterator[pb.AgentMessage], context: grpc.aio.ServicerContext
) -> AsyncIterator[pb.AgentMessage]:
    """The agent's messages; bytes that are not an AgentMessage end the stream with
    INVALID_ARGUMENT (not an unhandled error)."""
    try:
        async for message in requests:
            yield message
    except DecodeError:
        await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "a message is not an AgentMessage")
