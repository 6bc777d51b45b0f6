"""``GET /analyses/{id}``, ``GET /analyses/{id}/chart.png``, ``GET /analyses``: one analysis
(status, stage, progress, report), its chart, and the tenant's analyses page by page.

Another tenant's analysis answers 404 exactly as an unknown one (OWASP API Security Top 10,
API1 "Broken Object Level Authorization"), so its existence is not confirmed.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Header, Query, Request, Response
from fastapi.responses import JSONResponse

from apps import watchlists
from apps.api.auth import Principal
from apps.api.charts import (
    CHART_CACHE_CONTROL,
    ChartGate,
    ChartRenderError,
    chart_etag,
    chart_unavailable_reason,
    etag_matches,
    render_chart_png,
)
from apps.api.deps import SIGNED_LINK, ChartAuth, Reader, SettingsDep
from apps.api.edge import CheckedRoute
from apps.api.fields import MAX_OFFSET, AnalysisId, Ticker
from apps.api.schemas import AnalysisDetails, AnalysisOut, AnalysisPage, AnalysisStatus
from core.plans import DEFAULT_ANALYSIS_TYPE
from core.settings import Settings
from core.stages import TERMINAL_STATUSES, stage_of_status
from db import repo
from db.engine import get_engine
from pipeline import service
from pipeline.query import AnalysisType
from pipeline.steps.recovery import progress_of

router = APIRouter(route_class=CheckedRoute)


def owned_analysis(*, analysis_id: str, principal: Principal, settings: Settings) -> dict[str, Any] | None:
    """The ``analyses`` row of ``analysis_id`` if ``principal``'s tenant owns it, else ``None``:
    another tenant's analysis is reported exactly like an unknown one (404, OWASP API1), so its
    existence is not confirmed. A signed link (:data:`apps.api.deps.SIGNED_LINK`) carries
    its own authority over the one chart its signature names."""
    row = service.get_analysis(analysis_id=analysis_id, settings=settings)
    if row is None or (principal is not SIGNED_LINK and row.get("tenant") != principal.tenant):
        return None
    return row


def analysis_out(row: dict[str, Any], *, full: bool, settings: Settings) -> AnalysisOut:
    """The API view of an ``analyses`` row: progress (``pipeline.steps.recovery.progress_of``)
    and, when ``full``, the report (Markdown and JSON) and the chart's URL once it can be drawn."""
    progress = progress_of(row, settings=settings)
    report = (row.get("report_json") or {}) if full else {}
    return AnalysisOut(
        step=progress.step,
        attempt=progress.attempt,
        recoveries=progress.recoveries,
        lease_expires_at=progress.lease_expires_at,
        stale=progress.stale,
        progress=progress.note,
        analysis_id=row["id"],
        symbol=row["symbol"],
        as_of=row["as_of"],
        status=row["status"],
        analysis_type=_analysis_type(row),
        current_stage=stage_of_status(row["status"]),
        iteration=row["iteration"],
        max_iterations=row["max_iterations"],
        user_query=row["user_query"],
        signal=row["signal"],
        p_outperform=(row.get("report_json") or {}).get("p_outperform") if full else None,
        probability_text=(row.get("report_json") or {}).get("probability_text") if full else None,
        headline=_headline(row, full=full),
        direction=((report.get("direction") or {}).get("text") if full else None),
        details=_details(row, report, full=full),
        error=row["error"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        finished_at=row["finished_at"],
        report_markdown=row.get("report") if full else None,
        report_json=row.get("report_json") if full else None,
        chart_url=watchlists.chart_url(row["id"]) if full and chart_unavailable_reason(row) is None else None,
    )


def _headline(row: dict[str, Any], *, full: bool) -> str | None:
    """The report's one-line answer: the list query's ``headline`` column, else the report's."""
    if row.get("headline") is not None or not full:
        return row.get("headline")
    value = (row.get("report_json") or {}).get("headline")
    return str(value) if value is not None else None


def _details(row: dict[str, Any], report: dict[str, Any], *, full: bool) -> AnalysisDetails | None:
    """The raw reading under ``details``: the report's (reports written before it kept
    ``raw_signal`` and ``score`` at the top level), or only the confidence column in list pages
    (the report is not read there); ``None`` without a signal."""
    if row.get("signal") is None and row.get("confidence") is None:
        return None
    if not full:
        return AnalysisDetails(confidence=row.get("confidence"))
    stored = report.get("details")
    if isinstance(stored, dict):
        return AnalysisDetails.model_validate(stored)
    return AnalysisDetails(
        raw_signal=report.get("raw_signal"),
        score=report.get("score"),
        confidence=row.get("confidence"),
        key=report.get("prompt_version"),
    )


def _analysis_type(row: dict[str, Any]) -> str:
    """The plan of an ``analyses`` row: the list query's ``analysis_type`` column, else the
    state's; a state without one ran the default plan (``core.plans.DEFAULT_ANALYSIS_TYPE``)."""
    stated = row.get("analysis_type")
    if stated is None and isinstance(row.get("state"), dict):
        stated = row["state"].get("analysis_type")
    return str(stated or DEFAULT_ANALYSIS_TYPE)


@router.get("/analyses/{analysis_id}", response_model=AnalysisOut, tags=["analyses"])
def get_analysis(
    analysis_id: AnalysisId, principal: Reader, settings: SettingsDep
) -> AnalysisOut | JSONResponse:
    """Status, current stage and (when finished) the report as Markdown and JSON."""
    row = owned_analysis(analysis_id=analysis_id, principal=principal, settings=settings)
    if row is None:
        return JSONResponse({"detail": f"no analysis {analysis_id}"}, status_code=404)
    return analysis_out(row, full=True, settings=settings)


@router.get(
    "/analyses/{analysis_id}/chart.png",
    tags=["analyses"],
    response_class=Response,
    responses={
        200: {"content": {"image/png": {}}, "description": "The chart (PNG, ~50 KB, 1000×600 px)."},
        304: {"description": "Not modified (If-None-Match matched the ETag)."},
        404: {"description": "No such analysis."},
        409: {"description": "Not finished yet, or no price history to draw (research failed)."},
        500: {"description": "The render_chart tool failed (detail names its error code)."},
        503: {"description": "Too many chart requests at once; retry (Retry-After)."},
    },
)
def get_chart(
    analysis_id: AnalysisId,
    principal: ChartAuth,
    request: Request,
    settings: SettingsDep,
    if_none_match: Annotated[str | None, Header(alias="If-None-Match")] = None,
) -> Response:
    """The analysis's candlestick chart (PNG: support/resistance, Fibonacci levels,
    trendlines over its cited bars), rendered on demand by the ``render_chart`` tool (logged
    as a ``tool_calls`` row, stage ``chart``; ~0.5 s warm, 1–2 s the first time in a process).

    404 unknown analysis; 409 while the analysis runs or when it has no price history
    (research failed); 304 when ``If-None-Match`` matches the ``ETag``; 503 when
    ``MAX_CHART_REQUESTS`` charts are already in progress; 500 if the tool fails.
    """
    row = owned_analysis(analysis_id=analysis_id, principal=principal, settings=settings)
    if row is None:
        return JSONResponse({"detail": f"no analysis {analysis_id}"}, status_code=404)
    reason = chart_unavailable_reason(row)
    if reason is not None:
        headers = {"Retry-After": "5"} if row["status"] not in TERMINAL_STATUSES else None
        return JSONResponse({"detail": reason, "status": row["status"]}, status_code=409, headers=headers)
    cache = {"ETag": chart_etag(row), "Cache-Control": CHART_CACHE_CONTROL}
    if etag_matches(if_none_match, cache["ETag"]):
        return Response(status_code=304, headers=cache)
    gate: ChartGate = request.app.state.chart_gate
    if not gate.slots.acquire(blocking=False):
        return JSONResponse(
            {"detail": "too many chart renders in progress; retry shortly"},
            status_code=503,
            headers={"Retry-After": "1"},
        )
    try:
        png, tool_call_id = render_chart_png(analysis_id=analysis_id, gate=gate, settings=settings)
    except KeyError as exc:  # the row changed under us: same meaning as the checks above
        return JSONResponse({"detail": str(exc.args[0])}, status_code=409)
    except ChartRenderError as exc:
        headers = {"Retry-After": "1"} if exc.status_code == 503 else None
        return JSONResponse({"detail": str(exc)}, status_code=exc.status_code, headers=headers)
    finally:
        gate.slots.release()
    return Response(content=png, media_type="image/png", headers={**cache, "X-Tool-Call-Id": tool_call_id})


@router.get("/analyses", response_model=AnalysisPage, tags=["analyses"])
def list_analyses(
    principal: Reader,
    settings: SettingsDep,
    symbol: Annotated[Ticker | None, Query()] = None,
    status: AnalysisStatus | None = None,
    analysis_type: Annotated[
        AnalysisType | None,
        Query(alias="type", description="Only analyses of this plan (composite, csp, covered_call, ...)."),
    ] = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    offset: Annotated[int, Query(ge=0, le=MAX_OFFSET)] = 0,
) -> AnalysisPage:
    """Analyses newest first, filtered by exact symbol, status and plan (``type``);
    ``next_offset`` pages."""
    rows = repo.list_analyses(
        engine=get_engine(settings.service.effective_database_url),
        symbol=symbol,
        status=status,
        analysis_type=analysis_type,
        limit=limit + 1,
        offset=offset,
        tenant=principal.tenant,
    )
    return AnalysisPage(
        items=[analysis_out(r, full=False, settings=settings) for r in rows[:limit]],
        limit=limit,
        offset=offset,
        next_offset=offset + limit if len(rows) > limit else None,
    )
