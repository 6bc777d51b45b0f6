"""The console's pages (``/console/...``): server-rendered Jinja2 templates over the same service
functions the JSON routes call, under the same tenant rules (another tenant's object is a 404
page, exactly like an unknown one). Reference: ``docs/console.md``.

Every page needs a signed-in session (else 303 to ``/console/login?next=…``) whose key has the
``read`` scope; a new analysis needs ``analyze``. Every ``POST`` checks the CSRF token
(:mod:`apps.api.console.session`). The routes are left out of the OpenAPI document.
"""

from __future__ import annotations

import re
import uuid
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Annotated, Any, Final
from urllib.parse import quote

from fastapi import APIRouter, Depends, Form, Header, Request, Response
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse
from fastapi.templating import Jinja2Templates
from markdown_it import MarkdownIt
from markupsafe import Markup, escape

from apps import watchlists
from apps.api.auth import AuthError, Principal, require_scope
from apps.api.console.data_span import suggested_span
from apps.api.console.option_plan_view import option_verdict
from apps.api.console.progress import stage_steps, timeline
from apps.api.console.put_spread_view import keep_units, price, put_spread_view
from apps.api.console.refusals import REFUSED, refusal
from apps.api.console.screen_view import screen_parts, screen_ref_of
from apps.api.console.session import (
    ConsoleSession,
    CsrfError,
    check_csrf,
    end_session,
    new_session,
    read_session,
    same_origin,
    session_principal,
    start_session,
    write_session,
)
from apps.api.deps import Meter, app_settings, require_key
from apps.api.edge import CheckedRoute
from apps.api.fields import ANALYSIS_ID_PATTERN
from apps.api.page_headers import PAGE_HEADERS
from apps.api.quotas import QuotaExceededError
from apps.api.routes import analyses as analyses_route
from apps.api.routes import analyze as analyze_route
from apps.api.schemas import AnalyzeRequest
from core.plans import ANALYSIS_TYPES, DEFAULT_ANALYSIS_TYPE
from core.settings import Settings
from core.stages import TERMINAL_STATUSES, Status
from db import backtest_repo, repo
from db.engine import get_engine
from pipeline.plans.option.report import across, totals

# every POST of the console (its forms, present and to come) must come from its own origin
router = APIRouter(
    prefix="/console", include_in_schema=False, route_class=CheckedRoute, dependencies=[Depends(same_origin)]
)
templates = Jinja2Templates(directory=str(Path(__file__).with_name("templates")))
# prices in the templates print as the report prints them (cents, thousands separators)
templates.env.filters["money"] = price
# a number never wraps away from its unit ("22.56 %", "428.60 USD") on a narrow screen
templates.env.filters["keep_units"] = keep_units
_markdown = MarkdownIt("commonmark", {"html": False}).enable("table")
#: Rows of one analyses page.
PAGE_SIZE: Final = 25
_ANALYSIS_ID_RE: Final = re.compile(ANALYSIS_ID_PATTERN)
_STATUSES: Final = tuple(s.value for s in Status)


class PageRefused(Exception):
    """A console page the session may not see (``status_code`` 403: a missing scope)."""

    def __init__(self, status_code: int, message: str) -> None:
        super().__init__(message)
        self.status_code = status_code


class LoginRequired(Exception):
    """No (valid) console session: answered 303 to the sign-in page with ``next``."""

    def __init__(self, next_path: str) -> None:
        super().__init__(next_path)
        self.next_path = next_path


