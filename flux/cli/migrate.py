"""``flux migrate check PATH``: what of a flux-core project runs here, what changes meaning,
what is refused (docs/migrating-from-flux-core.md). Reads files only: nothing is imported."""

from __future__ import annotations

import json
from pathlib import Path

import click

from flux.registration.migration import Finding, Verdict, check_source

SKIPPED = {".git", ".venv", "venv", "__pycache__", "node_modules", ".tox"}


@click.group("migrate")
def migrate_group() -> None:
    """Moving a project from flux-core."""


@migrate_group.command("check")
@click.argument("path", type=click.Path(exists=True, path_type=Path))
@click.option("--all", "show_all", is_flag=True, help="List what runs unchanged and what differs only on a server too")
@click.option(
    "--format",
    "output_format",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="json: every finding with its verdict, and the counts (for CI)",
)
def migrate_check(path: Path, show_all: bool, output_format: str) -> None:
    """List each flux-core construct under PATH with its file and line: refused, changes
    meaning (differs for a program run with 'python file.py'), differs on a server (only
    once registered), runs. Exit 1 when something is refused."""
    findings = [finding for source in _sources(path) for finding in _read(source)]
    counts = {verdict.value: sum(f.verdict is verdict for f in findings) for verdict in Verdict}
    if output_format == "json":
        click.echo(json.dumps({"findings": [_as_json(f) for f in findings], "counts": counts}, indent=2))
    else:
        _print(findings, show_all)
        click.echo(f"{len(findings)} constructs: " + ", ".join(f"{n} {verdict}" for verdict, n in counts.items()))
    if counts[Verdict.REFUSED.value]:
        raise SystemExit(1)


def _print(findings: list[Finding], show_all: bool) -> None:
    """Refusals and changes of meaning always; what differs only on a server and what runs
    with ``--all`` (a server-only difference is a note for the day the code is registered)."""
    for verdict in (Verdict.REFUSED, Verdict.CHANGES, Verdict.SERVER, Verdict.RUNS):
        shown = [f for f in findings if f.verdict is verdict]
        if shown and (verdict in (Verdict.REFUSED, Verdict.CHANGES) or show_all):
            click.echo(f"{verdict.value}:")
            for finding in shown:
                click.echo(
                    f"  {finding.filename}:{finding.line}: {finding.construct}"
                    + (f": {finding.note}" if finding.note else "")
                )


def _as_json(finding: Finding) -> dict:
    return {
        "file": finding.filename,
        "line": finding.line,
        "construct": finding.construct,
        "verdict": finding.verdict.value,
        "note": finding.note,
    }


def _sources(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    return sorted(p for p in path.rglob("*.py") if not SKIPPED & set(p.relative_to(path).parts))


def _read(source: Path) -> list[Finding]:
    return check_source(source.read_text(errors="replace"), str(source))
