"""The small JSON endpoints the console's pages poll (``console.js``, ``chart.js``), each under
the session and the tenant rules of the pages (another tenant's object is a 404, as an unknown
one):

* ``GET /console/analyses/{id}/live.json``: the stage stepper and the timeline rows
  (``apps.api.console.progress``);
* ``GET /console/analyses/{id}/chart.json``: the interactive chart's bars and layers
  (``apps.chart_data``);
* ``GET /console/watchlists/{name}/runs/{date}/live.json``: where each ticker of a run is.

Why polling and not server-sent events: every page answer here is a short synchronous read
in the gateway's thread pool; an open event stream per watching tab would hold one of those
threads for as long as the tab stays open. A poll every second or two costs one small read.
Reference: ``docs/console.md``, "Live progress".
"""

from __future__ import annotations

from datetime import UTC, date, datetime
from typing import Any, Final

from fastapi import Header, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response

from apps import watchlists
from apps.api.charts import chart_etag, chart_unavailable_reason, etag_matches
from apps.api.console.progress import STEP_NAMES, event_json, stage_steps, timeline
from apps.api.console.views import SignedIn, _not_found, _owned, _page, markdown_html, router
from apps.api.deps import app_settings
from apps.api.routes import analyses as analyses_route
from core.stages import TERMINAL_STATUSES
from db import ops_repo, repo
from db.engine import get_engine

#: Tickers of a run the run page lists with their progress (the counts cover all of them).
RUN_TICKERS_SHOWN: Final = 500
_HEADERS: Final = {"Cache-Control": "no-store"}


def _missing(what: str) -> JSONResponse:
    return JSONResponse({"detail": f"no {what}"}, status_code=404, headers=_HEADERS)


@router.get("/analyses/{analysis_id}/live.json")
def analysis_live(analysis_id: str, request: Request, auth: SignedIn, n: int = -1) -> JSONResponse:
    """The live view of an analysis: ``{status, finished, progress, stale, error, now, pass,
    passes, steps, count, events?}`` (``steps`` of ``progress.stage_steps``; ``now`` the
    server's UTC time, from which the page ticks the running step's clock); ``events`` (the
    timeline rows, ``progress.event_json``) only when their number differs from ``n``, the
    number the page shows already. 404 for an unknown or another tenant's analysis."""
    principal, _ = auth
    settings = app_settings(request)
    row = _owned(analysis_id, principal, settings)
    if row is None:
        return _missing(f"analysis {analysis_id[:64]}")
    now = datetime.now(UTC)
    out = analyses_route.analysis_out(row, full=False, settings=settings)
    tools, llms = repo.call_log(
        engine=get_engine(settings.service.effective_database_url), analysis_id=analysis_id
    )
    events = timeline(tools, llms)
    body: dict[str, Any] = {
        "status": out.status,
        "progress": None if out.status in TERMINAL_STATUSES else out.progress,
        "stale": out.stale,
        "error": out.error,
        "now": now.isoformat(),
        **stage_steps(row, now=now),
        "count": len(events),
    }
    if n != len(events):
        body["events"] = [event_json(e) for e in events]
    return JSONResponse(body, headers=_HEADERS)


@router.get("/analyses/{analysis_id}/chart.json")
def analysis_chart_json(
    analysis_id: str,
    request: Request,
    auth: SignedIn,
    if_none_match: str | None = Header(default=None, alias="If-None-Match"),
) -> Response:
    """The interactive chart's data (``apps.chart_data.analysis_chart_data``); 404 for an
    unknown or another tenant's analysis, 409 while it runs or when it has no price history,
    304 when ``If-None-Match`` matches (the chart of a finished analysis never changes)."""
    from apps.chart_data import analysis_chart_data  # lazy: pandas and the chart tools

    principal, _ = auth
    settings = app_settings(request)
    row = _owned(analysis_id, principal, settings)
    if row is None:
        return _missing(f"analysis {analysis_id[:64]}")
    reason = chart_unavailable_reason(row)
    if reason is not None:
        return JSONResponse({"detail": reason}, status_code=409, headers=_HEADERS)
    etag = chart_etag(row).replace('W/"', 'W/"json-')
    cache = {"ETag": etag, "Cache-Control": "private, no-cache"}
    if etag_matches(if_none_match, etag):
        return Response(status_code=304, headers=cache)
    try:
        data = analysis_chart_data(analysis_id=analysis_id, settings=settings)
    except KeyError as exc:  # the history went missing under us: as the checks above
        return JSONResponse({"detail": str(exc.args[0])}, status_code=409, headers=_HEADERS)
    return JSONResponse(data, headers=cache)


