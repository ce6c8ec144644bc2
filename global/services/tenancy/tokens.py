"""Bearer tokens: issuing, hashing, authenticating, and the first admin token."""

from __future__ import annotations

import functools
import hashlib
import hmac
import secrets
import uuid
from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import bindparam, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from volcano_global.db.base import utcnow
from volcano_global.db.fast_reads import Read
from volcano_global.db.models import ApiToken, Queue, TokenRole
from volcano_global.errors import Forbidden, Invalid, NotFound, Unauthorized
from volcano_global.services.tenancy.token_names import check_token_name

TOKEN_PREFIX = "vg_"


@dataclass(frozen=True)
class Principal:
    """Who is calling: a name for audit and events, a role, and the cluster an agent is bound to."""

    name: str
    role: TokenRole
    cluster_id: uuid.UUID | None = None
    job_id: uuid.UUID | None = None
    queues: tuple[str, ...] = ()  # a queue user's queues
    # When the token was issued: a job token is issued with each placement of its job, so
    # this tells which run of the job its processes belong to.
    issued_at: datetime | None = None
    # The token's row (None: the admin token of the settings): what audit records name, as
    # the free-text name may read like another caller's.
    token_id: uuid.UUID | None = None

    def require_admin(self) -> None:
        if self.role is not TokenRole.ADMIN:
            raise Forbidden(f"{self.name} ({self.role.value} token) may not call this endpoint")

    def require_cluster(self, cluster_id: uuid.UUID) -> None:
        """Admins may act for any cluster; an agent only for its own."""
        if self.role is TokenRole.ADMIN:
            return
        if self.role is not TokenRole.AGENT or self.cluster_id != cluster_id:
            raise Forbidden(f"{self.name} may not act for another cluster")

    def require_cluster_read(self, cluster_id: uuid.UUID) -> None:
        """A cluster's own agent, or anyone who may read the federation."""
        if self.role is TokenRole.AGENT and self.cluster_id == cluster_id:
            return
        self.require_reader()

    def require_reader(self) -> None:
        """Reading the federation: admins, readers and queue users (these see their queues)."""
        if self.role not in (TokenRole.ADMIN, TokenRole.READER, TokenRole.QUEUE_USER):
            raise Forbidden(f"{self.name} ({self.role.value} token) may not read this")

    def require_submitter(self) -> None:
        if self.role not in (TokenRole.ADMIN, TokenRole.QUEUE_USER):
            raise Forbidden(f"{self.name} ({self.role.value} token) may not submit or cancel jobs")

    def visible_queues(self) -> tuple[str, ...] | None:
        """The queues this caller may see (None: all)."""
        return self.queues if self.role is TokenRole.QUEUE_USER else None

    def require_queue(self, queue: str) -> None:
        visible = self.visible_queues()
        if visible is not None and queue not in visible:
            raise Forbidden(
                f"{self.name} may not use queue {queue!r} (allowed: {', '.join(visible)})"
            )

    def require_job(self, job_id: uuid.UUID) -> None:
        """Admins may report for any job; a job token only for its own job."""
        if self.role is TokenRole.ADMIN:
            return
        if self.role is not TokenRole.JOB or self.job_id != job_id:
            raise Forbidden(f"{self.name} may not report for another job")


def new_secret() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


@functools.lru_cache(maxsize=4)
def _digest_of(admin_token: str) -> str:
    """The configured admin token's hash, computed once (it is compared on every request)."""
    return hash_token(admin_token)


def issue_token(
    session: AsyncSession,
    *,
    name: str,
    role: TokenRole,
    cluster_id: uuid.UUID | None = None,
    job_id: uuid.UUID | None = None,
    queues: list[str] | None = None,
    expires_at: datetime | None = None,
) -> str:
    """Store a new token's hash (written with the session's next flush) and return the token
    itself (the only time it is seen)."""
    token = new_secret()
    session.add(
        ApiToken(
            name=name,
            role=role,
            token_hash=hash_token(token),
            cluster_id=cluster_id,
            job_id=job_id,
            queues=queues,
            expires_at=expires_at,
        )
    )
    return token


async def revoke_cluster_tokens(session: AsyncSession, *, cluster_id: uuid.UUID) -> None:
    await session.execute(
        update(ApiToken)
        .where(ApiToken.cluster_id == cluster_id, ApiToken.revoked_at.is_(None))
        .values(revoked_at=utcnow())
    )


