"""FastAPI dependencies of the gateway's routes: settings, the caller's key and scope, the
signed-link alternative of the chart route, and the key's metering.

A route names what it needs by type: ``principal: Reader`` (a key with scope ``read``),
``Analyst`` (``analyze``), ``Curator`` (``watchlists``), ``Admin`` (``admin``), ``ChartAuth``
(a ``read`` key or a signed chart link), ``settings: SettingsDep``, ``meter: Metering``. Every
object a principal reaches belongs to its tenant (``principal.tenant``, ``core.tenancy``).

The security scheme is the ``X-API-Key`` header (:data:`api_key_header`): FastAPI lists it in
the OpenAPI document of every route that depends on it. Rules: ``docs/design.md``, "HTTP
gateway"; ``docs/security.md``.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import Depends, Query, Request
from fastapi.security import APIKeyHeader

from apps import watchlists
from apps.api.abuse import charge_failed_auth, client_address
from apps.api.auth import AuthError, Principal, authenticate, require_scope, verify_signed_path
from apps.api.fields import EXPIRES_PATTERN, SIGNATURE_PATTERN
from apps.api.quotas import admission, admit_analysis, charge_run, run_quota
from apps.metering import RunQuota
from core.settings import Settings

api_key_header = APIKeyHeader(name="X-API-Key", auto_error=False, description="finagent API key")


def app_settings(request: Request) -> Settings:
    """FastAPI dependency: the settings the app was built with (``create_app`` keeps them in
    ``app.state.settings``)."""
    settings: Settings = request.app.state.settings
    return settings


SettingsDep = Annotated[Settings, Depends(app_settings)]


def require_key(request: Request, token: Annotated[str | None, Depends(api_key_header)]) -> Principal:
    """FastAPI dependency: the caller's principal (401 missing key, 403 bad or revoked key;
    429 once the client address has spent its failed-authentication allowance,
    ``apps.api.abuse``); also kept in ``request.state.principal`` for the audit log.

    Raises :class:`apps.api.auth.AuthError` (answered by the app's handler)."""
    settings = app_settings(request)
    try:
        principal = authenticate(token=token, settings=settings)
    except AuthError:
        charge_failed_auth(address=client_address(request.scope), settings=settings)
        raise
    request.state.principal = principal
    return principal


def scoped(scope: str) -> Any:
    """A FastAPI dependency: the caller's principal if its key has ``scope``, else 403 naming it
    (``apps.api.auth.require_scope``)."""

    def dependency(principal: Annotated[Principal, Depends(require_key)]) -> Principal:
        require_scope(principal, scope)
        return principal

    return dependency


Auth = Annotated[Principal, Depends(require_key)]
Reader = Annotated[Principal, Depends(scoped("read"))]
Analyst = Annotated[Principal, Depends(scoped("analyze"))]
Curator = Annotated[Principal, Depends(scoped("watchlists"))]
Admin = Annotated[Principal, Depends(scoped("admin"))]

#: The principal of a request authorised by a signed link rather than a key: the signature
#: binds one chart's path, so it needs no tenant (``tenant=""`` matches no tenant's rows).
SIGNED_LINK = Principal(key_id="signed-link", name="signed link", tenant="", scopes=("read",))


def require_key_or_signed_link(
    request: Request,
    token: Annotated[str | None, Depends(api_key_header)],
    expires: Annotated[
        str | None, Query(pattern=EXPIRES_PATTERN, description="Signed link: expiry, Unix seconds.")
    ] = None,
    sig: Annotated[
        str | None, Query(pattern=SIGNATURE_PATTERN, description="Signed link: HMAC-SHA256, lower-case hex.")
    ] = None,
) -> Principal:
    """FastAPI dependency of the chart endpoint: an ``X-API-Key``, else a signed link for this
    analysis's chart (``apps.api.auth.verify_signed_path``). 401 with neither, 403 for a
    bad key or a bad or expired signature. Runs before the path is validated (as every key
    check does): the signature covers the path as sent."""
    if token or not (expires or sig):
        principal = require_key(request, token)
        require_scope(principal, "read")
        return principal
    analysis_id = str(request.path_params.get("analysis_id", ""))
    settings = app_settings(request)
    try:
        verify_signed_path(watchlists.chart_url(analysis_id), expires=expires, sig=sig, settings=settings)
    except AuthError:
        charge_failed_auth(address=client_address(request.scope), settings=settings)
        raise
    return SIGNED_LINK


ChartAuth = Annotated[Principal, Depends(require_key_or_signed_link)]


@dataclass(frozen=True)
class Meter:
    """The quotas of one key (``apps.api.quotas``), bound to the request's principal and
    settings. The checks run where the route calls them, not before the route: a replayed
    ``Idempotency-Key`` or a run that already exists spends nothing.

    Each method raises :class:`apps.api.quotas.QuotaExceededError` (429 + ``Retry-After``)
    as the function it wraps does."""

    principal: Principal
    settings: Settings

    def admission(self) -> AbstractContextManager[None]:
        """The key's admission section: one taker of its places and tokens at a time."""
        return admission(principal=self.principal, settings=self.settings)

    def admit_analysis(self) -> None:
        """Take one analysis's place and token (in-flight and per-minute quotas, daily budget)."""
        admit_analysis(principal=self.principal, settings=self.settings)

    def run_quota(self) -> RunQuota:
        """How many analyses a watchlist run may start now, and why the rest are refused."""
        return run_quota(principal=self.principal, settings=self.settings)

    def charge_run(self, *, started: int) -> None:
        """Charge the ``started`` analyses of a watchlist run to the key."""
        charge_run(principal=self.principal, settings=self.settings, started=started)


def metering(principal: Auth, settings: SettingsDep) -> Meter:
    """FastAPI dependency: the :class:`Meter` of the caller's key."""
    return Meter(principal=principal, settings=settings)


Metering = Annotated[Meter, Depends(metering)]
