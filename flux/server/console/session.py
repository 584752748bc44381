"""Who is looking, and whether a form came from our own page.

The console signs in with the API token itself (no second kind of credential): the
login form checks it against the API and keeps it in an HttpOnly, SameSite=Strict
cookie (Secure over https), which the console sends on as ``Authorization: Bearer``.
With an open API (loopback, no token) there is no login.

Every POST carries a CSRF token: the signed double-submit pattern (OWASP). A random
seed lives in its own HttpOnly cookie and the form's hidden field must be the HMAC of
that seed under a key derived from the bootstrap token, which every replica shares and
no page shows. A cross-site form can neither read the seed nor compute the HMAC; a
request whose ``Origin`` is another site is refused as well.

The namespace the console acts in is kept in a third cookie, set by the switcher (any
page asked with ``?namespace=``) and forgotten at sign-in and sign-out.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from urllib.parse import parse_qsl, urlsplit

from fastapi import Request
from starlette.responses import Response

TOKEN_COOKIE = "flux_token"
SEED_COOKIE = "flux_csrf"
NAMESPACE_COOKIE = "flux_namespace"
CSRF_FIELD = "csrf"
#: A form body larger than this is not a console form.
MAX_FORM = 1024 * 1024


class CsrfRefused(Exception):
    """A POST without a valid CSRF token, or from another site."""


@dataclass
class Fresh:
    """What one request decided its response's cookies carry: a new CSRF seed, the
    namespace this browser chose; ``kept`` once they are set (``Session.keep``)."""

    seed: str | None = None
    namespace: str | None = None
    kept: bool = False


class Session:
    def __init__(self, key: bytes, login: bool):
        self.key = hashlib.sha256(b"flux-console-csrf\0" + key).digest()
        #: The API wants a token: pages need a login.
        self.login = login

    def token(self, request: Request) -> str | None:
        return request.cookies.get(TOKEN_COOKIE) if self.login else None

    def api_headers(self, request: Request) -> dict[str, str]:
        token = self.token(request)
        return {"Authorization": f"Bearer {token}"} if token else {}

    @staticmethod
    def namespace(request: Request) -> str:
        """The namespace this browser chose last ('' before any)."""
        return request.cookies.get(NAMESPACE_COOKIE, "")

    async def posted(self, request: Request) -> dict[str, str]:
        """The POSTed form's fields, unchecked: ``form`` checks them before any call."""
        return _fields(await request.body())

    def seed(self, request: Request, fresh: Fresh) -> str:
        """This browser's CSRF seed; a new one waits in ``fresh`` until the response
        sets its cookie (``keep``)."""
        seed = fresh.seed or request.cookies.get(SEED_COOKIE)
        if not seed:
            seed = fresh.seed = secrets.token_urlsafe(32)
        return seed

    def csrf(self, request: Request, fresh: Fresh) -> str:
        return hmac.new(self.key, self.seed(request, fresh).encode(), hashlib.sha256).hexdigest()

    def keep(self, request: Request, response: Response, fresh: Fresh) -> Response:
        """Set the cookies this request created on its response (once)."""
        if not fresh.kept:
            if fresh.seed:
                self._cookie(request, response, SEED_COOKIE, fresh.seed)
            if fresh.namespace:
                self._cookie(request, response, NAMESPACE_COOKIE, fresh.namespace)
        fresh.kept = True
        return response

    async def form(self, request: Request) -> dict[str, str]:
        """The POSTed form, once its CSRF token and origin are checked."""
        origin = request.headers.get("origin")
        if origin and origin != "null" and urlsplit(origin).netloc != request.headers.get("host"):
            raise CsrfRefused(f"cross-site request from {origin}")
        fields = _fields(await request.body())
        seed = request.cookies.get(SEED_COOKIE)
        expected = hmac.new(self.key, seed.encode(), hashlib.sha256).hexdigest() if seed else None
        if not expected or not hmac.compare_digest(fields.get(CSRF_FIELD, ""), expected):
            raise CsrfRefused("missing or wrong CSRF token: reload the page and try again")
        return fields

    def signed_in(self, request: Request, response: Response, token: str) -> Response:
        """Keep the token; a fresh CSRF seed for the new session."""
        self._cookie(request, response, TOKEN_COOKIE, token)
        self._cookie(request, response, SEED_COOKIE, secrets.token_urlsafe(32))
        response.delete_cookie(NAMESPACE_COOKIE, path="/", httponly=True, samesite="strict", secure=_https(request))
        return response

    def signed_out(self, request: Request, response: Response) -> Response:
        for name in (TOKEN_COOKIE, SEED_COOKIE, NAMESPACE_COOKIE):
            response.delete_cookie(name, path="/", httponly=True, samesite="strict", secure=_https(request))
        return response

    @staticmethod
    def _cookie(request: Request, response: Response, name: str, value: str) -> None:
        response.set_cookie(name, value, path="/", httponly=True, samesite="strict", secure=_https(request))


def _fields(body: bytes) -> dict[str, str]:
    return dict(parse_qsl(body[:MAX_FORM].decode("utf-8", "replace"), keep_blank_values=True))


def _https(request: Request) -> bool:
    return request.url.scheme == "https"


def local_path(target: str | None, default: str) -> str:
    """A redirect target inside the console only (never an open redirect)."""
    if target and target.startswith("/ui/") and not target.startswith("//") and "\\" not in target:
        return target
    return default