def markdown_html(text: str | None, *, heading_offset: int = 2) -> Markup:
    """``text`` (CommonMark + tables) as HTML; raw HTML in the text is escaped, not passed on.
    Headings move ``heading_offset`` levels down (at most ``h6``), so an embedded document's
    ``# Title`` sits under the page's own ``h1``/``h2``. Each table is wrapped in a scroll box
    that the keyboard can focus (``tabindex="0"``), a region named after the heading above it,
    so a wide table scrolls inside its box, never the page (WCAG 2.1.1, axe
    ``scrollable-region-focusable``)."""
    tokens = _markdown.parse(text or "")
    heading, in_heading, tables = "", False, 0
    for token in tokens:
        if token.type in ("heading_open", "heading_close"):
            token.tag = f"h{min(6, int(token.tag[1]) + heading_offset)}"
            in_heading = token.type == "heading_open"
        elif token.type == "inline" and in_heading:
            heading = token.content
        elif token.type == "table_open":
            tables += 1
            token.meta = {"label": f"Table {tables}" + (f": {heading}" if heading else "")}
    return Markup(_markdown.renderer.render(tokens, _markdown.options, {}))  # noqa: S704 - raw HTML escaped


def _table_open(renderer: Any, tokens: Any, idx: int, options: Any, env: Any) -> str:
    label = str(escape((tokens[idx].meta or {}).get("label") or "Table"))
    return f'<div class="scroll" tabindex="0" role="region" aria-label="{label}">' + renderer.renderToken(
        tokens, idx, options, env
    )


def _table_close(renderer: Any, tokens: Any, idx: int, options: Any, env: Any) -> str:
    return renderer.renderToken(tokens, idx, options, env) + "</div>\n"


_markdown.add_render_rule("table_open", _table_open)
_markdown.add_render_rule("table_close", _table_close)


def _html(request: Request, template: str, context: dict[str, Any], status_code: int) -> HTMLResponse:
    response = templates.TemplateResponse(request, template, context, status_code=status_code)
    response.headers.update(PAGE_HEADERS)
    return response


def _page(
    request: Request,
    template: str,
    *,
    principal: Principal | None,
    session: ConsoleSession | None,
    status_code: int = 200,
    **context: Any,
) -> HTMLResponse:
    return _html(
        request,
        template,
        {"principal": principal, "csrf": session.csrf if session else "", **context},
        status_code,
    )


def _not_found(request: Request, principal: Principal, session: ConsoleSession, what: str) -> HTMLResponse:
    return _page(
        request, "error.html", principal=principal, session=session, status_code=404,
        title="Not found", message=f"No {what}.",
    )  # fmt: skip


def signed_in(request: Request) -> tuple[Principal, ConsoleSession]:
    """FastAPI dependency of every console page: the session's principal (with scope
    ``read``) and session. Raises :class:`LoginRequired` when there is none,
    :class:`PageRefused` (403) without the ``read`` scope. Keeps the principal in
    ``request.state`` for the audit log."""
    settings = app_settings(request)
    session = read_session(request, settings=settings)
    principal = session_principal(session, settings=settings)
    if principal is None or session is None:
        if request.method not in ("GET", "HEAD"):  # a form of a session that has ended
            raise CsrfError(
                "your console session has ended (signed out, expired, idle for too long, or its key "
                "was revoked or changed): sign in again"
            )
        target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        raise LoginRequired(target)
    request.state.principal = principal
    try:
        require_scope(principal, "read")
    except AuthError as exc:
        raise PageRefused(exc.status_code, str(exc)) from exc
    return principal, session


SignedIn = Annotated[tuple[Principal, ConsoleSession], Depends(signed_in)]


def _safe_next(value: str | None) -> str:
    """``value`` if it is a console path on this site, else the analyses page (no open redirect)."""
    if value and value.startswith("/console/") and not value.startswith("//") and "\\" not in value:
        return value
    return "/console/analyses"


# --- sign-in ---------------------------------------------------------------------------------


@router.get("/login")
def login_page(request: Request, next: str | None = None) -> Response:
    """The sign-in form; issues a signed-out session (its CSRF token) when there is none. A
    signed-in session goes straight to ``next``."""
    settings = app_settings(request)
    session = read_session(request, settings=settings)
    if session_principal(session, settings=settings) is not None:  # already signed in
        return RedirectResponse(_safe_next(next), status_code=303)
    session = session or new_session(None)
    response = _page(
        request, "login.html", principal=None, session=session, next=_safe_next(next), error=None
    )
    write_session(response, session, request=request, settings=settings)
    return response


