"""The final report: Markdown for people and a JSON object for machines (``--json``).

Every number printed comes from a tool output and every section names the ``tool_call_id``s
it came from.
"""

from __future__ import annotations

from typing import Any

from core.parts import ChartLevels, Grounding, ResearchBundle
from core.state import FinancialAgentState, Status
from pipeline.plan_hooks import result_plans
from pipeline.report_analysts import analyst_views_json, analyst_views_markdown
from pipeline.report_format import fmt as _fmt
from pipeline.report_format import refs as _refs
from pipeline.report_risk import risk_headline, risk_json, risk_lead, risk_markdown, risk_missing

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

DISCLAIMER = "Generated from historical data by deterministic rules; not investment advice."
LLM_DISCLAIMER = (
    "Generated from historical data by LLM agents over logged tool outputs (numbers checked "
    "against them); not investment advice."
)


def _usd(value: Any) -> str:
    """A price in USD to the cent with thousands separators (``1234.5678`` → ``1,234.57``);
    ``n/a`` for None; a non-number as it is."""
    if value is None:
        return "n/a"
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    return f"{value:,.2f}"


def _percent(value: Any) -> str:
    """A fraction as a signed percentage to two decimals (``-0.0248`` → ``-2.48 %``)."""
    if value is None:
        return "n/a"
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    return f"{value * 100:+.2f} %"


def _decimal2(value: Any) -> str:
    """A plain number to two decimals with thousands separators (RSI, ADX, P/E)."""
    if value is None:
        return "n/a"
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    return f"{value:,.2f}"


def _whole(value: Any) -> str:
    """A count or volume with thousands separators and no decimals (shares, OBV, USD market cap)."""
    if value is None:
        return "n/a"
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    return f"{value:,.0f}"


#: How each quote field prints (the JSON keeps the raw numbers: prices in USD, change_percent a
#: fraction, volume in shares): prices to the cent, the change as a percentage, counts whole.
QUOTE_FORMAT: dict[str, Any] = {
    "current_price": _usd,
    "previous_close": _usd,
    "change": _usd,
    "change_percent": _percent,
    "volume": _whole,
    "52w_high": _usd,
    "52w_low": _usd,
    "market_cap": _whole,
    "pe_ratio": _decimal2,
}
#: How each indicator prints: price levels and MACD (USD) to the cent, OBV (shares) whole, the
#: annualised HV(20) (a fraction) as a percentage, oscillators to two decimals.
INDICATOR_FORMAT: dict[str, Any] = {"obv": _whole, "hv_20": lambda v: _percent(v).lstrip("+")}


def _author_version(rec: Any) -> str | None:
    """The version of what authored the recommendation (``agents.analysts.versions``): the LLM prompts
    for an LLM synthesis, the scorer's rules otherwise; ``None`` without a recommendation."""
    if rec is None:
        return None
    from agents.analysts.versions import prompt_version, rules_version  # lazy: the LLM modules

    author = rec.author.kind if rec.author else "deterministic"
    return prompt_version() if author == "llm" else rules_version()


def _headline_p(rec: Any) -> float | None:
    """The calibrated p at the signal horizon, ``None`` without a calibrated recommendation."""
    if rec is None or not rec.probability:
        return None
    return float(rec.probability["horizons"][str(rec.probability["signal_horizon"])]["p"])


def probability_sentence(prob: dict[str, Any]) -> str:
    """The sentence that names the calibrated probability and its model, e.g. ``p(outperform SPY,
    20d) = 0.53, calibrated on 2,100 past signals of rules-…, 2013-07 .. 2015-05 (calibration-…);
    5d 0.51, 60d 0.55``; or the abstention and its reason. ``prob``:
    ``Recommendation.probability``. Raises ``KeyError`` for a malformed record."""
    h = prob["signal_horizon"]
    head = prob["horizons"][str(h)]
    bench, version = prob["benchmark"], prob["version"]
    if head["abstained"]:
        text = f"p(outperform {bench}, {h}d) = 0.50: abstained, {head['reason']} ({version})"
    else:
        text = (
            f"p(outperform {bench}, {h}d) = {head['p']:.2f}, calibrated on {head['rows']:,} past signals "
            f"of {prob['key']}, {head['first'][:7]} .. {head['last'][:7]} ({version})"
        )
    others = [
        f"{k}d " + ("abstained" if v["abstained"] else f"{v['p']:.2f}")
        for k, v in prob["horizons"].items()
        if k != str(h)
    ]
    return text + ("; " + ", ".join(others) if others else "")


