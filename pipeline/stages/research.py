"""Research stage (the first of a pass): fetch the quote and the price history through tools."""

from __future__ import annotations

from datetime import date
from typing import Any, Final

from agents.analysts.social import social_summary
from agents.analysts.views import fundamental_summary, sentiment_summary
from agents.data.fundamentals.earnings import CalendarUnavailableError, default_calendar
from agents.data.fundamentals.offline import SEED_FIELDS
from agents.data.routing import news_configured
from agents.tools.fundamentals import fundamentals_cover
from agents.tools.registry import ToolContext
from core.parts import ResearchBundle, Views
from core.settings import Settings
from core.state import FinancialAgentState, StageError
from pipeline.stages.common import call_tool, note
from pipeline.steps.backoff import TransientStageError

#: Two years of daily bars (~504) cover SMA(200) plus indicator warm-up with margin.
HISTORY_PERIOD = "2y"
#: News window of the research stage: the week before the close that prices as_of
#: (``agents.tools.news.cutoff``: nothing published after that close).
NEWS_HOURS_BACK = 24 * 7
#: Social window of the research stage: the same week; the most posts read (the tool's maximum).
SOCIAL_HOURS_BACK = 24 * 7
SOCIAL_LIMIT = 200


def _optional_call(
    *, state: FinancialAgentState, ctx: ToolContext, name: str, arguments: dict[str, object]
) -> dict[str, object] | None:
    """A non-critical tool call: its ``data`` and id, or None on any error (recorded with
    ``critical=False``; a network error or rate limit does not retry or fail research)."""
    try:
        env = call_tool(state=state, ctx=ctx, name=name, arguments=arguments, critical=False)
    except TransientStageError as exc:
        state.errors.append(
            StageError(
                stage=ctx.stage,
                iteration=state.iteration,
                code=exc.code,
                message=str(exc),
                critical=False,
                permanent=False,
            )
        )
        return None
    return {"data": env.data, "ref": env.tool_call_id} if env.ok and env.data is not None else None


#: The default ``get_fundamentals`` fields plus the trailing-earnings extras and market cap the report shows.
RESEARCH_FUNDAMENTALS = (*SEED_FIELDS, "eps_growth_yoy", "eps_surprise_mean_4q", "market_cap")


def _calendar_covers(symbol: str, ctx: ToolContext) -> bool:
    """Whether the shipped earnings calendar has ``symbol`` (a symbol outside its 161 is not an
    error of the analysis: the EARNINGS_SOON flag is then reported as not evaluated)."""
    try:
        return default_calendar().covers(symbol, ctx.as_of)
    except CalendarUnavailableError:
        return True  # let the tool report NOT_CONFIGURED in the row and the errors


def data_sources(*, settings: Settings, symbol: str, as_of: date) -> dict[str, str | None]:
    """Which optional sources research reads for ``symbol`` at ``as_of`` under ``settings``:
    ``{"news": the news provider's name, "social": "files", "fundamentals": "covered"}``, each
    ``None`` when not configured (news: its folder, feeds or key; social: ``FINAGENT_DATA_SOCIAL_DIR``;
    fundamentals: a source that may cover the symbol). Kept in the state
    (``FinancialAgentState.data_sources``), so the worker's settings decide, not a replaying
    shell's."""
    return {
        "news": settings.data.news_provider if news_configured(settings) else None,
        "social": "files" if settings.data.social_dir is not None else None,
        "fundamentals": "covered"
        if fundamentals_cover(settings=settings, symbol=symbol, as_of=as_of)
        else None,
    }


def _note_views(state: FinancialAgentState, views: Views) -> None:
    """Note in ``state`` what research's ``views`` hold (fundamentals' date, headline count and
    sentiment, social posts, the learned analyst), one line for the symbol."""
    stock = state.stock_data
    assert stock is not None
    parts = []
    if views.fundamental is not None:
        assert stock.fundamentals is not None
        parts.append(f"fundamentals as of {stock.fundamentals.get('timestamp')}")
    if views.sentiment is not None:
        sent = views.sentiment
        parts.append(f"{sent['count']} headlines, sentiment {sent['label']}")
    if views.social is not None:
        parts.append(f"{views.social['scored']} social posts, {views.social['label']}")
    if views.learned is not None:
        parts.append(f"learned analyst {views.learned['label']} (p up {views.learned['p_up']})")
    note(state, stage="research", content=f"{state.stock_symbol}: " + "; ".join(parts) + ".")