@router.post("/login")
def login(
    request: Request,
    api_key: Annotated[str, Form(max_length=200)] = "",
    csrf: Annotated[str, Form(max_length=200)] = "",
    next: Annotated[str, Form(max_length=2000)] = "",
) -> Response:
    """Exchange an API key for a session cookie (the key's tenant and scopes); 401/403 page for
    a missing or bad key (counted against the address's failed-authentication allowance, as
    ``X-API-Key`` is; 429 once spent), 403 without the CSRF token."""
    settings = app_settings(request)
    session = read_session(request, settings=settings)
    check_csrf(session, csrf)
    try:
        principal = require_key(request, api_key.strip() or None)
        require_scope(principal, "read")
    except (AuthError, QuotaExceededError) as exc:
        status = exc.status_code if isinstance(exc, AuthError) else 429
        message = str(exc).replace("send it in the X-API-Key header", "paste it above")
        return _page(
            request, "login.html", principal=None, session=session, status_code=status,
            next=_safe_next(next), error=message,
        )  # fmt: skip
    fresh = start_session(principal=principal, settings=settings)
    response = RedirectResponse(_safe_next(next), status_code=303)
    write_session(response, fresh, request=request, settings=settings)
    return response


@router.post("/logout")
def logout(request: Request, csrf: Annotated[str, Form(max_length=200)] = "") -> Response:
    """End the session (its row is deleted, so every copy of its cookie is refused; a
    signed-out cookie with a new CSRF token) and go to the sign-in page."""
    settings = app_settings(request)
    session = read_session(request, settings=settings)
    if session is not None:  # an expired or missing session has nothing to end
        check_csrf(session, csrf)
        end_session(session, settings=settings)
    response = RedirectResponse("/console/login", status_code=303)
    write_session(response, new_session(None), request=request, settings=settings)
    return response


@router.get("")
@router.get("/")
def home() -> Response:
    """The console's start page is the analyses list."""
    return RedirectResponse("/console/analyses", status_code=303)


# --- analyses --------------------------------------------------------------------------------


def list_answer(headline: str | None) -> str | None:
    """The Answer column of the analyses list: the stored headline whole (the page wraps it).
    A report written while headlines were cut at 160 characters (they end in "…") loses its cut
    clause, back to the last ``"; "``, ``", "`` or ``": "``, so no number or phrase shows half written;
    ``None`` stays ``None``."""
    if not headline or not headline.endswith("…"):
        return headline
    cut = max(headline.rfind(sep) for sep in ("; ", ", ", ": "))
    return (headline[:cut] if cut > 0 else headline[:-1].rsplit(" ", 1)[0]) + " …"


@router.get("/analyses")
def analyses_page(
    request: Request,
    auth: SignedIn,
    symbol: str = "",
    status: str = "",
    type: str = "",
    offset: int = 0,
) -> HTMLResponse:
    """The tenant's analyses, newest first, filtered by symbol, status and type; the rows not
    finished update themselves (``console.js`` polls their status)."""
    principal, session = auth
    settings = app_settings(request)
    errors = []
    symbol = symbol.strip().upper()
    if symbol and not re.fullmatch(r"[A-Z0-9.\-^=]{1,20}", symbol):
        errors.append(f"symbol {symbol[:20]!r}: letters, digits, '.', '-' only")
    if status and status not in _STATUSES:
        errors.append(f"status {status[:30]!r} is not one of {', '.join(_STATUSES)}")
    if type and type not in ANALYSIS_TYPES:
        errors.append(f"type {type[:30]!r} is not one of {', '.join(ANALYSIS_TYPES)}")
    offset = max(0, min(offset, 10_000_000))
    rows: list[dict[str, Any]] = []
    if not errors:
        rows = repo.list_analyses(
            engine=get_engine(settings.service.effective_database_url),
            symbol=symbol or None,
            status=status or None,
            analysis_type=type or None,
            limit=PAGE_SIZE + 1,
            offset=offset,
            tenant=principal.tenant,
        )
    items = [
        (
            analyses_route.analysis_out(r, full=False, settings=settings),
            r["analysis_type"] or DEFAULT_ANALYSIS_TYPE,
            list_answer(r.get("headline")),
        )
        for r in rows[:PAGE_SIZE]
    ]
    query = {"symbol": symbol, "status": status, "type": type}
    base = "&".join(f"{k}={quote(v)}" for k, v in query.items() if v)
    return _page(
        request, "analyses.html", principal=principal, session=session,
        status_code=422 if errors else 200,
        items=items, errors=errors, query=query, statuses=_STATUSES, types=ANALYSIS_TYPES,
        terminal=sorted(s.value for s in TERMINAL_STATUSES), offset=offset, base=base,
        next_offset=offset + PAGE_SIZE if len(rows) > PAGE_SIZE else None,
        prev_offset=max(0, offset - PAGE_SIZE) if offset else None,
    )  # fmt: skip


