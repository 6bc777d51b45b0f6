"""The gateway's routes, one module (one ``APIRouter``) per resource.

:data:`ROUTERS` is the order ``create_app`` includes them in: the order of the OpenAPI
document's paths. Each route's class is :class:`apps.api.edge.CheckedRoute`; its
dependencies (key, scope, settings, metering) are :mod:`apps.api.deps`.
"""

from __future__ import annotations

from typing import Final

from fastapi import APIRouter

from apps.api.routes import analyses, analyze, audit, health, runs, scorecard, watchlists

#: ``/health``; ``POST /analyze``; ``/analyses``; ``/watchlists``; their runs; ``/audit``;
#: ``/scorecard``.
ROUTERS: Final[tuple[APIRouter, ...]] = (
    health.router,
    analyze.router,
    analyses.router,
    watchlists.router,
    runs.router,
    audit.router,
    scorecard.router,
)
