"""Secrets: the rules for their names and values, and redaction.

A secret's value reaches only the attempt whose task asked for it (``secret_requests``).
Everything that leaves that attempt (events, captured log lines, the worker's own log
lines) goes through a ``Redactor`` that knows the values it was given, so a value a
task prints, raises or returns shows as ``***``. Pure: used by the runtime, the
worker and the server alike.
"""

from __future__ import annotations

import logging
from collections import Counter
from typing import Any, Iterable

from flux.domain.names import check_name

#: What a redacted value shows as.
MASK = "***"
#: Shorter values cannot be redacted without mangling ordinary text: refused when set.
MIN_SECRET_LENGTH = 4
#: Largest secret value, in characters (a PEM bundle fits).
MAX_SECRET_LENGTH = 64 * 1024


class SecretsUnavailable(LookupError):
    """A task asked for secrets it cannot have: not set (the message names each and the
    command that sets it), or the server has no key. The task fails under its retries."""


def check_secret_name(name: Any) -> str:
    return check_name(name, "secret")


def check_secret_value(value: Any) -> str:
    """``ValueError`` for a value that cannot be stored; the message never repeats it."""
    if not isinstance(value, str):
        raise ValueError("a secret's value must be text")
    if len(value.strip()) < MIN_SECRET_LENGTH:
        raise ValueError(
            f"a secret's value must be at least {MIN_SECRET_LENGTH} characters (shorter ones cannot be redacted)"
        )
    if len(value) > MAX_SECRET_LENGTH:
        raise ValueError(f"a secret's value must be at most {MAX_SECRET_LENGTH} characters")
    return value


def check_secret_requests(value: Any, owner: str) -> tuple[str, ...]:
    """A task's ``secret_requests``: a list or tuple of secret names, as a tuple."""
    if isinstance(value, str) or not isinstance(value, (list, tuple)):
        raise ValueError(f"{owner}: secret_requests must be a list of secret names, got {value!r}")
    try:
        names = tuple(check_secret_name(name) for name in value)
    except ValueError as exc:
        raise ValueError(f"{owner}: secret_requests: {exc}") from None
    if len(set(names)) != len(names):
        raise ValueError(f"{owner}: secret_requests names a secret twice: {list(names)!r}")
    return names


def _fragments(value: str) -> list[str]:
    """The value and, for a multi-line one (a PEM key), each of its lines long enough
    to mask: log lines are captured one line at a time. Longest first."""
    parts = {value.strip()} | {line.strip() for line in value.splitlines()}
    return sorted((p for p in parts if len(p) >= MIN_SECRET_LENGTH), key=len, reverse=True)


class Redactor:
    """The secret values some attempt was given; ``redact`` masks them in any JSON value."""

    def __init__(self) -> None:
        self._known: Counter[str] = Counter()

    def __bool__(self) -> bool:
        return bool(self._known)

    def add(self, values: Iterable[str]) -> None:
        for value in values:
            for fragment in _fragments(value):
                self._known[fragment] += 1

    def remove(self, values: Iterable[str]) -> None:
        for value in values:
            for fragment in _fragments(value):
                self._known[fragment] -= 1
                if self._known[fragment] <= 0:
                    del self._known[fragment]

    def text(self, text: str) -> str:
        for fragment in sorted(self._known, key=len, reverse=True):
            if fragment in text:
                text = text.replace(fragment, MASK)
        return text

    def redact(self, value: Any) -> Any:
        """``value`` with every known secret masked in its strings (keys included)."""
        if not self._known:
            return value
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {self.redact(k): self.redact(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [self.redact(item) for item in value]
        return value


class RedactingFilter(logging.Filter):
    """Masks a redactor's values in every record a handler formats (the worker's own lines)."""

    def __init__(self, redactor: Redactor):
        super().__init__()
        self.redactor = redactor

    def filter(self, record: logging.LogRecord) -> bool:
        if self.redactor:
            record.msg = self.redactor.text(record.getMessage())
            record.args = None
            if record.exc_info:
                import traceback

                record.exc_text = self.redactor.text("".join(traceback.format_exception(*record.exc_info)).rstrip())
                record.exc_info = None
        return True
