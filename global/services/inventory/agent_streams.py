"""One agent stream per cluster, and only while its token holds.

Each new stream raises the cluster's `agent_stream_epoch` in the transaction that accepts it;
the stream holding the current epoch is the cluster's stream, an older one (in any replica:
the database, not a process, decides) ends. An open stream re-reads its standing (its token
not revoked or expired, its cluster not deleted, its epoch current) when woken and every few
seconds; inventory writes check it again under the cluster's row lock, so a stream that lost
its standing never writes inventory after the change that took it away committed. A rotation,
a deletion or a newer stream wakes the cluster's streams in every process (`OUTBOX`)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from volcano_global.db.base import utcnow
from volcano_global.db.models import ApiToken, Cluster, Node
from volcano_global.errors import DomainError, Superseded, Unauthorized
from volcano_global.services.wakeups import OUTBOX, stream_standing


@dataclass(frozen=True)
class StreamClaim:
    """What an open stream holds: its cluster's epoch, taken when it was accepted, and the
    hash of its token (None: the settings' admin token, which no API revokes)."""

    cluster_id: uuid.UUID
    cluster_name: str
    epoch: int
    token_hash: str | None


async def claim_stream(
    session: AsyncSession, *, cluster: Cluster, token_hash: str | None
) -> StreamClaim:
    """Make the new stream the cluster's stream; older ones end once this commits. Its node
    counts are counted again here: the writes keep them by differences, so a count a writer
    that did not keep them (a replica of an earlier release, during a roll-out) left wrong
    would stay wrong; every stream starts from the truth. The row is locked first, as the
    inventory's writes lock it: the count is then a statement begun after any write of the
    cluster's nodes in flight committed (counted in the UPDATE that waited for it, it would
    read the nodes as they were before that write, on Postgres)."""
    await session.execute(
        select(Cluster.id).where(Cluster.id == cluster.id).with_for_update(key_share=True)
    )
    nodes = select(func.count()).select_from(Node).where(Node.cluster_id == cluster.id)
    epoch = (
        await session.execute(
            update(Cluster)
            .where(Cluster.id == cluster.id)
            .values(
                agent_stream_epoch=Cluster.agent_stream_epoch + 1,
                nodes_total=nodes.scalar_subquery(),
                nodes_ready=nodes.where(Node.ready.is_(True)).scalar_subquery(),
            )
            .returning(Cluster.agent_stream_epoch)
            .execution_options(synchronize_session=False)
        )
    ).scalar_one()
    streams_must_recheck(session, cluster.id)
    return StreamClaim(cluster.id, cluster.name, epoch, token_hash)


def streams_must_recheck(session: AsyncSession, cluster_id: uuid.UUID) -> None:
    """The transaction may end the cluster's open stream (token rotated, cluster deleted, a
    newer stream): wake it, in whichever process holds it, once the transaction commits."""
    OUTBOX.wrote(session, [cluster_id, stream_standing(cluster_id)])


async def lost_standing(session: AsyncSession, claim: StreamClaim) -> DomainError | None:
    """Why the stream must end, or None. The token is judged before the epoch: a stream
    replaced after a rotation is told its token was revoked, the thing to fix."""
    epoch = (
        await session.execute(
            select(Cluster.agent_stream_epoch).where(Cluster.id == claim.cluster_id)
        )
    ).scalar_one_or_none()
    if epoch is None:
        return Unauthorized(f"cluster {claim.cluster_name!r} was deleted")
    ended = await _token_ended(session, claim)
    if ended is not None:
        return ended
    return current_epoch(claim, epoch)


async def lost_standings(
    session: AsyncSession, claims: list[StreamClaim]
) -> list[DomainError | None]:
    """`lost_standing` of several streams, in two statements (their clusters' epochs, their
    tokens), in the order of `claims`."""
    ids = sorted({c.cluster_id for c in claims})
    epochs = dict(
        (
            await session.execute(
                select(Cluster.id, Cluster.agent_stream_epoch).where(Cluster.id.in_(ids))
            )
        ).all()
    )
    tokens = await _tokens(session, [c.token_hash for c in claims if c.token_hash is not None])
    verdicts: list[DomainError | None] = []
    for claim in claims:
        epoch = epochs.get(claim.cluster_id)
        if epoch is None:
            verdicts.append(Unauthorized(f"cluster {claim.cluster_name!r} was deleted"))
        else:
            verdicts.append(_token_verdict(claim, tokens) or current_epoch(claim, epoch))
    return verdicts


async def _tokens(
    session: AsyncSession, hashes: list[str]
) -> dict[str, tuple[datetime | None, datetime | None]]:
    """The stored tokens of these hashes: (revoked, expires) by hash."""
    if not hashes:
        return {}
    rows = await session.execute(
        select(ApiToken.token_hash, ApiToken.revoked_at, ApiToken.expires_at).where(
            ApiToken.token_hash.in_(sorted(set(hashes)))
        )
    )
    return {h: (revoked, expires) for h, revoked, expires in rows}


async def require_standing(session: AsyncSession, *, cluster: Cluster, claim: StreamClaim) -> None:
    """In a write transaction, after the cluster's row is locked: refuse the write of a stream
    that lost its standing."""
    await require_standings(session, [(cluster, claim)])


async def require_standings(session: AsyncSession, held: list[tuple[Cluster, StreamClaim]]) -> None:
    """`require_standing` for several streams' writes in one transaction (their tokens read
    in one statement); raises the first refusal."""
    tokens = await _tokens(session, [c.token_hash for _, c in held if c.token_hash is not None])
    for cluster, claim in held:
        reason = _token_verdict(claim, tokens) or current_epoch(claim, cluster.agent_stream_epoch)
        if reason is not None:
            raise reason


def current_epoch(claim: StreamClaim, epoch: int) -> DomainError | None:
    if epoch != claim.epoch:
        return Superseded(
            f"replaced by a newer stream for cluster {claim.cluster_name!r} (one stream per "
            "cluster: is a second agent running with this cluster's token?)"
        )
    return None


async def _token_ended(session: AsyncSession, claim: StreamClaim) -> DomainError | None:
    if claim.token_hash is None:
        return None
    row = (
        await session.execute(
            select(ApiToken.revoked_at, ApiToken.expires_at).where(
                ApiToken.token_hash == claim.token_hash
            )
        )
    ).first()
    tokens = {} if row is None else {claim.token_hash: (row.revoked_at, row.expires_at)}
    return _token_verdict(claim, tokens)


def _token_verdict(
    claim: StreamClaim, tokens: dict[str, tuple[datetime | None, datetime | None]]
) -> DomainError | None:
    """Why the claim's token no longer holds, given the stored tokens (revoked, expires) by
    hash: not stored (deleted) or revoked, or expired."""
    if claim.token_hash is None:
        return None
    stored = tokens.get(claim.token_hash)
    if stored is None or stored[0] is not None:
        return Unauthorized(
            f"the agent token of cluster {claim.cluster_name!r} was revoked (rotated: "
            "configure the agent with the new token)"
        )
    if stored[1] is not None and stored[1] <= utcnow():
        return Unauthorized(f"the agent token of cluster {claim.cluster_name!r} expired")
    return None
