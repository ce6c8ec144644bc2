"""Request-scoped dependencies: the database session (the request commits) and the caller."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy.ext.asyncio import AsyncSession

from volcano_global.api import audit
from volcano_global.db.engine import autocommit
from volcano_global.errors import Unauthorized
from volcano_global.services.tenancy.tokens import Principal, authenticate, configured_admin
from volcano_global.settings import Settings

MUTATING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
BEARER = HTTPBearer(auto_error=False, description="A token issued by the Global.")


async def get_settings(request: Request) -> Settings:
    return _settings(request)


async def get_session(request: Request) -> AsyncIterator[AsyncSession]:
    """One unit of work per request, committed before the response is sent (so a failed
    commit is reported to the caller instead of being lost). A read (GET) only reads: its
    statements run in autocommit (`autocommit`)."""
    async with request.app.state.sessions() as session:
        try:
            if request.method not in MUTATING:
                await autocommit(session)
            yield session
            principal = getattr(request.state, "principal", None)
            if principal is not None and request.method in MUTATING:
                await audit.record_accepted(session, request, principal)
            await session.commit()
        except BaseException:
            await session.rollback()
            raise


Session = Annotated[AsyncSession, Depends(get_session, scope="function")]
AppSettings = Annotated[Settings, Depends(get_settings)]


Credentials = Annotated[HTTPAuthorizationCredentials | None, Depends(BEARER)]


def _settings(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


async def _caller(
    request: Request, session: AsyncSession, credentials: HTTPAuthorizationCredentials | None
) -> Principal:
    principal = await authenticate(
        session, token=_token(credentials), admin_token=_admin_token(_settings(request))
    )
    request.state.principal = principal  # for the audit record of a mutating call
    return principal


# Each role is one dependency over the session and the bearer credentials, not a chain of
# them: FastAPI resolves every dependency of every request, and a chain costs more than the
# role check it wraps (docs/benchmarks.md, "Server cost: dated runs").


async def get_principal(request: Request, session: Session, credentials: Credentials) -> Principal:
    return await _caller(request, session, credentials)


async def get_admin(request: Request, session: Session, credentials: Credentials) -> Principal:
    principal = await _caller(request, session, credentials)
    principal.require_admin()
    return principal


async def get_reader(request: Request, session: Session, credentials: Credentials) -> Principal:
    principal = await _caller(request, session, credentials)
    principal.require_reader()
    return principal


async def get_submitter(request: Request, session: Session, credentials: Credentials) -> Principal:
    principal = await _caller(request, session, credentials)
    principal.require_submitter()
    return principal


async def get_submitter_alone(request: Request, credentials: Credentials) -> Principal:
    """The caller of an endpoint that keeps no session for the request (a submission is
    written by the job writer, audit record included): the admin token is recognised without
    the database, any other token is read in a session of its own, closed at once."""
    principal = await _alone(request, _token(credentials))
    request.state.principal = principal  # a refusal below is audited
    principal.require_submitter()
    return principal


async def bearer_caller(request: Request) -> Principal:
    """The caller by the request's bearer token alone, outside the dependencies (the error
    handler judging who calls before what the call holds). Raises Unauthorized."""
    return await _alone(request, _token(await BEARER(request)))


async def _alone(request: Request, token: str) -> Principal:
    """The admin token is recognised without the database, any other token is read in a
    session of its own, closed at once."""
    principal = configured_admin(token, _admin_token(_settings(request)))
    if principal is None:
        async with request.app.state.sessions() as session:
            principal = await authenticate(session, token=token, admin_token=None)
    return principal


def _token(credentials: HTTPAuthorizationCredentials | None) -> str:
    if credentials is None or not credentials.credentials:
        raise Unauthorized("missing bearer token (Authorization: Bearer <token>)")
    return credentials.credentials


def _admin_token(settings: Settings) -> str | None:
    return settings.admin_token.get_secret_value() if settings.admin_token else None


Caller = Annotated[Principal, Depends(get_principal)]
Admin = Annotated[Principal, Depends(get_admin)]
Reader = Annotated[Principal, Depends(get_reader)]  # admin, reader, queue user (its queues)
Submitter = Annotated[Principal, Depends(get_submitter)]  # admin, queue user (its queues)
LoneSubmitter = Annotated[Principal, Depends(get_submitter_alone)]  # the same, no session
