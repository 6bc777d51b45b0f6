"""The web console: server-rendered pages at ``/console`` on the gateway (``finagent serve``).

Sign-in with an API key gives a signed session cookie (``session``); the pages (``views``) call
the same service functions as the JSON routes. :func:`install_console` adds them to an app.
Reference: ``docs/console.md``.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import RedirectResponse
from fastapi.staticfiles import StaticFiles

from apps.api.console import (  # noqa: F401 - add their routes to the router
    evaluation,
    live,
    settings_page,
    watchlist_forms,
)
from apps.api.console.session import CsrfError, console_secret
from apps.api.console.views import (
    LoginRequired,
    PageRefused,
    csrf_refused,
    login_required,
    page_refused,
    router,
)
from core.settings import Settings

__all__ = ["install_console"]


def _root() -> RedirectResponse:
    """``GET /``: 307 to the console (its sign-in page when there is no session)."""
    return RedirectResponse("/console/analyses", status_code=307)


def install_console(api: FastAPI, settings: Settings) -> None:
    """Add the console's routes, its static files (``/console/static``) and its exception
    handlers (sign-in redirect, CSRF refusal, refused page) to ``api``; the cookie secret is
    kept in ``api.state.console_secret``.

    Raises ``ValueError`` for a ``FINAGENT_API_CONSOLE_SECRET`` shorter than 32 characters."""
    api.state.console_secret = console_secret(settings)
    api.include_router(router)
    # the gateway's root is the console's door: a person who types the address lands there
    api.add_api_route("/", _root, methods=["GET"], include_in_schema=False)
    api.mount(
        "/console/static",
        StaticFiles(directory=str(Path(__file__).with_name("static"))),
        name="console-static",
    )
    api.add_exception_handler(LoginRequired, login_required)
    api.add_exception_handler(CsrfError, csrf_refused)
    api.add_exception_handler(PageRefused, page_refused)
