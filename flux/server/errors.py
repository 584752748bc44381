"""Domain errors raised by server services and mapped to HTTP status codes in one place."""


class FluxError(Exception):
    status_code = 400


class NotFound(FluxError):
    status_code = 404


class Invalid(FluxError):
    status_code = 422


class Unauthorized(FluxError):
    status_code = 401


class Forbidden(FluxError):
    status_code = 403


class Conflict(FluxError):
    status_code = 409