def _share(value: float) -> str:
    """A fraction as a whole percentage without a sign: 0.487 → ``49``."""
    return f"{value * 100:.0f}"


def record_clause(record: dict[str, Any], *, calls: str = "calls") -> str:
    """The measured hit rate of a track record (``agents.quant.calibration``
    ``CalibrationModel.call_record``) in words, e.g. ``right 49 % [43, 55] of the time at 20
    sessions (1,193 calls, 2013-07..2015-11; 95 %, clustered by date, overlap-adjusted)``;
    ``calls`` names them. Raises ``KeyError`` for a malformed record."""
    interval = (
        f" [{_share(record['low'])}, {_share(record['high'])}]"
        if record.get("low") is not None and record.get("high") is not None
        else ""
    )
    how = record["interval"] if interval else "too few dates for an interval"
    return (
        f"right {_share(record['rate'])} %{interval} of the time at {record['horizon']} sessions "
        f"({record['calls']:,} {calls}, {record['first'][:7]}..{record['last'][:7]}; {how})"
    )


def direction(state: FinancialAgentState) -> dict[str, Any] | None:
    """The direction view in plain words, what the headline says about the stock: ``{signal,
    evidence, text, record}``. ``evidence`` is whether the calibrated p at the signal horizon
    cleared the evidence gate (``agents.quant.calibration``); without it ``text`` is "No
    evidence that any signal here predicts <symbol> against <benchmark>; …" with the author's
    measured hit rate (``record``: its directional calls at the signal horizon, outcomes up to
    2015-12-31, from the calibration artifact), never the raw confidence. ``None`` without a
    signal. Raises nothing."""
    rec = state.recommendation
    if rec is None:
        return None
    prob = rec.probability
    if not prob:
        # written before calibration: the author's signal is all there is, and it is no evidence
        return {
            "signal": rec.signal,
            "evidence": False,
            "text": "written before calibration: the author's raw signal, not evidence.",
            "record": None,
        }
    record = prob.get("record")
    if not prob["abstained"]:
        text = probability_sentence(prob) + "."
        return {"signal": rec.signal, "evidence": True, "text": text, "record": record}
    head = f"No evidence that any signal here predicts {state.stock_symbol} against {prob['benchmark']}"
    if record:
        tail = f"our directional calls were {record_clause(record)}."
    else:
        whose = "this prompt version's" if str(prob.get("key", "")).startswith("prompts-") else "these rules'"
        tail = f"{whose} calls have not been scored against outcomes yet."
    return {"signal": rec.signal, "evidence": False, "text": f"{head}; {tail}", "record": record}


def details_json(state: FinancialAgentState) -> dict[str, Any] | None:
    """The author's raw reading, kept out of the headline and the top level of the JSON:
    ``{raw_signal, score, confidence, key, record}``: the signal before calibration, the
    scorer's score in [-1, 1], the author's confidence in [0, 1] (a judgement, not a
    probability), the rule set or prompt version, and ``record``: the measured hit rate of that
    author's calls on the raw signal's side (``None`` for a HOLD or an unscored author).
    ``None`` without a recommendation."""
    rec = state.recommendation
    if rec is None:
        return None
    prob = rec.probability or {}
    return {
        "raw_signal": rec.raw_signal,
        "score": rec.score,
        "confidence": rec.confidence,
        "key": prob.get("key") or _author_version(rec),
        "record": prob.get("side_record"),
    }


def headline_text(state: FinancialAgentState) -> str | None:
    """One line for lists and digests: the plan's verdict for a plan with a result (a csp or
    covered call: ``Cash-secured put: sell 1 AAPL…``), else the risk forecast's 80 % range
    (:func:`pipeline.report_risk.risk_headline`, when there is a forecast) and the signal with
    ``no evidence`` or its calibrated p, e.g. ``80 % range in 20 sessions 499.37–629.87 (close
    560.99); HOLD: no evidence`` or ``BUY: p 0.56 (20d)``; ``None`` without either. No raw
    confidence. Raises nothing."""
    verdict = _plan_headline(state)
    if verdict:
        first = verdict.split(" (see ")[0].replace("**", "")
        return first if len(first) <= 160 else first[:159] + "…"
    view = direction(state)
    risk = risk_json(state)
    lead = f"{risk_headline(risk)}; " if risk else ""
    if view is None:
        return lead.rstrip("; ") or None
    if view["evidence"]:
        prob = state.recommendation.probability if state.recommendation else None
        p = _headline_p(state.recommendation)
        return f"{lead}{view['signal']}: p {p:.2f} ({(prob or {}).get('signal_horizon')}d)"
    return f"{lead}{view['signal']}: no evidence"


