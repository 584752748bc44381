"""Workflow registration, versions and lookup (functions of a Session, run by ``Database.run``).

``flux workflow register`` uploads a bundle and the server reads its workflows
statically (``flux.registration``: no line of it runs, here or on the client);
``POST /workflows`` with a source and what a client read from it is the older API,
and is re-validated the same way. Every change of content is a new version; an
execution keeps the version it was submitted with (docs/bundles.md).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from sqlalchemy import bindparam, func, select, update
from sqlalchemy.orm import Session

from flux.bundles.archive import Bundle
from flux.domain.events import ExecutionState
from flux.domain.namespaces import NamespaceState
from flux.domain.resource_request import InvalidResourceRequest, ResourceRequest, request_or_none
from flux.domain.sources import source_digest
from flux.model.workflow import validate_affinity, validate_routing
from flux.registration import StaticError, read_bundle
from flux.registration.bundle import stored_request
from flux.scheduling.explain import infeasibility
from flux.scheduling.snapshot import WorkerView
from flux.server.errors import Invalid, NotFound
from flux.server.models import ExecutionModel, NamespaceModel, WorkflowModel
from flux.server.namespaces import being_deleted, require_active
from flux.server.schemas import BundleRegistration, WorkflowInfo, WorkflowRegistration, WorkflowSpec


def _check_source(registration: WorkflowRegistration) -> None:
    try:
        compile(registration.source, registration.filename, "exec")
    except SyntaxError as exc:
        raise Invalid(f"{registration.filename} has a syntax error at line {exc.lineno}: {exc.msg}") from None


def _parse_requests(spec_name: str, requests: dict | None) -> ResourceRequest | None:
    try:
        return request_or_none(requests)
    except InvalidResourceRequest as exc:
        raise Invalid(f"workflow {spec_name!r}: {exc}") from None


@dataclass
class NewVersion:
    """What one registration would store of one workflow, validated."""

    name: str
    request: ResourceRequest | None
    affinity: dict | None
    routing: dict | None
    pending_timeout: float | None
    max_attempts: int | None
    source: str
    source_digest: str
    filename: str
    bundle_sha256: str | None = None
    module: str | None = None
    timeout: float | None = None
    #: Priority, preemptible, concurrency, max_concurrency: those set (``WorkflowOptions.contention``).
    contention: dict | None = None
    #: flux-core's ``namespace=`` on the workflow: where it must be registered (``flux.server.declared``).
    namespace: str | None = None
    #: A schedule declared in code (``DeclaredSchedule.request``), kept as a server schedule.
    schedule: dict | None = None
    #: Its module's constructs that keep this engine's meaning, not flux-core's: returned as warnings.
    notes: list[str] = field(default_factory=list)

    def key(self) -> tuple:
        requests = self.request.to_dict() if self.request else None
        return (
            self.source_digest,
            requests,
            self.affinity,
            self.routing,
            self.pending_timeout,
            self.max_attempts,
            self.bundle_sha256,
            self.module,
            self.timeout,
            self.contention,
        )


def register(
    session: Session, namespace: str, registration: WorkflowRegistration, fleet: list[WorkerView]
) -> list[WorkflowInfo]:
    """Store each workflow a client read from one source file (the API of hand-written
    calls; ``flux workflow register`` sends bundles: ``register_bundle``)."""
    _check_source(registration)
    digest = source_digest(registration.source)
    names = [spec.name for spec in registration.workflows]
    if len(set(names)) != len(names):
        raise Invalid("workflow names in one registration must be unique")
    versions = []
    for spec in registration.workflows:
        owner = f"workflow {spec.name!r}"
        try:
            affinity = validate_affinity(spec.affinity, owner)
            policy = validate_routing(spec.routing, owner)
        except ValueError as exc:
            raise Invalid(str(exc)) from None
        versions.append(
            NewVersion(
                spec.name,
                _parse_requests(spec.name, spec.requests),
                affinity,
                policy.to_dict() if policy else None,
                spec.pending_timeout,
                spec.max_attempts,
                registration.source,
                digest,
                registration.filename,
                timeout=spec.timeout,
                contention=_contention(spec),
            )
        )
    return store(session, namespace, versions, fleet)


def _contention(spec: WorkflowSpec) -> dict | None:
    """The contention options a hand-written registration set (as ``WorkflowOptions.contention``)."""
    fields = spec.model_dump(
        include={"priority", "preemptible", "min_runtime", "concurrency", "max_concurrency"}, exclude_defaults=True
    )
    return fields or None


def bundle_versions(bundle: Bundle, registration: BundleRegistration) -> list[NewVersion]:
    """Every workflow of a bundle, read statically (no code of it runs), as versions
    to store; its requirements merged into each one's packages unless turned off."""
    try:
        reading = read_bundle(bundle, registration.requirements)
        return [
            NewVersion(
                found.options.name,
                stored_request(found, reading),
                found.options.affinity,
                found.options.routing.to_dict() if found.options.routing else None,
                found.options.pending_timeout,
                found.options.max_attempts,
                bundle.text(found.filename) or "",
                bundle.sha256,
                found.filename,
                bundle.sha256,
                found.module,
                found.options.timeout,
                found.options.contention() or None,
                found.options.namespace,
                found.options.schedule.request() if found.options.schedule else None,
                reading.notes.get(found.filename, []),
            )
            for found in reading.workflows
        ]
    except (StaticError, InvalidResourceRequest) as exc:
        raise Invalid(str(exc)) from None


