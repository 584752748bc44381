"""What a process imports is what it uses (docs/footprint.md): ``flux start worker`` and
``flux --help`` load one command's module and not the programming model; ``from flux
import ...`` loads the model (``flux.model``) on first use, and ``task`` and ``workflow``
are the decorators whatever was imported first."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from click.testing import CliRunner

from flux.cli import COMMANDS, main
from flux.cli.core import walk


def _modules_after(code: str, prefixes: tuple[str, ...] = ("flux",)) -> set[str]:
    """The modules (flux's, or those ``prefixes`` name) a fresh interpreter holds after running ``code``."""
    probe = f"{code}\nimport json, sys\nprint(json.dumps(sorted(m for m in sys.modules if m.startswith({prefixes!r}))))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True).stdout
    return set(json.loads(out.splitlines()[-1]))


MODEL = {
    "flux.model.workflow",
    "flux.model.task",
    "flux.model.runtime",
    "flux.model.composition",
    "flux.model.determinism",
}
CLIENT_COMMANDS = {
    "flux.cli.executions",
    "flux.cli.workflows",
    "flux.cli.schedules",
    "flux.cli.cache",
    "flux.cli.secrets",
    "flux.cli.workers",
    "flux.cli.watch",
    "flux.cli.tokens",
    "flux.cli.audit",
}


def test_the_worker_command_loads_neither_the_client_commands_nor_the_programming_model():
    loaded = _modules_after(
        "from flux.cli import main\nmain(['start', 'worker', '--help'], prog_name='flux', standalone_mode=False)"
    )
    assert "flux.cli.start" in loaded
    assert not loaded & CLIENT_COMMANDS, loaded & CLIENT_COMMANDS
    assert not loaded & MODEL, loaded & MODEL


def test_help_lists_every_command_and_walking_the_tree_loads_them_all():
    result = CliRunner().invoke(main, ["--help"])
    assert result.exit_code == 0, result.output
    listed = result.output.split("Commands:")[1]
    assert all(f"  {name} " in listed for name in COMMANDS)
    paths = {path for path, _ in walk(main)}
    assert {("start", "worker"), ("execution", "list"), ("secret", "set"), ("schedule", "create")} <= paths


def test_a_lazily_loaded_command_still_names_its_environment_variables():
    result = CliRunner().invoke(main, ["execution", "list", "--help"])
    assert result.exit_code == 0, result.output
    assert "FLUX_SERVER_URL" in result.output


def test_importing_flux_loads_no_programming_model_until_a_name_is_used():
    assert not _modules_after("import flux") & MODEL
    assert {"flux.model.task", "flux.model.workflow"} <= _modules_after("from flux import task, workflow")


@pytest.mark.parametrize(
    "first", ["import flux.model.task, flux.model.workflow", "from flux import task, workflow", "import flux"]
)
def test_task_and_workflow_are_the_decorators_whatever_was_imported_first(first):
    code = (
        f"{first}\nimport flux\nfrom flux import task, workflow\n"
        "assert callable(task) and callable(workflow), (task, workflow)\n"
        "assert flux.task is task and flux.workflow is workflow\n"
        "assert type(task).__name__ == '_TaskDecorator' and type(workflow).__name__ == '_WorkflowDecorator'\n"
        "from flux import *\nassert 'sleep' in dir(flux) and callable(parallel)"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_an_unknown_name_is_an_attribute_error():
    import flux

    with pytest.raises(AttributeError, match="no attribute 'nonexistent'"):
        flux.nonexistent  # noqa: B018


def test_what_type_checkers_see_is_what_the_package_exports():
    import ast
    import inspect

    import flux

    tree = ast.parse(inspect.getsource(flux))
    checked = next(
        node for node in tree.body if isinstance(node, ast.If) and getattr(node.test, "id", "") == "TYPE_CHECKING"
    )
    seen = {
        alias.name: node.module for node in checked.body if isinstance(node, ast.ImportFrom) for alias in node.names
    }
    assert seen == flux._EXPORTS
    assert set(flux.__all__) | {"map"} == set(flux._EXPORTS)


def test_the_worker_process_imports_no_programming_model_its_children_run_it():
    """The worker runs no workflow code (the subprocess runner's children do): what it
    imports to start, build its runner and run its loops leaves the model to them."""
    loaded = _modules_after(
        "import flux.cli.start, flux.worker.runners.template, flux.worker.lifecycle\n"
        "from flux.worker.config import WorkerConfig, build_runner\n"
        "build_runner(WorkerConfig(name='w', server_url='http://127.0.0.1:1', bootstrap_token='t'))"
    )
    assert {"flux.worker.lifecycle", "flux.worker.runners.subprocess"} <= loaded
    assert not loaded & MODEL, loaded & MODEL
    # nor what only the server or the client need: wheel tags, cron (time zones: pydantic,
    # which decodes the protocol's messages, imports zoneinfo itself)
    assert not _modules_after("import flux.worker.lifecycle, flux.cli.start", ("packaging", "cronsim"))
    assert {"flux.worker.runners.execute", "flux.worker.runners.child"} <= _modules_after(
        "import flux.worker.runners.child"
    )


def test_a_mistyped_command_is_offered_the_close_ones_and_submodules_load_on_first_use():
    result = CliRunner().invoke(main, ["star"])
    assert result.exit_code == 2 and "start" in result.output, result.output
    assert "FLUX_CONFIG" in CliRunner().invoke(main, ["--help"]).output
    subprocess.run(
        [sys.executable, "-c", "import flux; assert flux.model.__name__ == 'flux.model'"], check=True, timeout=60
    )
