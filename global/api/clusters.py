"""/api/v1/clusters: registration, inventory, topology, agent tokens, events."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request, Response

from volcano_global.api.deps import Admin, AppSettings, Caller, Reader, Session
from volcano_global.api.errors import status_response
from volcano_global.db.models import Cluster, ClusterState
from volcano_global.schemas.clusters import (
    AgentEndpoint,
    ClusterCreate,
    ClusterList,
    ClusterOut,
    ClusterRegistered,
    ClusterToken,
    DomainOut,
    InventoryAccepted,
    InventorySnapshot,
    NodeCounts,
    Topology,
)
from volcano_global.schemas.common import GpuCapacity, ListMeta, error_responses
from volcano_global.schemas.jobs import EventList, EventOut
from volcano_global.services import events
from volcano_global.services.data import copies
from volcano_global.services.inventory import clusters, fleet_views
from volcano_global.services.inventory import snapshots as inventory

router = APIRouter(prefix="/api/v1/clusters", tags=["clusters"])


@router.post(
    "",
    status_code=201,
    operation_id="registerCluster",
    responses=error_responses(401, 403, 409, 422),
)
async def register_cluster(
    body: ClusterCreate, session: Session, _: Admin, settings: AppSettings, request: Request
) -> ClusterRegistered:
    """Register a member cluster. The response carries the agent token, shown only this once,
    and where its agent connects."""
    cluster, token = await clusters.register_cluster(
        session, name=body.name, description=body.description, labels=body.labels
    )
    (out,) = await present_clusters(session, [cluster])
    endpoint = AgentEndpoint(
        address=settings.agents.address,
        port=getattr(request.app.state, "grpc_port", None) or settings.grpc_port,
        tls=settings.tls.agents_enabled,
        client_certificate=settings.tls.agents_enabled and settings.tls.client_ca_file is not None,
    )
    return ClusterRegistered(**out.model_dump(), agent_token=token, agent_endpoint=endpoint)


@router.get("", operation_id="listClusters", responses=error_responses(401, 403, 422))
async def list_clusters(
    session: Session,
    _: Reader,
    text: Annotated[str | None, Query(max_length=63, description="Part of the name")] = None,
    state: ClusterState | None = None,
    limit: Annotated[
        int | None, Query(ge=1, le=1000, description="Clusters per page (default: all)")
    ] = None,
    continue_: Annotated[str | None, Query(alias="continue", max_length=512)] = None,
) -> ClusterList:
    """Member clusters by name; with `limit`, one page at a time (pass `metadata.continue`
    back for the next)."""
    rows, token = await fleet_views.cluster_page(
        session, text=text, state=state, limit=limit, continue_token=continue_
    )
    return ClusterList(
        items=await present_clusters(session, rows), metadata=ListMeta(continue_=token)
    )


@router.get("/{name}", operation_id="getCluster", responses=error_responses(401, 403, 404))
async def get_cluster(name: str, session: Session, caller: Caller) -> ClusterOut:
    cluster = await clusters.get_cluster(session, name=name)
    caller.require_cluster_read(cluster.id)
    (out,) = await present_clusters(session, [cluster])
    return out


@router.delete(
    "/{name}",
    status_code=204,
    operation_id="deleteCluster",
    responses=error_responses(401, 403, 404, 409),
)
async def delete_cluster(name: str, session: Session, _: Admin) -> Response:
    """Refused while the cluster holds shares of active jobs, or copies from it into other
    clusters are being stopped: those stops are committed (their agents are told) with the
    409, and the deletion goes through once the agents say the copies stopped."""
    cluster = await clusters.get_cluster(session, name=name)
    await clusters.require_no_active_shares(session, cluster)
    stopping = await copies.stop_cluster_copies(session, cluster_id=cluster.id, name=name)
    if stopping:
        where = ", ".join(
            sorted({f"{c.data_source} to {c.destination_cluster.name}" for c in stopping})
        )
        return status_response(
            409,
            "Conflict",
            f"cluster {name!r} is the source of copies being stopped ({where}): delete it "
            "again once their agents say they stopped",
        )
    await clusters.delete_cluster(session, name=name)
    return Response(status_code=204)


@router.post(
    "/{name}/token", operation_id="rotateClusterToken", responses=error_responses(401, 403, 404)
)
async def rotate_token(name: str, session: Session, _: Admin) -> ClusterToken:
    """Revoke the cluster's agent token and issue a new one (shown only this once)."""
    token = await clusters.rotate_agent_token(session, name=name)
    return ClusterToken(cluster=name, agent_token=token)