def step_index(status: str | None, checkpoint: str | None) -> int:
    """How far an analysis is on the stepper (:data:`progress.STEP_NAMES`): 0 queued (or no
    row yet), 1-4 the stage running or waiting, 5 done or failed. For the run page's per-ticker
    progress bars."""
    if status is None or status == "queued":
        return 0
    if status in TERMINAL_STATUSES:
        return len(STEP_NAMES) - 1
    from core.stages import END_OF_PASS, step_after

    step = step_after(checkpoint)
    return len(STEP_NAMES) - 2 if step == END_OF_PASS else STEP_NAMES.index(step)


def run_tickers(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The run page's ticker rows from ``db.ops_repo.run_progress``: each ``{symbol,
    analysis_id, url, state, step, steps, label, signal, error}``; ``state`` ``refused``,
    ``queued``, ``running``, ``done`` or ``failed``; ``step`` of ``steps`` the position on the
    stepper (:func:`step_index`); ``label`` what the page prints (the stage, or why refused)."""
    out = []
    for r in rows:
        status = r["analysis_status"]
        if r["status"] == "refused":
            state, label = "refused", f"not started: {r['error'] or 'refused'}"
        elif status in (None, "queued"):
            state, label = "queued", "queued"
        elif status in TERMINAL_STATUSES:
            state, label = status, status
        else:
            state, label = "running", status + ("" if r["lease_owner"] else " (waiting for a worker)")
        out.append(
            {
                "symbol": r["symbol"],
                "analysis_id": r["analysis_id"],
                "url": f"/console/analyses/{r['analysis_id']}" if r["analysis_id"] else None,
                "state": state,
                "step": step_index(status, r["checkpoint"]) if r["status"] != "refused" else 0,
                "steps": len(STEP_NAMES) - 1,
                "label": label,
                "signal": r["signal"] if status == "done" else None,
                "error": r["analysis_error"] if status == "failed" else None,
            }
        )
    return out


def run_counts(tickers: list[dict[str, Any]]) -> dict[str, int]:
    """``{total, done, failed, running, queued, refused}`` of :func:`run_tickers` rows."""
    counts = dict.fromkeys(("done", "failed", "running", "queued", "refused"), 0)
    for t in tickers:
        counts[t["state"]] += 1
    return {"total": len(tickers), **counts}


def run_view(*, run: dict[str, Any], settings: Any) -> dict[str, Any]:
    """``{status, finished, counts, tickers, shown_all}`` of watchlist run ``run`` (its row)."""
    rows = ops_repo.run_progress(
        engine=get_engine(settings.service.effective_database_url),
        run_id=run["id"],
        limit=RUN_TICKERS_SHOWN + 1,
    )
    tickers = run_tickers(rows[:RUN_TICKERS_SHOWN])
    return {
        "status": run["status"],
        "finished": run["status"] != "running",
        "counts": run_counts(tickers),
        "tickers": tickers,
        "shown_all": len(rows) <= RUN_TICKERS_SHOWN,
    }


@router.get("/watchlists/{name}/runs/{run_date}/live.json")
def run_live(name: str, run_date: str, request: Request, auth: SignedIn) -> JSONResponse:
    """Where each ticker of the run is (:func:`run_view`); 404 for an unknown or another
    tenant's watchlist or run."""
    principal, _ = auth
    settings = app_settings(request)
    try:
        day = date.fromisoformat(run_date)
        run = watchlists.get_run(name=name, run_date=day, settings=settings, tenant=principal.tenant)
    except (ValueError, watchlists.WatchlistError):
        return _missing("such run")
    return JSONResponse(run_view(run=run, settings=settings), headers=_HEADERS)


@router.get("/watchlists/{name}/runs/{run_date}")
def run_page(name: str, run_date: str, request: Request, auth: SignedIn) -> HTMLResponse:
    """One run of a watchlist: each ticker's progress while it runs (the page polls
    :func:`run_live` and swaps in its digest when the run is done, no reload), then its digest
    (Markdown rendered) with each ticker linking to its analysis's page and its chart."""
    principal, session = auth
    settings = app_settings(request)
    try:
        day = datetime.strptime(run_date, "%Y-%m-%d").date()
        run = watchlists.get_run(name=name, run_date=day, settings=settings, tenant=principal.tenant)
    except (ValueError, watchlists.WatchlistError):
        return _not_found(request, principal, session, "such run")
    digest = None
    if run["status"] == "done" and run.get("digest_json"):
        # the chart links open the console's chart route (the session, not a key, authorises it)
        console_links = watchlists.with_signed_charts(run["digest_json"], sign=lambda path: "/console" + path)
        digest = watchlists.digest_markdown(
            console_links,
            chart_note="Each ticker opens its analysis; each chart link opens the chart PNG.",
            ticker_url=lambda r: f"/console/analyses/{r['analysis_id']}",
        )
    return _page(
        request, "run.html", principal=principal, session=session, name=name, run=run,
        view=run_view(run=run, settings=settings), digest_html=markdown_html(digest) if digest else None,
    )  # fmt: skip
