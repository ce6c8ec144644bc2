"""What a person reads of a large fleet one piece at a time: the member clusters a page at a
time (by name, searchable), and a cluster's topology one level at a time (the console's
collapsible tree), so a page never holds 100 clusters' rows or 600 ToRs at once."""

from __future__ import annotations

import base64
from collections import Counter

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from volcano_global.db.models import Cluster, ClusterState
from volcano_global.errors import Invalid
from volcano_global.jobspec.fields import is_dns_label
from volcano_global.services.inventory.snapshots import DomainView


async def cluster_page(
    session: AsyncSession,
    *,
    text: str | None,
    state: ClusterState | None,
    limit: int | None,
    continue_token: str | None,
) -> tuple[list[Cluster], str | None]:
    """Clusters by name after the token's, whose name holds `text` (any case), in `state`;
    the token of the next page, or None on the last (or with no limit: every cluster)."""
    query = select(Cluster).order_by(Cluster.name)
    if text:
        query = query.where(func.lower(Cluster.name).contains(text.lower(), autoescape=True))
    if state is not None:
        query = query.where(Cluster.state == state)
    if continue_token:
        query = query.where(Cluster.name > _decode(continue_token))
    if limit is None:
        return list((await session.execute(query)).scalars()), None
    rows = list((await session.execute(query.limit(limit + 1))).scalars())
    more = len(rows) > limit
    rows = rows[:limit]
    return rows, (_encode(rows[-1].name) if more else None)


def _encode(name: str) -> str:
    return base64.urlsafe_b64encode(name.encode()).decode().rstrip("=")


def _decode(token: str) -> str:
    """The cluster name the token carries; anything else (a cluster name is a DNS label) is
    refused before it reaches a query."""
    try:
        padded = token + "=" * (-len(token) % 4)
        name = base64.b64decode(padded, altchars=b"-_", validate=True).decode()
    except (ValueError, UnicodeDecodeError):
        name = ""
    if not is_dns_label(name):
        raise Invalid.one("continue (query)", "invalid continue token")
    return name


def topology_level(
    domains: list[DomainView], *, parent: str | None, top: bool
) -> list[tuple[DomainView, int]]:
    """The domains under `parent` (`top`: those under none), or all of them with neither;
    each with how many children it has (what the tree's expander shows)."""
    if parent is not None and top:
        raise Invalid.one("top (query)", "give either parent or top, not both")
    names = {d.name for d in domains}
    if parent is not None and parent not in names:
        raise Invalid.one("parent (query)", f"no topology domain {parent!r} in this cluster")
    children = Counter(d.parent for d in domains if d.parent in names)
    if top:
        chosen = [d for d in domains if d.parent not in names]
    elif parent is not None:
        chosen = [d for d in domains if d.parent == parent]
    else:
        chosen = domains
    return [(d, children[d.name]) for d in chosen]
