"""A failure as data: what a task or workflow raised, with its traceback.

The child builds one (``flux.model.calls.failure_of``) into the value of
``TASK_FAILED`` and ``WORKFLOW_FAILED`` under ``failure``, beside the one-line
``error`` older readers show; the server keeps a FAILED execution's on its row
(``GET /executions/ID``), and the CLI, the console and ``flux.Client`` show it
through ``rendered``. Each frame says whether it is the user's: frames of Flux and of
the standard library are what people skip, so they are folded away unless asked
for (``flux execution show --full``).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError

#: Bounds that keep a failure small in an event: the innermost frames, the newest links.
MAX_FRAMES = 50
MAX_CHAIN = 8
MAX_TEXT = 4000


class Frame(BaseModel):
    """One frame of a traceback, as Python prints it."""

    file: str
    line: int | None = None
    function: str
    code: str | None = Field(default=None, description="The source line, when the child could read it")
    user: bool = Field(default=True, description="False for a frame of Flux or the standard library")


class RaisedError(BaseModel):
    """One exception of a chain: its type, message and frames (outermost first)."""

    type: str
    message: str
    frames: list[Frame] = []
    #: How it led to the next link: raised ``from`` it (cause) or while handling it (context).
    leads_by: Literal["cause", "context"] | None = None


class Failure(BaseModel):
    """What ended a task try or a workflow: its type, message and traceback."""

    type: str = Field(description="The exception's class, qualified outside builtins (mymod.PaymentDeclined)")
    message: str
    traceback: str = Field(default="", description="The whole chain as Python prints it")
    chain: list[RaisedError] = Field(default=[], description="Oldest cause first; the failure itself last")

    @classmethod
    def parsed(cls, value: Any) -> "Failure | None":
        """The failure in an event's value, or None (an older worker's, or not one)."""
        if not isinstance(value, dict):
            return None
        try:
            return cls.model_validate(value.get("failure")) if value.get("failure") is not None else None
        except ValidationError:
            return None

    def rendered(self, full: bool = False) -> str:
        """The traceback for people: each link's user frames (every frame when ``full``),
        with a note of what was folded away."""
        if full and self.traceback:
            return self.traceback.rstrip()
        lines: list[str] = []
        hidden = 0
        for link in self.chain or [RaisedError(type=self.type, message=self.message)]:
            shown = [frame for frame in link.frames if full or frame.user]
            hidden += len(link.frames) - len(shown)
            if shown:
                lines.append("Traceback (most recent call last):")
            for frame in shown:
                lines.append(f'  File "{frame.file}", line {frame.line}, in {frame.function}')
                if frame.code:
                    lines.append(f"    {frame.code}")
            lines.append(f"{link.type}: {link.message}" if link.message else link.type)
            if link.leads_by:
                lines.append("")
                lines.append(LEADS[link.leads_by])
                lines.append("")
        if hidden:
            lines.append(f"({hidden} frame(s) of Flux and the standard library not shown: --full shows them)")
        return "\n".join(lines)


LEADS = {
    "cause": "The above exception was the direct cause of the following exception:",
    "context": "During handling of the above exception, another exception occurred:",
}
