"""The agent's status reports of its shares: numbered, kept until the Global acknowledges
them, written once on a stream (every one still unacknowledged again on the next), and each
share's phase logged when it changes (a source may report counts often)."""

from __future__ import annotations

import logging
from collections import OrderedDict

from volcano_global.rpc.shares import SharePhase, ShareStatus
from volcano_global.rpc.v1 import agent_pb2 as pb

# The agent's own logger: operators (and their filters) read share phases under its name.
log = logging.getLogger("core_agent.client")

MAX_UNACKED_REPORTS = 10_000  # status reports kept for resending (memory bound)
# The phases a share's nodes change with: its pods run on them, or are gone.
NODES_MOVED = frozenset(
    {
        pb.SHARE_PHASE_RUNNING,
        pb.SHARE_PHASE_SUCCEEDED,
        pb.SHARE_PHASE_FAILED,
        pb.SHARE_PHASE_CANCELLED,
        pb.SHARE_PHASE_RESTARTING,
    }
)


class ShareReports:
    def __init__(self) -> None:
        self.seq = 0
        self.unacked: OrderedDict[int, pb.JobStatusReport] = OrderedDict()
        self.written = 0  # the last report written on the current stream
        self._phases: dict[str, SharePhase] = {}  # each share's last phase logged

    def add(self, status: ShareStatus) -> None:
        """Number a report and keep it until acknowledged (the oldest dropped past the bound:
        a Global that never acknowledges)."""
        self._log_phase(status)
        self.seq += 1
        report = status.to_proto()
        report.report_seq = self.seq
        self.unacked[self.seq] = report
        if len(self.unacked) > MAX_UNACKED_REPORTS:
            dropped, _ = self.unacked.popitem(last=False)
            log.warning(
                "more than %d reports unacknowledged: report %d dropped",
                MAX_UNACKED_REPORTS,
                dropped,
            )

    def unwritten(self) -> list[tuple[int, pb.JobStatusReport]]:
        """The reports not yet written on the current stream, in order."""
        return [(seq, report) for seq, report in self.unacked.items() if seq > self.written]

    def nodes_moved_unwritten(self) -> bool:
        """Whether a report not yet written starts or ends a share. The delta that shows its
        nodes taken or freed then goes before it, whatever the window: the Global applies a
        stream's messages in order. A round between an end and the freed nodes would see the
        ended job's link reservation gone and its GPUs still held (and split a job that one of
        its clusters was about to hold whole); one between a start and the taken nodes would
        see the running share's GPUs neither held by a placement nor used in the inventory,
        and place another share on them, which this agent would refuse."""
        return any(report.phase in NODES_MOVED for _, report in self.unwritten())

    def acknowledge(self, seq: int) -> None:
        for done in [s for s in self.unacked if s <= seq]:
            del self.unacked[done]

    def _log_phase(self, status: ShareStatus) -> None:
        if self._phases.get(status.placement_id) is status.phase:
            return
        self._phases[status.placement_id] = status.phase
        if len(self._phases) > MAX_UNACKED_REPORTS:
            self._phases.pop(next(iter(self._phases)))
        log.info(
            "share %s of job %s: %s%s",
            status.placement_id,
            status.job_uid,
            status.phase.value,
            f" ({status.message})" if status.message else "",
        )
