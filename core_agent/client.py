"""The agent's side of the stream: connect, say hello, bring the Global up to date (resend
what it has not applied, or a snapshot), then send coalesced deltas and heartbeats. Reconnects
with backoff; keeps unacknowledged inventory messages and status reports so a cut or a Global
restart loses nothing."""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections import OrderedDict
from pathlib import Path

import grpc

from core_agent.inventory import DEFAULT_COALESCE_S, Inventory, delta_of_changes
from core_agent.preflight import TlsMismatch, tls_mismatch
from core_agent.presence import PresenceReports
from core_agent.reconnect import REFUSED, Reconnect
from core_agent.share_reports import ShareReports
from core_agent.sources import InventorySource
from volcano_global import __version__
from volcano_global.rpc.copies import (
    CopyCause,
    CopyPhase,
    CopyStatus,
    DataCopyAssignment,
    DataCopyCancellation,
)
from volcano_global.rpc.shares import (
    ShareAssignment,
    ShareCancellation,
    SharePhase,
    ShareStatus,
    phases_accepted,
    report_for,
)
from volcano_global.rpc.v1 import agent_pb2 as pb
from volcano_global.rpc.v1 import agent_pb2_grpc
from volcano_global.shutdown import cancelling

log = logging.getLogger(__name__)

MAX_UNACKED = 1000  # beyond this, the Global gets a snapshot instead of the backlog
KEEPALIVE_MS = 15_000  # the Global accepts pings this often (its grpc server options)


