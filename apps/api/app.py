"""The FastAPI gateway (``docs/design.md``, "HTTP gateway"): ``finagent serve`` runs
``create_app()`` under uvicorn.

Endpoints (every one but ``/health`` and the docs needs ``X-API-Key``):

* ``GET /health``: database reachable, broker reachable, a worker answers a ping and runs a
  task that reaches the database, the recovery sweeper swept recently, no analysis stalled
  (service mode); 503 naming the failing parts.
* ``POST /analyze`` → 202 ``{analysis_id, status_url, …}``; ``Idempotency-Key`` header: the same
  key (per API key) with the same body returns the same analysis, with another body 409.
* ``GET /analyses/{id}``, ``GET /analyses?symbol=&status=&limit=&offset=``.
* ``GET /analyses/{id}/chart.png``: the analysis's chart rendered on demand by the
  ``render_chart`` tool (one ``tool_calls`` row, stage ``chart``); 404 unknown, 409 unfinished
  or no price history; ``ETag`` + ``Cache-Control`` (a finished analysis's chart never changes).
* ``/watchlists`` CRUD, ``POST /watchlists/{name}/runs``, ``GET /watchlists/{name}/runs``,
  ``GET /watchlists/{name}/runs/{date}``, ``GET /watchlists/{name}/runs/{date}/digest?format=``.
* ``/console/…``: the web console (``apps.api.console``, ``docs/console.md``), HTML pages
  behind a sign-in with an API key; not in the OpenAPI document. ``GET /`` redirects to it
  (``apps.api.console.install_console``).
* ``GET /audit`` (scope ``admin``): the audit log of the key's tenant.
* ``GET /scorecard?backtest=&since=&format=json|markdown&all_tenants=`` (scope ``read``): the
  forward scorecard of the key's tenant; ``all_tenants=true`` (scope ``operator``) every tenant's.

Authorization (``core.tenancy``): every object belongs to a tenant, and a key sees
only its own tenant's (another tenant's object answers 404, exactly as an unknown one); each
endpoint needs a scope (``read``, ``analyze``, ``watchlists``, ``admin``, ``operator``; 403
names the one missing). ``POST /analyze`` and each ticker of a watchlist run are metered per key
(``apps.api.quotas``, 429 + ``Retry-After``); requests without a valid key per client
address (``apps.api.abuse``); every mutating request with a key leaves an ``audit_log`` row,
those without one are counted per address and window (``apps.api.audit``).

Layout: :func:`create_app` assembles the middleware, the exception handlers
(``apps.api.errors``), the offline docs (``apps.api.docs``) and one router per resource
(``apps.api.routes``: ``health``, ``analyze``, ``analyses``, ``watchlists``, ``runs``,
``audit``, ``scorecard``); the routes' dependencies (key, scope, settings, metering) are
``apps.api.deps``.

Handlers are plain ``def``: FastAPI runs them in its thread pool, and the producer path
(provider check, database writes, broker publish) is blocking I/O.
"""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager

from fastapi import FastAPI

from apps.analysis_chart import warm_up_charts
from apps.api.audit import AuditMiddleware
from apps.api.charts import ChartGate
from apps.api.console import install_console
from apps.api.docs import install_offline_docs
from apps.api.edge import CheckedRoute
from apps.api.errors import install_error_handlers
from apps.api.health import check_health
from apps.api.limits import BodyLimitMiddleware
from apps.api.masking import SecretMaskingMiddleware
from apps.api.routes import ROUTERS
from apps.api.schemas import ERROR_RESPONSES
from core.logs import install_log_masking
from core.settings import Settings, get_settings
from pipeline import producer, service

#: ``check_health`` stays importable from here (``GET /health``'s checks, used by tests).
__all__ = ["check_health", "create_app"]


def create_app(settings: Settings | None = None) -> FastAPI:
    """Build the gateway for ``settings`` (default: the process settings).

    Embedded mode (no broker): an in-process worker starts with the app, so a single
    ``finagent serve`` answers requests on a fresh machine.
    """
    settings = settings or get_settings()
    api = FastAPI(
        title="finagent",
        version="0.1.0",
        description=(
            "Multi-agent stock analysis on a Celery pipeline. Send `X-API-Key`. Every error body "
            'is `{"detail": "…"}` (422 adds `errors`); every answer carries `X-Request-ID`.'
        ),
        lifespan=_lifespan(settings),
        responses=ERROR_RESPONSES,
        # /docs and /redoc from bundled assets, not a CDN (apps.api.docs)
        docs_url=None,
        redoc_url=None,
    )
    # every route checks its raw input first (NUL, lone surrogates, repeats: apps.api.edge)
    api.router.route_class = CheckedRoute
    install_offline_docs(api)
    api.state.settings = settings
    api.state.chart_gate = ChartGate()
    api.add_middleware(BodyLimitMiddleware, max_bytes=settings.api.max_body_bytes)
    # added last = outermost: it sees every answer, the body limit's 413 included
    api.add_middleware(
        AuditMiddleware,
        database_url=settings.service.effective_database_url,
        anonymous_window_seconds=settings.api.audit_anonymous_window_seconds,
    )
    # outermost of all: no answer, error bodies and X-Request-ID included, carries a configured
    # secret (docs/security.md, "Secrets"); the process's log records are masked too
    install_log_masking()
    api.add_middleware(SecretMaskingMiddleware)
    install_error_handlers(api)
    for router in ROUTERS:
        api.include_router(router)
    # the web console (/console): HTML pages over the same functions, left out of the schema
    install_console(api, settings)
    # the 405's Allow lists the methods of these (apps.api.edge.served_routes)
    api.state.served_routes = [*api.router.routes, *(route for router in ROUTERS for route in router.routes)]
    return api


def _lifespan(settings: Settings) -> Callable[[FastAPI], AbstractAsyncContextManager[None]]:
    """The app's lifespan: in embedded mode the database schema and the in-process worker
    start with the app; the chart imports warm up in a thread."""

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        if settings.service.mode == "embedded":
            service.prepare_database(settings=settings)
        producer.ensure_embedded_worker(settings=settings)
        # the first chart.png of a process paid ~3 s of imports; pay them now, off the request path
        threading.Thread(target=warm_up_charts, name="chart-warm-up", daemon=True).start()
        yield

    return lifespan
