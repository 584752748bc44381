"""The routes of webhooks (``/hooks``, docs/hooks.md): thin, like every route: one
transaction; a change of hooks is then read into this replica's copy before the
answer, and announced to the other replicas."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Response

from flux.server import topics
from flux.server.auth import CLIENT
from flux.server.errors import responses
from flux.server.hooks import sending, store
from flux.server.hooks.schemas import DeliveryInfo, HookCreate, HookInfo
from flux.server.scope import namespace
from flux.server.services import Services, services

READ = responses(401, 413, 422)
READ_ONE = responses(401, 404, 413, 422)
CHANGE = responses(401, 404, 409, 413, 422)

router = APIRouter(prefix="/hooks", tags=["hooks"], dependencies=CLIENT)
SVC = Depends(services)
NS = Depends(namespace)


async def _changed(svc: Services) -> None:
    await svc.hooks.reload()
    svc.notifier.notify(topics.HOOKS)


@router.post("", response_model=HookInfo, status_code=201, responses=CHANGE)
async def create_hook(body: HookCreate, ns: str = NS, svc: Services = SVC):
    """Subscribe a URL to events of the namespace (and to fleet events); 422 for a URL
    to the server's own network, 409 without a secrets key. The secret the server made
    (none given) is in this answer only."""
    keys = store.require_key(svc.secrets_keys)
    await sending.check_url(body.url, svc.settings.hooks_allow_private)
    hook = await svc.db.run(lambda s: store.create(s, keys, ns, body))
    await _changed(svc)
    return hook


@router.get("", response_model=list[HookInfo], responses=READ)
async def list_hooks(ns: str = NS, svc: Services = SVC):
    return await svc.db.read(lambda s: store.list_all(s, ns))


@router.get("/{name}", response_model=HookInfo, responses=READ_ONE)
async def show_hook(name: str, ns: str = NS, svc: Services = SVC):
    return await svc.db.read(lambda s: store.show(s, ns, name))


@router.delete("/{name}", status_code=204, response_class=Response, responses=READ_ONE)
async def delete_hook(name: str, ns: str = NS, svc: Services = SVC):
    """Its pending deliveries are dropped."""
    await svc.db.run(lambda s: store.delete_hook(s, ns, name))
    await _changed(svc)
    return Response(status_code=204)


@router.post("/{name}/test", response_model=DeliveryInfo, status_code=202, responses=READ_ONE)
async def test_hook(name: str, ns: str = NS, svc: Services = SVC):
    """A ``hook.test`` delivery to it, through the outbox; its attempts show on its delivery."""
    return await svc.db.run(lambda s: store.test(s, ns, name))


@router.get("/{name}/deliveries", response_model=list[DeliveryInfo], responses=READ_ONE)
async def list_deliveries(name: str, ns: str = NS, svc: Services = SVC):
    """Its newest deliveries (100), each with its attempts: status codes, latencies, errors."""
    return await svc.db.read(lambda s: store.deliveries(s, ns, name))


@router.get("/{name}/deliveries/{delivery_id}", response_model=DeliveryInfo, responses=READ_ONE)
async def show_delivery(name: str, delivery_id: str, ns: str = NS, svc: Services = SVC):
    return await svc.db.read(lambda s: store.delivery(s, ns, name, delivery_id))


@router.post("/{name}/deliveries/{delivery_id}/redeliver", response_model=DeliveryInfo, responses=CHANGE)
async def redeliver(name: str, delivery_id: str, ns: str = NS, svc: Services = SVC):
    """Send a delivered or dead delivery again, under the same id (409 while pending)."""
    return await svc.db.run(lambda s: store.redeliver(s, ns, name, delivery_id, svc.settings.hooks_max_age))
