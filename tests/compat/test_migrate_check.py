"""``flux migrate check`` over the corpus and over a file using what is refused: static
reading (nothing imported), each finding with its file and line."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from flux.cli import main
from flux.registration.migration import Verdict, check_source

CORPUS = Path(__file__).parent / "corpus"


def test_the_corpus_runs_with_each_change_of_meaning_named_by_file_and_line():
    result = CliRunner().invoke(main, ["migrate", "check", str(CORPUS)])
    assert result.exit_code == 0, result.output
    assert "refund_saga.py:12: with_options(rollback=...)" in result.output
    assert "0 refused" in result.output
    assert "settings_probe.py:7: flux.config.Configuration: read-only" in result.output
    assert "with_options(schedule=...)" not in result.output  # a server-only difference: quieter
    everything = CliRunner().invoke(main, ["migrate", "check", "--all", str(CORPUS)]).output
    assert "differs on a server:" in everything and "nightly_digest.py:13: with_options(schedule=...)" in everything


def test_the_agent_layer_and_input_routing_are_refused_without_importing_the_file(tmp_path):
    source = (
        "import no_such_dependency\n"
        "from flux.tasks.ai import agent\n"
        "from flux.routing import input, require\n"
        "from flux.tasks import create_workflow, pause\n"
        "async def wf(ctx):\n"
        "    await pause('x', after=5)\n"
        "@task.with_options(timeout=0, timeout_note=1)\n"
        "def t(): ...\n"
        "wf.run(execution_id='e', resume_payload=1)\n"
    )
    findings = {(f.line, f.construct): f.verdict for f in check_source(source, "legacy.py")}
    assert findings[(2, "flux.tasks.ai")] is Verdict.REFUSED
    assert findings[(3, "flux.routing.input")] is Verdict.REFUSED
    assert findings[(4, "flux.tasks.create_workflow")] is Verdict.REFUSED
    assert findings[(6, "pause(after=...)")] is Verdict.REFUSED
    assert findings[(7, "with_options(timeout=0)")] is Verdict.REFUSED
    assert findings[(9, "run(resume_payload=...)")] is Verdict.CHANGES
    (tmp_path / "legacy.py").write_text(source)
    result = CliRunner().invoke(main, ["migrate", "check", str(tmp_path)])
    assert result.exit_code == 1 and "legacy.py:2: flux.tasks.ai: the AI agent layer" in result.output
