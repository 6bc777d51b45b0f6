"""The console's evaluation forms: start a backtest (``POST /console/backtests``), follow it
(``/console/backtests/{name}``, polling ``…/live.json``), and score the matured
recommendations (``POST /console/scorecard/score``), through the functions ``finagent
backtest`` and ``finagent scorecard`` call (``apps.backtest.start_backtest``,
``apps.scorecard.score_pending``).

The rules (``docs/console.md``, "Backtests and scoring"): starting a backtest needs the
``analyze`` scope; its analyses belong to the key's tenant and run in the batch lane (a
person's analysis goes first); a grid is at most :data:`MAX_CONSOLE_GRID` points (the CLI
takes larger ones); a tenant runs one console backtest at a time; a name another tenant's
backtest holds is refused (409) as taken, without saying more. Every ``POST`` checks the CSRF
token; another tenant's backtest is a 404, as an unknown one.
"""

from __future__ import annotations

import hashlib
import re
from datetime import date
from typing import Annotated, Any, Final
from urllib.parse import quote, urlencode

from fastapi import Form, Request, Response
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse

from apps.api.auth import AuthError, Principal, require_scope
from apps.api.console.session import check_csrf
from apps.api.console.views import SignedIn, _not_found, _page, router, scorecard_page_response
from apps.api.deps import app_settings
from core.plans import DEFAULT_ANALYSIS_TYPE, backtest_types
from db import backtest_repo
from db.engine import get_engine

#: The largest grid (symbols × dates) the console starts; ``finagent backtest`` takes up to
#: ``apps.backtest.MAX_GRID``. 500 analyses are minutes of two workers, not hours.
MAX_CONSOLE_GRID: Final = 500
#: Items of a backtest its page lists (the counts cover all of them).
ITEMS_SHOWN: Final = 200
#: Recommendations one "score now" looks at (oldest first), as the beat task's batch.
SCORE_LIMIT: Final = 5000
_FLAG_RE: Final = re.compile(r"--(every|from|to|type|name)\b")


def default_name(*, tenant: str, symbols: str, start: str, end: str, every: str, analysis_type: str) -> str:
    """``bt-<10 hex>`` from the tenant and the grid: the same form resumes the same backtest,
    and two tenants asking for the same grid get two backtests (a name is global)."""
    key = "|".join((tenant, symbols.upper().replace(" ", ""), start, end, every.lower(), analysis_type))
    return f"bt-{hashlib.sha256(key.encode()).hexdigest()[:10]}"


def _owned_backtest(engine: Any, name: str, principal: Principal) -> dict[str, Any] | None:
    row = backtest_repo.get_backtest(engine=engine, name=name)
    if row is None or not backtest_repo.backtest_has_tenant(
        engine=engine, name=name, tenant=principal.tenant
    ):
        return None
    return row


def _running_backtest(engine: Any, principal: Principal) -> tuple[str, dict[str, int]] | None:
    """The tenant's backtest that still has analyses queued or running, if any."""
    for row in backtest_repo.list_backtests(engine=engine):
        counts = backtest_repo.progress_counts(engine=engine, backtest_name=row["name"])
        settled = ("done", "failed", "cancelled", "refused")
        if any(
            n for state, n in counts.items() if state not in settled
        ) and backtest_repo.backtest_has_tenant(engine=engine, name=row["name"], tenant=principal.tenant):
            return row["name"], counts
    return None


