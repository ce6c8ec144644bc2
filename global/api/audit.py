"""The audit records of REST calls: who called (token name and id) and from where.

The address is the socket peer's. X-Forwarded-For is believed only from a peer listed in
`audit.trusted_proxies`, and then only back to the first hop that is not a listed proxy (the
entries further left are whatever the client wrote): a client cannot claim another address.
"""

from __future__ import annotations

import ipaddress
import logging
from typing import Any

from fastapi import Request
from sqlalchemy.ext.asyncio import AsyncSession

from volcano_global.db.engine import transaction
from volcano_global.services import events
from volcano_global.services.tenancy.tokens import Principal
from volcano_global.settings import Settings

log = logging.getLogger(__name__)


def client_address(request: Request) -> str | None:
    """The address the call came from, as the audit trail records it."""
    peer = request.client.host if request.client else None
    settings: Settings = request.app.state.settings
    proxies = settings.audit.trusted_proxies
    if peer is None or not proxies or not _listed(_ip(peer), proxies):
        return peer
    hops = ",".join(request.headers.getlist("x-forwarded-for")).split(",")
    nearest = peer  # the nearest hop known so far: a trusted proxy
    for hop in reversed([h.strip() for h in hops if h.strip()]):
        ip = _ip(hop)
        if ip is None:  # not written by a proxy: the one that forwarded it is what is known
            return nearest
        if not _listed(ip, proxies):
            return str(ip)
        nearest = str(ip)
    return nearest


def _ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None


def _listed(ip: ipaddress.IPv4Address | ipaddress.IPv6Address | None, proxies: list[Any]) -> bool:
    return ip is not None and any(ip in network for network in proxies)


def audit_row(request: Request, caller: Principal) -> dict[str, object]:
    """The accepted call's record, for the job writer's batch (written with the job)."""
    return events.event_row(
        reason=events.AUDIT,
        message=events.audit_message(caller.name, request.method, request.url.path),
        token_id=caller.token_id,
        client_address=client_address(request),
    )


async def record_accepted(session: AsyncSession, request: Request, caller: Principal) -> None:
    """The accepted call's record, in the call's own transaction (`session`)."""
    await events.record_audit(
        session,
        who=caller.name,
        method=request.method,
        path=request.url.path,
        token_id=caller.token_id,
        client_address=client_address(request),
    )


async def record_denied(request: Request, caller: Principal, *whys: str) -> None:
    """A refused call's record (one per refusal `whys` gives: the documents of an apply), in
    a transaction of its own, as the call changed nothing."""
    address = client_address(request)
    try:
        async with transaction(request.app.state.sessions) as session:
            for why in whys:
                await events.record_audit(
                    session,
                    who=caller.name,
                    method=request.method,
                    path=request.url.path,
                    denied=why,
                    token_id=caller.token_id,
                    client_address=address,
                )
    except Exception as exc:  # the refusal stands even if the trail cannot be written now
        log.warning("could not audit a refused call: %s", exc)
