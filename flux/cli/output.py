"""What the commands print to people: the lazily made rich consoles, tables that fit
the terminal (names never cut, other columns wrapped), records without empty fields,
times and labels as people write them. ``--format json`` bypasses all of it."""

from __future__ import annotations

import json
import time
from datetime import datetime
from typing import Any


class LazyConsole:
    """rich's Console, made on first use: a process that prints no table (a worker, a
    server) never imports rich (~0.05 s of CPU and ~2 MiB at start; docs/footprint.md)."""

    def __init__(self, **options: Any):
        self._options = options
        self._console: Any = None

    @property
    def real(self) -> Any:
        """The ``rich.console.Console`` itself (for what type-checks it, as ``Live`` does)."""
        if self._console is None:
            from rich.console import Console

            self._console = Console(**self._options)
        return self._console

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)


console = LazyConsole()
#: Progress and notes go to stderr, so that stdout carries the result alone (``| jq``).
err_console = LazyConsole(stderr=True)


def when(value: float | None) -> str:
    return datetime.fromtimestamp(value).strftime("%Y-%m-%d %H:%M:%S") if value else "-"


def ago(epoch: float | None) -> str:
    if not epoch:
        return "never"
    seconds = max(0, int(time.time() - epoch))
    for unit, length in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= length:
            return f"{seconds // length}{unit} ago"
    return f"{seconds}s ago"


def cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, (dict, list)):
        return json.dumps(value)
    return str(value)


def render_rows(columns: list[str], rows: list[dict], title: str | None = None, whole: tuple[str, ...] = ()) -> None:
    """A table; the columns in ``whole`` (names, ids) are never cut: the others wrap to
    make room for them at the terminal's width."""
    from rich.table import Table
    from rich.text import Text

    table = Table(title=title)
    cells = [[when(row[c]) if c.endswith("_at") else cell(row.get(c)) for c in columns] for row in rows]
    for i, column in enumerate(columns):
        widest = max([len(column), *(len(line[i]) for line in cells)])
        least = widest if column in whole else min(widest, len(column))  # a header is never cut to "…"
        table.add_column(column, no_wrap=column in whole, min_width=least, overflow="fold")  # wrapped, never "…"
    for line in cells:
        table.add_row(*map(Text, line))  # text, not markup: "packages=[numpy]" stays whole
    console.print(table)


def labels_text(labels: dict[str, Any] | None) -> str:
    """Labels as people write them: ``zone=a tier=gpu``."""
    return " ".join(f"{key}={value}" for key, value in sorted((labels or {}).items())) or "-"


def render_record(record: dict) -> None:
    """A record as field and value, leaving out the fields it has no value for."""
    from rich.table import Table
    from rich.text import Text

    table = Table("field", "value", show_header=False)
    for key, value in record.items():
        if key == "source" or value is None or value == [] or value == {}:
            continue
        table.add_row(
            key, Text(when(value) if (key.endswith("_at") or key == "scheduled_for") and value else cell(value))
        )
    console.print(table)