class AgentClient:
    def __init__(
        self,
        *,
        cluster: str,
        target: str,
        token: str,
        source: InventorySource,
        coalesce_s: float = DEFAULT_COALESCE_S,
        max_message_bytes: int = 64 << 20,
        credentials: grpc.ChannelCredentials | None = None,
        token_file: Path | None = None,
    ) -> None:
        self.cluster = cluster
        self.target = target
        self.token = token
        self.token_file = token_file  # read again before each connection (rotation)
        self.source = source
        self.coalesce_s = coalesce_s
        self.max_message_bytes = max_message_bytes
        self.credentials = credentials  # TLS (and a client certificate for mutual TLS)
        self.seq = 0  # last sequence number sent
        self.acked = 0  # last sequence the Global acknowledged
        self.sent_view = Inventory()  # the inventory as of the last message sent
        self.unacked: OrderedDict[int, pb.AgentMessage] = OrderedDict()
        self.connected = asyncio.Event()
        self.heartbeat_s = 5.0
        self._resync_requested = False
        self._snapshot_seq = 0  # the sequence of the last snapshot this stream sent
        self.reports = ShareReports()
        self.share_phases: frozenset[int] = frozenset()  # what the Global's Welcome accepts
        self.reconnect = Reconnect(cluster, target)  # how long to wait after a stream ends
        # Seconds between full lists of the shares the cluster holds (0: the Global does not
        # take them); the Welcome says.
        self.share_inventory_s = 0.0
        # The data sources the cluster holds, for a Global that takes them (presence.py).
        self.presence = PresenceReports(getattr(source, "data_present", None))
        # Copies that belong to no share: each one's latest status not yet written (state,
        # not events: the Global sends a copy again on each stream until it knows its end).
        self.copy_reports: dict[str, pb.DataCopyReport] = {}
        self.takes_copies = False  # the Global's Welcome says it takes copy reports
        self.takes_usages = False  # ... and node usages in deltas (else whole nodes)

    async def run(self, *, stop: asyncio.Event | None = None) -> None:
        """Stream until `stop` is set, reconnecting with exponential backoff and jitter (up to
        the heartbeat interval)."""
        stop = stop or asyncio.Event()
        bind = getattr(self.source, "bind_reporter", None)
        if bind is not None:
            bind(self.report)  # a source that reports share status on its own (Kubernetes)
        if not await self._start(stop):
            return
        reconnect = self.reconnect
        while not stop.is_set():
            try:
                await self._session(stop)
            except (grpc.aio.AioRpcError, ConnectionError, asyncio.InvalidStateError) as exc:
                # The Global ended the stream (shutting down, token refused, replaced), or it
                # ended while we wrote (grpc.aio says "RPC already finished").
                if cancelling():  # grpc turned our cancellation into a stream error: stop
                    raise asyncio.CancelledError from None
                await self._ended(exc)
            self.connected.clear()
            if stop.is_set():
                break
            try:
                await asyncio.wait_for(stop.wait(), timeout=reconnect.next_delay(self.heartbeat_s))
            except TimeoutError:
                pass
        await self.source.stop()

    async def _start(self, stop: asyncio.Event) -> bool:
        """Start the source (a Kubernetes source waits for its first lists, for as long as the
        API server does not answer); False, with the source stopped, if `stop` came first: a
        pod told to terminate must not wait for its grace period to be killed. The source is
        stopped too if starting it fails or this task is cancelled."""
        started = asyncio.ensure_future(self.source.start())
        stopped = asyncio.ensure_future(stop.wait())
        try:
            await asyncio.wait({started, stopped}, return_when=asyncio.FIRST_COMPLETED)
            if started.done():
                started.result()  # what the source raised
                return True
        except BaseException:
            await self._abandon(started)
            raise
        finally:
            stopped.cancel()
        await self._abandon(started)
        return False

    async def _abandon(self, started: asyncio.Future[None]) -> None:
        started.cancel()
        await asyncio.gather(started, return_exceptions=True)
        await self.source.stop()

    async def _ended(self, exc: Exception) -> None:
        """How the stream ended decides what comes next: a token given on the command line
        that the Global refuses cannot change by retrying, so the agent ends (one line; in
        Kubernetes its restart reads the Secret's current token); a token file may be
        rewritten, so that agent retries slowly. A TLS disagreement ends the agent too."""
        if isinstance(exc, grpc.aio.AioRpcError):
            if exc.code() in REFUSED and self.token_file is None:
                raise exc
            if exc.code() is grpc.StatusCode.UNAVAILABLE and "refused" not in str(
                exc.details()
            ):  # (a Global that is down refuses the connection: nothing to look at)
                await self._refuse_tls_mismatch()
        self.reconnect.ended(exc, was_up=self.connected.is_set())

    async def _refuse_tls_mismatch(self) -> None:
        """End the agent when the Global's agent port and this agent disagree on TLS (the
        Global restarted with or without it): retrying can never succeed, and each try
        fills the Global's log with failed handshakes."""
        problem = await asyncio.to_thread(
            tls_mismatch, self.target, tls=self.credentials is not None, timeout_s=1.0
        )
        if problem:
            raise TlsMismatch(problem)

    async def _session(self, stop: asyncio.Event) -> None:
        options = [
            ("grpc.max_send_message_length", self.max_message_bytes),
            ("grpc.max_receive_message_length", self.max_message_bytes),
            # Each session gets its own connections: gRPC's process-wide subchannel pool would
            # otherwise keep a restarted Global's address in its own connection backoff (up to
            # 2 minutes) after our reconnect loop has decided to try again.
            ("grpc.use_local_subchannel_pool", 1),
            # A Global that vanished without closing the connection (host down, partition) is
            # noticed within ~25 s instead of the kernel's retransmission timeout.
            ("grpc.keepalive_time_ms", KEEPALIVE_MS),
            ("grpc.keepalive_timeout_ms", 10_000),
        ]
        channel = (
            grpc.aio.secure_channel(self.target, self.credentials, options=options)
            if self.credentials is not None
            else grpc.aio.insecure_channel(self.target, options=options)
        )
        async with channel:
            stub = agent_pb2_grpc.AgentServiceStub(channel)
            call = stub.Connect(metadata=(("authorization", f"Bearer {self._bearer()}"),))
            hello = pb.Hello(
                cluster=self.cluster,
                agent_version=__version__,
                last_acked_seq=self.acked,
                source=self.source.name,
                data_copies=getattr(self.source, "apply_copy", None) is not None,
            )
            await call.write(pb.AgentMessage(hello=hello))
            welcome = await call.read()
            if welcome is grpc.aio.EOF or welcome.WhichOneof("body") != "welcome":
                raise ConnectionError("the Global did not welcome the agent")
            self.heartbeat_s = float(welcome.welcome.heartbeat_interval_seconds or 5)
            self.share_phases = phases_accepted(welcome.welcome)  # an older Global knows fewer
            self.share_inventory_s = float(welcome.welcome.share_inventory_interval_seconds)
            self.presence.begin(welcome.welcome)
            self.takes_copies = welcome.welcome.data_copies
            self.takes_usages = welcome.welcome.node_usages
            # Every unacknowledged report before the list: a share that ended while the last
            # stream was down and was then removed from the cluster (a Volcano Job's TTL, a
            # user) would otherwise be missing from the list, and the Global would take it
            # for lost (failing its job) before reading that it had ended.
            self.reports.written = 0  # resend every unacknowledged report on this stream
            await self._write_reports(call)
            # Before the inventory: a restarted cluster's lost shares are let go before the
            # GPUs its snapshot shows free can be placed again.
            await self._send_share_inventory(call, "connect")
            await self._send_presence(call, "connect")
            self._snapshot_seq = 0  # requests on this stream answer its messages only
            await self._catch_up(call, welcome.welcome)
            self.connected.set()
            log.info("connected to the Global at %s as cluster %s", self.target, self.cluster)
            reader = asyncio.create_task(self._read(call), name=f"agent-{self.cluster}-reader")
            try:
                await self._write_loop(call, stop, reader)
            finally:
                reader.cancel()
                await asyncio.gather(reader, return_exceptions=True)
                call.cancel()

    async def _catch_up(self, call: grpc.aio.StreamStreamCall, welcome: pb.Welcome) -> None:
        applied = welcome.applied_seq
        self._acknowledge(applied)
        pending = [seq for seq in self.unacked if seq > applied]
        resumable = (
            not welcome.snapshot_required
            and applied <= self.seq
            and (applied == self.seq or (pending and pending[0] == applied + 1))
            # usages sent to a Global that took them, resent to one that does not: it would
            # drop them unread
            and (self.takes_usages or not any(self._has_usages(s) for s in pending))
        )
        if resumable:
            for seq in pending:
                await call.write(self.unacked[seq])
            return
        self.seq = max(self.seq, applied)
        await self._send_snapshot(call)

    def _has_usages(self, seq: int) -> bool:
        message = self.unacked[seq]
        return message.WhichOneof("body") == "delta" and len(message.delta.node_usages) > 0

    async def _send_snapshot(self, call: grpc.aio.StreamStreamCall) -> None:
        self.source.take_changes()  # the snapshot carries them
        view = self.source.current()
        self.seq += 1
        self._snapshot_seq = self.seq
        message = pb.AgentMessage(snapshot=view.snapshot(self.seq))
        self.unacked.clear()
        self.unacked[self.seq] = message
        self.sent_view = view
        await call.write(message)
        log.info("inventory snapshot sent: %d nodes (seq %d)", len(view.nodes), self.seq)

    async def _write_loop(
        self, call: grpc.aio.StreamStreamCall, stop: asyncio.Event, reader: asyncio.Task[None]
    ) -> None:
        # Heartbeats go out on their period whatever else is sent: a cluster whose inventory
        # changes all the time must not look silent. Status reports go at once. Inventory
        # changes go as one delta per coalescing window, jittered by a quarter either way so
        # that agents started together do not reach the Global in step, window after window.
        now = time.monotonic()
        next_beat, next_delta, moved = now + self.heartbeat_s, now, False
        next_list = now + (self.share_inventory_s or float("inf"))
        while not stop.is_set() and not reader.done():
            wake_at = min(next_beat, next_delta, next_list) if moved else min(next_beat, next_list)
            changed = asyncio.create_task(self.source.changed.wait())
            stopped = asyncio.create_task(stop.wait())
            done, pending = await asyncio.wait(
                {changed, stopped, reader},
                timeout=max(0.0, wake_at - time.monotonic()),
                return_when=asyncio.FIRST_COMPLETED,
            )
            for task in pending:
                if task is not reader:
                    task.cancel()
            if reader in done:
                reader.result()  # re-raise a stream error
                return
            if changed in done:
                self.source.changed.clear()
                moved = True  # (or only a report: the delta then finds nothing to send)
            if self._resync_requested:
                self._resync_requested = False
                await self._send_snapshot(call)
            if moved and self.reports.nodes_moved_unwritten():  # a share's nodes go first
                moved, next_delta = False, await self._delta_window(call)
            await self._write_reports(call)
            if time.monotonic() >= next_list:  # after the reports queued before it
                await self._send_share_inventory(call, "periodic")
                await self._send_presence(call, "periodic")
                next_list = time.monotonic() + self.share_inventory_s
            elif changed in done:
                await self._send_presence(call, "added")
            if moved and time.monotonic() >= next_delta:
                moved, next_delta = False, await self._delta_window(call)
            if time.monotonic() >= next_beat:
                await call.write(
                    pb.AgentMessage(heartbeat=pb.Heartbeat(sent_unix_millis=_now_ms()))
                )
                next_beat = time.monotonic() + self.heartbeat_s

    async def _write_reports(self, call: grpc.aio.StreamStreamCall) -> None:
        """The reports not yet written on this stream, in order; then the copies' news."""
        for seq, report in self.reports.unwritten():
            await call.write(pb.AgentMessage(job_status=report_for(report, self.share_phases)))
            self.reports.written = seq
        while self.takes_copies and self.copy_reports:
            copy_id = next(iter(self.copy_reports))
            await call.write(pb.AgentMessage(copy_report=self.copy_reports.pop(copy_id)))

    async def _send_share_inventory(self, call: grpc.aio.StreamStreamCall, reason: str) -> None:
        """Every share the cluster holds, read from it, for the Global to reconcile with its
        placements (only to a Global whose Welcome asked for it: an older one refuses it)."""
        held = getattr(self.source, "held_shares", None)
        if not self.share_inventory_s or held is None:
            return
        shares = [share.to_proto() for share in held()]
        message = pb.ShareInventory(shares=shares, reason=reason)
        await call.write(pb.AgentMessage(shares=message))

    async def _send_presence(self, call: grpc.aio.StreamStreamCall, reason: str) -> None:
        for message in self.presence.due(reason):
            await call.write(message)

    async def _delta_window(self, call: grpc.aio.StreamStreamCall) -> float:
        """Send the changes as a delta; when the next may go (a window jittered by a quarter
        either way after one was sent, at once if there was nothing to send)."""
        if await self._send_delta(call):
            return time.monotonic() + self.coalesce_s * random.uniform(0.75, 1.25)
        return time.monotonic()

    async def _send_delta(self, call: grpc.aio.StreamStreamCall) -> bool:
        """The changes since the last message, if any (a snapshot instead if too many deltas
        wait for acknowledgement); whether anything was sent."""
        changes = self.source.take_changes()
        if changes is None:  # the source cannot tell what moved: compare everything
            view = self.source.current()
            delta = self.sent_view.delta_to(view, self.seq + 1, usages=self.takes_usages)
            self.sent_view = view
        else:
            delta = delta_of_changes(
                self.sent_view, self.source, changes, self.seq + 1, usages=self.takes_usages
            )
        if delta is None:
            return False
        if len(self.unacked) >= MAX_UNACKED:
            await self._send_snapshot(call)
            return True
        self.seq += 1
        message = pb.AgentMessage(delta=delta)
        self.unacked[self.seq] = message
        await call.write(message)
        return True

    async def _read(self, call: grpc.aio.StreamStreamCall) -> None:
        while True:
            message = await call.read()
            if message is grpc.aio.EOF:
                raise ConnectionError("the Global closed the stream")
            kind = message.WhichOneof("body")
            if kind == "ack":
                self._acknowledge(message.ack.seq)
            elif kind == "report_ack":
                self.reports.acknowledge(message.report_ack.report_seq)
            elif kind == "assignment":
                assignment = ShareAssignment.from_proto(message.assignment)
                apply = getattr(self.source, "apply_share", None)
                if apply is None:
                    self.report(
                        ShareStatus(
                            placement_id=assignment.placement_id,
                            job_uid=assignment.job_uid,
                            phase=SharePhase.FAILED,
                            message=f"the {self.source.name} source cannot run shares yet",
                        )
                    )
                else:
                    apply(assignment, self.report)
            elif kind == "cancellation":
                cancellation = ShareCancellation.from_proto(message.cancellation)
                cancel = getattr(self.source, "cancel_share", None)
                if cancel is not None:
                    cancel(cancellation, self.report)
                else:
                    self.report(
                        ShareStatus(
                            placement_id=cancellation.placement_id,
                            job_uid=cancellation.job_uid,
                            phase=SharePhase.CANCELLED,
                        )
                    )
            elif kind == "copy":
                self._apply_copy(message.copy)
            elif kind == "copy_cancellation":
                cancel = getattr(self.source, "cancel_copy", None)
                if cancel is not None:
                    cancel(
                        DataCopyCancellation.from_proto(message.copy_cancellation), self.report_copy
                    )
            elif kind == "resync":
                self._resync(message.resync)

    def _resync(self, request: pb.ResyncRequest) -> None:
        """Send a snapshot, unless one sent since answers the request: the Global applies a
        stream's messages in order, so a request naming an applied sequence below the last
        snapshot's was made before that snapshot was applied (each delta queued behind a
        refused one is answered with its own request)."""
        if request.applied_seq < self._snapshot_seq:
            log.info("resync request before the last snapshot: ignored (%s)", request.reason)
            return
        log.warning("resync requested: %s", request.reason)
        self._resync_requested = True
        self.source.changed.set()  # wake the writer

    def _apply_copy(self, message: pb.DataCopyAssignment) -> None:
        copy = DataCopyAssignment.from_proto(message)
        apply = getattr(self.source, "apply_copy", None)
        if apply is not None:
            apply(copy, self.report_copy)
        else:
            why = f"the {self.source.name} source cannot run copies"
            failed = CopyStatus(
                copy_id=copy.copy_id,
                phase=CopyPhase.FAILED,
                message=why,
                cause=CopyCause.DESTINATION,
            )
            self.report_copy(failed)

    def report_copy(self, status: CopyStatus) -> None:
        """Queue a copy's status for the writer (the latest one per copy)."""
        if status.phase.ended:
            log.info(
                "copy %s: %s%s",
                status.copy_id,
                status.phase.value,
                f" ({status.message})" if status.message else "",
            )
        self.copy_reports.pop(status.copy_id, None)
        self.copy_reports[status.copy_id] = status.to_proto()
        self.source.changed.set()  # wake the writer

    def report(self, status: ShareStatus) -> None:
        """Number a status report and queue it for the writer (reports also acknowledge
        dispatch messages); kept until the Global acknowledges it."""
        self.reports.add(status)
        self.source.changed.set()  # wake the writer

    @property
    def unacked_reports(self) -> dict[int, pb.JobStatusReport]:
        return self.reports.unacked

    def _bearer(self) -> str:
        if self.token_file is None:
            return self.token
        try:
            return self.token_file.read_text().strip()
        except OSError as exc:  # a Secret being updated: the Global refuses, we retry
            log.error("cannot read the token file %s: %s", self.token_file, exc)
            return ""

    def _acknowledge(self, seq: int) -> None:
        self.acked = max(self.acked, seq)
        for old in [s for s in self.unacked if s <= seq]:
            del self.unacked[old]


def _now_ms() -> int:
    return int(time.time() * 1000)