def gather_context(
    *, state: FinancialAgentState, ctx: ToolContext, history: dict[str, Any] | None = None
) -> None:
    """Earnings calendar, fundamentals and news for ``state.stock_symbol`` into
    ``state.stock_data`` (non-critical).

    ``get_earnings_dates`` needs no configuration (the calendar ships in a dependency) and is
    called for every symbol the calendar covers; for any other symbol it is not called (no
    error), and the EARNINGS_SOON flag is reported as not evaluated. ``get_fundamentals`` is
    called when a source may cover the symbol (``FINAGENT_DATA_FUNDAMENTALS_DIR``, the yfinance data
    provider, or the earnings calendar's trailing EPS and P/E); ``get_news`` when the news
    provider is configured (its folder, feeds or key). Adds ``earnings`` (the symbol's
    calendar entry) and ``earnings_ref``, ``fundamentals`` (the symbol's entry),
    ``fundamentals_ref``, ``news_ref`` and ``views: {fundamental, sentiment, social}``
    (``agents.analysts.views``; zero headlines → NEUTRAL with a note; ``social`` from
    ``get_social_posts`` over the same week when ``FINAGENT_DATA_SOCIAL_DIR`` is set,
    ``agents.analysts.social``; ``learned`` from ``history`` (the ``get_history`` result) and
    those posts when the window has a post, :func:`learned_view`). Failures are recorded as
    non-critical errors and never fail research.
    """
    stock = state.stock_data
    assert stock is not None
    symbol = state.stock_symbol
    views = Views()
    if state.data_sources is None:  # the first pass decides; later passes and a replay reuse it
        state.data_sources = data_sources(settings=ctx.settings, symbol=symbol, as_of=ctx.as_of)
    sources = state.data_sources
    earnings = (
        _optional_call(
            state=state, ctx=ctx, name="get_earnings_dates", arguments={"symbols": [symbol], "recent": 4}
        )
        if _calendar_covers(symbol, ctx)
        else None
    )
    if earnings is not None:
        data = earnings["data"]
        assert isinstance(data, dict)
        entry = data["earnings"][0]
        if "error" not in entry:
            stock.earnings = entry
            stock.earnings_ref = str(earnings["ref"])
    if sources.get("fundamentals") is not None:
        got = _optional_call(
            state=state,
            ctx=ctx,
            name="get_fundamentals",
            arguments={"symbols": [symbol], "metrics": list(RESEARCH_FUNDAMENTALS)},
        )
        if got is not None:
            data = got["data"]
            assert isinstance(data, dict)
            entry = data["fundamentals"][0]
            if "error" not in entry:
                ref = str(got["ref"])
                stock.fundamentals = entry
                stock.fundamentals_ref = ref
                views.fundamental = fundamental_summary(entry, ref=ref)
    if sources.get("news") is not None:
        got = _optional_call(
            state=state,
            ctx=ctx,
            name="get_news",
            arguments={"symbols": [symbol], "hours_back": NEWS_HOURS_BACK},
        )
        if got is not None:
            data = got["data"]
            assert isinstance(data, dict)
            ref = str(got["ref"])
            stock.news_ref = ref
            views.sentiment = sentiment_summary(data, ref=ref)
    if sources.get("social") is not None:
        got = _optional_call(
            state=state,
            ctx=ctx,
            name="get_social_posts",
            arguments={"symbol": symbol, "hours_back": SOCIAL_HOURS_BACK, "limit": SOCIAL_LIMIT},
        )
        if got is not None:
            data = got["data"]
            assert isinstance(data, dict)
            views.social = {
                **social_summary(data, ref=str(got["ref"])),
                "weight_in_composite": ctx.settings.analysis.social_weight,
            }
            if history is not None and stock.history_ref and int(data.get("copies") or 0) > 0:
                views.learned = learned_view(
                    history=history,
                    posts=data,
                    refs=[stock.history_ref, str(got["ref"])],
                    weight=ctx.settings.analysis.learned_weight,
                )
    if views.model_fields_set:  # a view was made
        stock.views = views
        _note_views(state, views)


