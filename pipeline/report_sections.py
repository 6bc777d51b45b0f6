"""The report's sections of research and analysis facts, in Markdown: the data clock line, the
quote, the indicators, the chart levels, the fundamental, sentiment, social and learned views,
the earnings calendar, the rationale, risk flags and stop, the errors and the sources table; and
how their numbers print (prices to the cent, fractions as percentages, counts whole). Each section
cites the ``tool_call_id``s it came from. Part of the report (``pipeline.report``)."""

from __future__ import annotations

from typing import Any

from core import display
from core.display import fundamental_text, usd
from core.parts import AnalysisResult, ChartLevels, ResearchBundle
from core.state import FinancialAgentState
from pipeline.report_format import fmt as _fmt
from pipeline.report_format import refs as _refs

INDICATOR_LABELS: dict[str, str] = {
    "rsi_14": "RSI(14)",
    "macd": "MACD(12,26,9) line",
    "macd_signal": "MACD signal",
    "macd_hist": "MACD histogram",
    "bb_upper": "Bollinger(20,2) upper",
    "bb_middle": "Bollinger(20,2) middle",
    "bb_lower": "Bollinger(20,2) lower",
    "sma_50": "SMA(50)",
    "sma_200": "SMA(200)",
    "ema_21": "EMA(21)",
    "atr_14": "ATR(14)",
    "adx_14": "ADX(14)",
    "obv": "OBV",
    "hv_20": "HV(20), annualised",
}


#: How each quote field prints (the JSON keeps the raw numbers: prices in USD, change_percent a
#: fraction, volume in shares): one definition in ``core.display``, shared with the rationale the
#: scorer writes, so table and prose agree (the indicators likewise, ``display.indicator_text``).
QUOTE_FORMAT = display.QUOTE_FORMAT


def _by_ratio(levels: dict[str, Any]) -> list[tuple[str, Any]]:
    """Fibonacci ``{"23.6%": price, ...}`` items in ascending ratio: the order is the labels'
    own, not the dict's (a result read back from PostgreSQL JSONB has its keys reordered, and
    ``finagent replay`` must print the same report). Labels that are not percentages go last."""

    def ratio(label: str) -> float:
        try:
            return float(label.rstrip("%"))
        except ValueError:
            return float("inf")

    return sorted(levels.items(), key=lambda item: (ratio(item[0]), item[0]))


def clock_line(clock: dict[str, Any], as_of: str | None) -> str:
    """The header line saying how old the data is (``agents.data.market.clock``), e.g.
    ``Data ends 2013-03-01 (embedded); analysed as of 2012-06-29.``"""
    if clock.get("basis") == "data_end":
        head = f"Data ends {clock.get('day')} ({clock.get('source')})"
    elif clock.get("basis") == "live":
        head = f"Live data of {clock.get('day')} ({clock.get('source')})"
    else:
        head = f"Data through the last completed XNYS session {clock.get('day')} ({clock.get('source')})"
    return f"{head}; analysed as of {as_of}."


#: Fundamentals shown with their values in the report (the view adds observations on top).
FUNDAMENTAL_LABELS: dict[str, str] = {
    "pe_ratio": "P/E (trailing)",
    "eps_actual": "EPS, trailing four quarters (USD/share)",
    "eps_growth_yoy": "EPS growth, year over year",
    "eps_surprise_mean_4q": "EPS surprise, mean of four quarters",
    "market_cap": "market cap (USD)",
}