@router.put(
    "/{name}/inventory",
    operation_id="replaceClusterInventory",
    responses=error_responses(401, 403, 404, 413, 422),
)
async def replace_inventory(
    name: str, body: InventorySnapshot, session: Session, caller: Caller, settings: AppSettings
) -> InventoryAccepted:
    """Replace the cluster's whole inventory (nodes and HyperNode tree). Callable by the
    cluster's own agent token or an admin."""
    # Authorised before anything is locked: another cluster's token must not wait on the row.
    cluster_id = await clusters.get_cluster_id(session, name=name)
    caller.require_cluster(cluster_id)
    # The cluster's row first, as an agent's inventory writes take it: deleting its nodes
    # before locking it (the UPDATE at the end) could deadlock with a delta holding the row.
    cluster = await clusters.lock_cluster(session, name=name, cluster_id=cluster_id)
    cluster = await inventory.replace_inventory(
        session, cluster=cluster, snapshot=body, max_nodes=settings.limits.max_cluster_nodes
    )
    await clusters.agent_seen(session, cluster=cluster)  # a push counts as a heartbeat
    return InventoryAccepted(
        cluster=cluster.name,
        inventory_generation=cluster.inventory_generation,
        nodes=len(body.nodes),
        domains=len(body.domains),
        capacity=_capacity(cluster),
    )


@router.get(
    "/{name}/topology",
    operation_id="getClusterTopology",
    responses=error_responses(401, 403, 404, 422),
)
async def get_topology(
    name: str,
    session: Session,
    caller: Caller,
    parent: Annotated[
        str | None, Query(max_length=253, description="Only the domains under this one")
    ] = None,
    top: Annotated[bool, Query(description="Only the top tier's domains")] = False,
) -> Topology:
    """The cluster's HyperNode tree with free GPUs and node readiness per domain: whole, or
    one level (`top`, then `parent=NAME` for a domain's children: the console's tree)."""
    cluster = await clusters.get_cluster(session, name=name)
    caller.require_cluster_read(cluster.id)
    level = await fleet_views.topology_level(session, cluster=cluster, parent=parent, top=top)
    return Topology(
        cluster=cluster.name,
        domains=[
            DomainOut(
                name=d.name,
                tier=d.tier,
                tier_name=d.tier_name,
                parent=d.parent,
                capacity=[
                    GpuCapacity(gpu_model=m, total=t, free=f, used=t - f)
                    for m, (t, f) in sorted(d.capacity.items())
                ],
                nodes=d.nodes,
                nodes_not_ready=d.nodes_not_ready,
                children=children,
            )
            for d, children in level
        ],
    )


@router.get(
    "/{name}/events", operation_id="listClusterEvents", responses=error_responses(401, 403, 404)
)
async def cluster_events(name: str, session: Session, _: Reader) -> EventList:
    cluster = await clusters.get_cluster(session, name=name)
    rows = await events.list_events(session, cluster_id=cluster.id)
    return EventList(items=[EventOut.model_validate(e) for e in rows])


async def present_clusters(session: Session, rows: list[Cluster]) -> list[ClusterOut]:
    # The node counts the inventory's writes keep on the row (`Cluster.nodes_total`): listing
    # every cluster reads no node.
    result = []
    for cluster in rows:
        result.append(
            ClusterOut(
                name=cluster.name,
                description=cluster.description,
                labels=cluster.labels,
                state=cluster.state.value,
                last_heartbeat_at=cluster.last_heartbeat_at,
                inventory_generation=cluster.inventory_generation,
                inventory_updated_at=cluster.inventory_updated_at,
                capacity=_capacity(cluster),
                nodes=NodeCounts(total=cluster.nodes_total, ready=cluster.nodes_ready),
                created_at=cluster.created_at,
            )
        )
    return result


def _capacity(cluster: Cluster) -> list[GpuCapacity]:
    return [
        GpuCapacity(
            gpu_model=c.gpu_model,
            total=c.total_gpus,
            free=c.free_gpus,
            used=c.total_gpus - c.free_gpus,
        )
        for c in sorted(cluster.capacities, key=lambda c: c.gpu_model)
    ]