@router.get("/analyses/{analysis_id}/status.json")
def analysis_status(analysis_id: str, request: Request, auth: SignedIn) -> JSONResponse:
    """The analysis's status as ``GET /analyses/{id}`` gives it without the report (what the
    pages poll); 404 for an unknown or another tenant's analysis."""
    principal, _ = auth
    settings = app_settings(request)
    row = _owned(analysis_id, principal, settings)
    if row is None:
        return JSONResponse({"detail": f"no analysis {analysis_id[:64]}"}, status_code=404)
    out = analyses_route.analysis_out(row, full=False, settings=settings)
    return JSONResponse(out.model_dump(mode="json"))


def _owned(analysis_id: str, principal: Principal, settings: Settings) -> dict[str, Any] | None:
    if not _ANALYSIS_ID_RE.fullmatch(analysis_id):
        return None
    return analyses_route.owned_analysis(analysis_id=analysis_id, principal=principal, settings=settings)


@router.get("/analyses/{analysis_id}/chart.png")
def analysis_chart(
    analysis_id: str,
    request: Request,
    auth: SignedIn,
    if_none_match: Annotated[str | None, Header(alias="If-None-Match")] = None,
) -> Response:
    """The chart of ``GET /analyses/{id}/chart.png`` (the same function), authorised by the
    session instead of ``X-API-Key``."""
    principal, _ = auth
    settings = app_settings(request)
    if _owned(analysis_id, principal, settings) is None:
        return JSONResponse({"detail": f"no analysis {analysis_id[:64]}"}, status_code=404)
    return analyses_route.get_chart(
        analysis_id=analysis_id,
        principal=principal,
        request=request,
        settings=settings,
        if_none_match=if_none_match,
    )


