"""Who may call what, in one place (docs/security.md#roles): the action of every client
route, the namespace a call acts in, and the check that refuses it.

``ACTIONS`` names the action of each mutating route, by method and path template (the
``/namespaces/{namespace}`` prefix left out: a prefixed route and its unprefixed alias
are one entry); a GET is a read unless listed. ``check_routes`` refuses to build an
app with a mutating client route missing here, so none can slip through unauthorised
or unaudited. ``flux.server.auth.client`` applies the check to every client route;
``flux.server.audit`` records mutating calls under the same action.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping

from starlette.types import Scope

from flux.domain.access import ADMIN_ACTIONS, FLEET_ACTIONS, Action, Principal, refusal
from flux.domain.namespaces import DEFAULT
from flux.server.errors import Forbidden, NotFound, responses

NAMESPACE_PREFIX = "/namespaces/{namespace}"
MUTATING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
#: The key of a request's scope under which ``auth.client`` leaves the ``Call`` for its audit row.
CALL_SLOT = "flux.call"

#: (method, path template) -> action, for every mutating client route and the reads
#: that are not plain reads.
ACTIONS: dict[tuple[str, str], Action] = {
    ("POST", "/workflows"): Action.REGISTER,
    ("POST", "/workflows/bundle"): Action.REGISTER,
    ("POST", "/bundles"): Action.REGISTER,
    ("POST", "/workflows/{name}/run"): Action.RUN,
    ("POST", "/executions/{execution_id}/cancel"): Action.CANCEL,
    ("POST", "/executions/{execution_id}/resume"): Action.RESUME,
    ("POST", "/executions/prune"): Action.PRUNE,
    ("POST", "/schedules"): Action.MANAGE_SCHEDULES,
    ("PATCH", "/schedules/{name}"): Action.MANAGE_SCHEDULES,
    ("DELETE", "/schedules/{name}"): Action.MANAGE_SCHEDULES,
    ("POST", "/schedules/{name}/pause"): Action.OPERATE_SCHEDULE,
    ("POST", "/schedules/{name}/resume"): Action.OPERATE_SCHEDULE,
    ("POST", "/schedules/{name}/trigger"): Action.OPERATE_SCHEDULE,
    ("POST", "/hooks"): Action.MANAGE_HOOKS,
    ("GET", "/hooks"): Action.MANAGE_HOOKS,  # a hook's URL may carry a credential (a chat webhook's)
    ("GET", "/hooks/{name}"): Action.MANAGE_HOOKS,
    ("DELETE", "/hooks/{name}"): Action.MANAGE_HOOKS,
    ("POST", "/hooks/{name}/test"): Action.MANAGE_HOOKS,
    ("GET", "/hooks/{name}/deliveries"): Action.MANAGE_HOOKS,
    ("GET", "/hooks/{name}/deliveries/{delivery_id}"): Action.MANAGE_HOOKS,
    ("POST", "/hooks/{name}/deliveries/{delivery_id}/redeliver"): Action.MANAGE_HOOKS,
    ("DELETE", "/cache"): Action.CLEAR_CACHE,
    ("PUT", "/secrets/{name}"): Action.MANAGE_SECRETS,
    ("DELETE", "/secrets/{name}"): Action.MANAGE_SECRETS,
    ("GET", "/secrets"): Action.MANAGE_SECRETS,  # secrets' names are operators' business
    ("POST", "/workers/{name}/drain"): Action.DRAIN,
    ("POST", "/workers/{name}/undrain"): Action.DRAIN,
    ("GET", "/workers"): Action.READ_FLEET,
    ("GET", "/workers/{name}"): Action.READ_FLEET,
    ("POST", "/pools"): Action.MANAGE_POOLS,
    ("PUT", "/pools/{name}"): Action.MANAGE_POOLS,
    ("DELETE", "/pools/{name}"): Action.MANAGE_POOLS,
    ("GET", "/pools"): Action.READ_FLEET,
    ("GET", "/pools/{name}"): Action.READ_FLEET,
    ("GET", "/autoscale/desired"): Action.READ_FLEET,
    ("GET", "/fleet"): Action.READ_FLEET,
    ("GET", "/fleet/history"): Action.READ_FLEET,
    ("POST", "/tokens"): Action.MANAGE_TOKENS,
    ("GET", "/tokens"): Action.MANAGE_TOKENS,
    ("DELETE", "/tokens/{name}"): Action.MANAGE_TOKENS,
    ("GET", "/audit"): Action.READ_AUDIT,
    ("POST", "/namespaces"): Action.MANAGE_NAMESPACES,
    ("DELETE", "/namespaces/{name}"): Action.MANAGE_NAMESPACES,
    ("PATCH", "/namespaces/{name}"): Action.MANAGE_NAMESPACES,  # its weight and quota
    ("PUT", "/namespaces/{name}/quota"): Action.MANAGE_NAMESPACES,
}
#: Actions about no one namespace: the fleet, tokens, and the audit log (whose rows a
#: principal sees are filtered by its namespaces instead).
UNNAMESPACED = FLEET_ACTIONS | ADMIN_ACTIONS | {Action.READ_AUDIT}
#: The routes about one namespace itself, whose ``{name}`` is that namespace...
NAMESPACE_ROUTES = frozenset({"/namespaces/{name}", "/namespaces/{name}/quota"})
#: ...and the routes about none although their action usually is about one: the list of
#: namespaces (each principal sees its own) and bundle uploads (a bundle is stored once
#: for every namespace, by its sha256; registering it is what happens in a namespace).
UNNAMESPACED_ROUTES = frozenset({"/namespaces", "/bundles"})


def unprefixed(template: str) -> str:
    return template[len(NAMESPACE_PREFIX) :] or "/" if template.startswith(NAMESPACE_PREFIX) else template


def action_of(method: str, template: str) -> Action | None:
    """The route's action; None for a mutating route that is not listed."""
    action = ACTIONS.get((method, unprefixed(template)))
    if action is None and method not in MUTATING:
        return Action.READ
    return action


