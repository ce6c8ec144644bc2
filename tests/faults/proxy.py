"""A TCP proxy for fault tests, between agents and the Global: it forwards bytes both ways and,
on demand, cuts every connection (abort: the peers see a reset), cuts when a chosen chunk goes
by (in the middle of a snapshot, a delta or an assignment), or stops forwarding while keeping
the connections open (a network partition)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field

Trigger = Callable[[bytes, int], bool]  # (chunk, bytes already sent this way on the connection)


@dataclass
class _Cut:
    direction: str  # "up" (agent -> Global) or "down"
    when: Trigger
    forward: bool  # let the triggering chunk through before cutting
    done: asyncio.Event = field(default_factory=asyncio.Event)


@dataclass
class _Connection:
    client: asyncio.StreamWriter
    upstream: asyncio.StreamWriter
    sent: dict[str, int] = field(default_factory=lambda: {"up": 0, "down": 0})

    def abort(self) -> None:
        for writer in (self.client, self.upstream):
            writer.transport.abort()


class Proxy:
    def __init__(self, backend: str) -> None:
        host, _, port = backend.rpartition(":")
        self.backend = (host, int(port))
        self.connections: list[_Connection] = []
        self.accepted = 0
        self.cuts = 0  # connections cut so far
        self._pending: list[_Cut] = []
        self._flowing = asyncio.Event()
        self._flowing.set()
        self._server: asyncio.Server | None = None

    async def start(self) -> str:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        return f"127.0.0.1:{port}"

    async def close(self) -> None:
        self.cut()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    def cut(self) -> int:
        """Abort every open connection now; how many there were."""
        cut = len(self.connections)
        for connection in self.connections:
            connection.abort()
        self.connections.clear()
        self.cuts += cut
        return cut

    def cut_when(self, direction: str, when: Trigger, *, forward: bool) -> asyncio.Event:
        """Cut every connection at the first chunk going `direction` for which `when` holds;
        the event is set once it happened."""
        cut = _Cut(direction, when, forward)
        self._pending.append(cut)
        return cut.done

    def partition(self) -> None:
        """Stop forwarding in both directions; connections stay open."""
        self._flowing.clear()

    def heal(self) -> None:
        self._flowing.set()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.backend)
        except OSError:
            writer.transport.abort()
            return
        self.accepted += 1
        connection = _Connection(writer, up_writer)
        self.connections.append(connection)
        await asyncio.gather(
            self._pump(connection, "up", reader, up_writer),
            self._pump(connection, "down", up_reader, writer),
            return_exceptions=True,
        )
        connection.abort()
        if connection in self.connections:
            self.connections.remove(connection)

    async def _pump(
        self,
        connection: _Connection,
        direction: str,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> None:
        while chunk := await reader.read(65536):
            await self._flowing.wait()
            if connection not in self.connections:
                return  # cut meanwhile
            cut = next(
                (
                    c
                    for c in self._pending
                    if c.direction == direction and c.when(chunk, connection.sent[direction])
                ),
                None,
            )
            if cut is not None and not cut.forward:
                self._fire(cut)
                return
            writer.write(chunk)
            await writer.drain()
            connection.sent[direction] += len(chunk)
            if cut is not None:
                self._fire(cut)
                return
        connection.abort()

    def _fire(self, cut: _Cut) -> None:
        self._pending.remove(cut)
        self.cut()
        cut.done.set()


def carries_message(chunk: bytes) -> bool:
    """Whether the chunk holds an HTTP/2 DATA frame (a gRPC message) rather than only control
    frames (window updates, pings, settings). Assumes the chunk starts on a frame boundary,
    which holds on a quiet connection."""
    at = 0
    while at + 9 <= len(chunk):
        length, kind = int.from_bytes(chunk[at : at + 3], "big"), chunk[at + 3]
        if kind == 0 and length > 0:
            return True
        at += 9 + length
    return False