@router.post("/backtests")
def start_backtest_form(
    request: Request,
    auth: SignedIn,
    csrf: Annotated[str, Form(max_length=200)] = "",
    name: Annotated[str, Form(max_length=200)] = "",
    symbols: Annotated[str, Form(max_length=2000)] = "",
    start: Annotated[str, Form(max_length=40)] = "",
    end: Annotated[str, Form(max_length=40)] = "",
    every: Annotated[str, Form(max_length=40)] = "5d",
    analysis_type: Annotated[str, Form(max_length=40)] = DEFAULT_ANALYSIS_TYPE,
) -> Response:
    """Start (or resume) a backtest of the tenant from the scorecard page's form, as ``finagent
    backtest`` does (``apps.backtest.start_backtest``), and go to its page; the form again
    with the reasons when refused (403 without ``analyze``, 422 invalid grid or too large, 409
    a name taken or another backtest of the tenant still running)."""
    from apps import backtest  # lazy, as the CLI: pandas and the providers

    principal, session = auth
    check_csrf(session, csrf)
    settings = app_settings(request)
    form = {"name": name, "symbols": symbols, "start": start, "end": end, "every": every,
            "analysis_type": analysis_type}  # fmt: skip
    errors: list[str] = []
    status = 422
    tickers = [s for s in re.split(r"[\s,;]+", symbols.strip()) if s]
    try:
        require_scope(principal, "analyze")
    except AuthError as exc:
        errors, status = [str(exc)], exc.status_code
    first = last = None
    if not errors:
        try:
            first, last = date.fromisoformat(start.strip()), date.fromisoformat(end.strip())
        except ValueError:
            errors.append("from and to: dates as YYYY-MM-DD")
    if not errors and not tickers:
        errors.append("symbols: at least one ticker")
    if not errors and analysis_type not in backtest_types():
        errors.append(f"type {analysis_type[:40]!r}: one of {', '.join(backtest_types())}")
    chosen = name.strip() or default_name(
        tenant=principal.tenant, symbols=",".join(tickers), start=start.strip(), end=end.strip(),
        every=every.strip(), analysis_type=analysis_type,
    )  # fmt: skip
    engine = get_engine(settings.service.effective_database_url)
    if not errors and first is not None and last is not None:
        try:
            size = len(set(tickers)) * len(
                backtest.grid_dates(start=first, end=last, every=backtest.parse_every(every))
            )
            if size > MAX_CONSOLE_GRID:
                errors.append(
                    f"the grid has {size} points; the console starts at most {MAX_CONSOLE_GRID} "
                    "(fewer symbols, a shorter span or a longer step; `finagent backtest` takes more)"
                )
        except backtest.BacktestError as exc:
            errors.append(_FLAG_RE.sub(r"\1", str(exc)))
    if not errors:
        existing = backtest_repo.get_backtest(engine=engine, name=chosen)
        if existing is not None and _owned_backtest(engine, chosen, principal) is None:
            errors, status = [f"the name {chosen!r} is taken; choose another"], 409
    if not errors:
        running = _running_backtest(engine, principal)
        if running is not None and running[0] != chosen:
            errors, status = (
                [f"backtest {running[0]} is still running; start the next when it has finished"],
                409,
            )
    if not errors and first is not None and last is not None:
        try:
            started = backtest.start_backtest(
                name=chosen, symbols=tickers, start=first, end=last, every=every.strip(),
                analysis_type=analysis_type, settings=settings, tenant=principal.tenant,
            )  # fmt: skip
        except backtest.BacktestError as exc:
            errors = [_FLAG_RE.sub(r"\1", str(exc))]
            status = 409 if "exists with another grid" in str(exc) else 422
        else:
            if not started.analysis_ids:  # every point refused: nothing of the tenant's to show
                errors = [f"no grid point could be analysed: {r}" for r in list(started.refused.values())[:5]]
            else:
                return RedirectResponse(f"/console/backtests/{quote(chosen, safe='')}", status_code=303)
    return scorecard_page_response(
        request, principal, session, backtest_form=form, backtest_errors=errors, status_code=status
    )


