"""Server settings and the server's home folder (tokens, default database).

The home holds secrets (tokens) and the SQLite database: it is created 0700 and
those files are kept 0600. Database URLs are printed only through ``redact_url``.
"""

from __future__ import annotations

import ipaddress
import json
import os
import secrets
from dataclasses import asdict, dataclass, field
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from flux.domain.attempts import DEFAULT_MAX_ATTEMPTS
from flux.domain.gang import DEFAULT_MAX_SIZE
from flux.domain.policy import DEFAULT_COOLDOWN, DEFAULT_HALF_LIFE, DEFAULT_PREEMPTION_GRACE, ExecutionPolicy
from flux.domain.priority import PriorityClasses, parse_class
from flux.domain.workers import DEFAULT_MAX_HEARTBEATS_PER_SECOND

DEFAULT_MAX_BODY_SIZE = 64 * 1024**2
DEFAULT_MAX_JSON_DEPTH = 64
#: The largest input or output (task result, workflow output), JSON-encoded.
DEFAULT_MAX_PAYLOAD_SIZE = 32 * 1024**2
#: The largest ``max_payload_size`` a server accepts: under the runners' framing
#: limit (``flux.worker.runners.protocol.MAX_EVENT_BYTES``, 1 GiB) with room for an event's JSON.
MAX_PAYLOAD_SIZE_CEILING = 512 * 1024**2
#: What a request carries besides its one payload (the rest of a checkpoint batch).
BODY_HEADROOM = 1024**2
DEFAULT_MAX_BUNDLE_SIZE = 32 * 1024**2
#: The edge's connection bounds (``flux.server.edge``, docs/security.md#connections).
DEFAULT_MAX_HEADER_SIZE = 64 * 1024
DEFAULT_HEADER_TIMEOUT = 10.0
DEFAULT_BODY_TIMEOUT = 60.0
DEFAULT_MAX_CONNECTIONS = 10_000
DEFAULT_BUNDLE_INLINE_SIZE = 1024**2

#: Where ``--processes N`` hands the settings to each server process.
SETTINGS_ENV = "FLUX_SERVER_SETTINGS_JSON"


def default_home() -> Path:
    return Path(os.environ.get("FLUX_HOME") or Path.home() / ".flux")