def fundamental_values(stock: ResearchBundle | None) -> list[str]:
    """The headline fundamentals of the research stage's ``get_fundamentals`` entry, each with
    its source (``field_sources``), under the call's ``tool_call_id``, printed as
    ``core.display.fundamental_text`` prints them: growth and surprise in %, EPS to the cent, the
    P/E to two decimals, market cap whole."""
    entry = stock.fundamentals if stock else None
    if not entry:
        return []
    sources = entry.get("field_sources") or {}
    lines = ["| field | value | source |", "|---|---|---|"]
    for key, label in FUNDAMENTAL_LABELS.items():
        value = entry.get(key)
        if value is None:
            reason = (entry.get("null_reasons") or {}).get(key)
            if reason:
                lines.append(f"| {label} | n/a | {reason} |")
            continue
        shown = fundamental_text(key, value)  # growth and surprise signed %, EPS to the cent, P/E 2 decimals
        lines.append(f"| {label} | {shown} | {sources.get(key, '')} |")
    trailing = entry.get("trailing_eps") or {}
    if trailing.get("split_factor"):
        price = trailing.get("price") or {}
        lines += [
            "",
            f"Trailing EPS = the last four reported quarters of the earnings calendar "
            f"({trailing.get('eps_ttm_calendar_basis')} USD on 2025 shares) × {trailing.get('split_factor')} "
            f"({trailing.get('split_basis')}), on the share basis of the close "
            f"{usd(price.get('close'))} of {price.get('date')}.",
        ]
    return [*lines, ""]


def earnings_json(stock: ResearchBundle | None) -> dict[str, Any] | None:
    """The research stage's earnings-calendar entry with its citation, or None."""
    if stock is None or not stock.earnings or not stock.earnings_ref:
        return None
    return {**stock.earnings, "source_refs": [stock.earnings_ref]}


def earnings_markdown(earnings: dict[str, Any] | None) -> list[str]:
    """The next earnings report (within 30 days) and the last reported quarters, cited; EPS
    as the calendar gives it (USD/share, split-adjusted to 2025 share counts), surprise in %."""
    if not earnings:
        return []
    when = {
        "before_open": "before the open",
        "after_close": "after the close",
        "during_market": "during the session",
        "unknown": "time not recorded",
    }
    lines = [f"## Earnings {_refs(earnings.get('source_refs'))}", ""]
    if earnings.get("alias_note"):
        lines += [f"Calendar rows of {earnings.get('calendar_symbol')}: {earnings['alias_note']}.", ""]
    nxt = earnings.get("next")
    if nxt:
        estimate = (
            f"; EPS estimate {_fmt(nxt['eps_estimate'])}" if nxt.get("eps_estimate") is not None else ""
        )
        lines.append(
            f"Next report: {nxt['date']} ({when.get(nxt['time_of_day'], nxt['time_of_day'])}), "
            f"in {nxt['days_until']} days{estimate}."
        )
    else:
        lines.append(f"Next report: none shown: {earnings.get('next_null_reason')}.")
    recent = earnings.get("recent") or []
    if recent:
        lines += ["", "| report | time | EPS estimate | EPS actual | surprise |", "|---|---|---|---|---|"]
        for row in recent:
            surprise = row.get("surprise")
            shown = display.signed_percent(surprise) if isinstance(surprise, int | float) else "n/a"
            lines.append(
                f"| {row['date']} | {when.get(row['time_of_day'], row['time_of_day'])} "
                f"| {usd(row.get('eps_estimate'))} | {usd(row.get('eps_actual'))} | {shown} |"
            )
    lines += [
        "",
        "EPS in USD per share as the calendar (HistoricalEarningsData) records it: mostly split-adjusted "
        "to 2025 share counts, so not comparable with the as-of price.",
        "",
    ]
    return lines