def backtest_view(*, name: str, engine: Any, principal: Principal) -> dict[str, Any]:
    """``{progress: {total, done, failed, cancelled, refused, running, queued}, finished,
    points, shown_all}`` of backtest ``name`` for its page: ``points`` the first
    :data:`ITEMS_SHOWN` of the tenant's grid points with their analyses."""
    counts = backtest_repo.progress_counts(engine=engine, backtest_name=name)
    settled = ("done", "failed", "cancelled", "refused", "queued", "missing")
    progress = {
        "total": sum(counts.values()),
        "done": counts.get("done", 0),
        "failed": counts.get("failed", 0),
        "cancelled": counts.get("cancelled", 0),
        "refused": counts.get("refused", 0),
        "running": sum(n for state, n in counts.items() if state not in settled),
        "queued": counts.get("queued", 0) + counts.get("missing", 0),
    }
    rows = backtest_repo.items(
        engine=engine, backtest_name=name, tenant=principal.tenant, limit=ITEMS_SHOWN + 1
    )
    return {
        "progress": progress,
        "finished": progress["running"] + progress["queued"] == 0,
        "points": rows[:ITEMS_SHOWN],
        "shown_all": len(rows) <= ITEMS_SHOWN,
    }


@router.get("/backtests/{name}")
def backtest_page(name: str, request: Request, auth: SignedIn) -> HTMLResponse:
    """One backtest of the tenant: its grid, its progress (live while it runs), its grid points
    with links to their analyses, and once finished the way to its scorecard."""
    principal, session = auth
    engine = get_engine(app_settings(request).service.effective_database_url)
    row = _owned_backtest(engine, name, principal)
    if row is None:
        return _not_found(request, principal, session, "such backtest")
    view = backtest_view(name=name, engine=engine, principal=principal)
    return _page(
        request, "backtest.html", principal=principal, session=session, b=row, view=view,
        scorecard_query=urlencode({"backtest": name}),
    )  # fmt: skip


@router.get("/backtests/{name}/live.json")
def backtest_live(name: str, request: Request, auth: SignedIn) -> JSONResponse:
    """``{progress, finished}`` of the tenant's backtest (:func:`backtest_view` without the
    points); 404 for an unknown or another tenant's."""
    principal, _ = auth
    engine = get_engine(app_settings(request).service.effective_database_url)
    if _owned_backtest(engine, name, principal) is None:
        return JSONResponse(
            {"detail": "no such backtest"}, status_code=404, headers={"Cache-Control": "no-store"}
        )
    view = backtest_view(name=name, engine=engine, principal=principal)
    return JSONResponse(
        {"progress": view["progress"], "finished": view["finished"]}, headers={"Cache-Control": "no-store"}
    )


@router.post("/scorecard/score")
def score_now(
    request: Request,
    auth: SignedIn,
    csrf: Annotated[str, Form(max_length=200)] = "",
    backtest: Annotated[str, Form(max_length=200)] = "",
    since: Annotated[str, Form(max_length=40)] = "",
) -> Response:
    """Score the matured horizons of the selection's recommendations now, as ``finagent
    scorecard`` does before it prints (``apps.scorecard.score_pending``: idempotent, rows
    keyed by recommendation and horizon; at most :data:`SCORE_LIMIT` recommendations, oldest
    first; the tenant's only), then show the scorecard with what was scored. 404 for another
    tenant's backtest, 422 for a bad date. Scoring reads prices only; it needs the ``read``
    scope, as the page."""
    from apps import scorecard  # lazy: scipy and pandas

    principal, session = auth
    check_csrf(session, csrf)
    settings = app_settings(request)
    engine = get_engine(settings.service.effective_database_url)
    if backtest and _owned_backtest(engine, backtest, principal) is None:
        return _not_found(request, principal, session, "such backtest")
    day = None
    if since:
        try:
            day = date.fromisoformat(since)
        except ValueError:
            return scorecard_page_response(
                request, principal, session, status_code=422,
                score_errors=[f"since {since[:30]!r}: a date as YYYY-MM-DD"],
            )  # fmt: skip
    run = scorecard.score_pending(
        settings=settings,
        backtest_name=backtest or None,
        since=day,
        limit=SCORE_LIMIT,
        tenant=principal.tenant,
    )
    query = {"backtest": backtest, "since": since, "scored": str(run.written), "open": str(run.pending)}
    return RedirectResponse(
        "/console/scorecard?" + urlencode({k: v for k, v in query.items() if v}), status_code=303
    )