def namespace_of(action: Action, template: str, path_params: Mapping[str, Any]) -> str | None:
    """The ``namespace`` path parameter (a namespace route's ``name``), else the default;
    None for an action about no namespace, and for ``UNNAMESPACED_ROUTES``."""
    if "namespace" in path_params:
        return str(path_params["namespace"])
    if template in NAMESPACE_ROUTES:
        return str(path_params["name"])
    return None if action in UNNAMESPACED or template in UNNAMESPACED_ROUTES else DEFAULT


@dataclass
class Call:
    """What a client call is, as its audit row and its check see it."""

    action: Action
    namespace: str | None
    principal: Principal | None = None


def authorise(principal: Principal, call: Call) -> Principal:
    """404 for a namespace out of the principal's scope (nothing about it leaks; the
    answer names the namespaces the token may act in, which its holder may know), 403
    for a role without the action, naming the role it needs."""
    call.principal = principal
    if call.namespace is not None and not principal.sees(call.namespace):
        raise NotFound(f"namespace {call.namespace!r} not found; {principal.scope_hint()}")
    if not principal.may(call.action, call.namespace):
        raise Forbidden(refusal(principal, call.action))
    return principal


# --- the routes ------------------------------------------------------------------------------


@dataclass(frozen=True)
class ClientRoute:
    regex: re.Pattern
    methods: frozenset[str]
    template: str


def client_routes(routes: Iterable[Any], is_client: Callable[[Any], bool]) -> list[ClientRoute]:
    """Each client route (``is_client``) of ``routes`` (flattened: ``request_limits.flattened``)."""
    return [
        ClientRoute(route.path_regex, frozenset(route.methods or ()), route.path)
        for route in routes
        if is_client(route)
    ]


def unlisted(table: Iterable[ClientRoute]) -> list[str]:
    """Mutating client routes with no action in ``ACTIONS``."""
    return sorted(
        f"{method} {route.template}"
        for route in table
        for method in route.methods
        if action_of(method, route.template) is None
    )


def check_routes(table: Iterable[ClientRoute]) -> None:
    missing = unlisted(table)
    if missing:
        raise RuntimeError(f"client routes with no action in flux.server.access.ACTIONS: {', '.join(missing)}")


def match(table: Iterable[ClientRoute], scope: Scope) -> Call | None:
    """The call a request would be, for one refused before its route ran (at the edge)."""
    method, path = scope.get("method", ""), scope.get("path", "")
    for route in table:
        found = route.regex.match(path) if method in route.methods else None
        if found:
            action = action_of(method, route.template)
            return Call(action, namespace_of(action, route.template, found.groupdict())) if action is not None else None
    return None


#: What every client route may answer besides its own: a role that may not (403), a
#: namespace out of the token's scope (404).
REFUSALS = responses(403, 404)


def document(schema: dict, table: Iterable[ClientRoute]) -> dict:
    """Add ``REFUSALS`` to every client operation of an OpenAPI ``schema``."""
    error = {"description": "", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}}}
    for route in table:
        for method in route.methods:
            operation = schema["paths"].get(route.template, {}).get(method.lower())
            if operation is not None:
                for status, answer in REFUSALS.items():
                    operation["responses"].setdefault(str(status), {**error, "description": answer["description"]})
    return schema
