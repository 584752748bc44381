"""The secret store: values encrypted at rest with Fernet (AES-128-CBC + HMAC-SHA256,
``cryptography``), the key outside the database (docs/tasks.md#secrets, docs/security.md).

The key comes from ``FLUX_SECRETS_KEY`` or the file ``--secrets-key-file`` names: one
Fernet key, or several separated by commas or lines (the first encrypts, all decrypt:
``MultiFernet``, for rotation). Neither given, a server on SQLite makes one in its home on
first start (``HOME/secrets-key``, 0600, as it makes its bootstrap token): the database
and its key live side by side, as they would in any one-host install. On PostgreSQL it
does not: replicas with homes of their own would each make a different key. A server
whose database holds secrets refuses to start without a key that decrypts them. Values
leave the server only to the worker that holds an execution's current attempt
(``values_for``, fenced); no list or read returns one.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from flux.domain.namespaces import DEFAULT
from flux.domain.secrets import check_secret_value
from flux.server.errors import Conflict, Invalid, NotFound
from flux.server.namespaces import require_active
from flux.server.schemas import SecretInfo
from flux.server.service_models import SecretModel
from flux.server.settings import sqlite_file

KEY_ENV = "FLUX_SECRETS_KEY"
NO_KEY = (
    f"the server has no secrets key: start it with {KEY_ENV} or --secrets-key-file"
    " (make one with 'flux secret generate-key')"
)
#: The key a server on SQLite makes in its home when none is given.
HOME_KEY = "secrets-key"


class SecretsKeyError(RuntimeError):
    """The server cannot start: secrets are stored and no key (or the wrong one) is given."""


def keyring(key_file: Path | str | None = None) -> MultiFernet | None:
    """The server's keys from ``FLUX_SECRETS_KEY``, else ``key_file``; None when neither is set."""
    text = os.environ.get(KEY_ENV) or (Path(key_file).read_text() if key_file else "")
    keys = [part.strip() for part in text.replace("\n", ",").split(",") if part.strip()]
    if not keys:
        return None
    try:
        return MultiFernet([Fernet(key) for key in keys])
    except (ValueError, TypeError):
        source = KEY_ENV if os.environ.get(KEY_ENV) else str(key_file)
        raise SecretsKeyError(f"{source} does not hold Fernet keys (32 url-safe base64-encoded bytes each)") from None


def home_key(home: Path, database_url: str, key_file: Path | str | None) -> Path | None:
    """The key file to use: the one given, else (on SQLite, no ``FLUX_SECRETS_KEY``)
    ``HOME/secrets-key``, made 0600 on first start; None when a key must be given."""
    if key_file or os.environ.get(KEY_ENV) or sqlite_file(database_url) is None:
        return Path(key_file) if key_file else None
    path = Path(home) / HOME_KEY
    if not path.exists():
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(Fernet.generate_key().decode() + "\n")
    return path


def check_key(session: Session, keys: MultiFernet | None) -> None:
    """Refuse to start when the database holds secrets this server could not decrypt."""
    count = session.scalar(select(func.count()).select_from(SecretModel))
    if not count:
        return
    if keys is None:
        raise SecretsKeyError(f"the database holds {count} secret(s) and {NO_KEY[len('the server has ') :]}")
    sample = session.scalars(select(SecretModel.encrypted).limit(1)).one()
    try:
        keys.decrypt(sample.encode())
    except InvalidToken:
        raise SecretsKeyError(
            f"the secrets key does not decrypt the stored secrets (wrong {KEY_ENV} or key file?)"
        ) from None


def _info(row: SecretModel) -> SecretInfo:
    return SecretInfo(name=row.name, created_at=row.created_at, updated_at=row.updated_at)


def put(session: Session, keys: MultiFernet | None, name: str, value: str, namespace: str = DEFAULT) -> SecretInfo:
    if keys is None:
        raise Conflict(NO_KEY)
    try:
        check_secret_value(value)
    except ValueError as exc:
        raise Invalid(str(exc)) from None
    now = time.time()
    encrypted = keys.encrypt(value.encode()).decode()
    require_active(session, namespace)
    row = session.get(SecretModel, (namespace, name))
    if row is None:
        row = SecretModel(namespace=namespace, name=name, encrypted=encrypted, created_at=now, updated_at=now)
        session.add(row)
    else:
        row.encrypted, row.updated_at = encrypted, now
    session.flush()
    return _info(row)


def listed(session: Session, namespace: str = DEFAULT) -> list[SecretInfo]:
    """Names and times, never values."""
    query = select(SecretModel).where(SecretModel.namespace == namespace).order_by(SecretModel.name)
    return [_info(row) for row in session.scalars(query)]


def delete(session: Session, name: str, namespace: str = DEFAULT) -> None:
    row = session.get(SecretModel, (namespace, name))
    if row is None:
        raise NotFound(f"secret {name!r} not found")
    session.delete(row)


def values_for(
    session: Session, keys: MultiFernet | None, names: list[str], namespace: str = DEFAULT
) -> dict[str, str]:
    """The decrypted values of ``names`` in the namespace of the execution that asks
    (the caller has fenced its attempt)."""
    query = select(SecretModel).where(SecretModel.namespace == namespace, SecretModel.name.in_(names))
    rows = {row.name: row for row in session.scalars(query)}
    missing = [name for name in names if name not in rows]
    if missing:
        raise NotFound(not_set(missing, namespace))
    if keys is None:
        raise Conflict(NO_KEY)
    return {name: keys.decrypt(rows[name].encrypted.encode()).decode() for name in names}


def not_set(names: list[str], namespace: str) -> str:
    """Which secrets a task asked for are not set, and the command that sets each."""
    option = "" if namespace == DEFAULT else f" -n {namespace}"
    commands = "; ".join(f"flux secret set{option} {name}" for name in names)
    return f"secret(s) not set in namespace {namespace!r}: {', '.join(names)} (set with: {commands})"


def check_at_start(database_url: str, key_file: Path | str | None) -> None:
    """What ``flux start server`` checks before serving (the schema migrated first), so
    a missing or wrong key is one clear line and exit 1, not a failed start-up later."""
    from sqlalchemy.orm import Session as OpenSession

    from flux.server.database import make_engine, migrate, normalise_url

    keys = keyring(key_file)
    migrate(database_url)
    engine = make_engine(normalise_url(database_url))
    try:
        with OpenSession(engine) as session:
            check_key(session, keys)
    finally:
        engine.dispose()
