"""Request-scoped dependencies: the database session (the request commits) and the caller."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy.ext.asyncio import AsyncSession

from volcano_global.errors import Unauthorized
from volcano_global.services.tokens import Principal, authenticate
from volcano_global.settings import Settings

_bearer = HTTPBearer(auto_error=False, description="A token issued by the Global.")


def get_settings(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


async def get_session(request: Request) -> AsyncIterator[AsyncSession]:
    """One unit of work per request, committed before the response is sent (so a failed
    commit is reported to the caller instead of being lost)."""
    async with request.app.state.sessions() as session:
        try:
            yield session
            await session.commit()
        except BaseException:
            await session.rollback()
            raise


Session = Annotated[AsyncSession, Depends(get_session, scope="function")]
AppSettings = Annotated[Settings, Depends(get_settings)]


async def get_principal(
    session: Session,
    settings: AppSettings,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Principal:
    if credentials is None or not credentials.credentials:
        raise Unauthorized("missing bearer token (Authorization: Bearer <token>)")
    admin = settings.admin_token.get_secret_value() if settings.admin_token else None
    return await authenticate(session, token=credentials.credentials, admin_token=admin)


async def get_admin(principal: Annotated[Principal, Depends(get_principal)]) -> Principal:
    principal.require_admin()
    return principal


async def get_reader(principal: Annotated[Principal, Depends(get_principal)]) -> Principal:
    principal.require_reader()
    return principal


async def get_submitter(principal: Annotated[Principal, Depends(get_principal)]) -> Principal:
    principal.require_submitter()
    return principal


Caller = Annotated[Principal, Depends(get_principal)]
Admin = Annotated[Principal, Depends(get_admin)]
Reader = Annotated[Principal, Depends(get_reader)]  # admin, reader, queue user (its queues)
Submitter = Annotated[Principal, Depends(get_submitter)]  # admin, queue user (its queues)
