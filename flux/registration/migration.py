"""``flux migrate check``: a flux-core project read statically (``ast``; nothing of it is
imported or run), each construct found listed as what runs here unchanged, what runs with
another meaning, and what is refused, with its file and line
(docs/migrating-from-flux-core.md). Pure: no I/O beyond the source text it is given.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from enum import Enum


class Verdict(str, Enum):
    """What a construct does here. ``SERVER``: the same for a program run with ``python
    file.py``; it differs only once registered on a server (a schedule kept as the server's,
    a resume from another process, a value the worker must be allowed to decode)."""

    RUNS = "runs"
    CHANGES = "changes meaning"
    SERVER = "differs on a server"
    REFUSED = "refused"


@dataclass(frozen=True)
class Finding:
    filename: str
    line: int
    construct: str
    verdict: Verdict
    note: str


AGENTS = "the AI agent layer (agents, LLM providers, MCP) is not part of this engine"
#: Modules whose import is refused, by prefix.
REFUSED_MODULES = {
    "flux.tasks.ai": AGENTS,
    "flux.agents": AGENTS,
    "flux.mcp_server": AGENTS,
    "flux.tasks.mcp": AGENTS,
    "flux.service_mcp": AGENTS,
    "flux.catalogs": "register with 'flux workflow register'",
    "flux.hooks": "no outbound hooks here",
    "flux.approvals": "use requires_approval=True (a pause) instead",
}
#: Imported names that change meaning or are refused.
NAMES = {
    "Graph": (
        Verdict.RUNS,
        "its nodes run from the workflow's body, each a recorded task call (flux-core: one task)",
    ),
    "sleep": (
        Verdict.SERVER,
        "durable: from FLUX_DURABLE_SLEEP_THRESHOLD (30 s) the attempt ends and the server wakes it",
    ),
    "create_workflow": (Verdict.REFUSED, "no dynamic workflows: register a module"),
    "run_workflow": (Verdict.REFUSED, "no dynamic workflows: flux.call(workflow, input)"),
    "service_client": (Verdict.REFUSED, "no services"),
    "service_socket": (Verdict.REFUSED, "no services"),
    "Configuration": (
        Verdict.CHANGES,
        "read-only: home, server_host/port, database_url, local_storage_path and "
        "workers.server_url/labels/max_concurrent_executions as 'flux start' reads them; "
        "other keys, writes and override() raise",
    ),
    "SecretManager": (Verdict.SERVER, "saves secrets for local runs of this process; on a server: flux secret set"),
    "LocalFileStorage": (
        Verdict.SERVER,
        "pickles on this machine: the storing task and the reader must share the directory",
    ),
    "create_schedule_manager": (
        Verdict.REFUSED,
        "schedules are the server's: flux schedule create, or schedule= on the workflow",
    ),
}
ROUTING_REFUSED = {
    "input",
    "routing_input",
    "label_for",
    "meta_for",
    "optional",
    "when",
    "meta",
    "resource",
    "utilization",
    "sticky",
    "service",
}
OPTIONS = {
    "rollback": (
        Verdict.CHANGES,
        "a saga compensation of COMPLETED tasks, newest first, when the workflow fails "
        "(flux-core: the task that failed)",
    ),
    "secret_requests": (Verdict.CHANGES, "secret values are masked (***) in results, events and outputs"),
    "output_storage": (Verdict.SERVER, "the log records the reference; LocalFileStorage needs a shared directory"),
    "namespace": (Verdict.SERVER, "registering into another namespace is refused: register with -n NAME"),
    "schedule": (Verdict.SERVER, "kept as the server schedule named after the workflow at registration"),
    "durability": (Verdict.SERVER, "accepted with a warning: every execution is durable here"),
    "runner": (
        Verdict.SERVER,
        "accepted with a warning: the worker's own runner runs it (flux start worker --runner)",
    ),
    "requires_approval": (
        Verdict.SERVER,
        'a pause before the task: resume with {"approved": true} (or false) to decide',
    ),
    "runner_options": (Verdict.REFUSED, "ceilings come from requests (ResourceRequest)"),
    "hooks": (Verdict.REFUSED, "no outbound hooks here"),
    "config_requests": (Verdict.REFUSED, "no Configuration store: pass values as input or secrets"),
    "auth_exempt": (Verdict.REFUSED, "no per-task auth here"),
    "digest_exclude": (Verdict.REFUSED, "task ids are call order here"),
    "approval_target": (Verdict.REFUSED, "no standing grants: requires_approval=True pauses every call"),
    "risk": (Verdict.REFUSED, "agent-layer option"),
    "sensitive": (Verdict.REFUSED, "use secret_requests (masked)"),
}
CALL_OPTIONS = {
    ("pause", "until"): (Verdict.REFUSED, "a self-waking pause: await flux.sleep(...) instead"),
    ("pause", "after"): (Verdict.REFUSED, "a self-waking pause: await flux.sleep(...) instead"),
    ("pause", "on_complete"): (Verdict.REFUSED, "a self-waking pause: await flux.call(workflow) instead"),
    ("parallel", "raise_on_error"): (
        Verdict.REFUSED,
        "a failed call always fails the batch: catch each TaskFailedError",
    ),
    ("run", "resume_payload"): (Verdict.CHANGES, "the pause returns the value (flux-core 0.87.5 ignored it: None)"),
}


def task_notes(tasks: list) -> list[str]:
    """What registration warns about a module's tasks (``FoundTask``s) whose options keep
    this engine's meaning rather than flux-core's: the same words as ``migrate check``."""
    notes = []
    for found in tasks:
        for option in ("rollback", "secret_requests"):
            if getattr(found.options, option):
                notes.append(
                    f"{found.filename}:{found.line}: task {found.options.name!r} {option}=: "
                    f"{OPTIONS[option][1]} ({GUIDE})"
                )
    return notes


GUIDE = "docs/migrating-from-flux-core.md"


def check_source(source: str, filename: str) -> list[Finding]:
    """What ``source`` uses of flux-core, by line; a file that does not parse is one refused finding."""
    try:
        tree = ast.parse(source, filename)
    except (SyntaxError, ValueError) as exc:
        return [
            Finding(filename, getattr(exc, "lineno", 0) or 0, "the file", Verdict.REFUSED, f"cannot be parsed: {exc}")
        ]
    findings: list[Finding] = []
    routing_names: set[str] = set()
    uses_flux = any(
        isinstance(node, (ast.Import, ast.ImportFrom))
        and any(
            module.split(".")[0] == "flux"
            for module in ([a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""])
        )
        for node in ast.walk(tree)
    )
    for node in ast.walk(tree):
        if uses_flux and isinstance(node, (ast.Import, ast.ImportFrom)):
            findings.append(_data_library(filename, node))
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "flux" and not node.level:
            findings.extend(_import(filename, node, routing_names))
        elif isinstance(node, ast.Import):
            findings.extend(
                _module(filename, node.lineno, alias.name) for alias in node.names if alias.name.split(".")[0] == "flux"
            )
        elif isinstance(node, ast.Call):
            findings.extend(_call(filename, node, routing_names))
    return sorted((f for f in findings if f is not None), key=lambda f: (f.line, f.construct))


def _module(filename: str, line: int, module: str) -> Finding:
    for prefix, note in REFUSED_MODULES.items():
        if module == prefix or module.startswith(prefix + "."):
            return Finding(filename, line, module, Verdict.REFUSED, note)
    return Finding(filename, line, module, Verdict.RUNS, "")


def _import(filename: str, node: ast.ImportFrom, routing_names: set[str]) -> list[Finding]:
    module = _module(filename, node.lineno, node.module or "flux")
    if module.verdict is Verdict.REFUSED:
        return [module]
    found = []
    for alias in node.names:
        construct = f"{node.module}.{alias.name}"
        if node.module == "flux.routing":
            routing_names.add(alias.asname or alias.name)
            if alias.name in ROUTING_REFUSED:
                found.append(
                    Finding(
                        filename,
                        node.lineno,
                        construct,
                        Verdict.REFUSED,
                        "routing is fixed at registration here, not resolved from each execution's input: "
                        "a local run ignores it, registering is refused",
                    )
                )
                continue
            found.append(
                Finding(
                    filename,
                    node.lineno,
                    construct,
                    Verdict.SERVER,
                    "translated to score()/affinity: a local run ignores placement, as flux-core's inline runs did",
                )
            )
        elif alias.name in NAMES:
            verdict, note = NAMES[alias.name]
            found.append(Finding(filename, node.lineno, construct, verdict, note))
        else:
            found.append(Finding(filename, node.lineno, construct, Verdict.RUNS, ""))
    return found


def _call(filename: str, node: ast.Call, routing_names: set[str]) -> list[Finding]:
    name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
    found = []
    if name == "with_options":
        for keyword in node.keywords:
            if keyword.arg in OPTIONS:
                verdict, note = OPTIONS[keyword.arg]
                found.append(Finding(filename, node.lineno, f"with_options({keyword.arg}=...)", verdict, note))
            elif keyword.arg == "timeout" and isinstance(keyword.value, ast.Constant) and keyword.value.value == 0:
                found.append(
                    Finding(
                        filename,
                        node.lineno,
                        "with_options(timeout=0)",
                        Verdict.REFUSED,
                        "a timeout is > 0 here (flux-core's 0 meant none: leave it out)",
                    )
                )
    for keyword in node.keywords:
        if (name, keyword.arg) in CALL_OPTIONS:
            verdict, note = CALL_OPTIONS[(name, keyword.arg)]
            found.append(Finding(filename, node.lineno, f"{name}({keyword.arg}=...)", verdict, note))
    if name in ("resume", "run") and any(k.arg == "execution_id" for k in node.keywords) or name == "resume":
        found.append(
            Finding(
                filename,
                node.lineno,
                f"{name}(execution_id)",
                Verdict.SERVER,
                "a local run is resumed from this process's memory: another process cannot "
                "(flux-core: its database file)",
            )
        )
    if name == "ExecutionContext" and node.keywords:
        found.append(_context_construction(filename, node))
    return found


#: What flux-core's ``ExecutionContext(...)`` keywords build here (a local run not yet started).
CONTEXT_KEYWORDS = {"workflow_id", "workflow_namespace", "workflow_name", "input", "execution_id"}


def _context_construction(filename: str, node: ast.Call) -> Finding:
    others = sorted(k.arg for k in node.keywords if k.arg and k.arg not in CONTEXT_KEYWORDS)
    if others:
        return Finding(
            filename,
            node.lineno,
            "ExecutionContext(...)",
            Verdict.CHANGES,
            f"a local run not yet started; {', '.join(others)} not taken over (warns)",
        )
    return Finding(
        filename,
        node.lineno,
        "ExecutionContext(...)",
        Verdict.RUNS,
        "a local run not yet started: cancel() it, ContextManager.save() it, run(execution_id=) starts it",
    )


#: Libraries whose values JSON cannot hold: a task result of theirs is pickled (flux.model.codecs).
DATA_LIBRARIES = ("pandas", "numpy", "polars", "pyarrow", "scipy", "sklearn", "torch")
PICKLED = (
    "a result JSON cannot hold (a DataFrame, an array) is recorded pickled: a local run reads it back; "
    "on a server the worker needs FLUX_CODECS=pickle (docs/tasks.md)"
)


def _data_library(filename: str, node: ast.Import | ast.ImportFrom) -> Finding | None:
    modules = [alias.name for alias in node.names] if isinstance(node, ast.Import) else [node.module or ""]
    for module in modules:
        if module.split(".")[0] in DATA_LIBRARIES:
            return Finding(filename, node.lineno, f"results of {module.split('.')[0]}", Verdict.SERVER, PICKLED)
    return None
