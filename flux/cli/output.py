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


def ago(epoch: float | None, suffix: str = " ago") -> str:
    """How long ago, in its largest unit: ``3m ago`` (``3m`` with ``suffix=""``, an age column)."""
    if not epoch:
        return "never" if suffix else "-"
    seconds = max(0, int(time.time() - epoch))
    for unit, length in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= length:
            return f"{seconds // length}{unit}{suffix}"
    return f"{seconds}s{suffix}"


def cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, (dict, list)):
        return json.dumps(value)
    return str(value)


def short_when(value: float | None, now: float | None = None) -> str:
    """A time for a narrow column, as ``ls -l`` does: the time of day today, the day and
    minute this year, the date before that."""
    if not value:
        return "-"
    moment, today = datetime.fromtimestamp(value), datetime.fromtimestamp(now or time.time())
    if moment.date() == today.date():
        return moment.strftime("%H:%M:%S")
    return moment.strftime("%m-%d %H:%M" if moment.year == today.year else "%Y-%m-%d")


#: What each column costs besides its text in rich's default box: a border and a space each side.
_COLUMN_FRAME, _TABLE_FRAME = 3, 1


def render_rows(
    columns: list[str],
    rows: list[dict],
    title: str | None = None,
    whole: tuple[str, ...] = (),
    optional: tuple[str, ...] = (),
) -> None:
    """A table at the terminal's width. The columns in ``whole`` (and any named ``name`` or
    ``id``) are never cut; the others wrap between words, a word being cut only when nothing else fits.
    ``optional`` columns (the least wanted first) are left out where no row has a value,
    and then one at a time while the table would be wider than the terminal."""
    from rich.table import Table
    from rich.text import Text

    whole = (*whole, *(c for c in ("name", "id") if c in columns))  # names and ids, in every table
    cells = {c: [when(row[c]) if c.endswith("_at") else cell(row.get(c)) for row in rows] for c in columns}
    shown = [c for c in columns if c not in optional or any(v not in ("-", "") for v in cells[c])]
    room = console.width - _TABLE_FRAME
    while sum(_floor(c, cells[c], c in whole) + _COLUMN_FRAME for c in shown) > room:
        dropped = next((c for c in optional if c in shown), None)
        if dropped is None:
            break
        shown.remove(dropped)
    room -= _COLUMN_FRAME * len(shown)
    widths = _fit(
        [max([len(c), *map(len, cells[c])]) for c in shown], [_floor(c, cells[c], c in whole) for c in shown], room
    )
    if sum(widths) > room:  # even whole words do not fit: long words are cut, names and ids still not
        widths = _fit(widths, [w if c in whole else len(c) for c, w in zip(shown, widths)], room)
    table = Table(title=title)
    for column, width in zip(shown, widths):
        table.add_column(column, no_wrap=column in whole, width=width, overflow="fold")  # wrapped, never "…"
    for i in range(len(rows)):
        table.add_row(*(Text(cells[c][i]) for c in shown))  # text, not markup: "packages=[numpy]" stays whole
    real, needed = console.real, sum(widths) + _COLUMN_FRAME * len(shown) + _TABLE_FRAME
    terminal = real.width
    real.width = max(
        needed, terminal
    )  # wider only when its names and ids alone are: the terminal wraps, nothing is cut
    try:
        real.print(table)
    finally:
        real.width = terminal


def _floor(header: str, values: list[str], whole: bool) -> int:
    """The narrowest a column may be: its widest value if whole, else its longest word
    (and its header, never cut to "…")."""
    texts = values if whole else [word for value in values for word in value.split()]
    return max([len(header), *map(len, texts)])


def _fit(naturals: list[int], floors: list[int], room: int) -> list[int]:
    """Column widths within ``room``: the column with the most to spare gives a character
    at a time, none below its floor."""
    widths = list(naturals)
    excess = sum(widths) - room
    while excess > 0:
        spare, i = max((w - f, i) for i, (w, f) in enumerate(zip(widths, floors)))
        if spare <= 0:
            break
        widths[i] -= 1
        excess -= 1
    return widths


def labels_text(labels: dict[str, Any] | None) -> str:
    """Labels as people write them: ``zone=a tier=gpu``."""
    return " ".join(f"{key}={value}" for key, value in sorted((labels or {}).items())) or "-"


def render_record(record: dict) -> None:
    """A record as field and value, leaving out the fields it has no value for."""
    from rich.table import Table
    from rich.text import Text

    table = Table(show_header=False)
    table.add_column("field", no_wrap=True)
    table.add_column("value", overflow="fold")  # a long id or hash wraps, never cut to "…"
    for key, value in record.items():
        if key == "source" or value is None or value == [] or value == {}:
            continue
        table.add_row(
            key, Text(when(value) if (key.endswith("_at") or key == "scheduled_for") and value else cell(value))
        )
    console.print(table)
