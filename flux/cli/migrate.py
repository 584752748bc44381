"""``flux migrate check PATH``: what of a flux-core project runs here, what changes meaning,
what is refused (docs/migrating-from-flux-core.md). Reads files only: nothing is imported."""

from __future__ import annotations

from pathlib import Path

import click

from flux.registration.migration import Finding, Verdict, check_source

SKIPPED = {".git", ".venv", "venv", "__pycache__", "node_modules", ".tox"}


@click.group("migrate")
def migrate_group() -> None:
    """Moving a project from flux-core."""


@migrate_group.command("check")
@click.argument("path", type=click.Path(exists=True, path_type=Path))
@click.option(
    "--all", "show_all", is_flag=True, help="List what runs unchanged too (by default only changes and refusals)"
)
def migrate_check(path: Path, show_all: bool) -> None:
    """List each flux-core construct under PATH with its file and line. Exit 1 when
    something is refused."""
    findings = [finding for source in _sources(path) for finding in _read(source)]
    for verdict in (Verdict.REFUSED, Verdict.CHANGES, Verdict.RUNS):
        shown = [f for f in findings if f.verdict is verdict]
        if shown and (verdict is not Verdict.RUNS or show_all):
            click.echo(f"{verdict.value}:")
            for finding in shown:
                click.echo(
                    f"  {finding.filename}:{finding.line}: {finding.construct}"
                    + (f": {finding.note}" if finding.note else "")
                )
    counts = ", ".join(f"{sum(f.verdict is v for f in findings)} {v.value}" for v in Verdict)
    click.echo(f"{len(findings)} constructs: {counts}")
    if any(f.verdict is Verdict.REFUSED for f in findings):
        raise SystemExit(1)


def _sources(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    return sorted(p for p in path.rglob("*.py") if not SKIPPED & set(p.relative_to(path).parts))


def _read(source: Path) -> list[Finding]:
    return check_source(source.read_text(errors="replace"), str(source))