@dataclass
class ServerSettings:
    home: Path
    database_url: str | None = None
    host: str = "127.0.0.1"
    port: int = 8000
    #: Seconds without a heartbeat after which a worker is evicted and its work requeued.
    eviction_grace_period: float = 30.0
    #: Attempts an execution may crash in before it fails, for workflows that set none.
    default_max_attempts: int = DEFAULT_MAX_ATTEMPTS
    #: Seconds before the attempt after a crash (doubled each further crash, at most 60 s).
    attempt_backoff: float = 1.0
    #: Shared by every replica (e.g. from a Kubernetes secret); else HOME/bootstrap-token.
    bootstrap_token: str | None = None
    #: When set, client calls (register, run, cancel, drain, reads) must present it.
    api_token: str | None = None
    #: A file holding the API token (kept off the command line); see ``resolve_api_token``.
    api_token_file: Path | None = None
    #: Largest request body in bytes (413 above it); 0 turns the limit off.
    max_body_size: int = DEFAULT_MAX_BODY_SIZE
    #: Largest request line and headers in bytes (431 above it).
    max_header_size: int = DEFAULT_MAX_HEADER_SIZE
    #: Seconds a connection has to send a request's headers (408 after), from its opening
    #: or the request's first byte; and its body, from the end of its headers.
    header_timeout: float = DEFAULT_HEADER_TIMEOUT
    body_timeout: float = DEFAULT_BODY_TIMEOUT
    #: Connections open at once per server process (503 past it; lowered to fit the
    #: process's file descriptors).
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    #: Largest input or output in bytes, JSON-encoded (submit: 413; a task result or
    #: workflow output over it fails that task or workflow, naming the limit). None: 32 MiB,
    #: or less when ``max_body_size`` is lowered below that (a payload travels in one request).
    max_payload_size: int | None = None
    #: Seconds after which finished executions are deleted with their events and logs;
    #: None keeps them (``flux.server.retention``).
    retention: float | None = None
    #: Deepest nesting of a JSON body (422 deeper).
    max_json_depth: int = DEFAULT_MAX_JSON_DEPTH
    #: Seconds between flushes of worker leases (liveness) to the database. None: 10 s
    #: when replicas may share it (PostgreSQL), 300 s on SQLite (one server process).
    lease_interval: float | None = None
    #: Heartbeats a second the fleet sends at most: a large fleet's workers are told to beat
    #: less often (``flux.domain.workers.paced_interval``); 0: each beats at its own interval.
    max_heartbeats_per_second: float = DEFAULT_MAX_HEARTBEATS_PER_SECOND
    #: Shed (503 + Retry-After) new work once database work has queued this long; 0 = never.
    shed_after: float = 5.0
    #: Server processes on this host (PostgreSQL only; each behaves as a replica).
    processes: int = 1
    #: Set by a parent that already migrated the schema before starting processes.
    migrated: bool = False
    #: Largest workflow bundle in bytes, zipped (413 above it); it unpacks to at most 4x.
    max_bundle_size: int = DEFAULT_MAX_BUNDLE_SIZE
    #: Bundles up to this size are kept in the database; larger ones in ``bundle_dir``.
    bundle_inline_size: int = DEFAULT_BUNDLE_INLINE_SIZE
    #: Where large bundles are kept (HOME/bundles); replicas must share it.
    bundle_dir: Path | None = None
    #: A file holding the Fernet key(s) of the secret store (``FLUX_SECRETS_KEY`` wins);
    #: the key itself is never a setting (settings travel to --processes N as JSON).
    secrets_key_file: Path | None = None
    #: Priority classes added to or replacing the defaults, as ``NAME=VALUE[:never]`` (docs/contention.md).
    priority_classes: list[str] = field(default_factory=list)
    #: Seconds a preempted attempt has before it is ended (the task sees ``preempting`` meanwhile).
    preemption_grace: float = DEFAULT_PREEMPTION_GRACE
    #: Seconds after a preemption in which an execution is preempted again only as a last resort.
    preemption_cooldown: float = DEFAULT_COOLDOWN
    #: Half-life of each namespace's past usage in fair share; 0: instantaneous DRF.
    fair_share_half_life: float = DEFAULT_HALF_LIFE
    #: Webhooks (docs/hooks.md): may a hook reach loopback, link-local and private addresses?
    hooks_allow_private: bool = False
    #: Seconds a delivery is retried for before it is dead.
    hooks_max_age: float = 24 * 3600.0
    #: Seconds before the first retry (doubled per failure, at most an hour, with jitter).
    hooks_backoff: float = 10.0
    #: Seconds one POST may take, all of it (connect, send, answer).
    hooks_timeout: float = 10.0
    #: Seconds an execution stays unschedulable before ``execution.unschedulable`` is sent
    #: (once per wait): a verdict that a worker joining a minute later undoes is no alert.
    hooks_unschedulable_after: float = 300.0
    #: Run the scaling loop of worker pools (docs/autoscaling.md); off: pools are only rows.
    autoscale: bool = True
    #: The largest gang a workflow may declare or a run ask for (docs/gangs.md): registration
    #: and runs over it are a 422 naming ``gang.size``.
    max_gang_size: int = DEFAULT_MAX_SIZE

    def __post_init__(self) -> None:
        self.max_payload_size = self._payload_limit()
        self.home = Path(self.home)
        self.bundle_dir = Path(self.bundle_dir) if self.bundle_dir else self.home / "bundles"
        if not self.database_url:
            self.database_url = f"sqlite:///{self.home / 'flux.db'}"
        for text in self.priority_classes:
            parse_class(text)  # a malformed class stops the server at start, naming it
        if not isinstance(self.max_gang_size, int) or self.max_gang_size < 2:
            raise ValueError(
                f"max_gang_size must be a whole number of at least 2 (a gang's least size), got {self.max_gang_size!r}"
            )

    def _payload_limit(self) -> int:
        body = self.max_body_size
        if self.max_payload_size is None:
            if not body or body >= DEFAULT_MAX_PAYLOAD_SIZE + BODY_HEADROOM:
                return DEFAULT_MAX_PAYLOAD_SIZE
            return max(body - BODY_HEADROOM, body // 2)
        if not 0 < self.max_payload_size <= MAX_PAYLOAD_SIZE_CEILING:
            raise ValueError(
                f"max_payload_size must be more than 0 and at most {MAX_PAYLOAD_SIZE_CEILING} bytes (512Mi)"
            )
        if body and self.max_payload_size + BODY_HEADROOM > body:
            raise ValueError(
                f"max_payload_size ({self.max_payload_size} bytes) needs a max_body_size of at least "
                f"{self.max_payload_size + BODY_HEADROOM} bytes (now {body}): a payload travels in one request"
            )
        return self.max_payload_size

    def to_json(self) -> str:
        return json.dumps(
            {key: str(value) if isinstance(value, Path) else value for key, value in asdict(self).items()}
        )

    @classmethod
    def from_json(cls, text: str) -> "ServerSettings":
        return cls(**json.loads(text))

    def attempt_policy(self) -> ExecutionPolicy:
        classes = PriorityClasses().with_overrides(parse_class(text) for text in self.priority_classes)
        return ExecutionPolicy(
            default_max_attempts=self.default_max_attempts,
            backoff=self.attempt_backoff,
            priorities=classes,
            preemption_grace=self.preemption_grace,
            preemption_cooldown=self.preemption_cooldown,
            fair_share_half_life=self.fair_share_half_life,
            max_gang_size=self.max_gang_size,
        )

    def lease_interval_for(self, shared: bool) -> float:
        if self.lease_interval is not None:
            return self.lease_interval
        return min(5.0, self.eviction_grace_period / 6) if shared else 300.0

    @property
    def bootstrap_token_path(self) -> Path:
        return self.home / "bootstrap-token"

    @property
    def api_token_path(self) -> Path:
        return self.home / "api-token"


def redact_url(url: str) -> str:
    """``url`` with its password, if any, as ``***``: for everything printed or logged."""
    parts = urlsplit(url)
    userinfo, at, hostport = parts.netloc.rpartition("@")
    user, colon, _password = userinfo.partition(":")
    if not at or not colon:
        return url
    return urlunsplit(parts._replace(netloc=f"{user}:***@{hostport}"))


def sqlite_file(database_url: str) -> Path | None:
    """The database file of a ``sqlite:///PATH`` URL (None for other databases, in memory)."""
    from sqlalchemy.engine import make_url  # only the server needs it, not every CLI call

    url = make_url(database_url)
    if url.get_backend_name() != "sqlite" or url.database in (None, "", ":memory:"):
        return None
    return Path(url.database)


def prepare_home(settings: ServerSettings) -> None:
    """Create the home 0700; create the SQLite file 0600 before SQLAlchemy does (it would
    use the umask), and make existing database and token files owner-only."""
    settings.home.mkdir(mode=0o700, parents=True, exist_ok=True)
    private = [settings.bootstrap_token_path, settings.api_token_path, settings.home / "secrets-key"]
    database = sqlite_file(settings.database_url)
    if database is not None:
        database.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.close(os.open(database, os.O_WRONLY | os.O_CREAT, 0o600))
        private += [database.with_name(database.name + suffix) for suffix in ("", "-wal", "-shm", "-journal")]
    for path in private:
        if path.exists():
            path.chmod(0o600)


def ensure_bootstrap_token(home: Path) -> str:
    """Read the bootstrap token, creating it (mode 0600) on first start."""
    return _ensure_token_file(Path(home) / "bootstrap-token")


def _ensure_token_file(path: Path) -> str:
    if path.exists():
        return read_token_file(path)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    token = secrets.token_urlsafe(32)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(token + "\n")
    return token


def read_token_file(path: str | Path) -> str:
    """A token kept in a file (first line); ``ValueError`` when the file is empty."""
    token = Path(path).read_text().strip()
    if not token:
        raise ValueError(f"{path} is empty")
    return token


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a name or an interface's address: reachable from elsewhere


def resolve_api_token(settings: ServerSettings) -> tuple[str | None, str | None]:
    """The API token and, when it lives in a file, a line saying where (never the token).

    ``--api-token``, else ``--api-token-file``; a server listening beyond loopback
    with neither uses HOME/api-token, generating it (0600) on first start, as Jupyter
    does: the API runs code on every worker and must not be open to the network.
    """
    if settings.api_token:
        return settings.api_token, None
    if settings.api_token_file:
        return read_token_file(settings.api_token_file), f"API token from {settings.api_token_file}"
    if is_loopback(settings.host):
        return None, None
    created = not settings.api_token_path.exists()
    token = _ensure_token_file(settings.api_token_path)
    how = "generated into" if created else "read from"
    return token, (
        f"--host {settings.host} is not loopback, so client calls need the API token, {how} {settings.api_token_path} "
        f"(mode 0600); clients: FLUX_API_TOKEN or --api-token-file"
    )
