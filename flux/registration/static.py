"""Static registration: a module's workflows and their options, read from its source
with the ``ast`` module, never by importing it.

Registering needs none of the workflow's dependencies (no torch on a laptop) and runs
none of its import-time side effects. Decorator arguments are evaluated only when they
are literals (numbers, strings, lists, tuples, dicts, ``None``, booleans, arithmetic on
numbers) or calls of the Flux constructors in ``CONSTRUCTORS``, which are then called
for real: the values go through the very validators the decorators use
(``flux.domain.workflow_options.WorkflowOptions.of``, ``flux.domain.task_options.TaskOptions``). A bare name is
looked up among the module's earlier top-level constants; a name of a function of the
module (a task's ``fallback=`` or ``rollback=``) is recorded by that name and resolved
on the worker, where the module is imported. Anything else is a ``StaticError``
naming the file, the line and what is allowed.
"""

from __future__ import annotations

import ast
import operator
from dataclasses import dataclass, field
from typing import Any, Callable

from flux.domain import fluxcore_routing as flux_core_routing
from flux.domain.affinity import DoesNotExist, Exists, Ge, Gt, In, Le, Lt, NotIn
from flux.domain.concurrency import Concurrency
from flux.domain.fluxcore_schedules import cron, interval, once
from flux.domain.gang import Gang, InvalidGang
from flux.domain.resource_request import InvalidResourceRequest, ResourceRequest
from flux.domain.routing import label, load, metric, score
from flux.domain.task_options import TaskOptions
from flux.domain.workflow_options import WorkflowOptions, names

#: The Flux constructors a decorator argument may call (``from flux import ...`` names).
CONSTRUCTORS: dict[str, Callable[..., Any]] = {
    "ResourceRequest": ResourceRequest,
    "In": In,
    "NotIn": NotIn,
    "Exists": Exists,
    "DoesNotExist": DoesNotExist,
    "Gt": Gt,
    "Lt": Lt,
    "Ge": Ge,
    "Le": Le,
    "score": score,
    "label": label,
    "load": load,
    "metric": metric,
    "Concurrency": Concurrency,
    "cron": cron,
    "interval": interval,
    "once": once,
    "Gang": Gang,
    # flux-core's routing language (``from flux.routing import ...``), translated to ours
    **{f"routing.{name}": getattr(flux_core_routing, name) for name in flux_core_routing.__all__},
}
#: ``ResourceRequest.with_cpu("500m").with_memory("512Mi")``: the request's shortcuts,
#: on the class or on a request built before them.
SHORTCUTS = ("with_cpu", "with_memory", "with_disk", "with_gpu", "with_gpu_memory", "with_packages", "with_resources")
DECORATORS = ("workflow", "task")
#: Every workflow option, then those of flux-core's the decorator accepts and never stores.
WORKFLOW_OPTIONS = (*names(), "output_storage", "runner", "durability")
TASK_OPTIONS = (
    "name",
    "retry_max_attempts",
    "retry_delay",
    "retry_backoff",
    "timeout",
    "fallback",
    "rollback",
    "cache",
    "cache_ttl",
    "secret_requests",
    "requires_approval",
    "metadata",
    "output_storage",
)
#: Options not stored: flux-core's ``output_storage`` (an object of the module, built on the
#: worker when it imports it), ``requires_approval`` (perhaps a lambda; the worker applies
#: it), ``runner`` and ``durability`` (warned about by the decorator).
RUNTIME_OPTIONS = ("output_storage", "runner", "durability", "requires_approval")
#: Task options whose value is a function of the module, recorded by name.
FUNCTION_OPTIONS = ("fallback", "rollback")

ALLOWED = (
    "literals (numbers, strings, lists, tuples, dicts, True/False/None, arithmetic on numbers), "
    "module-level constants defined by such expressions, and calls of "
    + ", ".join(CONSTRUCTORS)
    + " (and ResourceRequest's "
    + ", ".join(SHORTCUTS)
    + ")"
)

_BINARY = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_COMPARE = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
}
_UNARY = {ast.USub: operator.neg, ast.UAdd: operator.pos}
#: Largest exponent of ``**`` (``8 * 2**30`` is fine; ``10**10**10`` is a denial of service).
MAX_EXPONENT = 256


class StaticError(ValueError):
    """A module that cannot be registered without running it: file, line, reason."""

    def __init__(self, filename: str, line: int | None, message: str):
        self.filename, self.line, self.reason = filename, line, message
        #: The decorator option whose value was refused, when one was (``gang``: a 422 naming it).
        self.option: str | None = None
        where = f"{filename}:{line}" if line else filename
        super().__init__(f"{where}: {message}")


@dataclass(frozen=True)
class FunctionRef:
    """A function of the module named by a task option; the worker resolves it on import."""

    name: str

    def __call__(self, *args: Any, **kwargs: Any) -> Any:  # callable, so TaskOptions accepts it
        raise RuntimeError(f"{self.name} is resolved on the worker, where the module is imported")


