"""The web console's session cookie and CSRF token (``docs/console.md``, "Security").

A sign-in exchanges an API key for a cookie; the key itself is never stored in it. The cookie
``finagent_console`` holds ``{"k": key_id | None, "c": csrf_token}`` signed with
``itsdangerous.URLSafeTimedSerializer`` (HMAC-SHA1 over the payload and a timestamp; the
library's default) under the secret ``FINAGENT_CONSOLE_SECRET`` (or a random one per process),
so it cannot be forged or edited, and it expires ``FINAGENT_CONSOLE_SESSION_TTL`` seconds after
it was issued. It is ``HttpOnly``, ``SameSite=Lax``, ``Path=/console`` and ``Secure`` when the
request came over HTTPS.

Each request re-reads the key's row: a revoked key ends its sessions at once, and the tenant
and scopes are the key's current ones (:func:`session_principal`).

CSRF: every form carries the session's token in a hidden field ``csrf`` and every ``POST`` is
refused (403) unless it equals the cookie's (synchronizer token bound to the session, OWASP
CSRF Prevention Cheat Sheet); the token is renewed at sign-in and sign-out. ``SameSite=Lax``
already keeps the cookie off cross-site ``POST``\\ s; the token is the second fence.
"""

from __future__ import annotations

import hmac
import secrets
from dataclasses import dataclass
from typing import Any, Final

from itsdangerous import BadSignature, URLSafeTimedSerializer
from starlette.requests import Request
from starlette.responses import Response

from core.settings import Settings
from db import ops_repo
from db.engine import get_engine
from pipeline.api.auth import Principal, principal_of

COOKIE: Final = "finagent_console"
#: A configured secret shorter than this is refused (HMAC wants as much secret as its output).
MIN_SECRET_CHARS: Final = 32
_SALT: Final = "finagent-console-session"


class CsrfError(Exception):
    """A console ``POST`` without the session's CSRF token (answered 403)."""


@dataclass(frozen=True)
class ConsoleSession:
    """The decoded cookie: ``key_id`` of the signed-in key (``None`` before sign-in) and the
    session's CSRF token (URL-safe text, 43 characters)."""

    key_id: str | None
    csrf: str


def console_secret(settings: Settings) -> str:
    """The cookie-signing secret: ``FINAGENT_CONSOLE_SECRET``, else a fresh random one (256 bits).

    Raises:
        ValueError: the configured secret is shorter than :data:`MIN_SECRET_CHARS` characters.
    """
    configured = settings.api.console_secret.get_secret_value() if settings.api.console_secret else ""
    if not configured:
        return secrets.token_urlsafe(32)
    if len(configured) < MIN_SECRET_CHARS:
        raise ValueError(f"FINAGENT_CONSOLE_SECRET must be at least {MIN_SECRET_CHARS} characters")
    return configured


def _serializer(request: Request) -> URLSafeTimedSerializer:
    return URLSafeTimedSerializer(request.app.state.console_secret, salt=_SALT)


def read_session(request: Request, *, settings: Settings) -> ConsoleSession | None:
    """The request's console session, or ``None`` when the cookie is missing, forged, edited,
    malformed or older than ``console_session_ttl`` seconds."""
    raw = request.cookies.get(COOKIE)
    if not raw:
        return None
    try:
        data: Any = _serializer(request).loads(raw, max_age=settings.api.console_session_ttl)
    except BadSignature:  # SignatureExpired is a BadSignature
        return None
    if not isinstance(data, dict) or not isinstance(data.get("c"), str):
        return None
    key_id = data.get("k")
    return ConsoleSession(key_id=key_id if isinstance(key_id, str) else None, csrf=data["c"])


def new_session(key_id: str | None) -> ConsoleSession:
    """A session for ``key_id`` (``None``: signed out) with a fresh CSRF token."""
    return ConsoleSession(key_id=key_id, csrf=secrets.token_urlsafe(32))


def write_session(
    response: Response, session: ConsoleSession, *, request: Request, settings: Settings
) -> None:
    """Set the signed cookie of ``session`` on ``response`` (attributes: module docstring)."""
    value = _serializer(request).dumps({"k": session.key_id, "c": session.csrf})
    response.set_cookie(
        COOKIE,
        value,
        max_age=settings.api.console_session_ttl,
        path="/console",
        httponly=True,
        samesite="lax",
        secure=request.url.scheme == "https",
    )


def session_principal(session: ConsoleSession | None, *, settings: Settings) -> Principal | None:
    """The principal of the session's key as its row stands now; ``None`` when signed out or
    the key is unknown or revoked."""
    if session is None or session.key_id is None:
        return None
    row = ops_repo.get_api_key(
        engine=get_engine(settings.service.effective_database_url), key_id=session.key_id
    )
    if row is None or row["revoked_at"] is not None:
        return None
    return principal_of(row)


def check_csrf(session: ConsoleSession | None, submitted: str | None) -> None:
    """Raise :class:`CsrfError` unless ``submitted`` equals the session's token (constant time)."""
    if session is None or not submitted or not hmac.compare_digest(session.csrf, submitted):
        raise CsrfError("the form's CSRF token is missing or wrong: reload the page and submit again")
