"""Which namespace a client request acts in (docs/namespaces.md).

Every client route on namespaced things (workflows, executions, schedules, secrets,
the task cache, the watch stream) takes its namespace from the ``namespace``
dependency, and ``include`` mounts it twice: under ``/namespaces/{namespace}`` (the
API's form, in the OpenAPI schema, like Kubernetes' paths) and without that prefix
(``/executions``) as an alias for ``default``, left out of the schema, so scripts that
name no namespace keep working. The worker protocol's routes take no namespace: they are mounted once,
as they are, and the server finds a namespace from the execution.
"""

from __future__ import annotations

from fastapi import APIRouter, Depends, FastAPI, Path, Request
from fastapi.routing import APIRoute

from flux.domain.names import NAME_MAX, NAME_PATTERN
from flux.domain.namespaces import DEFAULT
from flux.server import namespaces
from flux.server.auth import CLIENT
from flux.server.errors import responses
from flux.server.services import Services, services

PREFIX = "/namespaces/{namespace}"
NAME = Path(
    pattern=NAME_PATTERN,
    max_length=NAME_MAX,
    description="The namespace; the same path without this prefix is 'default'",
)


async def _exists(namespace: str = NAME, svc: Services = Depends(services)) -> None:
    """The prefix's own: declares ``{namespace}`` (a malformed one is a 422), 404 with
    its name unless it exists (from memory: no query)."""
    if await svc.namespaces.state(svc.db, namespace) is None:
        raise namespaces.not_found(namespace)


async def namespace(request: Request) -> str:
    """A route's namespace: the prefix's (checked by ``_exists``), or ``default`` at the alias."""
    return request.path_params.get("namespace", DEFAULT)


def _takes_namespace(dependant) -> bool:  # noqa: ANN001 - FastAPI's Dependant
    return any(dep.call is namespace or _takes_namespace(dep) for dep in dependant.dependencies)


def include(app: FastAPI, router: APIRouter) -> None:
    """Mount ``router``: its routes that take a namespace under the prefix and at the
    alias; the others once, as they are. Match order within the router is kept."""
    scoped, plain = APIRouter(), APIRouter()
    for route in router.routes:
        takes = isinstance(route, APIRoute) and _takes_namespace(route.dependant)
        (scoped if takes else plain).routes.append(route)
    app.include_router(plain)
    app.include_router(scoped, prefix=PREFIX, dependencies=[*CLIENT, Depends(_exists)], responses=responses(404, 422))
    app.include_router(scoped, include_in_schema=False)
