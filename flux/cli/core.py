"""What every command shares: the ``flux`` group (``--config``, ``--debug``), how a
failure becomes one line and an exit code, the client options (tables and the
console: ``flux.cli.output``).

Exit codes (README "Exit codes"): 0 success, 1 failure (an error, or a FAILED
execution with ``--wait``), 2 usage or connection error, 3 CANCELLED, 4 still
running (or queued) when ``--wait`` gave up.
"""

from __future__ import annotations

import functools
import inspect
import json
import math
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import click
from click.core import ParameterSource

from flux.cli.output import render_record
from flux.client import DEFAULT_SERVER_URL, FluxClient, FluxClientError, FluxConnectionError
from flux.domain.durations import InvalidDuration, parse_duration
from flux.domain.namespaces import DEFAULT, NAMESPACE_ENV, worker_namespaces
from flux.domain.resource_request import InvalidResourceRequest, parse_custom_resources, parse_quantity
from flux.objects import import_object
from flux.server.settings import read_token_file

EXIT_FAILED, EXIT_USAGE, EXIT_CANCELLED, EXIT_RUNNING = 1, 2, 3, 4
#: ``flux start server``: its address is taken (another server?), told before anything else is done.
EXIT_ADDRESS_IN_USE = 5


class UsageProblem(click.ClickException):
    """A bad argument told in one line (click's own usage errors print the usage too)."""

    exit_code = EXIT_USAGE


class AddressInUse(click.ClickException):
    """A server's address is taken: one line and its own exit code (not CANCELLED's)."""

    exit_code = EXIT_ADDRESS_IN_USE


class QuantityType(click.ParamType):
    """Bytes from an int or a Kubernetes-style quantity (512Mi, 2Gi, 1G)."""

    name = "quantity"

    def __init__(self, allow_zero: bool = False):
        self.allow_zero = allow_zero  # for limits where 0 means "off"

    def convert(self, value, param, ctx):  # noqa: ANN001
        if isinstance(value, int):
            return value
        if self.allow_zero and value.strip() == "0":
            return 0
        try:
            return parse_quantity(value, f"--{param.name.replace('_', '-')}")
        except InvalidResourceRequest as exc:
            self.fail(str(exc), param, ctx)


QUANTITY = QuantityType()


class DurationType(click.ParamType):
    """Seconds from a number or a duration such as 90s, 5m, 30d (``flux.domain.durations``);
    with ``zero``, also ``0`` (an option where 0 means "at once")."""

    name = "duration"

    def __init__(self, zero: bool = False):
        self.zero = zero

    def convert(self, value, param, ctx):  # noqa: ANN001
        if isinstance(value, float):
            return value
        if self.zero and str(value).strip().lower() in ("0", "0s", "0.0"):
            return 0.0
        try:
            return parse_duration(value, f"--{param.name.replace('_', '-')}")
        except InvalidDuration as exc:
            self.fail(str(exc), param, ctx)


DURATION = DurationType()
#: A duration where ``0`` is allowed and means "at once".
DURATION_OR_ZERO = DurationType(zero=True)


class FiniteRange(click.FloatRange):
    """``click.FloatRange`` that also refuses ``nan`` and ``inf``: ``nan`` passes every
    bound (each comparison is false) and would silently turn a limit off."""

    def convert(self, value, param, ctx):  # noqa: ANN001
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return number


# --- failures ------------------------------------------------------------------------------


def _detail(response: Any) -> str:
    try:
        return str(response.json()["detail"])
    except (ValueError, TypeError, KeyError):
        return response.text[:200] or response.reason_phrase


def describe(exc: Exception) -> tuple[str, int]:
    """One line and an exit code for a failure no command turned into a message."""
    import httpx

    from flux.worker.identity import NameTaken
    from flux.worker.runners.docker import EngineUnreachable

    if isinstance(exc, FluxConnectionError):
        return str(exc), EXIT_USAGE
    if isinstance(exc, (FluxClientError, NameTaken, EngineUnreachable)):
        return str(exc), EXIT_FAILED
    if isinstance(exc, httpx.HTTPStatusError):  # the worker's calls to the server
        response, request = exc.response, exc.request
        if request.url.path.endswith("/workers/register"):
            return f"the server refused registration: {_detail(response)}", EXIT_FAILED
        return (
            f"the server refused {request.method} {request.url.path}: HTTP {response.status_code}: {_detail(response)}",
            EXIT_FAILED,
        )
    if isinstance(exc, httpx.TransportError):
        try:
            where = f" at {exc.request.url.scheme}://{exc.request.url.netloc.decode()}"
        except RuntimeError:  # no request attached
            where = ""
        return f"cannot reach the Flux server{where}: {exc or exc.__class__.__name__}", EXIT_USAGE
    if isinstance(exc, OSError) and exc.strerror:
        return f"{exc.strerror}: {exc.filename}" if exc.filename else exc.strerror, EXIT_FAILED
    return f"{exc.__class__.__name__}: {exc} (flux --debug ... shows the traceback)", EXIT_FAILED


