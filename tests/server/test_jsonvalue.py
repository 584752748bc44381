"""``JsonValue`` keeps a lone float a float on SQLite (numeric affinity once stored the
JSON text ``1.0`` as the integer 1) and reads rows written before it as they were."""

from __future__ import annotations

import sqlalchemy as sa

from flux.server.jsonvalue import JsonValue

VALUES = [1.0, 0.5, 0.0, 2, True, None, "1.0", {"a": 1.0}, [1.0], 1e20]


def test_every_json_value_reads_back_with_its_type_on_sqlite():
    engine = sa.create_engine("sqlite://")
    table = sa.Table(
        "t", sa.MetaData(), sa.Column("id", sa.Integer, primary_key=True), sa.Column("v", JsonValue(none_as_null=True))
    )
    table.metadata.create_all(engine)
    with engine.begin() as connection:
        connection.execute(table.insert(), [{"v": value} for value in VALUES])  # executemany, as the event log
        connection.execute(sa.text("INSERT INTO t (v) VALUES ('1.0')"))  # a row from before: SQLite made it 1
        read = connection.scalars(sa.select(table.c.v).order_by(table.c.id)).all()
    assert read[:-1] == VALUES and [type(value) for value in read[:-1]] == [type(value) for value in VALUES]
    assert read[-1] == 1 and type(read[-1]) is int
