"""/api/v1/tokens: admin, reader and queue-user tokens (admin only)."""

from __future__ import annotations

import uuid

from fastapi import APIRouter

from volcano_global.api.deps import Admin, Session
from volcano_global.db.models import ApiToken, TokenRole
from volcano_global.schemas.common import error_responses
from volcano_global.schemas.tokens import TokenCreate, TokenIssued, TokenList, TokenOut
from volcano_global.services.tenancy import tokens

router = APIRouter(prefix="/api/v1/tokens", tags=["tokens"])


@router.post(
    "", status_code=201, operation_id="createToken", responses=error_responses(401, 403, 422)
)
async def create_token(body: TokenCreate, session: Session, _: Admin) -> TokenIssued:
    """Issue a token: `reader` reads everything and changes nothing; `queue-user` submits to,
    sees and cancels only the jobs of its queues; `admin` does everything."""
    row, secret = await tokens.create_user_token(
        session,
        name=body.name,
        role=TokenRole(body.role),
        queues=list(body.queues),
        expires_at=body.expires_at,
    )
    return TokenIssued(**_out(row).model_dump(), token=secret)


@router.get("", operation_id="listTokens", responses=error_responses(401, 403))
async def list_tokens(session: Session, _: Admin) -> TokenList:
    return TokenList(items=[_out(t) for t in await tokens.list_user_tokens(session)])


@router.delete(
    "/{token_id}", operation_id="revokeToken", responses=error_responses(401, 403, 404, 422)
)
async def revoke_token(token_id: uuid.UUID, session: Session, _: Admin) -> TokenOut:
    """Revoke a token at once (idempotent)."""
    return _out(await tokens.revoke_token(session, token_id=token_id))


def _out(row: ApiToken) -> TokenOut:
    return TokenOut(
        id=row.id,
        name=row.name,
        role=row.role.value,
        queues=list(row.queues or []),
        created_at=row.created_at,
        expires_at=row.expires_at,
        revoked_at=row.revoked_at,
    )
