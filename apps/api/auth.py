"""API keys: created by ``finagent apikey create NAME``, sent in the ``X-API-Key`` header.

A key is ``fa_<key_id>_<secret>``: ``key_id`` (12 hex characters) is public and finds the row;
only ``sha256(key)`` is stored, and the hash of the presented key is compared with
``hmac.compare_digest`` (constant time). The key itself is printed once and never stored or
logged. Missing key → 401, unknown, malformed or revoked → 403.

Each key belongs to a tenant and carries scopes (``core.tenancy``): a request outside
them is refused with 403 naming the missing scope (:func:`require_scope`).

Signed links (``FINAGENT_API_URL_SIGNING_KEY``): a chart URL may instead carry ``?expires=<unix
seconds>&sig=<hex>``, ``sig = HMAC-SHA256(key, "GET\n<path>\n<expires>")`` (RFC 2104), so a
browser can load it as an ``<img>`` (it sends no custom header). The signature binds the path,
so it opens that one chart only, until ``expires``.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import time
from dataclasses import dataclass
from typing import Any, Final

from core.settings import Settings
from core.tenancy import DEFAULT_SCOPES, DEFAULT_TENANT, check_tenant
from db import ops_repo
from db.engine import get_engine

KEY_PREFIX: Final = "fa_"
_KEY_RE: Final = re.compile(r"^fa_([0-9a-f]{12})_([A-Za-z0-9_-]{20,100})$")
#: A signing key shorter than this is refused: HMAC-SHA256 wants at least 256 bits of secret.
MIN_SIGNING_KEY_CHARS: Final = 32


class AuthError(Exception):
    """Authentication failed; ``status_code`` is 401 (no key) or 403 (bad or revoked key)."""

    def __init__(self, status_code: int, message: str) -> None:
        super().__init__(message)
        self.status_code = status_code


@dataclass(frozen=True)
class Principal:
    """The caller behind a valid key: its public id and name, its tenant and its scopes."""

    key_id: str
    name: str
    tenant: str = DEFAULT_TENANT
    scopes: tuple[str, ...] = DEFAULT_SCOPES


def require_scope(principal: Principal, scope: str) -> None:
    """Raise ``AuthError(403)`` naming ``scope`` unless ``principal`` has it."""
    if scope not in principal.scopes:
        raise AuthError(
            403, f"this API key lacks the {scope!r} scope (it has: {', '.join(principal.scopes) or 'none'})"
        )


def hash_key(token: str) -> str:
    """sha256 hex digest of the full key string (what the database stores)."""
    return hashlib.sha256(token.encode()).hexdigest()


def create_key(
    *,
    name: str,
    settings: Settings,
    tenant: str = DEFAULT_TENANT,
    scopes: tuple[str, ...] = DEFAULT_SCOPES,
) -> str:
    """Create a key named ``name`` of ``tenant`` with ``scopes`` and return it (the only time
    it exists in clear).

    Raises ``ops_repo.DuplicateNameError`` for a taken name, ``ValueError`` for an empty name,
    a malformed tenant or an empty scope list (``core.tenancy.TenancyError``).
    """
    if not name.strip() or len(name) > 100:
        raise ValueError("an API key name must be 1-100 characters")
    check_tenant(tenant)
    if not scopes:
        raise ValueError("an API key needs at least one scope")
    key_id = secrets.token_hex(6)
    token = f"{KEY_PREFIX}{key_id}_{secrets.token_urlsafe(32)}"
    ops_repo.create_api_key(
        engine=get_engine(settings.service.effective_database_url),
        key_id=key_id,
        name=name,
        key_hash=hash_key(token),
        tenant=tenant,
        scopes=scopes,
    )
    return token


def rotate_key(*, name: str, settings: Settings) -> tuple[str, dict[str, Any]]:
    """A new secret for the active key named ``name``: ``(token, row)``, the token shown this
    once (same public id, tenant and scopes; the old token is refused from then on and the key's
    console sessions end).

    Raises ``KeyError`` when no key has that name, ``ValueError`` when it is revoked (a revoked
    key stays revoked: create another)."""
    engine = get_engine(settings.service.effective_database_url)
    row = ops_repo.find_api_key(engine=engine, name=name)
    if row is None:
        raise KeyError(f"no API key named {name!r}")
    if row["revoked_at"] is not None:
        raise ValueError(f"the API key {name!r} is revoked; create one with another name")
    token = f"{KEY_PREFIX}{row['key_id']}_{secrets.token_urlsafe(32)}"
    if not ops_repo.rotate_api_key(engine=engine, name=name, key_id=row["key_id"], key_hash=hash_key(token)):
        raise ValueError(f"the API key {name!r} was revoked meanwhile")  # a race with a revocation
    return token, row


def authenticate(*, token: str | None, settings: Settings) -> Principal:
    """The principal of ``token``.

    Raises ``AuthError(401)`` when ``token`` is missing/empty, ``AuthError(403)`` when it is
    malformed, unknown or revoked (the message never echoes the key)."""
    if not token:
        raise AuthError(401, "missing API key: send it in the X-API-Key header")
    match = _KEY_RE.fullmatch(token)
    row: dict[str, Any] | None = None
    if match:
        row = ops_repo.get_api_key(
            engine=get_engine(settings.service.effective_database_url), key_id=match.group(1)
        )
    # compare even when there is no row, so unknown and wrong keys cost the same
    stored = row["key_hash"] if row else "0" * 64
    if not hmac.compare_digest(hash_key(token), stored) or row is None:
        raise AuthError(403, "invalid API key")
    if row["revoked_at"] is not None:
        raise AuthError(403, "API key revoked")
    return principal_of(row)


def principal_of(row: dict[str, Any]) -> Principal:
    """The :class:`Principal` of an ``api_keys`` row (``db.ops_repo.get_api_key``)."""
    return Principal(
        key_id=row["key_id"],
        name=row["name"],
        tenant=row["tenant"],
        scopes=tuple(s for s in row["scopes"].split(",") if s),
    )


def _signing_key(settings: Settings) -> bytes:
    key = settings.api.url_signing_key.get_secret_value() if settings.api.url_signing_key else ""
    if len(key) < MIN_SIGNING_KEY_CHARS:
        raise AuthError(401, "signed links are not enabled on this gateway: send the X-API-Key header")
    return key.encode()


def signing_enabled(settings: Settings) -> bool:
    """True when ``FINAGENT_API_URL_SIGNING_KEY`` is set and long enough to sign links."""
    key = settings.api.url_signing_key.get_secret_value() if settings.api.url_signing_key else ""
    return len(key) >= MIN_SIGNING_KEY_CHARS


def _signature(key: bytes, path: str, expires: int) -> str:
    return hmac.new(key, f"GET\n{path}\n{expires}".encode(), hashlib.sha256).hexdigest()


def sign_path(path: str, *, settings: Settings, now: float | None = None) -> str:
    """``path`` (gateway-relative, e.g. ``/analyses/ID/chart.png``) with ``?expires=&sig=``
    valid for ``settings.api.signed_url_ttl`` seconds from ``now`` (Unix seconds, default the clock).

    Raises:
        AuthError(401): no signing key (or one shorter than 32 characters) is configured.
    """
    expires = int((time.time() if now is None else now) + settings.api.signed_url_ttl)
    return f"{path}?expires={expires}&sig={_signature(_signing_key(settings), path, expires)}"


def verify_signed_path(
    path: str, *, expires: str | None, sig: str | None, settings: Settings, now: float | None = None
) -> None:
    """Check a signed link for ``path``; returns None when valid.

    Raises:
        AuthError(401): signing is not configured, or the link carries no signature.
        AuthError(403): the signature is wrong (another path, edited expiry) or ``expires`` is past.
    """
    key = _signing_key(settings)
    if not expires or not sig:
        raise AuthError(401, "missing API key: send it in the X-API-Key header")
    if not expires.isdigit() or len(expires) > 12:
        raise AuthError(403, "invalid signed link")
    if not hmac.compare_digest(_signature(key, path, int(expires)), sig):
        raise AuthError(403, "invalid signed link")
    if int(expires) < (time.time() if now is None else now):
        raise AuthError(403, "signed link expired: ask the gateway for the digest again")