#: click 8.2 and later suggest close command names ("Did you mean 'start'?").
_NoSuchCommand = getattr(click.exceptions, "NoSuchCommand", None)


class FluxGroup(click.Group):
    """The top group: every failure below it is one line on stderr and an exit code,
    or, with ``flux --debug``, the traceback. ``lazy_commands`` (name: "module:attribute")
    are imported on first use, so a command pays only for its own imports."""

    def __init__(self, *args: Any, lazy_commands: dict[str, str] | None = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.lazy_commands = dict(lazy_commands or {})
        _name_envvars(self)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *self.lazy_commands})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.lazy_commands and cmd_name not in self.commands:
            command = import_object(self.lazy_commands[cmd_name])
            show_envvars(command)
            self.add_command(command, cmd_name)
        return self.commands.get(cmd_name)

    def resolve_command(self, ctx: click.Context, args: list[str]) -> Any:
        try:
            return super().resolve_command(ctx, args)
        except click.UsageError as exc:
            if _NoSuchCommand is None or not isinstance(exc, _NoSuchCommand):
                raise
            # click suggests close names from the commands loaded so far: offer them all
            raise _NoSuchCommand(args[0], possibilities=self.list_commands(ctx), ctx=ctx) from None

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.ClickException, click.exceptions.Exit, click.Abort):
            raise
        except Exception as exc:
            if ctx.params.get("debug"):
                raise
            message, code = describe(exc)
            failure = click.ClickException(message)
            failure.exit_code = code
            raise failure from None


def walk(command: click.Command, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], click.Command]]:
    """Every command below ``command`` (itself first), with its path of names (lazy
    commands are imported on the way)."""
    yield path, command
    if isinstance(command, click.Group):
        ctx = click.Context(command)
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            if sub is not None:
                yield from walk(sub, (*path, name))


def show_envvars(command: click.Command) -> None:
    """``--help`` names each option's environment variable (FLUX_SERVER_URL, ...)."""
    for _, each in walk(command):
        _name_envvars(each)


def _name_envvars(command: click.Command) -> None:
    for param in command.params:
        if isinstance(param, click.Option) and param.envvar:
            param.show_envvar = True


def client_commands(group: click.Group) -> dict[tuple[str, ...], click.Command]:
    """The commands that talk to a server: flux.toml's [client] settings are their defaults."""
    return {path: cmd for path, cmd in walk(group) if getattr(cmd.callback, "flux_client", False)}


# --- client commands -------------------------------------------------------------------------


@dataclass
class Output:
    """What a client command returns when a plain value is not enough: its own
    rendering for people (called while the client is still open), an exit code."""

    data: Any
    render: Callable[[Any], None] | None = None
    exit_code: int = 0


def token_from_file(path: str, what: str) -> str:
    try:
        return read_token_file(path)
    except (OSError, ValueError) as exc:
        raise click.ClickException(f"cannot read the {what} token: {exc}") from None


class TopOptions(dict):
    """Client options given before the command (``flux -n ml workflow list``), by parameter name."""


def top_option(ctx: click.Context, name: str, own: Any) -> Any:
    """The command's own value of a client option, unless the same option was given
    before the command and the command's own was not on its command line."""
    given = ctx.find_root().obj
    if (
        not isinstance(given, TopOptions)
        or name not in given
        or ctx.get_parameter_source(name) is ParameterSource.COMMANDLINE
    ):
        return own
    return given[name]


_RANK = {ParameterSource.COMMANDLINE: 3, ParameterSource.ENVIRONMENT: 2, ParameterSource.DEFAULT_MAP: 1}


