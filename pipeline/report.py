"""The final report: Markdown for people and a JSON object for machines (``--json``).

Every number printed comes from a tool output and every section names the ``tool_call_id``s
it came from. This module assembles both; the sections live beside it: the direction call
(``pipeline.report_direction``), the risk forecast (``pipeline.report_risk``), the research and
analysis facts (``pipeline.report_sections``), the LLM parts (``pipeline.report_llm``), the
analysts run from their row (``pipeline.report_analysts``), the number formats
(``pipeline.report_format``). The names other modules import stay importable from here.
"""

from __future__ import annotations

from typing import Any

from core.parts import Grounding
from core.state import FinancialAgentState, Status
from pipeline.plan_hooks import result_plans
from pipeline.report_analysts import analyst_views_json, analyst_views_markdown
from pipeline.report_direction import (
    author_version,
    details_json,
    details_markdown,
    direction,
    headline_p,
    probability_sentence,
    record_clause,
)
from pipeline.report_llm import (
    MAX_ERROR_CHARS,
    analysts_markdown,
    errors_markdown,
    grounding_markdown,
    llm_json,
    one_line,
    unverified_markdown,
)
from pipeline.report_risk import risk_headline, risk_json, risk_lead, risk_markdown, risk_missing
from pipeline.report_sections import (
    INDICATOR_LABELS,
    chart_markdown,
    clock_line,
    earnings_json,
    earnings_markdown,
    fundamental_values,
    indicators_markdown,
    quote_markdown,
    signal_markdown,
    sources_markdown,
    views_markdown,
)

DISCLAIMER = "Generated from historical data by deterministic rules; not investment advice."
LLM_DISCLAIMER = (
    "Generated from historical data by LLM agents over logged tool outputs (numbers checked "
    "against them); not investment advice."
)


def headline_text(state: FinancialAgentState) -> str | None:
    """One line for lists and digests: the plan's whole verdict for a plan with a result (a csp or
    covered call: ``Cash-secured put: sell 1 AAPL…``, never shortened), else the risk forecast's 80 % range
    (:func:`pipeline.report_risk.risk_headline`, when there is a forecast) and the signal with
    ``no evidence`` or its calibrated p, e.g. ``80 % range in 20 sessions 499.37–629.87 (close
    560.99); HOLD: no evidence`` or ``BUY: p 0.56 (20d)``; ``None`` without either. No raw
    confidence. Raises nothing."""
    verdict = _plan_headline(state)
    if verdict:
        # whole: a cut verdict hides the totals (or cuts a number) the decision rests on
        return verdict.split(" (see ")[0].replace("**", "")
    view = direction(state)
    risk = risk_json(state)
    lead = f"{risk_headline(risk)}; " if risk else ""
    if view is None:
        return lead.rstrip("; ") or None
    if view["evidence"]:
        prob = state.recommendation.probability if state.recommendation else None
        p = headline_p(state.recommendation)
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
        "prompt_version": author_version(rec),
        "p_outperform": headline_p(rec),
        "probability_text": probability_sentence(rec.probability) if rec and rec.probability else None,
        "probability": rec.probability if rec else None,
        # the author's raw signal, score and confidence: details, not evidence (direction)
        "details": details_json(state),
        "rationale": rec.rationale if rec else [],
        "risk_flags": rec.risk_flags if rec else [],
        "stop_loss": rec.stop_loss.model_dump(mode="json") if rec and rec.stop_loss else None,
        "views": stock.views.model_dump(mode="json") if stock and stock.views else {},
        "earnings": earnings_json(stock),
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
        **llm_json(state),
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


def _head_markdown(data: dict[str, Any], state: FinancialAgentState) -> list[str]:
    """The report's head: the title, the question, the data clock, the risk lead (or why there is
    no forecast), the verdict or the direction in one plain sentence, the stop reason and the pass."""
    lines: list[str] = [f"# {data['symbol']}: analysis as of {data['as_of']}", ""]
    if data.get("question"):
        note = f"; {data['query_note']}" if data.get("query_note") else ""
        lines += [f"Question: {data['question']!r} (resolved to {data['symbol']}{note})", ""]
    if data["market_clock"]:
        lines += [clock_line(data["market_clock"], data["as_of"]), ""]
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
    return [
        *lines,
        "",
        f"Analysis `{data['analysis_id']}`, pass {state.iteration + 1} of at most {state.max_iterations}.",
        "",
    ]


def report_markdown(state: FinancialAgentState, *, grounding: Grounding | None = None) -> str:
    """The human-readable report in Markdown (same facts as :func:`report_json`)."""
    data = report_json(state, grounding=grounding)
    lines = _head_markdown(data, state)
    lines += risk_markdown(data["risk"])
    stock, analysis = state.stock_data, state.analysis
    lines += quote_markdown(data["quote"], quote_ref=(stock.quote_ref if stock else None) or "")
    lines += indicators_markdown(data["indicators"], analysis=analysis, stock=stock)
    for plan in result_plans():
        lines += plan.report_markdown(state)
    lines += chart_markdown(analysis.chart if analysis else None)
    if stock is not None and stock.status == "success":
        lines += [
            f"Chart: `finagent chart {state.analysis_id}` renders these levels on the cited bars (PNG).",
            "",
        ]
    lines += views_markdown(data["views"], values=fundamental_values(stock))
    lines += analyst_views_markdown(state)
    lines += earnings_markdown(data["earnings"])
    lines += signal_markdown(data)
    lines += analysts_markdown(data)
    lines += unverified_markdown(data["grounding"])
    lines += grounding_markdown(data["grounding"])
    lines += errors_markdown(data["errors"])
    lines += details_markdown(data, state)
    lines += sources_markdown(state)
    disclaimer = LLM_DISCLAIMER if data["analysts"] else DISCLAIMER
    lines += ["", f"_{disclaimer}_", ""]
    return "\n".join(lines)


__all__ = [
    "DISCLAIMER",
    "INDICATOR_LABELS",
    "LLM_DISCLAIMER",
    "MAX_ERROR_CHARS",
    "details_json",
    "direction",
    "final_json",
    "headline_text",
    "one_line",
    "probability_sentence",
    "record_clause",
    "report_json",
    "report_markdown",
    "stop_reason",
]