def store(session: Session, namespace: str, versions: list[NewVersion], fleet: list[WorkerView]) -> list[WorkflowInfo]:
    """Store a new version of each workflow that changed in ``namespace``; an unchanged
    one keeps its version (registering is idempotent).

    Each returned workflow carries a warning when no worker in ``fleet`` (the
    registered workers) could ever satisfy it; it is registered all the same.
    """
    require_active(session, namespace)
    stored = []
    for new in versions:
        latest = _latest(session, namespace, new.name)
        warnings = _warnings(new.request, new.affinity, fleet, namespace) + new.notes
        if (
            latest
            and (
                latest.source_digest,
                latest.requests,
                latest.affinity,
                latest.routing,
                latest.pending_timeout,
                latest.max_attempts,
                latest.bundle_sha256,
                latest.module,
                latest.timeout,
                latest.contention,
            )
            == new.key()
        ):
            stored.append((latest, warnings))
            continue
        row = WorkflowModel(
            namespace=namespace,
            name=new.name,
            version=(latest.version + 1) if latest else 1,
            source=new.source,
            source_digest=new.source_digest,
            filename=new.filename,
            requests=new.request.to_dict() if new.request else None,
            affinity=new.affinity,
            routing=new.routing,
            pending_timeout=new.pending_timeout,
            max_attempts=new.max_attempts,
            timeout=new.timeout,
            created_at=time.time(),
            bundle_sha256=new.bundle_sha256,
            module=new.module,
            contention=new.contention,
        )
        session.add(row)
        stored.append((row, warnings))
    session.flush()
    for row, _ in stored:
        _requeue_waiting_on(session, row)
    return [info(row, warnings=warnings) for row, warnings in stored]


def _requeue_waiting_on(session: Session, row: WorkflowModel) -> None:
    """Executions queued for this workflow's latest version that never started move to
    the new one: a relaxed request or affinity rescues them at once. Those submitted
    for an explicit version, and any that already ran (their replay needs the same
    code), keep theirs."""
    values = dict(
        workflow_id=row.id,
        workflow_version=row.version,
        requests=row.requests,
        affinity=row.affinity,
        routing=row.routing,
        pending_timeout=row.pending_timeout,
        deadline=None if row.timeout is None else ExecutionModel.scheduled_at + row.timeout,
        placement_note=None,
        unschedulable=None,
        row_version=ExecutionModel.row_version + 1,
    )
    if row.max_attempts is not None:
        values["max_attempts"] = row.max_attempts
    session.execute(
        update(ExecutionModel)
        .where(
            ExecutionModel.namespace == row.namespace,
            ExecutionModel.workflow_name == row.name,
            ExecutionModel.workflow_version < row.version,
            ExecutionModel.state == ExecutionState.SCHEDULED.value,
            ExecutionModel.attempt == 0,
            ExecutionModel.version_pinned.is_(False),
        )
        .values(**values)
        .execution_options(synchronize_session=False)
    )


def _warnings(
    request: ResourceRequest | None, affinity: dict | None, fleet: list[WorkerView], namespace: str
) -> list[str]:
    """What it requests no worker could ever give it (judged among the workers that serve its namespace)."""
    if request is None and not affinity:
        return []
    reason = infeasibility(request, affinity, fleet, namespace)
    return [reason] if reason else []


def _named(namespace: str, name: str):  # noqa: ANN202 - a WHERE clause
    return (WorkflowModel.namespace == namespace) & (WorkflowModel.name == name)


def _latest(session: Session, namespace: str, name: str) -> WorkflowModel | None:
    return session.scalars(
        select(WorkflowModel).where(_named(namespace, name)).order_by(WorkflowModel.version.desc()).limit(1)
    ).first()


#: What a submission copies from its workflow (not the source: it can be large).
HEADER = (
    WorkflowModel.id,
    WorkflowModel.name,
    WorkflowModel.version,
    WorkflowModel.requests,
    WorkflowModel.affinity,
    WorkflowModel.routing,
    WorkflowModel.pending_timeout,
    WorkflowModel.max_attempts,
    WorkflowModel.timeout,
    WorkflowModel.contention,
)