def views_markdown(views: dict[str, Any], *, values: list[str] | None = None) -> list[str]:
    """The fundamental, news-sentiment and social-sentiment views (``agents.analysts.views``,
    ``agents.analysts.social``) as Markdown, each value cited;
    ``values`` (:func:`fundamental_values`) go under the Fundamentals heading."""
    lines: list[str] = []
    fundamental = views.get("fundamental")
    if fundamental:
        lines += [f"## Fundamentals {_refs(fundamental.get('source_refs'))}", ""]
        lines += values or []
        lines.append(
            f"Outlook: **{fundamental.get('outlook')}** (deterministic rules, `agents/analysts/views.py`)."
        )
        for obs in fundamental.get("observations") or []:
            lines.append(f"- {obs['field']} {fundamental_text(obs['field'], obs['value'])}: {obs['text']}")
        if fundamental.get("missing"):
            lines.append(f"- not available: {', '.join(fundamental['missing'])}")
        lines.append("")
    sentiment = views.get("sentiment")
    if sentiment:
        lines += [f"## News sentiment {_refs(sentiment.get('source_refs'))}", ""]
        mean = sentiment.get("mean_sentiment")
        lines.append(
            f"**{sentiment.get('label')}**: {sentiment.get('count')} headlines"
            + (f", mean VADER sentiment {_fmt(mean)}" if mean is not None else "")
            + f". {sentiment.get('note') or ''}"
        )
        for item in sentiment.get("top") or []:
            lines.append(
                f"- {item.get('published_at')}: {item.get('headline')} "
                f"(sentiment {_fmt(item.get('sentiment'))})"
            )
        lines.append("")
    social = views.get("social")
    if social:
        lines += [f"## Social sentiment {_refs(social.get('source_refs'))}", ""]
        score = social.get("score")
        lines.append(
            f"**{social.get('label')}**: {social.get('scored')} posts scored"
            + (f", reach-weighted sentiment {_fmt(score)}" if score is not None else "")
            + f" (weight in the composite score: {_fmt(social.get('weight_in_composite', 0.0))}). "
            + f"{social.get('note') or ''}"
        )
        for item in social.get("top") or []:
            lines.append(
                f"- {item.get('created_at')}: {item.get('text')} "
                f"(sentiment {_fmt(item.get('sentiment'))}, weight {_fmt(item.get('weight'))}, "
                f"{item.get('count')} copies)"
            )
        lines.append("")
    learned = views.get("learned")
    if learned:
        lines += [f"## Learned analyst {_refs(learned.get('source_refs'))}", ""]
        lines.append(
            f"**{learned.get('label')}**: p(next session up) {_fmt(learned.get('p_up'))}, score "
            f"{_fmt(learned.get('score'))}, model `{learned.get('version')}` (weight in the composite "
            f"score: {_fmt(learned.get('weight_in_composite', 0.0))}). {learned.get('note') or ''}"
        )
        features = learned.get("features") or {}
        if features:
            lines.append("- features: " + ", ".join(f"{k} {_fmt(v)}" for k, v in features.items()))
        lines.append("")
    return lines


def chart_markdown(chart: ChartLevels | None) -> list[str]:
    """Support/resistance zones and Fibonacci levels of the analysis stage
    (docs/design.md, "Chart tools"), each section citing its tool call; prices USD as the tools
    returned them."""
    lines: list[str] = []
    if chart is None:
        return lines
    levels = chart.support_resistance
    if levels:
        lines += [f"## Support and resistance {_refs([chart.support_resistance_ref or ''])}", ""]
        for side in ("support", "resistance"):
            zones = levels.get(side) or []
            if zones:
                shown = ", ".join(
                    (
                        f"{usd(z['low'])}–{usd(z['high'])}"
                        if "low" in z and z["low"] != z["high"]
                        else usd(z["price"])
                    )
                    + f" ({z['strength']}, {z['touches']} {'touch' if z['touches'] == 1 else 'touches'}"
                    + (f"; {', '.join(z['sources'])}" if z.get("sources") else "")
                    + ")"
                    for z in zones
                )
                lines.append(f"- {side}: {shown}")
        window = levels.get("window")
        if window:
            lines += [
                "",
                f"Zones of one window: {window['start']}..{window['end']} ({window['bars']} bars"
                + (f", period {window['period']}" if window.get("period") else "")
                + "); a support zone's low caps a put's strike.",
            ]
        lines.append("")
    fib = chart.fib
    if fib and fib.get("levels"):
        lines += [f"## Fibonacci retracement {_refs([chart.fib_ref or ''])}", ""]
        low = f"{usd(fib.get('swing_low'))} ({fib.get('swing_low_date')})"
        high = f"{usd(fib.get('swing_high'))} ({fib.get('swing_high_date')})"
        # a swing runs from its first extreme to its last: down from the high, up from the low
        start, end = (high, low) if fib.get("direction") == "down" else (low, high)
        lines.append(f"Swing {fib.get('direction')} from {start} to {end}:")
        lines.append("")
        lines.append(" | ".join(f"{name} {usd(price)}" for name, price in _by_ratio(fib["levels"])))
        lines.append("")
    return lines


