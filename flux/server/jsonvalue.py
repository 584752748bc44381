"""A JSON column whose top-level number keeps its type on SQLite too.

SQLite gives a column declared ``JSON`` numeric affinity, so the text ``1.0`` a whole
JSON value serialises to is stored as the integer 1 (and ``0.5`` as a REAL): a workflow
that reports ``progress(1.0)`` or returns ``1.0`` would read back ``1``. Only a lone
float is affected (inside an object or array the number is part of the text), and only
on SQLite (PostgreSQL's ``json`` keeps the text as written). So on SQLite a lone float
is bound as a BLOB of its JSON text, which affinity leaves alone, and a BLOB read back is
parsed as JSON; every other value, and every other database, goes through ``JSON``
unchanged. Rows written before this read as they were stored (a ``1`` stays ``1``).
"""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import JSON
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator


class JsonValue(TypeDecorator):
    """``JSON`` for a column that may hold a bare JSON value (an event's value, an
    execution's input and output): DDL and PostgreSQL behaviour are ``JSON``'s."""

    impl = JSON
    cache_ok = True

    def bind_processor(self, dialect: Dialect) -> Any:
        inner = self.impl_instance.bind_processor(dialect)
        if dialect.name != "sqlite":
            return inner

        def process(value: Any) -> Any:
            if type(value) is float:  # bool and int are no floats; they keep their form anyway
                return json.dumps(value).encode()
            return inner(value) if inner else value

        return process

    def result_processor(self, dialect: Dialect, coltype: Any) -> Any:
        inner = self.impl_instance.result_processor(dialect, coltype)
        if dialect.name != "sqlite":
            return inner

        def process(value: Any) -> Any:
            if isinstance(value, bytes):
                return json.loads(value)
            return inner(value) if inner else value

        return process