def stop_reason(state: FinancialAgentState) -> str | None:
    """Why a failed analysis ended, e.g. ``"2 critical errors"``; ``None`` for a done analysis or
    one still running.

    * Ended by ``should_continue`` (the iteration cap, ``≥ 2`` critical errors; or a
      permanent error, or no further work): its verdict. Read from the state, not the
      ``analyses.error`` column: ``end_of_pass`` appends the verdict to ``state.messages`` as
      ``{"name": "should_continue", "content": reason, "status": <the final status>}`` before
      the report is built. Only the LAST ``should_continue`` message counts: an earlier one (no
      ``status``) is the "re-running the chain" note that started this pass, which a failure in
      that pass must not report as its stop reason.
    * Failed otherwise (the chain's error callback, the attempt cap, the recovery sweep's
      ``STALLED``, a cancelled backtest item: ``pipeline.steps.close.fail_analysis`` appends
      the error last): ``"<code>: <message>"`` of the last error of the current pass, e.g.
      ``"STAGE_FAILED: finagent.analysis failed: ValueError: …"``; ``None`` when there is none.
    """
    if state.status is not Status.FAILED:
        return None
    for message in reversed(state.messages):
        if message.get("name") == "should_continue":
            reason = message.get("content")
            if message.get("status") == Status.FAILED.value and reason:
                return str(reason)
            break
    current = state.iteration_errors()
    if not current:
        return None
    return current[-1].reason()


def report_json(state: FinancialAgentState, *, grounding: Grounding | None = None) -> dict[str, Any]:
    """The machine-readable report (the ``--json`` object).

    Keys: analysis_id, symbol, as_of, status, stop_reason (:func:`stop_reason`: why a failed
    analysis was ended, else null), signal, headline (:func:`headline_text`: one line for lists),
    risk (:func:`pipeline.report_risk.risk_json`: the risk forecast per horizon with its backtest
    lines and the stop's probabilities, or null), direction (:func:`direction`: the direction
    view in plain words and the measured hit rate
    behind it), prompt_version (``agents.analysts.versions``: the prompts'
    version for an LLM-authored signal, the scorer rules' otherwise; null without a signal),
    p_outperform (the calibrated p(outperform the benchmark) at the signal horizon,
    ``agents.quant.calibration``; 0.5 when abstaining; null without a signal), probability_text
    (:func:`probability_sentence`), probability (``Recommendation.probability``: every horizon,
    the model's version and evidence, the author's track record), details (:func:`details_json`:
    the author's raw signal, score and confidence with the hit rate of such calls; not evidence,
    so not at the top level), rationale,
    risk_flags, stop_loss, risk_per_share, quote, indicators, views, earnings (the
    get_earnings_dates entry plus its ``source_refs``, or null), source_refs, iteration, errors
    (each ``StageError`` without its timestamp ``at``), tool_calls (count of logical calls),
    grounding, one key per plan with a result part (``core.plans``: the row's ``result_field``,
    its part's JSON for an analysis of that type, null otherwise), market_clock (the data source's
    "today", ``agents.data.market.clock``: ``{day, basis, source, note}``, or null),
    analyst_views (:func:`pipeline.report_analysts.analyst_views_json`: only when an analyst run
    from its row gave a view). ``indicators``
    uses the keys of
    ``INDICATOR_LABELS`` (values as of ``as_of``; null when not computable).
    """
    rec, stock = state.recommendation, state.stock_data
    technical = (state.analysis.technical if state.analysis else None) or {}
    return {
        "analysis_id": state.analysis_id,
        "symbol": state.stock_symbol,
        "as_of": state.as_of.isoformat() if state.as_of else None,
        "analysis_type": state.analysis_type or "composite",
        # the user's own words when the symbol was resolved from free text (absent for a bare
        # ticker, whose query is the generated "Analyze SYMBOL")
        **({"question": question} if (question := _question(state)) else {}),
        # why parse_query did not take the model's ticker (e.g. a model that always answers AAPL)
        **({"query_note": state.query_note} if state.query_note else {}),
        "status": state.status.value,
        "stop_reason": stop_reason(state),
        "signal": rec.signal if rec else None,
        "headline": headline_text(state),
        # what has evidence first: the risk forecast with its backtest lines (pipeline.report_risk)
        "risk": risk_json(state),
        "direction": direction(state),
        "prompt_version": _author_version(rec),
        "p_outperform": _headline_p(rec),
        "probability_text": probability_sentence(rec.probability) if rec and rec.probability else None,
        "probability": rec.probability if rec else None,
        # the author's raw signal, score and confidence: details, not evidence (direction)
        "details": details_json(state),
        "rationale": rec.rationale if rec else [],
        "risk_flags": rec.risk_flags if rec else [],
        "stop_loss": rec.stop_loss.model_dump(mode="json") if rec and rec.stop_loss else None,
        "views": stock.views.model_dump(mode="json") if stock and stock.views else {},
        "earnings": _earnings_json(stock),
        "risk_per_share": rec.risk_per_share.model_dump(mode="json") if rec and rec.risk_per_share else None,
        "quote": stock.quote if stock else None,
        "market_clock": (stock.quote or {}).get("market_clock") if stock else None,
        "indicators": {key: (technical.get("indicators") or {}).get(key) for key in INDICATOR_LABELS},
        "price_context": {
            key: technical.get(key)
            for key in ("date", "close", "high_52w", "low_52w", "pct_from_52w_high", "bars_used")
        },
        "source_refs": list(state.source_refs),
        "iteration": state.iteration,
        # without the wall-clock "at" (kept in the state): the report is a function of the
        # analysis's inputs, so a replay (apps.replay) reproduces it byte for byte
        "errors": [e.model_dump(mode="json", exclude={"at"}) for e in state.errors],
        "tool_calls": len(state.tool_history),
        "grounding": (
            grounding.model_dump(mode="json") if grounding else {"numbers_checked": 0, "unverified": []}
        ),
        **_llm_json(state),
        **analyst_views_json(state),
        **{
            plan.spec.result_field: value
            for plan in result_plans()
            if plan.spec.result_field
            and ((value := plan.result_json(state)) is not None or plan.spec.null_in_json)
        },
    }


