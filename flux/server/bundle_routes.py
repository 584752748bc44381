"""The routes of bundles: upload (``POST /bundles``), a worker's fetch by hash
(``GET /bundles/{sha256}``) and registering a stored bundle's workflows
(``POST /workflows/bundle``). Reading a bundle's modules happens off the database's
writer: only storing the versions is a transaction."""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response

from flux.server import bundles, declared, topics, workflows
from flux.server.auth import CLIENT, worker
from flux.server.errors import responses
from flux.server.schemas import BundleInfo, BundleRegistration, WorkflowInfo
from flux.server.scope import namespace
from flux.server.services import Services, services

UPLOAD = responses(401, 413, 422)
FETCH = responses(401, 404, 413, 422)
REGISTER = responses(401, 404, 409, 413, 422)
ZIP = "application/zip"


router = APIRouter()


@router.post(
    "/bundles",
    response_model=BundleInfo,
    status_code=201,
    dependencies=CLIENT,
    responses=UPLOAD,
    # documented as octet-stream (what generic clients and schemathesis send); application/zip is taken alike
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}},
        }
    },
)
async def upload_bundle(request: Request, svc: Services = Depends(services)):
    """A zip (or wheel) of a workflow project; stored once per sha256. 413 past the
    size limit, 422 for an entry that would unpack outside the bundle (named)."""
    data = await request.body()
    bundle = await asyncio.to_thread(bundles.check, data, svc.settings)
    return await svc.db.run(lambda s: bundles.store(s, bundle, data, svc.settings))


@router.get(
    "/bundles/{sha256}",
    response_class=Response,
    dependencies=[Depends(worker)],
    responses={**FETCH, 200: {"content": {ZIP: {}}}},
)
async def fetch_bundle(sha256: str, svc: Services = Depends(services)):
    """A worker fetches the bundle of an execution it was given, by its hash."""
    data = await svc.db.read(lambda s: bundles.load(s, sha256, svc.settings))
    return Response(data, media_type=ZIP, headers={"Cache-Control": "public, max-age=31536000, immutable"})


@router.post(
    "/workflows/bundle", response_model=list[WorkflowInfo], status_code=201, dependencies=CLIENT, responses=REGISTER
)
async def register_bundle(body: BundleRegistration, ns: str = Depends(namespace), svc: Services = Depends(services)):
    """Register every @workflow of an uploaded bundle in the namespace, read from its
    source (never run). Bundles themselves belong to no namespace: stored once by hash."""
    data = await svc.db.read(lambda s: bundles.load(s, body.bundle, svc.settings))
    bundle = await asyncio.to_thread(bundles.check, data, svc.settings)
    versions = await asyncio.to_thread(workflows.bundle_versions, bundle, body, svc.policy.max_gang_size)
    fleet_views = svc.dispatcher.snapshot.views
    registered = await svc.db.run(lambda s: declared.register_versions(s, ns, versions, fleet_views(s)))
    if declared.declares_schedules(versions):
        svc.notifier.notify(topics.SCHEDULES)  # the firing loop counts its next due time again
    svc.dispatcher.kick()  # what waited on an older version may fit now
    return registered
