"""The routes of the secret store (``flux.server.secrets``): set, list (names and times
only) and delete for clients; the values of an execution's requested secrets for the
worker that holds its current attempt."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Path
from fastapi.responses import Response

from flux.domain.names import NAME_PATTERN
from flux.server import secrets
from flux.server.auth import CLIENT, worker
from flux.server.errors import responses
from flux.server.executions.checkpoints import fenced_row
from flux.server.registry import Member
from flux.server.schemas import SecretInfo, SecretRequest, SecretValue, SecretValues
from flux.server.scope import namespace
from flux.server.services import Services, services

ANSWERS = responses(401, 404, 409, 413, 422)
WORKER = responses(401, 403, 404, 409, 413, 422)
NAME = Path(pattern=NAME_PATTERN, max_length=128, description="The secret's name")
NS = Depends(namespace)


router = APIRouter()


@router.put("/secrets/{name}", response_model=SecretInfo, dependencies=CLIENT, responses=ANSWERS)
async def set_secret(body: SecretValue, name: str = NAME, ns: str = NS, svc: Services = Depends(services)):
    """Create or replace a secret of the namespace; the value is encrypted with the server's key and never returned."""
    return await svc.db.run(lambda s: secrets.put(s, svc.secrets_keys, name, body.value, ns))


@router.get("/secrets", response_model=list[SecretInfo], dependencies=CLIENT, responses=ANSWERS)
async def list_secrets(ns: str = NS, svc: Services = Depends(services)):
    """Every secret's name and times: never a value."""
    return await svc.db.read(lambda s: secrets.listed(s, ns))


@router.delete("/secrets/{name}", status_code=204, response_class=Response, dependencies=CLIENT, responses=ANSWERS)
async def delete_secret(name: str = NAME, ns: str = NS, svc: Services = Depends(services)):
    await svc.db.run(lambda s: secrets.delete(s, name, ns))
    return Response(status_code=204)


@router.post("/executions/{execution_id}/secrets", response_model=SecretValues, responses=WORKER)
async def attempt_secrets(
    execution_id: str, body: SecretRequest, member: Member = Depends(worker), svc: Services = Depends(services)
):
    """The values of the secrets a task of this execution requested (of its namespace),
    for the worker that holds its current attempt (else 409: fenced)."""

    def read(session):  # noqa: ANN001, ANN202
        execution = fenced_row(session, member.name, execution_id, body.attempt)
        return SecretValues(values=secrets.values_for(session, svc.secrets_keys, body.names, execution.namespace))

    return await svc.db.read(read)