def _question(state: FinancialAgentState) -> str | None:
    """The free-text question the analysis was resolved from (``state.user_query``), or
    ``None`` for an analysis asked by ticker (its query is the generated "Analyze SYMBOL").
    At most 500 characters. Raises nothing."""
    text = (state.user_query or "").strip()
    if not text or text == f"Analyze {state.stock_symbol}":
        return None
    return text if len(text) <= 500 else text[:499] + "…"


def final_json(state: FinancialAgentState) -> dict[str, Any]:
    """The ``--json`` object of a reviewed state (grounding taken from ``state.analysis``)."""
    return report_json(state, grounding=state.analysis.grounding if state.analysis else None)


def _plan_headline(state: FinancialAgentState) -> str | None:
    """The first headline a result-bearing plan gives (its verdict: the answer of a csp or a
    covered call), ``None`` for a plan without one."""
    for plan in result_plans():
        line = plan.headline(state)
        if line:
            return line
    return None


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


def _clock_line(clock: dict[str, Any], as_of: str | None) -> str:
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


def _fundamental_values(stock: ResearchBundle | None) -> list[str]:
    """The headline fundamentals of the research stage's ``get_fundamentals`` entry, each with
    its source (``field_sources``), under the call's ``tool_call_id``; growth and surprise in %."""
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
        shown = f"{value:+.2%}" if key in ("eps_growth_yoy", "eps_surprise_mean_4q") else _fmt(value)
        lines.append(f"| {label} | {shown} | {sources.get(key, '')} |")
    trailing = entry.get("trailing_eps") or {}
    if trailing.get("split_factor"):
        price = trailing.get("price") or {}
        lines += [
            "",
            f"Trailing EPS = the last four reported quarters of the earnings calendar "
            f"({trailing.get('eps_ttm_calendar_basis')} USD on 2025 shares) × {trailing.get('split_factor')} "
            f"({trailing.get('split_basis')}), on the share basis of the close "
            f"{_fmt(price.get('close'))} of {price.get('date')}.",
        ]
    return [*lines, ""]


