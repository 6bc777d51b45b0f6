"""The console's watchlist forms: create (on ``/console/watchlists``), edit
(``/console/watchlists/{name}/edit``), delete and "run now" (``POST …/delete``, ``POST …/runs``).

Each form calls the JSON route's function (``apps.api.routes.watchlists`` / ``runs``) with
the same request models, so a refused form shows the reasons the API gives (field validation
422, a taken name or a tenant cap 409, a quota 429) on the form again, never a 500. Every
``POST`` checks the CSRF token; changing needs the ``watchlists`` scope (403 on the form
otherwise). Another tenant's watchlist is a 404 page, the same as an unknown one.
Reference: ``docs/console.md``.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Final
from urllib.parse import quote

from fastapi import Form, Request, Response
from fastapi.responses import HTMLResponse, RedirectResponse
from pydantic import BaseModel, Field

from apps import watchlists
from apps.api.auth import Principal, require_scope
from apps.api.console.refusals import REFUSED, refusal
from apps.api.console.session import ConsoleSession, check_csrf
from apps.api.console.views import SignedIn, _not_found, _page, router, watchlist_page_response
from apps.api.deps import Meter, app_settings
from apps.api.routes import runs as runs_route
from apps.api.routes import watchlists as watchlists_route
from apps.api.schemas import RunRequest, WatchlistIn, WatchlistOptions, WatchlistPatch
from core.settings import Settings

#: What separates tickers in the form's field: commas, spaces or new lines.
_TICKER_SEPARATORS: Final = re.compile(r"[\s,;]+")
#: The ``as_of`` choices of a watchlist's options ("" = the default, the run's date).
AS_OF_CHOICES: Final = ("", "run_date", "latest")


class WatchlistForm(BaseModel):
    """The fields of the watchlist create and edit forms, as the browser sends them (text, ""
    when left empty; FastAPI reads the model from the form body). The lengths only bound what
    is read: what a field must hold is the API model's rule (``WatchlistIn`` /
    ``WatchlistPatch``), checked after :func:`parse_tickers` and :func:`form_options`."""

    csrf: str = Field("", max_length=200)
    name: str = Field("", max_length=200)  # the create form only
    tickers: str = Field("", max_length=10_000)  # up to the product's 200 tickers, with room
    schedule: str = Field("", max_length=200)
    timezone: str = Field("", max_length=200)
    max_iterations: str = Field("", max_length=20)
    as_of: str = Field("", max_length=20)
    enabled: str = Field("", max_length=10)  # the edit form's checkbox ("on" or absent)

    def shown(self, *fields: str) -> dict[str, str]:
        """The values to show the form again with (``fields`` of it, as typed)."""
        return {field: getattr(self, field) for field in fields}


def parse_tickers(text: str) -> list[str]:
    """The tickers of the form's text field: split on commas, semicolons and white space,
    empties dropped, order kept (normalising and de-duplicating is the API model's job)."""
    return [t for t in _TICKER_SEPARATORS.split(text.strip()) if t]


def form_options(max_iterations: str, as_of: str) -> WatchlistOptions | None:
    """The ``options`` of the form's fields, ``None`` when both are empty.

    Raises ``pydantic.ValidationError`` (as the API's model does) for a ``max_iterations``
    outside 1-10 or not a whole number, or an ``as_of`` not in ``run_date``/``latest``."""
    raw: dict[str, Any] = {}
    if text := max_iterations.strip():
        # a form sends text; the API's model is strict about JSON integers
        raw["max_iterations"] = int(text) if re.fullmatch(r"-?[0-9]{1,6}", text) else text
    if as_of.strip():
        raw["as_of"] = as_of.strip()
    return WatchlistOptions.model_validate(raw) if raw else None


def _list_page(
    request: Request,
    principal: Principal,
    session: ConsoleSession,
    *,
    form: dict[str, str] | None = None,
    errors: list[str] | None = None,
    status_code: int = 200,
) -> HTMLResponse:
    settings = app_settings(request)
    rows = watchlists.list_watchlists(settings=settings, tenant=principal.tenant)
    return _page(
        request, "watchlists.html", principal=principal, session=session, status_code=status_code,
        rows=rows, form=form or {}, errors=errors or [], as_of_choices=AS_OF_CHOICES,
        time_zones=watchlists.TIME_ZONES, defaults=settings.watchlists,
    )  # fmt: skip


@router.get("/watchlists")
def watchlists_page(request: Request, auth: SignedIn) -> HTMLResponse:
    """The tenant's watchlists (``apps.watchlists.list_watchlists``) and the form that
    creates one."""
    principal, session = auth
    return _list_page(request, principal, session)


@router.post("/watchlists")
def create_watchlist(request: Request, auth: SignedIn, fields: Annotated[WatchlistForm, Form()]) -> Response:
    """Create a watchlist as ``POST /watchlists`` does (the same function and model) and go
    to its page; the form again with the API's reasons when refused (422, 403, 409, 429)."""
    principal, session = auth
    check_csrf(session, fields.csrf)
    settings = app_settings(request)
    form = fields.shown("name", "tickers", "schedule", "timezone", "max_iterations", "as_of")
    try:
        require_scope(principal, "watchlists")
        body = WatchlistIn(
            name=fields.name.strip(),
            tickers=parse_tickers(fields.tickers),
            schedule=fields.schedule.strip() or None,
            timezone=fields.timezone.strip() or None,
            options=form_options(fields.max_iterations, fields.as_of),
        )
        row = watchlists_route.create_watchlist(
            body=body, principal=principal, request=request, settings=settings
        )
    except REFUSED as exc:
        errors, status = refusal(exc)
        return _list_page(request, principal, session, form=form, errors=errors, status_code=status)
    return RedirectResponse(f"/console/watchlists/{quote(row.name, safe='')}", status_code=303)


def _edit_page(
    request: Request,
    principal: Principal,
    session: ConsoleSession,
    row: dict[str, Any],
    *,
    form: dict[str, str] | None = None,
    errors: list[str] | None = None,
    status_code: int = 200,
) -> HTMLResponse:
    options = row.get("options") or {}
    shown = form or {
        "tickers": ", ".join(row["tickers"]),
        "schedule": row["schedule"],
        "timezone": row["timezone"],
        "max_iterations": str(options.get("max_iterations") or ""),
        "as_of": options.get("as_of") or "",
        "enabled": "on" if row["enabled"] else "",
    }
    return _page(
        request, "watchlist_edit.html", principal=principal, session=session, status_code=status_code,
        w=row, form=shown, errors=errors or [], as_of_choices=AS_OF_CHOICES, time_zones=watchlists.TIME_ZONES,
    )  # fmt: skip


def _owned_watchlist(name: str, principal: Principal, settings: Settings) -> dict[str, Any] | None:
    try:
        return watchlists.get_watchlist(name=name, settings=settings, tenant=principal.tenant)
    except watchlists.WatchlistError:  # unknown, another tenant's, or not a name at all
        return None


@router.get("/watchlists/{name}/edit")
def edit_watchlist_page(name: str, request: Request, auth: SignedIn) -> HTMLResponse:
    """The form that changes a watchlist (tickers, schedule, time zone, options, enabled);
    404 page for an unknown or another tenant's."""
    principal, session = auth
    row = _owned_watchlist(name, principal, app_settings(request))
    if row is None:
        return _not_found(request, principal, session, "such watchlist")
    return _edit_page(request, principal, session, row)


@router.post("/watchlists/{name}/edit")
def edit_watchlist(
    name: str, request: Request, auth: SignedIn, fields: Annotated[WatchlistForm, Form()]
) -> Response:
    """Change a watchlist as ``PATCH /watchlists/{name}`` does (every field of the form is
    sent; empty options clear them) and go back to its page; the form again with the API's
    reasons when refused; 404 page for an unknown or another tenant's."""
    principal, session = auth
    check_csrf(session, fields.csrf)
    settings = app_settings(request)
    row = _owned_watchlist(name, principal, settings)
    if row is None:
        return _not_found(request, principal, session, "such watchlist")
    form = fields.shown("tickers", "schedule", "timezone", "max_iterations", "as_of", "enabled")
    try:
        require_scope(principal, "watchlists")
        body = WatchlistPatch(
            tickers=parse_tickers(fields.tickers),
            schedule=fields.schedule.strip(),
            timezone=fields.timezone.strip(),
            options=form_options(fields.max_iterations, fields.as_of) or WatchlistOptions(),
            enabled=bool(fields.enabled),
        )
        watchlists_route.update_watchlist(name=row["name"], body=body, principal=principal, settings=settings)
    except REFUSED as exc:
        errors, status = refusal(exc)
        if status == 404:  # deleted meanwhile
            return _not_found(request, principal, session, "such watchlist")
        return _edit_page(request, principal, session, row, form=form, errors=errors, status_code=status)
    return RedirectResponse(f"/console/watchlists/{quote(row['name'], safe='')}", status_code=303)


@router.post("/watchlists/{name}/delete")
def delete_watchlist(
    name: str, request: Request, auth: SignedIn, csrf: Annotated[str, Form(max_length=200)] = ""
) -> Response:
    """Delete a watchlist and its runs as ``DELETE /watchlists/{name}`` does, then go to the
    list; 404 page for an unknown or another tenant's, 403 page without the ``watchlists``
    scope."""
    principal, session = auth
    check_csrf(session, csrf)
    settings = app_settings(request)
    row = _owned_watchlist(name, principal, settings)
    if row is None:
        return _not_found(request, principal, session, "such watchlist")
    try:
        require_scope(principal, "watchlists")
        watchlists_route.delete_watchlist(name=row["name"], principal=principal, settings=settings)
    except REFUSED as exc:
        errors, status = refusal(exc)
        if status == 404:
            return _not_found(request, principal, session, "such watchlist")
        return _page(
            request, "error.html", principal=principal, session=session, status_code=status,
            title="Not deleted", message="; ".join(errors),
        )  # fmt: skip
    return RedirectResponse("/console/watchlists", status_code=303)


@router.post("/watchlists/{name}/runs")
def run_watchlist(
    name: str,
    request: Request,
    auth: SignedIn,
    csrf: Annotated[str, Form(max_length=200)] = "",
    run_date: Annotated[str, Form(max_length=40)] = "",
) -> Response:
    """Start (or find) the run of a date now as ``POST /watchlists/{name}/runs`` does (the
    same function: per-ticker quotas, the date rules) and go to the run's page; the
    watchlist's page again with the API's reason when refused; 404 page for an unknown or
    another tenant's watchlist."""
    principal, session = auth
    check_csrf(session, csrf)
    settings = app_settings(request)
    row = _owned_watchlist(name, principal, settings)
    if row is None:
        return _not_found(request, principal, session, "such watchlist")
    try:
        require_scope(principal, "watchlists")
        body = RunRequest.model_validate({"run_date": run_date.strip()} if run_date.strip() else {})
        run = runs_route.start_run(
            name=row["name"], body=body, principal=principal, settings=settings,
            meter=Meter(principal=principal, settings=settings),
        )  # fmt: skip
    except REFUSED as exc:
        errors, status = refusal(exc)
        if status == 404:
            return _not_found(request, principal, session, "such watchlist")
        return watchlist_page_response(
            request,
            principal,
            session,
            row,
            run_form={"run_date": run_date},
            errors=errors,
            status_code=status,
        )
    return RedirectResponse(
        f"/console/watchlists/{quote(row['name'], safe='')}/runs/{run.run_date.isoformat()}", status_code=303
    )
