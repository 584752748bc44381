"""The routes of bundles: upload (``POST /bundles``), a worker's fetch by hash
(``GET /bundles/{sha256}``) and registering a stored bundle's workflows
(``POST /workflows/bundle``). Reading a bundle's modules happens off the database's
writer: only storing the versions is a transaction."""

from __future__ import annotations

import asyncio
from typing import Callable

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response

from flux.server import bundles, workflows
from flux.server.database import Database
from flux.server.errors import responses
from flux.server.schemas import BundleInfo, BundleRegistration, WorkflowInfo
from flux.server.settings import ServerSettings

UPLOAD = responses(401, 413, 422)
FETCH = responses(401, 404, 413, 422)
REGISTER = responses(401, 404, 413, 422)
ZIP = "application/zip"


def router(client: list, bearer: Callable, authenticate_worker: Callable, settings: ServerSettings) -> APIRouter:
    api = APIRouter()

    def db(request: Request) -> Database:
        return request.app.state.db

    @api.post(
        "/bundles", response_model=BundleInfo, status_code=201, dependencies=client, responses=UPLOAD,
        # documented as octet-stream (what generic clients and schemathesis send); application/zip is taken alike
        openapi_extra={"requestBody": {"required": True, "content": {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}}}},
    )
    async def upload_bundle(request: Request):
        """A zip (or wheel) of a workflow project; stored once per sha256. 413 past the
        size limit, 422 for an entry that would unpack outside the bundle (named)."""
        data = await request.body()
        bundle = await asyncio.to_thread(bundles.check, data, settings)
        return await db(request).run(lambda s: bundles.store(s, bundle, data, settings))

    @api.get("/bundles/{sha256}", response_class=Response, responses={**FETCH, 200: {"content": {ZIP: {}}}})
    async def fetch_bundle(sha256: str, request: Request, token: str | None = Depends(bearer)):
        """A worker fetches the bundle of an execution it was given, by its hash."""
        await authenticate_worker(request, token)
        data = await db(request).read(lambda s: bundles.load(s, sha256, settings))
        return Response(data, media_type=ZIP, headers={"Cache-Control": "public, max-age=31536000, immutable"})

    @api.post("/workflows/bundle", response_model=list[WorkflowInfo], status_code=201, dependencies=client, responses=REGISTER)
    async def register_bundle(body: BundleRegistration, request: Request):
        """Register every @workflow of an uploaded bundle, read from its source (never run)."""
        data = await db(request).read(lambda s: bundles.load(s, body.bundle, settings))
        bundle = await asyncio.to_thread(bundles.check, data, settings)
        versions = await asyncio.to_thread(workflows.bundle_versions, bundle, body)
        fleet_views = request.app.state.dispatcher.snapshot.views
        registered = await db(request).run(lambda s: workflows.store(s, versions, fleet_views(s)))
        request.app.state.dispatcher.kick()  # what waited on an older version may fit now
        return registered

    return api
