"""The console's forms as typed values: the fields a button posts, read once its CSRF
token and origin are checked (``Visit.form``). A field the form lacks is its default;
what the API's body needs from them (JSON input, a version) is parsed here, and a
``ValueError`` is what the page says is wrong."""

from __future__ import annotations

import json
from dataclasses import dataclass, fields
from typing import Any, TypeVar

Form = TypeVar("Form")


def form_of(kind: type[Form], posted: dict[str, str]) -> Form:
    """``kind``'s fields from the posted ones; those it does not name are ignored."""
    given = {field.name: posted[field.name] for field in fields(kind) if field.name in posted}  # type: ignore[arg-type]
    return kind(**given)


@dataclass(frozen=True)
class Button:
    """A button that acts and goes back to the page it was pressed on (``next``)."""

    next: str = ""


@dataclass(frozen=True)
class WithInput:
    """A form with a JSON ``input`` (empty: none)."""

    input: str = ""

    @property
    def text(self) -> str:
        return self.input.strip()

    def value(self) -> Any:
        return json.loads(self.text) if self.text else None


@dataclass(frozen=True)
class Run(WithInput):
    """A workflow's Run: its input and, when given, the version to run."""

    version: str = ""

    def body(self) -> dict[str, Any]:
        body: dict[str, Any] = {"input": self.value()}
        if self.version.strip():
            body["version"] = int(self.version)
        return body


@dataclass(frozen=True)
class NewSchedule(WithInput):
    """A new schedule: a name, a workflow, cron or every, overlap, catch-up, a time zone."""

    name: str = ""
    workflow: str = ""
    kind: str = "cron"
    timing: str = ""
    overlap: str = ""
    catch_up: str = ""
    timezone: str = ""

    def body(self) -> dict[str, Any]:
        if self.kind not in ("cron", "every"):
            raise ValueError(f"a schedule runs on cron or every, not {self.kind!r}")
        body: dict[str, Any] = {
            "name": self.name.strip(),
            "workflow": self.workflow.strip(),
            self.kind: self.timing.strip(),
        }
        for field in ("overlap", "catch_up", "timezone"):  # the API's defaults where left empty
            if getattr(self, field).strip():
                body[field] = getattr(self, field).strip()
        try:
            body["input"] = self.value()
        except ValueError as exc:
            raise ValueError(f"the schedule's input is not valid JSON: {exc}") from None
        return body


@dataclass(frozen=True)
class Login:
    token: str = ""
    next: str = ""
