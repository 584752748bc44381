"""Duration options: `0` is refused where a duration must pass, accepted where it means "at once"
(``--hooks-unschedulable-after 0``, docs/hooks.md)."""

from __future__ import annotations

import click
import pytest
from click.testing import CliRunner

from flux.cli.core import DURATION, DURATION_OR_ZERO


def _command(kind: click.ParamType) -> click.Command:
    @click.command()
    @click.option("--after", type=kind)
    def command(after: float) -> None:
        click.echo(repr(after))

    return command


@pytest.mark.parametrize("value", ["0", "0s"])
def test_zero_is_at_once_where_allowed_and_refused_elsewhere(value):
    assert CliRunner().invoke(_command(DURATION_OR_ZERO), ["--after", value]).output.strip() == "0.0"
    refused = CliRunner().invoke(_command(DURATION), ["--after", value])
    assert refused.exit_code == 2 and "must be more than 0 seconds" in refused.output


@pytest.mark.parametrize(("value", "message"), [("-5", "must be more than 0 seconds"), ("abc", "is not a duration")])
def test_a_negative_or_malformed_value_is_still_a_usage_error(value, message):
    result = CliRunner().invoke(_command(DURATION_OR_ZERO), ["--after", value])
    assert result.exit_code == 2 and message in result.output


def test_hooks_unschedulable_after_takes_zero():
    from flux.cli.start import start_server

    option = next(p for p in start_server.params if p.name == "hooks_unschedulable_after")
    assert option.type.convert("0", option, None) == 0.0