def _api_token(api_token: str | None, api_token_file: str | None) -> str | None:
    """The token from whichever of the two was given with the higher precedence
    (flag, environment, flux.toml); the file when both come from the same place."""
    if not api_token_file:
        return api_token
    ctx = click.get_current_context()
    if api_token and _RANK.get(ctx.get_parameter_source("api_token"), 0) > _RANK.get(
        ctx.get_parameter_source("api_token_file"), 0
    ):
        return api_token
    return token_from_file(api_token_file, "API")


def client_command(fn: Callable | None = None, *, namespaced: bool = True) -> Callable:
    """Adds --server-url, --namespace, --api-token, --api-token-file and --format; the
    command gets an open FluxClient (in that namespace) and returns what to print (or an
    ``Output``). ``namespaced=False``: a command on what belongs to no namespace (tokens,
    the audit log), which has no -n of its own, so its options may say --namespace."""
    if fn is None:
        return functools.partial(client_command, namespaced=namespaced)
    wants_format = "fmt" in inspect.signature(fn).parameters

    @click.option(
        "--server-url",
        envvar="FLUX_SERVER_URL",
        default=DEFAULT_SERVER_URL,
        show_default=True,
        help="The Flux server's URL",
    )
    @click.option(
        "--api-token",
        envvar="FLUX_API_TOKEN",
        default=None,
        help="Bearer token the server requires of clients; prefer the environment or "
        "--api-token-file: the command line is visible to every user",
    )
    @click.option(
        "--api-token-file",
        envvar="FLUX_API_TOKEN_FILE",
        type=click.Path(dir_okay=False),
        default=None,
        help="File holding the API token (a mounted secret, HOME/api-token)",
    )
    @click.option(
        "--format",
        "fmt",
        type=click.Choice(["table", "json"]),
        default="table",
        show_default=True,
        help="table: for people; json: the full record, for scripts",
    )
    @functools.wraps(fn)
    def wrapper(server_url: str, api_token: str | None, api_token_file: str | None, fmt: str, **kwargs: Any) -> None:
        if wants_format:
            kwargs["fmt"] = fmt
        ctx = click.get_current_context()
        server_url, api_token_file = (
            top_option(ctx, "server_url", server_url),
            top_option(ctx, "api_token_file", api_token_file),
        )
        namespace = top_option(ctx, "namespace", kwargs.pop("namespace")) if namespaced else DEFAULT
        token = _api_token(api_token, api_token_file)
        with FluxClient(server_url, api_token=token, namespace=namespace, read_config=False) as client:
            result = fn(client, **kwargs)
            output = result if isinstance(result, Output) else Output(result, getattr(fn, "render", None))
            if output.data is not None:
                if fmt == "json":
                    click.echo(json.dumps(output.data, indent=2, default=str))
                else:
                    (output.render or render_record)(output.data)
        if output.exit_code:
            click.get_current_context().exit(output.exit_code)

    if namespaced:
        wrapper = click.option(
            "--namespace",
            "-n",
            envvar=NAMESPACE_ENV,
            default=None,
            show_default="the token's only namespace, else default",
            help="The namespace the command acts in (docs/namespaces.md)",
        )(wrapper)
    wrapper.flux_client = True
    wrapper.flux_namespaced = namespaced
    return wrapper


def renders(render: Callable[[Any], None]) -> Callable:
    def attach(fn: Callable) -> Callable:
        fn.render = render
        return fn

    return attach


def execution_id_argument(fn: Callable) -> Callable:
    return click.argument("execution_id", metavar="ID")(fn)


def parse_labels(pairs: tuple[str, ...], option: str = "--label") -> dict[str, str]:
    result = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{pair!r} is not KEY=VALUE", param_hint=option)
        result[key] = value
    return result


def parse_worker_namespaces(values: tuple[str, ...]) -> tuple[str, ...]:
    """``--namespace`` values (each may list several, comma-separated, as FLUX_WORKER_NAMESPACES does)."""
    try:
        return worker_namespaces([name.strip() for value in values for name in value.split(",") if name.strip()])
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--namespace") from None


def parse_resources(pairs: tuple[str, ...]) -> dict[str, float]:
    try:
        amounts = {name: float(amount) for name, amount in parse_labels(pairs, "--resource").items()}
        return dict(parse_custom_resources(amounts, "--resource"))
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--resource") from None