def options_view(
    csp: dict[str, Any],
    screen: dict[str, Any] | None,
    screen_ref: str | None,
    *,
    kind: str = "csp",
    symbol: str = "",
) -> dict[str, Any]:
    """The options section of a csp or covered-call analysis: ``csp`` is the report's ``csp``
    (or ``covered_call``) record, ``screen`` the stored result of the ``filter_options`` (or
    ``filter_calls``) tool call ``screen_ref`` it cites (``None`` when there is none); ``kind``
    the analysis type (``"csp"``: puts, ``"covered_call"``: calls), ``symbol`` the analysis's
    (for a record that names none).

    Returns ``{kind, title, right, status, rejected_by, verdict, verdict_refs (the Answer card:
    :func:`apps.api.console.option_plan_view.option_verdict`), reasons, chosen, contracts, rungs (the
    sized ladder of the plan), position (the noun of a ladder's contracts, ``"puts across 2
    strikes"``, ``None`` without a ladder), totals (the whole position's net premium and a put's
    collateral, :func:`pipeline.plans.option.report.totals`), alternatives, ladder,
    screen, slice, refs, screen_ref}``: ``right`` ``"put"`` or ``"call"``, ``chosen`` the
    suggested contract (``None`` when rejected),
    ``alternatives`` the record's (up to 3), ``ladder`` the best passing put of each expiry
    (the first of that expiry in the screen's ranking, by its ``score``; among the rows the
    screen returned, which are at most its ``limit``), by expiry; ``slice`` the rows of the chain the
    screen returned (passing puts, then the nearest misses with the rules they fail);
    ``screen`` the screen's header (quote date, underlying, screened and passing counts, rules,
    failed counts). Prices USD per share, premium and collateral USD per contract."""
    options = csp.get("options") or {}
    rungs = (csp.get("sizing") or {}).get("rungs") or []
    right = "call" if kind == "covered_call" else "put"
    position = f"{right}s {across(rungs, ('strike',))}" if len(rungs) > 1 else None
    parts = screen_parts(screen)
    return {
        "kind": kind,
        "title": "covered call" if kind == "covered_call" else "cash-secured put",
        "right": "call" if kind == "covered_call" else "put",
        "status": csp.get("status"),
        "rejected_by": csp.get("rejected_by"),
        **option_verdict(csp, kind=kind, symbol=symbol),
        "reasons": csp.get("reasons") or [],
        "chosen": csp.get("suggestion") if csp.get("status") == "suggested" else None,
        "contracts": (csp.get("sizing") or {}).get("contracts"),
        "rungs": rungs,
        "position": position,
        "totals": totals(csp) if csp.get("status") == "suggested" else [],
        "alternatives": csp.get("alternatives") or [],
        **parts,
        "refs": list(options.get("source_refs") or []),
        "screen_ref": screen_ref,
    }  # fmt: skip


#: The options plans the console shows: report key (= analysis type) → its screen tool.
OPTION_PLANS = {"csp": "filter_options", "covered_call": "filter_calls"}


def _options_section(report: dict[str, Any], engine: Any, analysis_id: str) -> dict[str, Any] | None:
    kind = next((k for k in OPTION_PLANS if report.get(k)), None)
    if kind is None:
        return None
    record = report[kind]
    screen_ref = screen_ref_of(record, OPTION_PLANS[kind])
    screen = (
        repo.get_tool_result(engine=engine, tool_call_id=screen_ref, analysis_id=analysis_id)
        if screen_ref
        else None
    )
    return options_view(record, screen, screen_ref, kind=kind, symbol=str(report.get("symbol") or ""))


def _put_spread_section(report: dict[str, Any], engine: Any, analysis_id: str) -> dict[str, Any] | None:
    """The put-spread section's view of a ``put_spread`` analysis (``None`` for other types),
    with the stored result of the ``filter_options`` call its short puts came from."""
    record = report.get("put_spread")
    if not isinstance(record, dict):
        return None
    screen_ref = screen_ref_of(record, "filter_options")
    screen = (
        repo.get_tool_result(engine=engine, tool_call_id=screen_ref, analysis_id=analysis_id)
        if screen_ref
        else None
    )
    return put_spread_view(record, screen=screen, screen_ref=screen_ref)


@router.get("/analyses/{analysis_id}")
def analysis_page(analysis_id: str, request: Request, auth: SignedIn) -> HTMLResponse:
    """One analysis: the stage stepper, headline (signal, calibrated p), rationale with
    citations to the timeline's tool calls, chart, grounding, the report, and the timeline of
    tool and LLM calls. While it runs the page polls ``live.json`` (stepper and new timeline
    rows) and, when it finishes, fetches itself again and swaps its content in (no reload);
    without scripts it refreshes itself every few seconds."""
    principal, session = auth
    settings = app_settings(request)
    row = _owned(analysis_id, principal, settings)
    if row is None:
        return _not_found(request, principal, session, "such analysis")
    out = analyses_route.analysis_out(row, full=True, settings=settings)
    engine = get_engine(settings.service.effective_database_url)
    tools, llms = repo.call_log(engine=engine, analysis_id=analysis_id)
    events = timeline(tools, llms)
    report = out.report_json or {}
    return _page(
        request, "analysis.html", principal=principal, session=session,
        a=out, report=report, events=events, terminal=sorted(s.value for s in TERMINAL_STATUSES),
        finished=out.status in TERMINAL_STATUSES, steps=stage_steps(row, now=datetime.now(UTC)),
        cited={e["id"] for e in events if e["anchor"]},
        report_html=markdown_html(out.report_markdown), options=_options_section(report, engine, analysis_id),
        spread_plan=_put_spread_section(report, engine, analysis_id),
    )  # fmt: skip


