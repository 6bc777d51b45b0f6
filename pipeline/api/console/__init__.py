"""The web console: server-rendered pages at ``/console`` on the gateway (``finagent serve``).

Sign-in with an API key gives a signed session cookie (``session``); the pages (``views``) call
the same service functions as the JSON routes. :func:`install_console` adds them to an app.
Reference: ``docs/console.md``.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

from core.settings import Settings
from pipeline.api.console import watchlist_forms  # noqa: F401 - adds the watchlist forms to the router
from pipeline.api.console.session import CsrfError, console_secret
from pipeline.api.console.views import (
    LoginRequired,
    PageRefused,
    csrf_refused,
    login_required,
    page_refused,
    router,
)

__all__ = ["install_console"]


def install_console(api: FastAPI, settings: Settings) -> None:
    """Add the console's routes, its static files (``/console/static``) and its exception
    handlers (sign-in redirect, CSRF refusal, refused page) to ``api``; the cookie secret is
    kept in ``api.state.console_secret``.

    Raises ``ValueError`` for a ``FINAGENT_CONSOLE_SECRET`` shorter than 32 characters."""
    api.state.console_secret = console_secret(settings)
    api.include_router(router)
    api.mount(
        "/console/static",
        StaticFiles(directory=str(Path(__file__).with_name("static"))),
        name="console-static",
    )
    api.add_exception_handler(LoginRequired, login_required)
    api.add_exception_handler(CsrfError, csrf_refused)
    api.add_exception_handler(PageRefused, page_refused)
