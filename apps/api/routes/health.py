"""``GET /health``: readiness (no key needed); the checks are :func:`apps.api.health.check_health`."""

from __future__ import annotations

from fastapi import APIRouter, Response

from apps.api.deps import SettingsDep
from apps.api.edge import CheckedRoute
from apps.api.health import check_health
from apps.api.schemas import HealthOut

router = APIRouter(route_class=CheckedRoute)


@router.get(
    "/health",
    response_model=HealthOut,
    tags=["operations"],
    responses={503: {"model": HealthOut, "description": "A part is failing: see `failing`."}},
)
def health(response: Response, settings: SettingsDep) -> HealthOut:
    """Readiness: database, broker and a consuming worker. 503 names the failing parts."""
    result = check_health(settings=settings)
    if result.failing:
        response.status_code = 503
    return result
