"""/api/v1/priorityclasses: Kubernetes PriorityClass documents (YAML or JSON)."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from volcano_global.api.deps import Admin, Reader, Session
from volcano_global.api.documents import document_body, read_document
from volcano_global.errors import Invalid
from volcano_global.jobspec.priority_classes import PriorityClass, read_priority_class
from volcano_global.schemas.common import error_responses
from volcano_global.schemas.priority_classes import (
    PriorityClassList,
    PriorityClassMeta,
    PriorityClassOut,
)
from volcano_global.services.tenancy import priority_classes as classes

router = APIRouter(prefix="/api/v1/priorityclasses", tags=["priority classes"])
_BODY = document_body("A Kubernetes PriorityClass (scheduling.k8s.io/v1)")


def present(pc: PriorityClass) -> PriorityClassOut:
    return PriorityClassOut(
        metadata=PriorityClassMeta(name=pc.name),
        value=pc.value,
        preemption_policy=pc.preemption_policy,  # type: ignore[arg-type]
        global_default=pc.global_default,
        description=pc.description,
        built_in=pc.built_in,
    )


@router.post(
    "",
    status_code=201,
    operation_id="createPriorityClass",
    responses=error_responses(401, 403, 409, 413, 415, 422),
    openapi_extra=_BODY,
)
async def create_priority_class(request: Request, session: Session, _: Admin) -> PriorityClassOut:
    """Create a class; jobs naming it are accepted at once."""
    pc = read_priority_class(await read_document(request))
    return present(await classes.create_priority_class(session, pc=pc))


@router.put(
    "/{name}",
    operation_id="applyPriorityClass",
    responses=error_responses(401, 403, 409, 413, 415, 422),
    openapi_extra=_BODY,
)
async def apply_priority_class(
    name: str, request: Request, session: Session, _: Admin
) -> PriorityClassOut:
    """Create the class or change its description and globalDefault (value and
    preemptionPolicy are immutable, as in Kubernetes)."""
    pc = read_priority_class(await read_document(request))
    if pc.name != name:
        raise Invalid.one("metadata.name", f"must be {name!r}, the class in the path")
    return present(await classes.replace_priority_class(session, pc=pc))


@router.get("", operation_id="listPriorityClasses", responses=error_responses(401, 403))
async def list_priority_classes(session: Session, _: Reader) -> PriorityClassList:
    return PriorityClassList(
        items=[present(pc) for pc in await classes.list_priority_classes(session)]
    )


@router.get("/{name}", operation_id="getPriorityClass", responses=error_responses(401, 403, 404))
async def get_priority_class(name: str, session: Session, _: Reader) -> PriorityClassOut:
    return present(await classes.get_priority_class(session, name=name))


@router.delete(
    "/{name}",
    status_code=204,
    operation_id="deletePriorityClass",
    responses=error_responses(401, 403, 404, 409),
)
async def delete_priority_class(name: str, session: Session, _: Admin) -> Response:
    """Jobs already submitted keep the priority they were given."""
    await classes.delete_priority_class(session, name=name)
    return Response(status_code=204)
