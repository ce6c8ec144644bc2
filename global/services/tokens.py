"""Bearer tokens: issuing, hashing, authenticating, and the first admin token."""

from __future__ import annotations

import hashlib
import hmac
import secrets
import uuid
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession

from volcano_global.db.base import utcnow
from volcano_global.db.models import ApiToken, TokenRole
from volcano_global.errors import Forbidden, Unauthorized

TOKEN_PREFIX = "vg_"


@dataclass(frozen=True)
class Principal:
    """Who is calling: a name for audit and events, a role, and the cluster an agent is bound to."""

    name: str
    role: TokenRole
    cluster_id: uuid.UUID | None = None
    job_id: uuid.UUID | None = None

    def require_admin(self) -> None:
        if self.role is not TokenRole.ADMIN:
            raise Forbidden(f"{self.name} ({self.role.value} token) may not call this endpoint")

    def require_cluster(self, cluster_id: uuid.UUID) -> None:
        """Admins may act for any cluster; an agent only for its own."""
        if self.role is TokenRole.ADMIN:
            return
        if self.role is not TokenRole.AGENT or self.cluster_id != cluster_id:
            raise Forbidden(f"{self.name} may not act for another cluster")

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


async def issue_token(
    session: AsyncSession,
    *,
    name: str,
    role: TokenRole,
    cluster_id: uuid.UUID | None = None,
    job_id: uuid.UUID | None = None,
    expires_at: datetime | None = None,
) -> str:
    """Store a new token's hash and return the token itself (the only time it is seen)."""
    token = new_secret()
    session.add(
        ApiToken(
            name=name,
            role=role,
            token_hash=hash_token(token),
            cluster_id=cluster_id,
            job_id=job_id,
            expires_at=expires_at,
        )
    )
    await session.flush()
    return token


async def revoke_cluster_tokens(session: AsyncSession, *, cluster_id: uuid.UUID) -> None:
    await session.execute(
        update(ApiToken)
        .where(ApiToken.cluster_id == cluster_id, ApiToken.revoked_at.is_(None))
        .values(revoked_at=utcnow())
    )


async def authenticate(session: AsyncSession, *, token: str, admin_token: str | None) -> Principal:
    digest = hash_token(token)
    if admin_token is not None and hmac.compare_digest(digest, hash_token(admin_token)):
        return Principal(name="admin", role=TokenRole.ADMIN)
    row = (
        await session.execute(select(ApiToken).where(ApiToken.token_hash == digest))
    ).scalar_one_or_none()
    if row is None or row.revoked_at is not None:
        raise Unauthorized("invalid or revoked token")
    if row.expires_at is not None and row.expires_at <= utcnow():
        raise Unauthorized("token expired")
    return Principal(name=row.name, role=row.role, cluster_id=row.cluster_id, job_id=row.job_id)


async def ensure_admin_token(session: AsyncSession) -> str | None:
    """Create the bootstrap admin token if no admin token exists yet; return it (once)."""
    existing = await session.execute(
        select(ApiToken.id).where(ApiToken.role == TokenRole.ADMIN, ApiToken.revoked_at.is_(None))
    )
    if existing.first() is not None:
        return None
    return await issue_token(session, name="bootstrap-admin", role=TokenRole.ADMIN)
