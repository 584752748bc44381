"""output_storage=LocalFileStorage() for a result that is not JSON."""

from __future__ import annotations

from flux import ExecutionContext, task, workflow
from flux.output_storage import LocalFileStorage

storage = LocalFileStorage()


class Frame:
    def __init__(self, rows):
        self.rows = rows


@task.with_options(output_storage=storage)
async def load_rows(n: int):
    return Frame(list(range(n)))


@workflow
async def stored_frame(ctx: ExecutionContext[int]):
    frame = await load_rows(ctx.input)
    return {"rows": len(frame.rows)}


if __name__ == "__main__":
    print(stored_frame.run(4).to_json())
