"""/api/v1/links: network links between member clusters."""

from __future__ import annotations

from fastapi import APIRouter, Response

from volcano_global.api.deps import Admin, Reader, Session
from volcano_global.db.models import Link
from volcano_global.schemas.common import error_responses
from volcano_global.schemas.links import LinkCreate, LinkList, LinkOut
from volcano_global.services.inventory import links

router = APIRouter(prefix="/api/v1/links", tags=["links"])


@router.post(
    "", status_code=201, operation_id="createLink", responses=error_responses(401, 403, 409, 422)
)
async def create_link(body: LinkCreate, session: Session, _: Admin) -> LinkOut:
    link = await links.create_link(
        session,
        cluster_a=body.cluster_a,
        cluster_b=body.cluster_b,
        capacity_gbps=body.capacity_gbps,
        latency_ms=body.latency_ms,
    )
    return (await present_links(session, [link]))[0]


@router.get("", operation_id="listLinks", responses=error_responses(401, 403))
async def list_links(session: Session, _: Reader) -> LinkList:
    return LinkList(items=await present_links(session, await links.list_links(session)))


@router.delete(
    "/{cluster_a}/{cluster_b}",
    status_code=204,
    operation_id="deleteLink",
    responses=error_responses(401, 403, 404, 409),
)
async def delete_link(cluster_a: str, cluster_b: str, session: Session, _: Admin) -> Response:
    """Delete the link between two clusters (in either order)."""
    await links.delete_link(session, cluster_a=cluster_a, cluster_b=cluster_b)
    return Response(status_code=204)


async def present_links(session: Session, rows: list[Link]) -> list[LinkOut]:
    reserved = await links.reserved_gbps(session, link_ids=[link.id for link in rows])
    return [
        LinkOut(
            cluster_a=link.cluster_a.name,
            cluster_b=link.cluster_b.name,
            capacity_gbps=link.capacity_gbps,
            latency_ms=link.latency_ms,
            reserved_gbps=reserved.get(link.id, 0.0),
            free_gbps=max(link.capacity_gbps - reserved.get(link.id, 0.0), 0.0),
            created_at=link.created_at,
        )
        for link in rows
    ]