#: The namespace's state comes with the version, in the same read: a run into a
#: namespace being deleted is refused at no extra query.
_HEADER = (
    select(*HEADER, NamespaceModel.state.label("namespace_state"))
    .join(NamespaceModel, NamespaceModel.name == WorkflowModel.namespace)
    .where(_named(bindparam("namespace"), bindparam("name")))
)
_NEWEST = _HEADER.order_by(WorkflowModel.version.desc()).limit(1)
_VERSION = _HEADER.where(WorkflowModel.version == bindparam("version"))


def header(session: Session, namespace: str, name: str, version: int | None = None):
    """The columns of one workflow version (the newest by default) that a run needs;
    409 while its namespace is being deleted."""
    if version is None:
        row = session.execute(_NEWEST, {"namespace": namespace, "name": name}).first()
    else:
        row = session.execute(_VERSION, {"namespace": namespace, "name": name, "version": version}).first()
    if row is None:
        raise _not_found(name, version, namespace)
    if row.namespace_state != NamespaceState.ACTIVE.value:
        raise being_deleted(namespace)
    return row


def get(session: Session, namespace: str, name: str, version: int | None = None) -> WorkflowModel:
    if version is None:
        row = _latest(session, namespace, name)
    else:
        row = session.scalars(
            select(WorkflowModel).where(_named(namespace, name), WorkflowModel.version == version)
        ).first()
    if row is None:
        raise _not_found(name, version, namespace)
    return row


def _not_found(name: str, version: int | None, namespace: str) -> NotFound:
    suffix = f" version {version}" if version is not None else ""
    return NotFound(f"workflow {name!r}{suffix} is not registered in namespace {namespace!r}")


def list_latest(
    session: Session, namespace: str, limit: int | None = None, after: str | None = None
) -> list[WorkflowInfo]:
    """The newest version of each workflow, by name; ``limit`` of them after the name ``after``."""
    newest = (
        select(WorkflowModel.name, func.max(WorkflowModel.version).label("version"))
        .where(WorkflowModel.namespace == namespace)
        .group_by(WorkflowModel.name)
    )
    if after is not None:
        newest = newest.where(WorkflowModel.name > after)
    newest = newest.order_by(WorkflowModel.name).limit(limit).subquery()
    rows = session.scalars(
        select(WorkflowModel)
        .join(newest, _named(namespace, newest.c.name) & (WorkflowModel.version == newest.c.version))
        .order_by(WorkflowModel.name)
    )
    return [info(row) for row in rows]


def versions(session: Session, namespace: str, name: str) -> list[WorkflowInfo]:
    """Every stored version of a workflow, oldest first (404 if it has none)."""
    rows = session.scalars(select(WorkflowModel).where(_named(namespace, name)).order_by(WorkflowModel.version)).all()
    if not rows:
        raise _not_found(name, None, namespace)
    return [info(row) for row in rows]


def info(row: WorkflowModel, with_source: bool = False, warnings: list[str] | None = None) -> WorkflowInfo:
    return WorkflowInfo(
        name=row.name,
        version=row.version,
        filename=row.filename,
        requests=row.requests,
        affinity=row.affinity,
        routing=row.routing,
        pending_timeout=row.pending_timeout,
        max_attempts=row.max_attempts,
        timeout=row.timeout,
        created_at=row.created_at,
        source=row.source if with_source else None,
        bundle=row.bundle_sha256,
        module=row.module,
        contention=row.contention,
        warnings=warnings or [],
    )


@dataclass(frozen=True)
class Code:
    """What a worker needs to load one workflow version."""

    source: str
    filename: str
    bundle: str | None
    module: str | None


_SOURCES: dict[tuple[str, str, int, int], Code] = {}
#: Versions whose source is kept in memory; a version never changes once stored.
SOURCE_CACHE = 256


def code_of(session: Session, execution: ExecutionModel) -> Code:
    """The code of an execution's workflow version, read once per process: a stored
    version is immutable, so every delivery after the first costs no query. Keyed by
    the row's id too: a namespace deleted and made again holds other versions."""
    key = (execution.namespace, execution.workflow_name, execution.workflow_version, execution.workflow_id)
    cached = _SOURCES.get(key)
    if cached is None:
        row = get(session, execution.namespace, execution.workflow_name, execution.workflow_version)
        if len(_SOURCES) >= SOURCE_CACHE:
            _SOURCES.pop(next(iter(_SOURCES)))
        # a bundle's module is imported from the bundle: its text need not travel
        source = "" if row.bundle_sha256 else row.source
        cached = _SOURCES[key] = Code(source, row.filename, row.bundle_sha256, row.module)
    return cached


def forget(namespace: str) -> None:
    """``namespace`` was deleted: its versions' code leaves this process's memory."""
    for key in [key for key in _SOURCES if key[0] == namespace]:
        del _SOURCES[key]