@dataclass
class FoundWorkflow:
    options: WorkflowOptions
    filename: str
    line: int
    module: str


@dataclass
class FoundTask:
    options: TaskOptions
    filename: str
    line: int


@dataclass
class ModuleReading:
    workflows: list[FoundWorkflow] = field(default_factory=list)
    tasks: list[FoundTask] = field(default_factory=list)


def read_source(source: str, filename: str, module: str = "") -> ModuleReading:
    """The workflows and tasks ``source`` defines, validated; ``StaticError`` otherwise."""
    try:
        tree = ast.parse(source, filename)
    except SyntaxError as exc:
        raise StaticError(filename, exc.lineno, f"syntax error: {exc.msg}") from None
    except (ValueError, RecursionError, MemoryError) as exc:  # null bytes, absurd nesting
        raise StaticError(filename, None, f"cannot be parsed: {exc}") from None
    return _Reader(filename, module).read(tree)


class _Reader:
    def __init__(self, filename: str, module: str):
        self.filename, self.module = filename, module
        #: Local name -> what it stands for: "flux" (the package), a decorator or a constructor.
        self.names: dict[str, str] = {}
        self.constants: dict[str, Any] = {}
        self.functions: set[str] = set()
        self.reading = ModuleReading()

    def error(self, node: ast.AST | None, message: str) -> StaticError:
        return StaticError(self.filename, getattr(node, "lineno", None), message)

    def read(self, tree: ast.Module) -> ModuleReading:
        self._statements(tree.body)
        return self.reading

    def _statements(self, body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name == "flux":
                        self.names[alias.asname or "flux"] = "flux"
            elif isinstance(node, ast.ImportFrom) and node.module == "flux.routing" and not node.level:
                for alias in node.names:  # flux-core's routing language, not ours (``from flux import label``)
                    if f"routing.{alias.name}" in CONSTRUCTORS:
                        self.names[alias.asname or alias.name] = f"routing.{alias.name}"
            elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "flux" and not node.level:
                for alias in node.names:
                    if alias.name in DECORATORS or alias.name in CONSTRUCTORS:
                        self.names[alias.asname or alias.name] = alias.name
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self._function(node)
            elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                self._constant(node.targets[0].id, node.value)
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
                self._constant(node.target.id, node.value)
            elif isinstance(node, ast.If):
                self._statements(node.body)
                self._statements(node.orelse)
            elif isinstance(node, ast.Try):
                self._statements(node.body)

    def _constant(self, name: str, value: ast.expr) -> None:
        """Remember a top-level constant a decorator may name, if it is one we can evaluate."""
        try:
            self.constants[name] = self.evaluate(value)
        except StaticError:
            self.constants.pop(name, None)

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self.functions.add(node.name)
        for decorator in node.decorator_list:
            kind, call = self._decorator(decorator)
            if kind == "workflow":
                self._workflow(node, decorator, call)
            elif kind == "task":
                self._task(node, decorator, call)

    def _decorator(self, node: ast.expr) -> tuple[str | None, ast.Call | None]:
        """("workflow" or "task", the with_options call or None), or (None, None)."""
        call = None
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "with_options":
            call, node = node, node.func.value
        kind = self._flux_name(node)
        if kind in DECORATORS:
            return kind, call
        return None, None

    def _flux_name(self, node: ast.expr) -> str | None:
        """``workflow``, ``flux.workflow``, ``fx.In``...: the Flux name it stands for."""
        if isinstance(node, ast.Name):
            return self.names.get(node.id)
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and self.names.get(node.value.id) == "flux"
        ):
            return node.attr
        return None

    def _options(self, call: ast.Call | None, allowed: tuple[str, ...], what: str) -> dict[str, Any]:
        if call is None:
            return {}
        if call.args:
            raise self.error(call, f"{what}.with_options takes keyword arguments only ({', '.join(allowed)})")
        options = {}
        for keyword in call.keywords:
            if keyword.arg is None:
                raise self.error(
                    keyword.value, f"**kwargs cannot be read statically; name each option ({', '.join(allowed)})"
                )
            if keyword.arg not in allowed:
                raise self.error(keyword.value, f"unknown {what} option {keyword.arg!r}; allowed: {', '.join(allowed)}")
            if keyword.arg in RUNTIME_OPTIONS:
                continue
            try:
                if keyword.arg in FUNCTION_OPTIONS:
                    options[keyword.arg] = self._function_ref(keyword.value)
                else:
                    options[keyword.arg] = self.evaluate(keyword.value)
            except StaticError as exc:
                exc.option = keyword.arg
                raise
        return options

    def _function_ref(self, node: ast.expr) -> FunctionRef | None:
        if isinstance(node, ast.Constant) and node.value is None:
            return None
        if isinstance(node, ast.Name) and node.id in self.functions:
            return FunctionRef(node.id)
        raise self.error(
            node, "must name a function defined earlier in this module (recorded by name, resolved on the worker)"
        )

    def _workflow(
        self, node: ast.FunctionDef | ast.AsyncFunctionDef, decorator: ast.expr, call: ast.Call | None
    ) -> None:
        if not isinstance(node, ast.AsyncFunctionDef):
            raise self.error(node, f"@workflow needs an 'async def' function taking ctx; {node.name!r} is a plain def")
        options = self._options(call, WORKFLOW_OPTIONS, "workflow")
        name = options.pop("name", None)
        try:
            for policy in ("affinity", "routing"):
                if isinstance(options.get(policy), flux_core_routing.Unmapped):  # input-resolved: never registered
                    raise ValueError(f"workflow {name or node.name!r}: {options[policy].message()}")
            validated = WorkflowOptions.of(node.name if name is None else name, **options)
        except (ValueError, TypeError, InvalidResourceRequest) as exc:
            error = self.error(decorator, str(exc))
            error.option = "gang" if isinstance(exc, InvalidGang) else None
            raise error from None
        self.reading.workflows.append(FoundWorkflow(validated, self.filename, node.lineno, self.module))

    def _task(self, node: ast.FunctionDef | ast.AsyncFunctionDef, decorator: ast.expr, call: ast.Call | None) -> None:
        options = self._options(call, TASK_OPTIONS, "task")
        try:
            validated = TaskOptions(name=options.pop("name", None) or node.name, **options)
        except (ValueError, TypeError) as exc:
            raise self.error(decorator, str(exc)) from None
        self.reading.tasks.append(FoundTask(validated, self.filename, node.lineno))

    def evaluate(self, node: ast.expr) -> Any:
        """The value of a literal expression or an allowed constructor call."""
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, (ast.List, ast.Tuple)):
            values = [self.evaluate(item) for item in node.elts]
            return values if isinstance(node, ast.List) else tuple(values)
        if isinstance(node, ast.Dict):
            if any(key is None for key in node.keys):
                raise self.error(node, f"** inside a dict cannot be read statically; allowed: {ALLOWED}")
            return {self.evaluate(key): self.evaluate(value) for key, value in zip(node.keys, node.values)}
        if isinstance(node, ast.Name) and node.id in self.constants:
            return self.constants[node.id]
        if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
            return self._apply(node, _UNARY[type(node.op)], self.evaluate(node.operand))
        if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            left, right = self.evaluate(node.left), self.evaluate(node.right)
            if isinstance(node.op, ast.Pow) and not (isinstance(right, (int, float)) and abs(right) <= MAX_EXPONENT):
                raise self.error(node, f"exponent must be a number of at most {MAX_EXPONENT}")
            if isinstance(left, (str, bytes, list, tuple)) or isinstance(right, (str, bytes, list, tuple)):
                raise self.error(node, "arithmetic is allowed on numbers and routing terms only")
            return self._apply(node, _BINARY[type(node.op)], left, right)
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _COMPARE:
            return self._apply(
                node, _COMPARE[type(node.ops[0])], self.evaluate(node.left), self.evaluate(node.comparators[0])
            )
        if isinstance(node, ast.Call):
            return self._construct(node)
        shown = ast.unparse(node)
        raise self.error(node, f"{shown[:60]!r} cannot be evaluated without running the module; allowed: {ALLOWED}")

    def _construct(self, node: ast.Call) -> Any:
        function = self._shortcut(node.func) or CONSTRUCTORS.get(self._flux_name(node.func) or "")
        if function is None:
            raise self.error(node, f"{ast.unparse(node.func)[:60]!r} is not a Flux constructor; allowed: {ALLOWED}")
        args = []
        for arg in node.args:
            if isinstance(arg, ast.Starred):
                args.extend(self.evaluate(arg.value))
            else:
                args.append(self.evaluate(arg))
        kwargs = {}
        for keyword in node.keywords:
            if keyword.arg is None:
                raise self.error(keyword.value, f"**kwargs cannot be read statically; allowed: {ALLOWED}")
            kwargs[keyword.arg] = self.evaluate(keyword.value)
        return self._apply(node, function, *args, **kwargs)

    def _shortcut(self, func: ast.expr) -> Callable[..., Any] | None:
        """``ResourceRequest.with_cpu`` or ``<a request>.with_memory``: the bound shortcut."""
        if not isinstance(func, ast.Attribute) or func.attr not in SHORTCUTS:
            return None
        if self._flux_name(func.value) == "ResourceRequest":
            return getattr(ResourceRequest, func.attr)
        receiver = self.evaluate(func.value)
        return getattr(receiver, func.attr) if isinstance(receiver, ResourceRequest) else None

    def _apply(self, node: ast.AST, function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        try:
            return function(*args, **kwargs)
        except (ValueError, TypeError, ArithmeticError, InvalidResourceRequest) as exc:
            raise self.error(node, str(exc)) from None
