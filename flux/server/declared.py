"""What a registered module declares beyond its workflows, in flux-core's style
(docs/migrating-from-flux-core.md): the namespace a workflow belongs in, checked against
the one it is registered into, and its in-code schedule, kept as a server schedule. One
transaction with the versions, so a refused schedule stores nothing."""

from __future__ import annotations

from sqlalchemy.orm import Session

from flux.scheduling.snapshot import WorkerView
from flux.server import workflows
from flux.server.errors import Invalid
from flux.server.schedules import store as schedules
from flux.server.schemas import WorkflowInfo
from flux.server.workflows import NewVersion


def register_versions(
    session: Session, namespace: str, versions: list[NewVersion], fleet: list[WorkerView]
) -> list[WorkflowInfo]:
    """``workflows.store``, after the namespace check, then each declared schedule."""
    for new in versions:
        declared = new.options.namespace
        if declared is not None and declared != namespace:
            raise Invalid(
                f"workflow {new.name!r} declares namespace={declared!r} but is registered into {namespace!r}; "
                f"register it with -n {declared}"
            )
    stored = workflows.store(session, namespace, versions, fleet)
    for new in versions:
        if new.options.schedule is not None:
            schedules.declare(session, namespace, new.name, new.options.schedule.request())
    return stored


def declares_schedules(versions: list[NewVersion]) -> bool:
    return any(new.options.schedule is not None for new in versions)
