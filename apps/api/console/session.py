"""The web console's session: a server-side row, its cookie, its CSRF token and the origin check
(``docs/console.md``, "Security").

A sign-in exchanges an API key for a session: a row of ``console_sessions``
(``db.console_sessions_repo``: the key's id, its scopes as they were, a CSRF token, the expiry
and the last use) found by a random 256-bit session id, which is all the cookie carries. The
cookie ``finagent_console`` is ``{"s": session_id}`` after sign-in and ``{"c": csrf_token}``
before it (the sign-in form's token, no row: an anonymous page view writes nothing), signed with
``itsdangerous.URLSafeTimedSerializer`` under ``FINAGENT_API_CONSOLE_SECRET`` (or a random one per
process) and ``HttpOnly``, ``SameSite=Lax``, ``Path=/console``, ``Secure`` over HTTPS.

A session is over, whatever its cookie says, once its row is gone or stale: sign-out deletes it,
revoking the key deletes the key's rows (``db.ops_repo.revoke_api_key``), a change of the key's
scopes, ``FINAGENT_API_CONSOLE_SESSION_TTL`` after sign-in, or ``FINAGENT_API_CONSOLE_IDLE_TIMEOUT``
without a request end it (Django and Flask-Login end sessions server-side the same way). A copy
of the cookie then gets the sign-in page (GET) or 403 (POST).

CSRF, two fences on every ``POST`` (OWASP CSRF Prevention Cheat Sheet): the form's hidden
``csrf`` field must equal the session's token (synchronizer token, renewed at sign-in and
sign-out), and the request's ``Origin`` (else its ``Referer``) must be the console's own origin
or one of ``FINAGENT_API_CONSOLE_ALLOWED_ORIGINS`` (:func:`check_origin`; a POST with neither header
is refused: browsers send ``Origin`` with every POST). ``SameSite=Lax`` already keeps the cookie
off cross-site ``POST``\\ s.
"""

from __future__ import annotations

import hmac
import secrets
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import urlsplit

from itsdangerous import BadSignature, URLSafeTimedSerializer
from starlette.requests import Request
from starlette.responses import Response

from apps.api.auth import Principal, principal_of
from apps.api.deps import app_settings
from core.settings import Settings
from db import console_sessions_repo, ops_repo
from db.engine import get_engine

COOKIE: Final = "finagent_console"
#: A configured secret shorter than this is refused (HMAC wants as much secret as its output).
MIN_SECRET_CHARS: Final = 32
_SALT: Final = "finagent-console-session"


class CsrfError(Exception):
    """A console ``POST`` refused: without the session's CSRF token, from another origin, or
    with a session that has ended (answered 403)."""


@dataclass(frozen=True)
class ConsoleSession:
    """A console session: ``key_id`` of the signed-in key (``None`` before sign-in), its CSRF
    token (URL-safe text, 43 characters) and, signed in, the session id of its row."""

    key_id: str | None
    csrf: str
    session_id: str | None = None


def console_secret(settings: Settings) -> str:
    """The cookie-signing secret: ``FINAGENT_API_CONSOLE_SECRET``, else a fresh random one (256 bits).

    Raises:
        ValueError: the configured secret is shorter than :data:`MIN_SECRET_CHARS` characters.
    """
    configured = settings.api.console_secret.get_secret_value() if settings.api.console_secret else ""
    if not configured:
        return secrets.token_urlsafe(32)
    if len(configured) < MIN_SECRET_CHARS:
        raise ValueError(f"FINAGENT_API_CONSOLE_SECRET must be at least {MIN_SECRET_CHARS} characters")
    return configured


def _serializer(request: Request) -> URLSafeTimedSerializer:
    return URLSafeTimedSerializer(request.app.state.console_secret, salt=_SALT)


def read_session(request: Request, *, settings: Settings) -> ConsoleSession | None:
    """The request's console session, or ``None`` when the cookie is missing, forged, edited,
    malformed or older than ``console_session_ttl`` seconds, or its server-side session is
    over (module docstring)."""
    raw = request.cookies.get(COOKIE)
    if not raw:
        return None
    try:
        data: Any = _serializer(request).loads(raw, max_age=settings.api.console_session_ttl)
    except BadSignature:  # SignatureExpired is a BadSignature
        return None
    if not isinstance(data, dict):
        return None
    session_id = data.get("s")
    if isinstance(session_id, str):
        row = console_sessions_repo.live(
            engine=get_engine(settings.service.effective_database_url),
            session_id=session_id,
            idle_seconds=settings.api.console_idle_timeout,
        )
        if row is None:
            return None
        return ConsoleSession(key_id=row["key_id"], csrf=row["csrf"], session_id=session_id)
    if isinstance(data.get("c"), str):
        return ConsoleSession(key_id=None, csrf=data["c"])
    return None


