"""flux-core's ``Graph``: tasks as the nodes of a DAG, each run once every node upstream of
it ran and every edge's condition (a function of the upstream node's output) held; a
node gets its upstream nodes' outputs as arguments; the graph's result is what reaches
``END``. Here the nodes are run from the workflow's body in one topological order, so
each node's task call is recorded and replayed like any other (ids in that order).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

START, END = "START", "END"


async def _always(_: Any) -> bool:
    return True


async def _identity(value: Any) -> Any:
    return value


@dataclass
class _Node:
    action: Callable[..., Any]
    #: Upstream node name -> the condition on its output that lets this node run.
    upstream: dict[str, Callable[[Any], Any]] = field(default_factory=dict)


class Graph:
    def __init__(self, name: str):
        self.name = name
        self._nodes: dict[str, _Node] = {START: _Node(_identity), END: _Node(_identity)}

    def add_node(self, name: str, action: Callable[..., Any]) -> "Graph":
        if name in self._nodes:
            raise ValueError(f"Node {name} already present.")
        self._nodes[name] = _Node(action)
        return self

    def add_edge(self, start_node: str, end_node: str, condition: Callable[[Any], Any] = _always) -> "Graph":
        for node in (start_node, end_node):
            if node not in self._nodes:
                raise ValueError(f"Node {node} must be present.")
        if end_node == START or start_node == END:
            raise ValueError("START cannot be an end node, nor END a start node")
        self._nodes[end_node].upstream[start_node] = condition
        return self

    def start_with(self, node: str) -> "Graph":
        return self.add_edge(START, node)

    def end_with(self, node: str) -> "Graph":
        return self.add_edge(node, END)

    def validate(self) -> list[str]:
        """The nodes in one topological order; ``ValueError`` for a graph without a start
        or an end, a node START does not reach, or a cycle."""
        if not any(START in node.upstream for node in self._nodes.values()) or not self._nodes[END].upstream:
            raise ValueError(f"graph {self.name!r} needs start_with(...) and end_with(...)")
        waiting = {name: set(node.upstream) for name, node in self._nodes.items()}
        order = []
        ready = [name for name, ups in waiting.items() if not ups]
        while ready:
            current = ready.pop(0)
            order.append(current)
            for name, ups in waiting.items():
                if current in ups:
                    ups.discard(current)
                    if not ups:
                        ready.append(name)
        if len(order) != len(self._nodes):
            raise ValueError(f"graph {self.name!r} has a cycle among {sorted(set(self._nodes) - set(order))}")
        if order[0] != START or len([n for n in order if not self._nodes[n].upstream]) != 1:
            raise ValueError(f"graph {self.name!r}: every node must be reached from START")
        return order

    async def __call__(self, input: Any = None) -> Any:  # noqa: A002 - flux-core's name
        outputs: dict[str, Any] = {}
        for name in self.validate():
            node = self._nodes[name]
            if name != START and not await self._may_run(node, outputs):
                continue
            arguments = [input] if name == START else [outputs[up] for up in node.upstream]
            outputs[name] = await _result(node.action(*arguments))
        return outputs.get(END)

    @staticmethod
    async def _may_run(node: _Node, outputs: dict[str, Any]) -> bool:
        for upstream, condition in node.upstream.items():
            if upstream not in outputs or not await _result(condition(outputs[upstream])):
                return False
        return True


async def _result(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value