@router.get("/new")
def new_analysis_page(request: Request, auth: SignedIn) -> HTMLResponse:
    """The new-analysis form; its hidden idempotency key makes a resubmitted form (a double
    click, a reload) return the same analysis."""
    principal, session = auth
    return _page(
        request, "new.html", principal=principal, session=session, span=_data_span(request),
        types=ANALYSIS_TYPES, form={}, errors=[], idempotency_key=str(uuid.uuid4()),
    )  # fmt: skip


def _data_span(request: Request) -> Any:
    """The configured data's tickers and span the form suggests from (cached per process)."""
    return suggested_span(app_settings(request))


@router.post("/analyses")
def submit_analysis(
    request: Request,
    auth: SignedIn,
    csrf: Annotated[str, Form(max_length=200)] = "",
    symbol: Annotated[str, Form(max_length=200)] = "",
    query: Annotated[str, Form(max_length=2000)] = "",
    as_of: Annotated[str, Form(max_length=100)] = "",
    analysis_type: Annotated[str, Form(max_length=100)] = "",
    cost_basis: Annotated[str, Form(max_length=100)] = "",
    idempotency_key: Annotated[str, Form(max_length=200)] = "",
) -> Response:
    """Start an analysis exactly as ``POST /analyze`` does (the same function: validation,
    quotas, idempotency, audit) and go to its page; the form again with the reason when it is
    refused (422 invalid, 403 scope, 409 key reused with other fields, 429 quota, 503)."""
    principal, session = auth
    check_csrf(session, csrf)
    settings = app_settings(request)
    form = {"symbol": symbol, "query": query, "as_of": as_of, "analysis_type": analysis_type}
    fields: dict[str, Any] = {k: v.strip() for k, v in form.items() if v.strip()}
    form["cost_basis"] = cost_basis
    if cost_basis.strip():  # a covered call's basis: the API's options.cost_basis validates it
        fields["options"] = {"cost_basis": cost_basis.strip()}
    key = idempotency_key if re.fullmatch(r"[!-~]{1,200}", idempotency_key) else str(uuid.uuid4())
    try:
        require_scope(principal, "analyze")
        body = AnalyzeRequest(**fields)
        accepted = analyze_route.analyze(
            body=body,
            principal=principal,
            request=request,
            response=Response(),
            settings=settings,
            meter=Meter(principal=principal, settings=settings),
            idempotency_key=key,
        )
    except REFUSED as exc:
        errors, status = refusal(exc)
    else:
        return RedirectResponse(f"/console/analyses/{accepted.analysis_id}", status_code=303)
    return _page(
        request, "new.html", principal=principal, session=session, status_code=status,
        types=ANALYSIS_TYPES, form=form, errors=errors, span=_data_span(request),
        # a refused request enqueued nothing: the corrected form is a new request
        idempotency_key=str(uuid.uuid4()),
    )  # fmt: skip


# --- watchlists, backtests, scorecard --------------------------------------------------------


@router.get("/watchlists/{name}")
def watchlist_page(name: str, request: Request, auth: SignedIn) -> HTMLResponse:
    """One watchlist with its runs, newest first; 404 page for an unknown or another tenant's."""
    principal, session = auth
    settings = app_settings(request)
    try:
        row = watchlists.get_watchlist(name=name, settings=settings, tenant=principal.tenant)
    except watchlists.WatchlistError:
        return _not_found(request, principal, session, "such watchlist")
    return watchlist_page_response(request, principal, session, row)