def _earnings_json(stock: ResearchBundle | None) -> dict[str, Any] | None:
    """The research stage's earnings-calendar entry with its citation, or None."""
    if stock is None or not stock.earnings or not stock.earnings_ref:
        return None
    return {**stock.earnings, "source_refs": [stock.earnings_ref]}


def _earnings_markdown(earnings: dict[str, Any] | None) -> list[str]:
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
            shown = f"{surprise:+.2%}" if isinstance(surprise, int | float) else "n/a"
            lines.append(
                f"| {row['date']} | {when.get(row['time_of_day'], row['time_of_day'])} "
                f"| {_fmt(row.get('eps_estimate'))} | {_fmt(row.get('eps_actual'))} | {shown} |"
            )
    lines += [
        "",
        "EPS in USD per share as the calendar (HistoricalEarningsData) records it: mostly split-adjusted "
        "to 2025 share counts, so not comparable with the as-of price.",
        "",
    ]
    return lines


def _llm_json(state: FinancialAgentState) -> dict[str, Any]:
    """The LLM keys of the ``--json`` object: ``llm_calls`` (calls answered),
    ``llm_usage {calls, failed_calls, attempts, failed_attempts, tokens, cost_usd, cost}`` (every
    attempt counted; ``cost`` says "unknown" with the reason instead of a guessed ``$0``),
    ``tokens {prompt, completion, total}``, ``cost_usd`` (``None`` when a price is unknown),
    ``author`` of the recommendation (``{"kind": "deterministic"}`` or ``{"kind": "llm", "model"}``),
    ``analysts`` (each analyst's source, model, result, error; an LLM answer also its
    ``response_format``, the structured-output form its deployment answered under, and
    ``fallback``, true when that deployment is not the role's primary; an options-plan analyst's
    ``example``, the filled example answer its prompt showed; ``refused_answer``, the model's
    answer when it was refused for repeating that example (``LLM_COPIED_EXAMPLE``) or for
    prose that is no reading of the data (``LLM_NO_READING``); records of earlier versions may
    hold ``copied_answer`` instead; the synthesis's ``signal`` is the model's, before the signal
    check) and ``risk_notes``."""
    analysis, rec = state.analysis, state.recommendation
    usage = analysis.llm if analysis else None
    prompt = usage.prompt_tokens if usage else 0
    completion = usage.completion_tokens if usage else 0
    # response_format / fallback: how an LLM answer's deployment was asked and whether it was
    # the role's primary (present on LLM answers only; older records lack them)
    answered = ("response_format", "fallback", "example", "refused_answer", "copied_answer")
    analysts = {
        name: {
            **{k: record.get(k) for k in ("source", "model", "result", "error")},
            **{k: record[k] for k in answered if k in record},
        }
        for name, record in ((analysis.agents if analysis else None) or {}).items()
    }
    synthesis = rec.synthesis if rec else None
    if synthesis:
        analysts["synthesis"] = {
            **{k: synthesis.get(k) for k in ("source", "model", "error")},
            # the model's own signal, before the signal check (also when it was rejected)
            **({"signal": synthesis["signal_check"].get("signal")} if synthesis.get("signal_check") else {}),
            **{k: synthesis[k] for k in answered if k in synthesis},
        }
    return {
        "llm_calls": usage.calls if usage else 0,
        "tokens": {"prompt": prompt, "completion": completion, "total": prompt + completion},
        "cost_usd": usage.cost_usd if usage else 0.0,
        "llm_usage": {
            "calls": usage.calls if usage else 0,
            "failed_calls": usage.failed_calls if usage else 0,
            "attempts": usage.attempts if usage else 0,
            "failed_attempts": usage.failed_attempts if usage else 0,
            "tokens": prompt + completion,
            "cost_usd": usage.cost_usd if usage else 0.0,
            "cost": _cost_text(usage.cost_usd if usage else 0.0, usage.attempts if usage else 0),
        },
        "author": rec.author.model_dump(mode="json") if rec and rec.author else {"kind": "deterministic"},
        "analysts": analysts,
        "risk_notes": (rec.risk_notes if rec else None) or [],
    }


def _cost_text(cost: float | None, attempts: int) -> str:
    """``$0.0123``, or why the cost is unknown (never a guessed ``$0``)."""
    if cost is not None:
        return f"${cost:.4f}"
    if attempts:
        return "unknown (a model's price is not in LiteLLM's map or settings, or only failed attempts)"
    return "unknown"


#: Longest error message shown in a report line (the rows keep the full text).
MAX_ERROR_CHARS = 300


