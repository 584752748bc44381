"""Workflow registration, versions and lookup (functions of a Session, run by ``Database.run``).

``flux workflow register`` uploads a bundle and the server reads its workflows
statically (``flux.registration``: no line of it runs, here or on the client);
``POST /workflows`` with a source and what a client read from it is the older API,
and is re-validated the same way. Every change of content is a new version; an
execution keeps the version it was submitted with (docs/bundles.md).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace

from sqlalchemy import bindparam, func, select, update
from sqlalchemy.orm import Session

from flux.bundles.archive import Bundle
from flux.domain.events import ExecutionState
from flux.domain.gang import DEFAULT_MAX_SIZE, InvalidGang
from flux.domain.namespaces import NamespaceState
from flux.domain.resource_request import InvalidResourceRequest
from flux.domain.sources import source_digest
from flux.domain.workflow_options import WorkflowOptions
from flux.registration import StaticError, read_bundle
from flux.registration.bundle import stored_request
from flux.scheduling.binding import no_pool
from flux.scheduling.demand import Demand
from flux.scheduling.explain import infeasibility
from flux.scheduling.snapshot import WorkerView
from flux.server import gang_options
from flux.server.autoscale import notes
from flux.server.errors import Invalid, NotFound
from flux.server.models import ExecutionModel, NamespaceModel, WorkflowModel
from flux.server.namespaces import being_deleted, require_active
from flux.server.schemas import BundleRegistration, WorkflowInfo, WorkflowRegistration, WorkflowSpec


def _check_source(registration: WorkflowRegistration) -> None:
    try:
        compile(registration.source, registration.filename, "exec")
    except SyntaxError as exc:
        raise Invalid(f"{registration.filename} has a syntax error at line {exc.lineno}: {exc.msg}") from None


@dataclass
class NewVersion:
    """What one registration would store of one workflow, validated."""

    options: WorkflowOptions
    source: str
    source_digest: str
    filename: str
    bundle_sha256: str | None = None
    module: str | None = None
    #: Its module's constructs that keep this engine's meaning, not flux-core's: returned as warnings.
    notes: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.options.name

    def key(self) -> tuple:
        """What decides whether it is a new version: its code and its options document."""
        return (self.source_digest, self.bundle_sha256, self.module, self.options.stored())


def register_source(
    session: Session,
    namespace: str,
    registration: WorkflowRegistration,
    fleet: list[WorkerView],
    max_gang_size: int = DEFAULT_MAX_SIZE,
) -> list[WorkflowInfo]:
    """Store each workflow a client read from one source file (the API of hand-written
    calls; ``flux workflow register`` sends bundles: ``register_bundle``)."""
    _check_source(registration)
    digest = source_digest(registration.source)
    names = [spec.name for spec in registration.workflows]
    if len(set(names)) != len(names):
        raise Invalid("workflow names in one registration must be unique")
    versions = [
        NewVersion(_options(spec, index, max_gang_size), registration.source, digest, registration.filename)
        for index, spec in enumerate(registration.workflows)
    ]
    return store(session, namespace, versions, fleet)


def _options(spec: WorkflowSpec, index: int, max_gang_size: int) -> WorkflowOptions:
    """A hand-written registration's options, re-validated by the decorator's rules; its
    gang against the server's cap (a 422 at ``workflows.<index>.gang.<field>``)."""
    where = ["body", "workflows", index]
    try:
        options = WorkflowOptions.of(spec.name, **spec.model_dump(exclude={"name"}))
        gang_options.check_declared(options, max_gang_size, where)
        return options
    except InvalidGang as exc:
        raise gang_options.refusal(exc, where) from None
    except InvalidResourceRequest as exc:
        raise Invalid(f"workflow {spec.name!r}: {exc}") from None
    except (ValueError, TypeError) as exc:
        raise Invalid(str(exc)) from None


def bundle_versions(
    bundle: Bundle, registration: BundleRegistration, max_gang_size: int = DEFAULT_MAX_SIZE
) -> list[NewVersion]:
    """Every workflow of a bundle, read statically (no code of it runs), as versions
    to store; its requirements merged into each one's packages unless turned off. A bad
    gang is a 422 at ``bundle.gang.<field>``, its message naming the file and line."""
    try:
        reading = read_bundle(bundle, registration.requirements)
    except StaticError as exc:
        if exc.option == "gang":
            raise gang_options.refusal(InvalidGang(exc.reason), BUNDLE, f"{exc.filename}:{exc.line}: ") from None
        raise Invalid(str(exc)) from None
    except InvalidResourceRequest as exc:
        raise Invalid(str(exc)) from None
    for found in reading.workflows:
        prefix = f"{found.filename}:{found.line}: workflow {found.options.name!r}: "
        gang_options.check_declared(found.options, max_gang_size, BUNDLE, prefix)
    try:
        return [
            NewVersion(
                replace(found.options, requests=stored_request(found, reading)),
                bundle.text(found.filename) or "",
                bundle.sha256,
                found.filename,
                bundle_sha256=bundle.sha256,
                module=found.module,
                notes=reading.notes.get(found.filename, []),
            )
            for found in reading.workflows
        ]
    except InvalidResourceRequest as exc:
        raise Invalid(str(exc)) from None


#: Where a bundle's refused option is told (its file and line lead the message).
BUNDLE = ("body", "bundle")


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
        warnings = _warnings(session, new.options, fleet, namespace) + new.notes
        if latest and (latest.source_digest, latest.bundle_sha256, latest.module, latest.options) == new.key():
            stored.append((latest, warnings))
            continue
        row = WorkflowModel(
            namespace=namespace,
            name=new.name,
            version=(latest.version + 1) if latest else 1,
            source=new.source,
            source_digest=new.source_digest,
            filename=new.filename,
            created_at=time.time(),
            bundle_sha256=new.bundle_sha256,
            module=new.module,
            options=new.options.stored(),
            **_columns(new.options),
        )
        session.add(row)
        stored.append((row, warnings))
    session.flush()
    for row, _ in stored:
        _requeue_waiting_on(session, row)
    return [info(row, warnings=warnings) for row, warnings in stored]


def _columns(options: WorkflowOptions) -> dict:
    """The options dispatch and submission read as columns (an execution copies them)."""
    document = options.to_json()
    columns = {name: document.get(name) for name in COLUMNS}
    return dict(columns, contention=options.contention() or None)


#: The options a version row keeps as columns of their own, beside its ``options`` document.
COLUMNS = ("requests", "affinity", "routing", "pending_timeout", "max_attempts", "timeout")


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


def _warnings(session: Session, options: WorkflowOptions, fleet: list[WorkerView], namespace: str) -> list[str]:
    """What it requests no worker could ever give it (judged among the workers that serve its
    namespace), and no pool could start one for it; for a gang that may not be preempted, a
    gang no topology domain could ever hold (docs/gangs.md)."""
    request, affinity = options.requests, options.affinity
    if request is None and not affinity and options.gang is None:
        return []
    pools = notes.templates(session)
    reason = infeasibility(request, affinity, fleet, namespace) if request is not None or affinity else None
    if reason:
        demand = Demand(execution_id="", request=request, affinity=affinity, namespace=namespace)
        reason = notes.unplaceable(reason, pools, no_pool(pools, demand))
    gang = None if reason else gang_options.never_fits_warning(options, namespace, fleet, pools)
    return [warning for warning in (reason, gang) if warning]


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
    WorkflowModel.options,
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
        gang=(row.options or {}).get("gang"),
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
