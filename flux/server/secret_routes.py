"""The routes of the secret store (``flux.server.secrets``): set, list (names and times
only) and delete for clients; the values of an execution's requested secrets for the
worker that holds its current attempt."""

from __future__ import annotations

from typing import Callable

from fastapi import APIRouter, Depends, Path, Request
from fastapi.responses import Response

from flux.domain.names import NAME_PATTERN
from flux.server import secrets
from flux.server.errors import responses
from flux.server.executions.lifecycle import fenced_row
from flux.server.schemas import SecretInfo, SecretRequest, SecretValue, SecretValues

CLIENT = responses(401, 404, 409, 413, 422)
WORKER = responses(401, 403, 404, 409, 413, 422)
NAME = Path(pattern=NAME_PATTERN, max_length=128, description="The secret's name")


def router(client: list, bearer: Callable, authenticate_worker: Callable, keys) -> APIRouter:  # noqa: ANN001 - MultiFernet | None
    api = APIRouter()

    @api.put("/secrets/{name}", response_model=SecretInfo, dependencies=client, responses=CLIENT)
    async def set_secret(body: SecretValue, request: Request, name: str = NAME):
        """Create or replace a secret; the value is encrypted with the server's key and never returned."""
        return await request.app.state.db.run(lambda s: secrets.put(s, keys, name, body.value))

    @api.get("/secrets", response_model=list[SecretInfo], dependencies=client, responses=CLIENT)
    async def list_secrets(request: Request):
        """Every secret's name and times: never a value."""
        return await request.app.state.db.read(secrets.listed)

    @api.delete("/secrets/{name}", status_code=204, response_class=Response, dependencies=client, responses=CLIENT)
    async def delete_secret(request: Request, name: str = NAME):
        await request.app.state.db.run(lambda s: secrets.delete(s, name))
        return Response(status_code=204)

    @api.post("/executions/{execution_id}/secrets", response_model=SecretValues, responses=WORKER)
    async def attempt_secrets(execution_id: str, body: SecretRequest, request: Request, token: str | None = Depends(bearer)):
        """The values of the secrets a task of this execution requested, for the worker
        that holds its current attempt (else 409: fenced)."""
        member = await authenticate_worker(request, token)

        def read(session):  # noqa: ANN001, ANN202
            fenced_row(session, member.name, execution_id, body.attempt)
            return SecretValues(values=secrets.values_for(session, keys, body.names))

        return await request.app.state.db.read(read)

    return api
