"""``GET /scorecard?backtest=&since=&format=json|markdown&all_tenants=`` (scope ``read``): the
forward scorecard of the key's tenant; ``all_tenants=true`` (scope ``operator``) every tenant's."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query, Response
from fastapi.encoders import jsonable_encoder
from fastapi.responses import JSONResponse, PlainTextResponse

from apps.api.auth import require_scope
from apps.api.deps import Reader, SettingsDep
from apps.api.edge import CheckedRoute
from apps.api.fields import BacktestName, SinceDate
from db.engine import get_engine

router = APIRouter(route_class=CheckedRoute)


@router.get(
    "/scorecard",
    tags=["evaluation"],
    response_class=Response,
    responses={
        200: {
            "content": {
                "application/json": {"schema": {"type": "object"}},
                "text/markdown": {"schema": {"type": "string"}},
            },
            "description": "The scorecard as JSON (default) or Markdown (format=markdown).",
        },
        404: {"description": "No backtest of that name (in the key's tenant)."},
    },
)
def get_scorecard(
    principal: Reader,
    settings: SettingsDep,
    backtest: Annotated[BacktestName | None, Query()] = None,
    since: Annotated[SinceDate | None, Query()] = None,
    format: Literal["json", "markdown"] = "json",
    all_tenants: Annotated[
        bool, Query(description="Every tenant's recommendations (scope `operator`).")
    ] = False,
) -> Response:
    """The forward scorecard (``apps.scorecard``) of the key's tenant's stored scores,
    beside the baselines: per strategy and horizon (5, 20, 60 trading days) the directional
    hit with its Wilson 95 % interval, HOLD against always-HOLD, the mean signed excess and
    the per-date IC with Newey–West intervals, Brier, ECE and the reliability table, paired
    comparisons with the baselines, and breakdowns by analyst, model and prompt version; on
    the default entry rule (the next session's open) and the configured benchmark (rows
    scored otherwise are counted in ``stale``). Read-only: the beat task
    ``finagent.scorecard.score`` (or ``finagent scorecard``) writes the scores as horizons
    mature. Scope ``read``: only the tenant's own recommendations, and only backtests holding
    its analyses (any other name answers 404, as an unknown one). ``all_tenants=true`` needs
    the ``operator`` scope: every tenant's."""
    # lazy: scipy and pandas-ta load on the first scorecard request only
    from apps import scorecard
    from db import backtest_repo

    if all_tenants:
        require_scope(principal, "operator")
    tenant = None if all_tenants else principal.tenant
    engine = get_engine(settings.service.effective_database_url)
    if backtest is not None and (
        backtest_repo.get_backtest(engine=engine, name=backtest) is None
        or (
            tenant is not None
            and not backtest_repo.backtest_has_tenant(engine=engine, name=backtest, tenant=tenant)
        )
    ):
        return JSONResponse({"detail": f"no backtest named {backtest!r}"}, status_code=404)
    card = scorecard.build_scorecard(
        settings=settings, backtest_name=backtest, since=since, score_first=False, tenant=tenant
    )
    if format == "markdown":
        return PlainTextResponse(scorecard.markdown(card), media_type="text/markdown")
    return JSONResponse(jsonable_encoder(card))