def one_line(text: str, limit: int = MAX_ERROR_CHARS) -> str:
    """``text`` on one line: white space (newlines included) collapsed, cut to ``limit``
    characters with an ellipsis. Multi-line provider errors stay whole in the rows."""
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _grounding_markdown(ground: dict[str, Any]) -> list[str]:
    """The "Grounding" section: LLM statements dropped (with their unverified numbers), the
    correction rounds and the signal check; empty when there is nothing to say."""
    dropped = ground.get("dropped") or []
    corrections = ground.get("corrections") or {}
    check = ground.get("signal_check")
    if not (dropped or corrections or check):
        return []
    lines = ["## Grounding", ""]
    meaning = {
        "fixed": "the corrected answer holds no unverified number",
        "unfixed": "the corrected answer still held unverified numbers; those statements were dropped",
        "failed": "the round failed (see Errors); the statements with unverified numbers were dropped",
        "skipped": "skipped, the LLM budget was spent; the statements with unverified numbers were dropped",
        "refused": (
            "the corrected answer was refused (no reading of the data, or nothing verifiable left); "
            "the first answer stands without its statements with unverified numbers"
        ),
    }
    for name, outcome in corrections.items():
        lines.append(f"- {name}: one correction round: {meaning.get(outcome, outcome)}.")
    for item in dropped:
        problems = [str(n) for n in item.get("numbers") or []]
        # a bare number matches no output; "41.2 (not the RSI)" or "183.88 above ... (it is
        # below)" is a misreading of an output (agents.analysts.claims, grounding.misattributed)
        bare = [n for n in problems if " " not in n]
        misread = [n for n in problems if " " in n]
        said = [f"{', '.join(bare)} match no cited tool output"] if bare else []
        said += [f"{'; '.join(misread)}: the cited tool outputs say otherwise"] if misread else []
        lines.append(
            f"- dropped from {item.get('part')}: {'; '.join(said)} "
            f"(statement: {one_line(str(item.get('text')), 160)!r})"
        )
    if check:
        verdict = "accepted" if check.get("accepted") else "not accepted"
        lines.append(f"- LLM signal {check.get('signal')} {verdict}: {check.get('reason')}.")
    lines.append("")
    return lines


def _analysts_markdown(data: dict[str, Any]) -> list[str]:
    """The "Analysts" and "LLM usage" sections (empty without LLM analysts)."""
    if not data["analysts"]:
        return []
    lines = ["## Analysts", ""]
    for name, record in data["analysts"].items():
        source = record.get("source")
        who = f"LLM `{record.get('model')}`" if source == "llm" else source
        if source == "llm" and record.get("fallback"):
            who += ", a fallback"
        if source == "llm" and record.get("response_format"):
            who += f", response format {record['response_format']}"
        result = record.get("result") or {}
        notes = result.get("notes")
        head = f"- **{name}** ({who})"
        verdict = [str(result[k]) for k in ("recommendation", "outlook", "label") if result.get(k)]
        if verdict:
            head += f": {verdict[0]}"
        if notes:
            head += f". {notes}"
        if result.get("source_refs"):
            head += f" {_refs(result['source_refs'])}"
        lines.append(head)
        if source == "rejected":
            lines.append(
                "  - answered, not used: its signal is not supported by its statements (see Grounding)"
            )
        elif record.get("error") and source != "llm":
            lines.append(f"  - not from an LLM: {one_line(record['error'])}")
    if data["risk_notes"]:
        lines += ["", "Risk notes (LLM synthesis):", *[f"- {n}" for n in data["risk_notes"]]]
    acct = data["llm_usage"]
    lines += [
        "",
        f"LLM usage: {acct['calls']} calls answered, {acct['failed_calls']} failed; "
        f"{acct['attempts']} attempts ({acct['failed_attempts']} failed); {data['tokens']['total']} tokens "
        f"({data['tokens']['prompt']} prompt, {data['tokens']['completion']} completion); "
        f"cost {acct['cost']}",
        "",
    ]
    return lines


