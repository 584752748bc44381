"""flux.tasks.Graph: a DAG of tasks with a condition on an edge."""

from __future__ import annotations

from flux import ExecutionContext, task, workflow
from flux.tasks import Graph


@task
async def measure(text: str):
    return len(text)


@task
async def short_note(size: int):
    return f"short ({size})"


@workflow
async def review_graph(ctx: ExecutionContext[str]):
    graph = (
        Graph("review")
        .add_node("measure", measure)
        .add_node("short_note", short_note)
        .add_edge("measure", "short_note", condition=lambda size: size < 20)
        .start_with("measure")
        .end_with("short_note")
    )
    return await graph(ctx.input)


if __name__ == "__main__":
    print(review_graph.run("a brief text").to_json())