def new_session(key_id: None = None) -> ConsoleSession:
    """A signed-out session (no row) with a fresh CSRF token: the sign-in form's."""
    return ConsoleSession(key_id=key_id, csrf=secrets.token_urlsafe(32))


def start_session(*, principal: Principal, settings: Settings) -> ConsoleSession:
    """Sign ``principal``'s key in: a new session row (fresh id and CSRF token, the key's
    scopes as they are now, lasting ``console_session_ttl`` seconds)."""
    session = ConsoleSession(
        key_id=principal.key_id, csrf=secrets.token_urlsafe(32), session_id=secrets.token_urlsafe(32)
    )
    row = ops_repo.get_api_key(
        engine=get_engine(settings.service.effective_database_url), key_id=principal.key_id
    )
    console_sessions_repo.create(
        engine=get_engine(settings.service.effective_database_url),
        session_id=str(session.session_id),
        key_id=principal.key_id,
        scopes=str(row["scopes"]) if row else ",".join(sorted(principal.scopes)),
        csrf=session.csrf,
        ttl_seconds=settings.api.console_session_ttl,
    )
    return session


def end_session(session: ConsoleSession | None, *, settings: Settings) -> None:
    """Sign out: delete the session's row (nothing for a signed-out session), so every copy
    of its cookie is refused from now on."""
    if session is not None and session.session_id is not None:
        console_sessions_repo.end(
            engine=get_engine(settings.service.effective_database_url), session_id=session.session_id
        )


def write_session(
    response: Response, session: ConsoleSession, *, request: Request, settings: Settings
) -> None:
    """Set the signed cookie of ``session`` on ``response`` (attributes: module docstring)."""
    payload = {"s": session.session_id} if session.session_id is not None else {"c": session.csrf}
    value = _serializer(request).dumps(payload)
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


def request_origin(request: Request) -> str:
    """The console's own origin as this request reached it: ``scheme://host[:port]`` (the
    ``Host`` header; behind a proxy, the scheme uvicorn's forwarded headers give)."""
    host = request.headers.get("host") or request.url.netloc
    return f"{request.url.scheme}://{host}".lower()


def _origin_of(url: str) -> str | None:
    """``scheme://host[:port]`` of ``url`` (lower case), ``None`` for something else."""
    try:
        parts = urlsplit(url.strip())
    except ValueError:
        return None
    if not parts.scheme or not parts.netloc:
        return None
    return f"{parts.scheme}://{parts.netloc}".lower()


def check_origin(request: Request, *, settings: Settings) -> None:
    """Raise :class:`CsrfError` unless the request's ``Origin`` (else its ``Referer``) is
    the console's own origin (:func:`request_origin`) or one of
    ``FINAGENT_API_CONSOLE_ALLOWED_ORIGINS``; a request with neither header is refused too."""
    configured = (o.strip().rstrip("/").lower() for o in settings.api.console_allowed_origins.split(","))
    allowed = {request_origin(request), *(o for o in configured if o)}
    origin = request.headers.get("origin")
    if origin is not None and origin.strip() and origin.strip() != "null":
        claimed = _origin_of(origin)
        what = f"Origin {origin[:100]!r}"
    elif request.headers.get("referer"):
        claimed = _origin_of(request.headers["referer"])
        what = f"Referer of origin {claimed!r}"
    else:
        raise CsrfError(
            "the form was sent without Origin or Referer, so it cannot be told from a form of "
            "another site: submit it from the console's page"
        )
    if claimed not in allowed:
        raise CsrfError(
            f"the form was sent from another site ({what}); the console accepts forms from "
            f"{', '.join(sorted(allowed))} (FINAGENT_API_CONSOLE_ALLOWED_ORIGINS adds others)"
        )


def same_origin(request: Request) -> None:
    """Router dependency of the console: :func:`check_origin` on every request with an unsafe
    method (POST, PUT, PATCH, DELETE), so every form of the console is checked, present and to
    come."""
    if request.method not in ("GET", "HEAD", "OPTIONS"):
        check_origin(request, settings=app_settings(request))


def check_csrf(session: ConsoleSession | None, submitted: str | None) -> None:
    """Raise :class:`CsrfError` unless ``submitted`` equals the session's token (constant time)."""
    if session is None or not submitted or not hmac.compare_digest(session.csrf, submitted):
        raise CsrfError("the form's CSRF token is missing or wrong: reload the page and submit again")
