"""Who may do what: roles, the actions they allow, and a token's principal.

Four roles, each allowing what the one below it does and more (as Kubernetes'
default ClusterRoles view < edit < admin < cluster-admin): ``viewer`` reads;
``developer`` also registers, runs, cancels and resumes, and pauses, resumes or
triggers schedules; ``operator`` also manages schedules and secrets, clears the
task cache, prunes history, reads the audit log, drains workers and manages worker pools; ``admin`` does
everything in every namespace, tokens and namespaces included.

A token is scoped to namespaces (or to all of them). Namespaced actions need the
namespace in scope; fleet-wide ones (reading or draining workers) need a token that
is not restricted to a few namespaces, or the operator role (docs/security.md#roles).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

from flux.domain.namespaces import DEFAULT


class Role(StrEnum):
    VIEWER = "viewer"
    DEVELOPER = "developer"
    OPERATOR = "operator"
    ADMIN = "admin"


class Action(StrEnum):
    """What an API call does, as the audit log names it and roles allow it."""

    READ = "read"
    REGISTER = "register"
    RUN = "run"
    CANCEL = "cancel"
    RESUME = "resume"
    #: Pause, resume or trigger a schedule (not change it).
    OPERATE_SCHEDULE = "operate_schedule"
    #: Create, change or delete a schedule.
    MANAGE_SCHEDULES = "manage_schedules"
    MANAGE_SECRETS = "manage_secrets"
    #: Create, delete, test, read webhooks and redeliver (their URLs may carry credentials).
    MANAGE_HOOKS = "manage_hooks"
    CLEAR_CACHE = "clear_cache"
    PRUNE = "prune"
    READ_AUDIT = "read_audit"
    READ_FLEET = "read_fleet"
    DRAIN = "drain"
    #: Create, change or delete worker pools (docs/autoscaling.md).
    MANAGE_POOLS = "manage_pools"
    MANAGE_TOKENS = "manage_tokens"
    MANAGE_NAMESPACES = "manage_namespaces"


#: Actions on the fleet, which belongs to no namespace.
FLEET_ACTIONS = frozenset({Action.READ_FLEET, Action.DRAIN, Action.MANAGE_POOLS})
#: Actions only an admin takes (they change who may do what, or what exists).
ADMIN_ACTIONS = frozenset({Action.MANAGE_TOKENS, Action.MANAGE_NAMESPACES})

_VIEWER = frozenset({Action.READ})
_DEVELOPER = _VIEWER | {Action.REGISTER, Action.RUN, Action.CANCEL, Action.RESUME, Action.OPERATE_SCHEDULE}
_OPERATOR = _DEVELOPER | {
    Action.MANAGE_SCHEDULES,
    Action.MANAGE_SECRETS,
    Action.MANAGE_HOOKS,
    Action.CLEAR_CACHE,
    Action.PRUNE,
    Action.READ_AUDIT,
    Action.READ_FLEET,
    Action.DRAIN,
    Action.MANAGE_POOLS,
}
#: The actions each role allows.
ALLOWED: dict[Role, frozenset[Action]] = {
    Role.VIEWER: _VIEWER,
    Role.DEVELOPER: frozenset(_DEVELOPER),
    Role.OPERATOR: frozenset(_OPERATOR),
    Role.ADMIN: frozenset(Action),
}


def home_namespace(namespaces: Iterable[str] | None) -> str | None:
    """Where a token with these namespaces acts when a client names none: its only
    namespace (as a Kubernetes service account's kubeconfig names its own), else
    ``default`` where it may act there (all namespaces, or several with ``default``);
    None for several without it: it has no namespace of its own and must name one
    (``-n``), so nothing shows it a ``default`` it may not use."""
    if namespaces is None:
        return DEFAULT
    scope = frozenset(namespaces)
    if len(scope) == 1:
        return next(iter(scope))
    return DEFAULT if DEFAULT in scope else None


@dataclass(frozen=True)
class Principal:
    """Who a request acts as: a token's name, its role and its namespaces."""

    token: str
    role: Role
    #: The namespaces it may act in; ``None``: all of them.
    namespaces: frozenset[str] | None = None

    @property
    def home(self) -> str | None:
        """The namespace it acts in when a client names none (``home_namespace``)."""
        return home_namespace(self.namespaces)

    def scope_hint(self) -> str:
        """Where it may act, for a refusal of a namespace out of its scope."""
        return f"token {self.token} may act in: {', '.join(sorted(self.namespaces or ()))}; pass -n NAMESPACE"

    def sees(self, namespace: str) -> bool:
        """Whether ``namespace`` is in scope at all (out of scope reads as absent: 404)."""
        return self.role == Role.ADMIN or self.namespaces is None or namespace in self.namespaces

    def may(self, action: Action, namespace: str | None = None) -> bool:
        """Whether this principal may take ``action`` (in ``namespace``, for namespaced actions)."""
        if action not in ALLOWED[self.role]:
            return action == Action.READ_FLEET and self.namespaces is None
        if action in FLEET_ACTIONS or action in ADMIN_ACTIONS or namespace is None:
            return True
        return self.sees(namespace)


#: The roles, lowest first.
ORDER = (Role.VIEWER, Role.DEVELOPER, Role.OPERATOR, Role.ADMIN)

#: What each action does, as a refusal names it ("role viewer may not run executions").
PHRASES: dict[Action, str] = {
    Action.READ: "read",
    Action.REGISTER: "register workflows",
    Action.RUN: "run executions",
    Action.CANCEL: "cancel executions",
    Action.RESUME: "resume executions",
    Action.OPERATE_SCHEDULE: "pause, resume or trigger schedules",
    Action.MANAGE_SCHEDULES: "create, change or delete schedules",
    Action.MANAGE_SECRETS: "manage secrets",
    Action.MANAGE_HOOKS: "manage webhooks",
    Action.CLEAR_CACHE: "clear the task cache",
    Action.PRUNE: "prune the history",
    Action.READ_AUDIT: "read the audit log",
    Action.READ_FLEET: "read the fleet",
    Action.DRAIN: "drain or undrain workers",
    Action.MANAGE_POOLS: "manage worker pools",
    Action.MANAGE_TOKENS: "manage tokens",
    Action.MANAGE_NAMESPACES: "manage namespaces",
}


def lowest_role(action: Action) -> Role:
    """The least role that allows ``action``."""
    return next(role for role in ORDER if action in ALLOWED[role])


def refusal(principal: Principal, action: Action) -> str:
    """Why ``principal`` may not take ``action``: its role, and the role it would need."""
    needed = f"{lowest_role(action)} or above"
    if action == Action.READ_FLEET:
        needed += ", or a token for every namespace"
    return f"role {principal.role} may not {PHRASES[action]} ({needed})"