def watchlist_page_response(
    request: Request,
    principal: Principal,
    session: ConsoleSession,
    row: dict[str, Any],
    *,
    run_form: dict[str, str] | None = None,
    errors: list[str] | None = None,
    status_code: int = 200,
) -> HTMLResponse:
    """The page of the tenant's watchlist ``row`` with its runs (newest first), its "run now"
    form (with ``errors`` of a refused run, shown with ``status_code``), and its edit and
    delete links."""
    runs = watchlists.list_runs(
        name=row["name"], limit=50, settings=app_settings(request), tenant=principal.tenant
    )
    return _page(
        request, "watchlist.html", principal=principal, session=session, status_code=status_code,
        w=row, runs=runs, run_form=run_form or {}, errors=errors or [],
    )  # fmt: skip


def _scorecard_selection(
    request: Request, principal: Principal, backtest: str, since: str
) -> tuple[list[dict[str, Any]], date | None, list[str]]:
    """The tenant's backtests (with progress counts), the parsed ``since`` and the reasons the
    filters are refused (an unknown or another tenant's backtest is ``["404"]``)."""
    engine = get_engine(app_settings(request).service.effective_database_url)
    backtests = [
        {**b, "progress": backtest_repo.progress_counts(engine=engine, backtest_name=b["name"])}
        for b in backtest_repo.list_backtests(engine=engine)
        if backtest_repo.backtest_has_tenant(engine=engine, name=b["name"], tenant=principal.tenant)
    ]
    if backtest and backtest not in {b["name"] for b in backtests}:
        return backtests, None, ["404"]
    day = None
    if since:
        try:
            day = date.fromisoformat(since)
        except ValueError:
            return backtests, None, [f"since {since[:30]!r}: a date as YYYY-MM-DD"]
    return backtests, day, []


@router.get("/scorecard")
def scorecard_page(
    request: Request,
    auth: SignedIn,
    backtest: str = "",
    since: str = "",
    scored: int | None = None,
    open: int | None = None,
) -> HTMLResponse:
    """The tenant's backtests, the form that starts one, and the forward scorecard (what ``GET
    /scorecard?format=markdown`` answers: ``apps.scorecard.build_scorecard``) of one
    backtest and from a date on when chosen: a summary card per horizon
    (``apps.scorecard.summary``), its two plots once it holds scored recommendations, and
    the expert tables folded below. ``scored``/``open``: what a "score now" just did."""
    principal, session = auth
    return scorecard_page_response(
        request, principal, session, backtest=backtest, since=since,
        scored=(scored, open) if scored is not None and open is not None else None,
    )  # fmt: skip


def scorecard_page_response(
    request: Request,
    principal: Principal,
    session: ConsoleSession,
    *,
    backtest: str = "",
    since: str = "",
    scored: tuple[int, int] | None = None,
    backtest_form: dict[str, str] | None = None,
    backtest_errors: list[str] | None = None,
    score_errors: list[str] | None = None,
    status_code: int = 200,
) -> HTMLResponse:
    """The scorecard page of :func:`scorecard_page` for ``principal``'s tenant, with a refused
    backtest form (``backtest_form`` as typed, ``backtest_errors``) or refused scoring
    (``score_errors``) shown with ``status_code``; 404 page for another tenant's backtest."""
    settings = app_settings(request)
    backtests, day, errors = _scorecard_selection(request, principal, backtest, since)
    if errors == ["404"]:
        return _not_found(request, principal, session, "such backtest")
    card_html, plotted, cards, card, benchmark_text = None, False, [], None, ""
    risk_plot = Markup("")
    if not errors:
        # what GET /scorecard?format=markdown answers (its tenant checks are done above)
        from apps import scorecard  # lazy, as the route: scipy and pandas load on first use

        card = scorecard.build_scorecard(
            settings=settings, backtest_name=backtest or None, since=day, score_first=False,
            tenant=principal.tenant,
        )  # fmt: skip
        card_html = markdown_html(scorecard.markdown(card))
        from apps.scorecard_risk import risk_svg

        risk_plot = Markup(risk_svg(card.get("risk")))  # noqa: S704
        plotted = bool(card["strategies"])
        cards = scorecard.summary(card)
        benchmark_text = scorecard.benchmark_names(card.get("benchmark") or [])
    query = "&".join(f"{k}={quote(v)}" for k, v in (("backtest", backtest), ("since", since)) if v)
    return _page(
        request, "scorecard.html", principal=principal, session=session,
        status_code=422 if errors else status_code, errors=errors,
        backtests=backtests, chosen=backtest, since=since, card_html=card_html, card=card,
        cards=cards, plotted=plotted, plot_query=query, scored=scored, benchmark_text=benchmark_text,
        risk_plot=risk_plot,
        backtest_form=backtest_form or {"every": "5d", "analysis_type": DEFAULT_ANALYSIS_TYPE},
        backtest_errors=backtest_errors or [], score_errors=score_errors or [], types=_backtest_types(),
    )  # fmt: skip