#: The quote's fields in the order the report prints them.
QUOTE_FIELDS = (
    "date",
    "current_price",
    "previous_close",
    "change",
    "change_percent",
    "volume",
    "52w_high",
    "52w_low",
    "market_cap",
    "pe_ratio",
)


def quote_markdown(quote: dict[str, Any] | None, *, quote_ref: str) -> list[str]:
    """The "Quote" section: the ``get_stock_data`` fields (:data:`QUOTE_FIELDS`, printed by
    :data:`QUOTE_FORMAT`), a missing one with its reason, a field from another source with its
    source, cited ``quote_ref``; empty without a quote."""
    if not quote:
        return []
    lines = [f"## Quote {_refs([quote_ref])}", "", "| field | value |", "|---|---|"]
    for key in QUOTE_FIELDS:
        shown = QUOTE_FORMAT.get(key, _fmt)(quote.get(key))
        if quote.get(key) is None and key in (quote.get("null_reasons") or {}):
            shown = f"n/a ({quote['null_reasons'][key]})"
        elif key in (quote.get("field_sources") or {}):
            shown += f" ({quote['field_sources'][key]})"
        lines.append(f"| {key} | {shown} |")
    return [*lines, "", f"Source: {quote.get('source')}", ""]


def indicators_markdown(
    indicators: dict[str, Any], *, analysis: AnalysisResult | None, stock: ResearchBundle | None
) -> list[str]:
    """The "Indicators" section: each of :data:`INDICATOR_LABELS` with its value from
    ``indicators`` (the JSON report's, as of ``as_of``), citing the ``technical_indicators`` call
    and the history it read; empty when the analysis computed none."""
    if analysis is None or not analysis.technical:
        return []
    technical = analysis.technical
    history_ref = (stock.history_ref if stock else None) or ""
    lines = [
        f"## Indicators {_refs([analysis.technical_ref or '', history_ref])}",
        "",
        "Computed with pandas-ta on split- and dividend-adjusted daily bars "
        f"({technical.get('bars_used')} bars to {technical.get('date')}).",
        "",
        "| indicator | value |",
        "|---|---|",
    ]
    for key, label in INDICATOR_LABELS.items():
        lines.append(f"| {label} | {display.indicator_text(key, indicators.get(key))} |")
    return [*lines, ""]


def signal_markdown(data: dict[str, Any]) -> list[str]:
    """The recommendation's "Rationale", "Risk flags" and "Risk per share" sections from the JSON
    report ``data``, each item cited; each section empty when it has nothing."""
    lines: list[str] = []
    if data["rationale"]:
        lines += ["## Rationale", ""]
        lines += [f"- {item['text']} {_refs(item.get('source_refs'))}" for item in data["rationale"]]
        lines.append("")
    if data["risk_flags"]:
        lines += ["## Risk flags", ""]
        lines += [f"- **{f['flag']}**: {f['text']} {_refs(f.get('source_refs'))}" for f in data["risk_flags"]]
        lines.append("")
    stop, risk = data["stop_loss"], data["risk_per_share"]
    if stop:
        lines += ["## Risk per share", ""]
        lines.append(f"- Stop ({stop['rule']}): {usd(stop['value'])} {_refs(stop['source_refs'])}")
        if risk:
            lines.append(
                f"- Risk per share: {display.percent(risk['fraction'])} of the close "
                f"{_refs(risk['source_refs'])}"
            )
        lines.append("")
    return lines


def sources_markdown(state: FinancialAgentState) -> list[str]:
    """The "Sources" table: every tool call of the analysis (``state.tool_history``) with its
    tool, stage, pass, status and attempts."""
    lines = [
        "## Sources",
        "",
        "| tool_call_id | tool | stage | pass | status | attempts |",
        "|---|---|---|---|---|---|",
    ]
    for entry in state.tool_history:
        lines.append(
            f"| `{entry.tool_call_id}` | {entry.tool} | {entry.stage} | {entry.iteration + 1} "
            f"| {entry.status} | {entry.attempts} |"
        )
    return lines
