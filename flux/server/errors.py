"""Domain errors and the one error body every 4xx/5xx answer carries.

Services raise the classes below; ``install`` maps them, FastAPI's validation
errors, unknown routes and anything unexpected to ``ErrorBody``, so a client
parses one shape (a human ``detail``, a machine ``code``, field ``errors`` for
validation) whatever failed. ``responses`` documents those answers in OpenAPI.
"""

from __future__ import annotations

from typing import Any, Sequence

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException
from starlette.routing import Match

from flux.server.schemas import ErrorBody, ErrorItem


class FluxError(Exception):
    status_code = 400
    code = "bad_request"


class NotFound(FluxError):
    status_code = 404
    code = "not_found"


class Invalid(FluxError):
    status_code = 422
    code = "invalid"


class InvalidField(Invalid):
    """A field's value broke a rule only the service can judge (a server setting such as
    the gang cap): answered as FastAPI's own field errors are, ``validation_error`` with
    ``errors[].loc`` naming the field, so a client reads one shape for both."""

    code = "validation_error"

    def __init__(self, loc: Sequence[str | int], message: str):
        self.loc, self.message = list(loc), message
        where = ".".join(str(part) for part in (self.loc[1:] if self.loc[0] in ("body", "query", "path") else self.loc))
        super().__init__(f"{where}: {message}")


class Unauthorized(FluxError):
    status_code = 401
    code = "unauthorized"


class Forbidden(FluxError):
    status_code = 403
    code = "forbidden"


class Conflict(FluxError):
    status_code = 409
    code = "conflict"


class TooLarge(FluxError):
    status_code = 413
    code = "payload_too_large"


#: Machine codes of answers that do not come from a FluxError.
CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "payload_too_large",
    422: "validation_error",
    500: "internal",
}

DESCRIPTIONS = {
    401: "Missing or wrong token",
    403: "The token is valid but not for this resource",
    404: "No such resource",
    409: "The resource's state forbids this (stale attempt, already finished)",
    413: "Request body larger than the server's max_body_size, or an input over its max_payload_size",
    422: "Malformed request: invalid field, nesting too deep, integer out of range, NUL character",
}


def error_response(
    status: int,
    detail: str,
    code: str | None = None,
    errors: Sequence[ErrorItem] | None = None,
    headers: dict[str, str] | None = None,
) -> JSONResponse:
    body = ErrorBody(detail=detail, code=code or CODES.get(status, "error"), errors=list(errors) if errors else None)
    return JSONResponse(body.model_dump(exclude_none=True), status_code=status, headers=headers)


def field_errors(items: Sequence[dict[str, Any]]) -> list[ErrorItem]:
    return [ErrorItem(loc=list(item.get("loc", ())), msg=str(item.get("msg", ""))) for item in items]


def summary(errors: Sequence[ErrorItem]) -> str:
    """``resources.cpu_total: Input should be a valid number; ...`` (``body``/``query`` dropped)."""

    def where(loc: list) -> str:
        return ".".join(str(part) for part in (loc[1:] or loc))

    return "; ".join(f"{where(e.loc)}: {e.msg}" for e in errors)


def responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses=`` for a route group: each error status with ``ErrorBody``."""
    return {status: {"model": ErrorBody, "description": DESCRIPTIONS[status]} for status in statuses}


#: The methods a 405's ``Allow`` may list.
METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE")


def allowed_methods(request: Request) -> str:
    """Every method some route takes on this path: Starlette's 405 names only the first
    matching route's, and FastAPI makes one route per method. Each method is asked of
    the router as it would route it (included routers too)."""
    routes = request.app.router.routes
    allowed = [
        method
        for method in METHODS
        if any(route.matches({**request.scope, "method": method})[0] is Match.FULL for route in routes)
    ]
    return ", ".join(allowed)


def install(app: FastAPI) -> None:
    """Answer every failure with ``ErrorBody``."""

    @app.exception_handler(FluxError)
    async def _flux_error(_: Request, exc: FluxError) -> JSONResponse:
        errors = [ErrorItem(loc=exc.loc, msg=exc.message)] if isinstance(exc, InvalidField) else None
        return error_response(exc.status_code, str(exc), exc.code, errors)

    @app.exception_handler(RequestValidationError)
    async def _validation_error(_: Request, exc: RequestValidationError) -> JSONResponse:
        errors = field_errors(exc.errors())
        return error_response(422, summary(errors), errors=errors)

    @app.exception_handler(HTTPException)
    async def _http_error(request: Request, exc: HTTPException) -> JSONResponse:
        headers = exc.headers
        if exc.status_code == 405:
            headers = {**(headers or {}), "Allow": allowed_methods(request)}
        return error_response(exc.status_code, str(exc.detail), headers=headers)

    @app.exception_handler(Exception)
    async def _unexpected(_: Request, exc: Exception) -> JSONResponse:
        # Starlette logs the traceback after this answer; the client learns nothing internal.
        return error_response(500, "internal server error")


#: OpenAPI error answers of each route group (every route also has the edge's 413 and 422).
PUBLIC = responses(413, 422)
READ = responses(401, 413, 422)
READ_ONE = responses(401, 404, 413, 422)
CHANGE = responses(401, 404, 409, 413, 422)
WORKER = responses(401, 403, 404, 409, 413, 422)