def learned_view(
    *, history: dict[str, Any], posts: dict[str, Any], refs: list[str], weight: float
) -> dict[str, Any] | None:
    """The learned analyst's view (``agents.analysts.learned.learned_summary``) from a
    ``get_history`` result (its last bar is the session before the predicted one) and a
    ``get_social_posts`` result, citing ``refs``; None with fewer bars than the features need
    or a broken artefact (the analysis goes on without it)."""
    from agents.analysts import learned
    from agents.data.market_calendar import close_at_or_before

    bars = history.get("history") or []
    if len(bars) < learned.MIN_BARS:
        return None
    try:
        model = learned.load()
        tail = bars[-learned.MIN_BARS :]
        values = learned.price_features(
            [float(b["adjusted_close"]) for b in tail], [float(b["volume"] or 0.0) for b in tail]
        )
        days = [date.fromisoformat(str(b["timestamp"])[:10]) for b in tail[-(learned.LAG + 1) :]]
        values |= learned.social_features(
            list(posts.get("posts") or []),
            bounds=[close_at_or_before(d) for d in days],
            tweets=int(posts.get("copies") or 0),
        )
        return learned.learned_summary(model=model, values=values, refs=refs, weight=weight)
    except (learned.LearnedModelError, ValueError, KeyError, TypeError):
        return None


def research(*, state: FinancialAgentState, ctx: ToolContext) -> FinancialAgentState:
    """Call ``get_stock_data`` and ``get_history`` for ``state.stock_symbol`` at ``ctx.as_of``.

    Sets ``state.stock_data`` (a :class:`~core.parts.ResearchBundle`) to ``{status:
    "success", quote, quote_ref, history_ref, history_check, bars, first_date, last_date}``
    (``history_check``: symbol, period, interval and digest of the bars, so later stages rebuild
    them from the provider instead of reloading the stored result:
    ``agents.tools.history.cited_history``; plus fundamentals/news/views when configured:
    :func:`gather_context`) or ``{status: "failed", error_codes}``. (The adapter then moves the status on:
    ``FinancialAgentState.advance``.)
    History is not requested when the quote failed, so one pass records at most one data error.

    Raises:
        TransientStageError: a tool hit a network error or rate limit (the task retries).
    """
    symbol = state.stock_symbol
    quote = call_tool(state=state, ctx=ctx, name="get_stock_data", arguments={"symbol": symbol})
    # A failed quote means the source has nothing for this symbol/date now: asking for history
    # too would only log the same failure twice (and count as a second critical error).
    history = (
        call_tool(
            state=state, ctx=ctx, name="get_history", arguments={"symbol": symbol, "period": HISTORY_PERIOD}
        )
        if quote.ok
        else None
    )
    if quote.ok and history and history.ok and quote.data and history.data and history.data["count"] > 0:
        from agents.tools.history import history_check  # pandas: not on the CLI's import path

        state.stock_data = ResearchBundle.model_validate(
            {
                "status": "success",
                "quote": quote.data,
                "quote_ref": quote.tool_call_id,
                "history_ref": history.tool_call_id,
                "history_check": history_check(history.data),
                "bars": history.data["count"],
                "first_date": history.data["first_date"],
                "last_date": history.data["last_date"],
            }
        )
        note(
            state,
            stage="research",
            content=f"{symbol}: quote {quote.data['date']} and {history.data['count']} daily bars fetched.",
        )
        gather_context(state=state, ctx=ctx, history=history.data)
    else:
        codes = [env.error.code.value for env in (quote, history) if env is not None and env.error]
        state.stock_data = ResearchBundle(status="failed", error_codes=codes)
        note(state, stage="research", content=f"{symbol}: research failed ({', '.join(codes) or 'no bars'}).")
    return state


def stored_research(row: dict[str, Any]) -> ResearchBundle | None:
    """The research bundle (``stock_data``) of a stored ``analyses`` row (``state`` parsed), or
    ``None`` when research has not run. Raises ``pydantic.ValidationError`` for a stored state
    whose ``stock_data`` is not a research bundle (a corrupted row)."""
    stock = (row.get("state") or {}).get("stock_data")
    return ResearchBundle.model_validate(stock) if stock else None


def chartable_history(row: dict[str, Any]) -> str | None:
    """The ``tool_call_id`` of the analysis's successful ``get_history`` call (what its chart
    draws), or ``None`` when research failed or has not run."""
    stock = stored_research(row)
    if stock is None or stock.status != "success" or not stock.history_ref:
        return None
    return stock.history_ref


#: The analysts this stage runs by its own code (:func:`gather_context`, :func:`learned_view`),
#: each a row of ``agents.analysts.table`` with stage ``research``: a row added there without
#: code here fails ``tests/pipeline/stages/test_stage_analysts.py`` instead of being silently
#: skipped.
RESEARCH_ANALYSTS: Final = frozenset({"fundamental", "sentiment", "social", "learned"})