def report_markdown(state: FinancialAgentState, *, grounding: Grounding | None = None) -> str:
    """The human-readable report in Markdown (same facts as :func:`report_json`)."""
    data = report_json(state, grounding=grounding)
    lines: list[str] = [f"# {data['symbol']}: analysis as of {data['as_of']}", ""]
    if data.get("question"):
        note = f"; {data['query_note']}" if data.get("query_note") else ""
        lines += [f"Question: {data['question']!r} (resolved to {data['symbol']}{note})", ""]
    if data["market_clock"]:
        lines += [_clock_line(data["market_clock"], data["as_of"]), ""]
    view = data["direction"]
    verdict = _plan_headline(state)
    if data["risk"] and not verdict:
        # what has evidence leads: the risk forecast, then the direction in one plain sentence
        lines += [risk_lead(data["risk"]), ""]
    elif missing := risk_missing(state):
        lines += [missing, ""]
    if data["signal"] and view:
        # one plain sentence about the direction; the raw reading is in the details section
        line = f"**Signal: {data['signal']}**: {view['text']}"
        if verdict:
            # a plan's verdict answers the question asked (a csp: which put, or none); the stock's
            # direction stays below it as context
            line = f"Stock direction (context, not the verdict): {data['signal']}: {view['text']}"
            lines += [verdict, ""]
        lines.append(line)
    elif verdict:
        lines.append(verdict)
    else:
        lines.append("**No recommendation**: the analysis could not complete (see Errors).")
    if data["stop_reason"]:
        lines += ["", f"Stopped: {data['stop_reason']}"]
    lines += [
        "",
        f"Analysis `{data['analysis_id']}`, pass {state.iteration + 1} of at most {state.max_iterations}.",
        "",
    ]
    lines += risk_markdown(data["risk"])

    stock = state.stock_data
    quote = data["quote"]
    if quote:
        quote_ref = (stock.quote_ref if stock else None) or ""
        lines += [f"## Quote {_refs([quote_ref])}", "", "| field | value |", "|---|---|"]
        for key in (
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
        ):
            shown = QUOTE_FORMAT.get(key, _fmt)(quote.get(key))
            if quote.get(key) is None and key in (quote.get("null_reasons") or {}):
                shown = f"n/a ({quote['null_reasons'][key]})"
            elif key in (quote.get("field_sources") or {}):
                shown += f" ({quote['field_sources'][key]})"
            lines.append(f"| {key} | {shown} |")
        lines += ["", f"Source: {quote.get('source')}", ""]

    analysis = state.analysis
    if analysis is not None and analysis.technical:
        technical = analysis.technical
        history_ref = (stock.history_ref if stock else None) or ""
        lines += [
            f"## Indicators {_refs([analysis.technical_ref or '', history_ref])}",
            "",
            "Computed with pandas-ta on split- and dividend-adjusted daily bars "
            f"({technical.get('bars_used')} bars to {technical.get('date')}).",
            "",
            "| indicator | value |",
            "|---|---|",
        ]
        for key, label in INDICATOR_LABELS.items():
            lines.append(f"| {label} | {INDICATOR_FORMAT.get(key, _decimal2)(data['indicators'].get(key))} |")
        lines.append("")

    for plan in result_plans():
        lines += plan.report_markdown(state)
    lines += _chart_markdown(analysis.chart if analysis else None)
    if stock is not None and stock.status == "success":
        lines += [
            f"Chart: `finagent chart {state.analysis_id}` renders these levels on the cited bars (PNG).",
            "",
        ]
    lines += _views_markdown(data["views"], values=_fundamental_values(stock))
    lines += analyst_views_markdown(state)
    lines += _earnings_markdown(data["earnings"])
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
        lines.append(f"- Stop ({stop['rule']}): {_usd(stop['value'])} {_refs(stop['source_refs'])}")
        if risk:
            lines.append(
                f"- Risk per share: {risk['fraction']:.2%} of the close {_refs(risk['source_refs'])}"
            )
        lines.append("")
    lines += _analysts_markdown(data)
    ground = data["grounding"]
    if ground.get("unverified"):
        lines += [
            "## Unverified numbers",
            "",
            "These numbers match no cited tool output and are not facts: " + ", ".join(ground["unverified"]),
            "",
        ]
    lines += _grounding_markdown(ground)
    if data["errors"]:
        lines += ["## Errors", ""]
        lines += [
            f"- pass {e['iteration'] + 1}, {e['stage']}: {e['code']}: {one_line(e['message'])}"
            for e in data["errors"]
        ]
        lines += ["", "Full error texts are in the `llm_calls` and `tool_calls` rows of this analysis.", ""]
    lines += _details_markdown(data, state)
    lines += [
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
    disclaimer = LLM_DISCLAIMER if data["analysts"] else DISCLAIMER
    lines += ["", f"_{disclaimer}_", ""]
    return "\n".join(lines)


def _two(value: Any) -> str:
    return "n/a" if value is None else f"{float(value):.2f}"


def _signed(value: Any) -> str:
    return "n/a" if value is None else f"{float(value):+.2f}"


def _details_markdown(data: dict[str, Any], state: FinancialAgentState) -> list[str]:
    """The "Details of the direction call" section: the calibration's sentence (its version,
    evidence and any abstention reason), the author's raw signal, score and confidence, each
    labelled with the measured hit rate of such calls (not evidence: never in the headline), and
    what became of an LLM synthesis. Empty without a recommendation."""
    details = data["details"]
    if not details:
        return []
    lines = ["## Details of the direction call", ""]
    if data["probability_text"]:
        lines.append(f"- Calibration: {data['probability_text']}.")
    raw, score, confidence = details["raw_signal"] or data["signal"], details["score"], details["confidence"]
    record = details.get("record")
    if not data["probability"]:
        label = "written before calibration, so no hit rate was recorded with it."
    elif raw == "HOLD":
        label = "a HOLD makes no directional call, so it has no hit rate."
    elif record:
        label = f"{raw} calls of these rules were {record_clause(record)}."
    else:
        label = f"{raw} calls of these rules have not been scored against outcomes yet."
    llm = data["author"].get("kind") == "llm"
    rec = state.recommendation
    scorer = (rec.deterministic if rec else None) or {}
    synthesis = (rec.synthesis if rec else None) or {}
    if llm:
        whose = (
            f"its {raw} calls were {record_clause(record)}."
            if record and raw != "HOLD"
            else "a HOLD makes no directional call."
            if raw == "HOLD"
            else "its calls have not been scored against outcomes yet."
        )
        lines.append(
            f"- LLM synthesis by `{data['author'].get('model')}` (prompt version `{details['key']}`): raw "
            f"signal {raw}, stated confidence {_two(confidence)} (the model's judgement, not a "
            f"probability); {whose} Not evidence, so not published."
        )
        lines.append(
            f"- Deterministic scorer: {scorer.get('signal')}, score {_signed(score)}, confidence "
            f"{_two(scorer.get('confidence'))} (context)."
        )
    else:
        lines.append(
            f"- Raw rule score {_signed(score)} ({raw}, rule set `{details['key']}`; confidence "
            f"{_two(confidence)}, a vote share, not a probability): {label} Not evidence, so not "
            "published."
        )
    if synthesis.get("source") == "rejected":
        check = synthesis.get("signal_check") or {}
        lines.append(
            f"- The LLM synthesis's {check.get('signal')} was not accepted: its checked statements do "
            "not support it (see Grounding)."
        )
    elif synthesis and not llm:
        lines.append("- The LLM synthesis was not used (see Analysts).")
    lines.append("")
    return lines


def _views_markdown(views: dict[str, Any], *, values: list[str] | None = None) -> list[str]:
    """The fundamental, news-sentiment and social-sentiment views (``agents.analysts.views``,
    ``agents.analysts.social``) as Markdown, each value cited;
    ``values`` (:func:`_fundamental_values`) go under the Fundamentals heading."""
    lines: list[str] = []
    fundamental = views.get("fundamental")
    if fundamental:
        lines += [f"## Fundamentals {_refs(fundamental.get('source_refs'))}", ""]
        lines += values or []
        lines.append(
            f"Outlook: **{fundamental.get('outlook')}** (deterministic rules, `agents/analysts/views.py`)."
        )
        for obs in fundamental.get("observations") or []:
            lines.append(f"- {obs['field']} {_fmt(obs['value'])}: {obs['text']}")
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


def _chart_markdown(chart: ChartLevels | None) -> list[str]:
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
                        f"{_usd(z['low'])}–{_usd(z['high'])}"
                        if "low" in z and z["low"] != z["high"]
                        else _usd(z["price"])
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
        lines.append(
            f"Swing {fib.get('direction')} from {_usd(fib.get('swing_low'))} ({fib.get('swing_low_date')}) "
            f"to {_usd(fib.get('swing_high'))} ({fib.get('swing_high_date')}):"
        )
        lines.append("")
        lines.append(" | ".join(f"{name} {_usd(price)}" for name, price in _by_ratio(fib["levels"])))
        lines.append("")
    return lines