def _backtest_types() -> tuple[str, ...]:
    from core.plans import backtest_types

    return tuple(backtest_types())


#: The plots of the scorecard page: ``apps.scorecard.write_plots``'s plot name by route name (each
#: request draws only its own plot).
SCORECARD_PLOTS: Final = {"calibration": "calibration", "cumulative-excess": "cumulative_excess"}


@router.get("/scorecard/{plot}.png")
def scorecard_plot(
    plot: str, request: Request, auth: SignedIn, backtest: str = "", since: str = ""
) -> Response:
    """One plot of the tenant's scorecard as a PNG, drawn server-side by the CLI's plotting
    code (``apps.scorecard.write_plots``, matplotlib): ``calibration`` (observed share
    outperforming against p(outperform) per horizon, with the bin counts) or
    ``cumulative-excess`` (compounded signed excess return of the pipeline and the baselines
    at the shortest horizon). The same selection as the page (``backtest``, ``since``); 404
    for another plot, another tenant's backtest, or a selection without scored
    recommendations; 422 for a bad ``since``."""
    import tempfile

    from apps import scorecard

    principal, _ = auth
    settings = app_settings(request)
    if plot not in SCORECARD_PLOTS:
        return JSONResponse({"detail": f"no plot {plot[:40]!r}"}, status_code=404)
    _, day, errors = _scorecard_selection(request, principal, backtest, since)
    if errors:
        code = 404 if errors == ["404"] else 422
        return JSONResponse({"detail": "no such backtest" if code == 404 else errors[0]}, status_code=code)
    with tempfile.TemporaryDirectory(prefix="finagent-plots-") as tmp:
        card = scorecard.build_scorecard(
            settings=settings, backtest_name=backtest or None, since=day, score_first=False,
            tenant=principal.tenant, plots_dir=Path(tmp), plots=[SCORECARD_PLOTS[plot]],
        )  # fmt: skip
        path = card["plots"].get(SCORECARD_PLOTS[plot])
        if not path:
            return JSONResponse({"detail": "no scored recommendations to plot"}, status_code=404)
        body = Path(path).read_bytes()
    return Response(body, media_type="image/png", headers={"Cache-Control": "no-store"})


def csrf_refused(request: Request, exc: Exception) -> HTMLResponse:
    """403 page for a ``POST`` without the session's CSRF token."""
    return _html(
        request,
        "error.html",
        {"principal": None, "csrf": "", "title": "Form refused", "message": str(exc)},
        403,
    )


def login_required(_: Request, exc: Exception) -> RedirectResponse:
    """303 to the sign-in page, coming back to the page asked for."""
    target = exc.next_path if isinstance(exc, LoginRequired) else "/console/analyses"
    return RedirectResponse(f"/console/login?next={quote(_safe_next(target), safe='')}", status_code=303)


def page_refused(request: Request, exc: Exception) -> HTMLResponse:
    """The HTML page of a :class:`PageRefused` (its status and message)."""
    status = exc.status_code if isinstance(exc, PageRefused) else 403
    return _html(
        request,
        "error.html",
        {"principal": None, "csrf": "", "title": "Not allowed", "message": str(exc)},
        status,
    )


__all__ = ["CsrfError", "LoginRequired", "PageRefused", "router"]