async def revoke_job_tokens(
    session: AsyncSession, *, job_ids: Collection[uuid.UUID], ended_at: datetime
) -> None:
    """A run of each job ended by `ended_at`: their job tokens (every one issued until then;
    a next run's is issued after) stop working at once, so none outlives its run. One
    statement for all of them."""
    if not job_ids:
        return
    await session.execute(
        update(ApiToken)
        .where(
            ApiToken.job_id.in_(sorted(set(job_ids))),
            ApiToken.role == TokenRole.JOB,
            ApiToken.revoked_at.is_(None),
            ApiToken.created_at <= ended_at,
        )
        .values(revoked_at=ended_at)
    )


def configured_admin(token: str, admin_token: str | None) -> Principal | None:
    """The admin, if `token` is the admin token of the settings (no database needed)."""
    if admin_token is not None and hmac.compare_digest(hash_token(token), _digest_of(admin_token)):
        return Principal(name="admin", role=TokenRole.ADMIN)
    return None


async def authenticate(session: AsyncSession, *, token: str, admin_token: str | None) -> Principal:
    admin = configured_admin(token, admin_token)
    if admin is not None:
        return admin
    row = await _BY_DIGEST.one_or_none(session, {"digest": hash_token(token)})
    if row is None or row["revoked_at"] is not None:
        raise Unauthorized("invalid or revoked token")
    if row["expires_at"] is not None and row["expires_at"] <= utcnow():
        raise Unauthorized("token expired")
    return Principal(
        name=row["name"],
        role=row["role"],
        cluster_id=row["cluster_id"],
        job_id=row["job_id"],
        queues=tuple(row["queues"] or ()),
        issued_at=row["created_at"],
        token_id=row["id"],
    )


# Read on every request with a stored token: on the driver, not through the ORM (db/fast_reads).
_BY_DIGEST = Read(
    select(
        ApiToken.id,
        ApiToken.name,
        ApiToken.role,
        ApiToken.cluster_id,
        ApiToken.job_id,
        ApiToken.queues,
        ApiToken.created_at,
        ApiToken.revoked_at,
        ApiToken.expires_at,
    ).where(ApiToken.token_hash == bindparam("digest"))
)


async def ensure_admin_token(session: AsyncSession) -> str | None:
    """Create the bootstrap admin token if no admin token exists yet; return it (once)."""
    existing = await session.execute(
        select(ApiToken.id).where(ApiToken.role == TokenRole.ADMIN, ApiToken.revoked_at.is_(None))
    )
    if existing.first() is not None:
        return None
    return issue_token(session, name="bootstrap-admin", role=TokenRole.ADMIN)


async def create_user_token(
    session: AsyncSession,
    *,
    name: str,
    role: TokenRole,
    queues: list[str],
    expires_at: datetime | None,
) -> tuple[ApiToken, str]:
    """An admin, reader or queue-user token (agent and job tokens come with their cluster or
    job). A queue user needs at least one existing queue; reserved names are refused."""
    check_token_name(name)
    if role not in (TokenRole.ADMIN, TokenRole.READER, TokenRole.QUEUE_USER):
        raise Invalid.one("role", "must be admin, reader or queue-user")
    if role is TokenRole.QUEUE_USER:
        if not queues:
            raise Invalid.one("queues", "a queue-user token needs at least one queue")
        known = set(
            (await session.execute(select(Queue.name).where(Queue.name.in_(queues)))).scalars()
        )
        for i, queue in enumerate(queues):
            if queue not in known:
                raise Invalid.one(f"queues[{i}]", f"queue {queue!r} does not exist")
    elif queues:
        raise Invalid.one(
            "queues", f"only a queue-user token is limited to queues, not {role.value}"
        )
    if expires_at is not None and expires_at <= utcnow():
        raise Invalid.one("expiresAt", "must be in the future")
    secret = issue_token(
        session, name=name, role=role, queues=queues or None, expires_at=expires_at
    )
    row = (
        await session.execute(select(ApiToken).where(ApiToken.token_hash == hash_token(secret)))
    ).scalar_one()
    return row, secret


async def list_user_tokens(session: AsyncSession) -> list[ApiToken]:
    rows = await session.execute(
        select(ApiToken)
        .where(ApiToken.role.in_([TokenRole.ADMIN, TokenRole.READER, TokenRole.QUEUE_USER]))
        .order_by(ApiToken.created_at)
    )
    return list(rows.scalars())


async def revoke_token(session: AsyncSession, *, token_id: uuid.UUID) -> ApiToken:
    row = await session.get(ApiToken, token_id)
    if row is None or row.role not in (TokenRole.ADMIN, TokenRole.READER, TokenRole.QUEUE_USER):
        raise NotFound(f"token {token_id} not found")
    if row.revoked_at is None:
        row.revoked_at = utcnow()
        await session.flush()
    return row
