"""Recommendation stage (the third of a pass): signal, confidence, stop level via the calculator."""

from __future__ import annotations

from datetime import date
from typing import Any, Final

from agents.llm.session import LLMSession
from agents.quant import calibration as cal
from agents.tools.registry import ToolContext
from core.parts import Author, Recommendation, ResearchBundle, RiskPerShare, StopLoss
from core.state import FinancialAgentState
from pipeline.stages.common import apply_outcome, call_tool, note
from pipeline.steps.context import StepContext

#: Stop distance in ATRs. 2 × ATR(14) below the close is the common volatility stop
#: (Wilder 1978 used ATR multiples for stops); it sizes risk per share, it is not advice.
ATR_STOP_MULTIPLE = 2


def _earnings_inputs(stock: ResearchBundle, refs: dict[str, str]) -> tuple[str | None, str | None]:
    """(next earnings date, checked-through date) for EARNINGS_SOON, and the ref to cite in
    ``refs["earnings"]``: the earnings calendar (``get_earnings_dates``) first, else
    ``get_fundamentals``'s ``earnings_date`` (e.g. Yahoo online), else (None, None)."""
    calendar = stock.earnings or {}
    nxt = calendar.get("next") or {}
    if stock.earnings_ref and (nxt.get("date") or calendar.get("checked_through")):
        refs["earnings"] = stock.earnings_ref
        return nxt.get("date"), calendar.get("checked_through")
    fundamentals = stock.fundamentals or {}
    if stock.fundamentals_ref:
        refs["earnings"] = stock.fundamentals_ref
    return fundamentals.get("earnings_date"), None


def recommendation(*, state: FinancialAgentState, ctx: StepContext) -> FinancialAgentState:
    """Score the indicators deterministically (``agents.quant.scorer.score_technical``) and compute
    the ATR stop and risk per share with the ``calculator`` tool (so those numbers are logged
    tool outputs too).

    Sets ``state.recommendation`` (:class:`~core.parts.Recommendation`: signal,
    confidence, score, rationale, components, risk_flags, stop_loss, risk_per_share; stop values
    ``None`` without ATR); the adapter then moves the status on.
    """
    from agents.quant.scorer import score_technical  # keeps pandas-free imports cheap for the CLI

    analysis = state.analysis
    technical = analysis.technical if analysis is not None else None
    if analysis is not None and technical:
        # indicators without research happen only in hand-built states: read them as no context
        stock = state.stock_data or ResearchBundle(status="failed")
        refs = {
            "history": stock.history_ref or "",
            "quote": stock.quote_ref or "",
            "indicators": analysis.technical_ref or "",
        }
        earnings_date, checked_through = _earnings_inputs(stock, refs)
        result = score_technical(
            indicators=_flat(technical),
            quote=stock.quote,
            refs=refs,
            earnings_date=earnings_date,
            earnings_checked_through=checked_through,
            as_of=state.as_of.isoformat() if state.as_of else None,
        )
        rec = Recommendation.model_validate(
            {**result.model_dump(mode="json"), "stop_loss": None, "risk_per_share": None}
        )
        social = stock.views.social if stock.views is not None else None
        weight = ctx.settings.analysis.social_weight
        # Weight 0 (the default) leaves the scorer's recommendation untouched, byte for byte.
        if weight > 0 and social is not None and social.get("score") is not None:
            _with_social(rec, social=social, weight=weight)
        learned_view = stock.views.learned if stock.views is not None else None
        learned_weight = ctx.settings.analysis.learned_weight
        if learned_weight > 0 and learned_view is not None:
            _with_learned(rec, view=learned_view, weight=learned_weight)
        close = technical.get("close")
        atr = (technical.get("indicators") or {}).get("atr_14")
        if close is not None and atr is not None:
            stop = call_tool(
                state=state,
                ctx=ctx,
                name="calculator",
                arguments={"expression": f"{close!r} - {ATR_STOP_MULTIPLE} * {atr!r}"},
                critical=False,
            )
            risk = call_tool(
                state=state,
                ctx=ctx,
                name="calculator",
                arguments={"expression": f"{ATR_STOP_MULTIPLE} * {atr!r} / {close!r}"},
                critical=False,
            )
            if stop.ok and stop.data:
                rec.stop_loss = StopLoss(
                    value=stop.data["result"],
                    expression=stop.data["expression"],
                    rule=f"close - {ATR_STOP_MULTIPLE} x ATR(14)",
                    source_refs=[stop.tool_call_id, refs["indicators"]],
                )
            if risk.ok and risk.data:
                rec.risk_per_share = RiskPerShare(
                    fraction=risk.data["result"],
                    expression=risk.data["expression"],
                    source_refs=[risk.tool_call_id, refs["indicators"]],
                )
        session = ctx.llm
        if session is not None and analysis.agents:
            rec = _with_synthesis(state=state, ctx=ctx, session=session, rec=rec)
        if state.as_of is not None:
            _calibrate(rec, as_of=state.as_of)
        odds = _stop_odds(state=state, ctx=ctx, stop=rec.stop_loss) if rec.stop_loss else None
        if odds is not None:  # no key in the state when there is nothing to say
            rec.stop_odds = odds
        state.recommendation = rec
        note(state, stage="recommendation", content=f"{rec.signal} (confidence {rec.confidence}).")
    return state


def _stop_odds(*, state: FinancialAgentState, ctx: StepContext, stop: StopLoss) -> dict[str, Any] | None:
    """P(close below) and P(touch) of the stop at each horizon of the risk analyst's forecast
    (``risk_levels`` on ``state.analysis.risk_ref``): ``{level, horizons: [{horizon, p_below,
    p_touch}], source_refs}`` citing that call and the stop's; ``None`` without a forecast or
    when the call fails (recorded, not critical)."""
    analysis = state.analysis
    if analysis is None or not analysis.risk_ref:
        return None
    env = call_tool(
        state=state,
        ctx=ctx,
        name="risk_levels",
        arguments={
            "symbol": state.stock_symbol,
            "forecast_ref": analysis.risk_ref,
            "levels": [float(stop.value)],
        },
        critical=False,
    )
    if not (env.ok and env.data):
        return None
    first = env.data["levels"][0]
    return {
        "level": first["level"],
        "horizons": first["horizons"],
        "source_refs": [env.tool_call_id, analysis.risk_ref, *stop.source_refs[:1]],
    }


def _with_social(rec: Recommendation, *, social: dict[str, Any], weight: float) -> None:
    """Blend the social analyst's score into ``rec`` at ``weight`` > 0 (``FINAGENT_ANALYSIS_SOCIAL_WEIGHT``,
    ``agents.analysts.social.blend``): the score moves, the signal follows the scorer's
    thresholds, and a ``social_sentiment`` component cites the social view's tool call. The
    confidence stays the scorer's."""
    from agents.analysts.social import blend
    from agents.quant.scorer import BUY_THRESHOLD, SELL_THRESHOLD

    rec.score = blend(score=rec.score, social=float(social["score"]), weight=weight)
    rec.signal = "BUY" if rec.score >= BUY_THRESHOLD else "SELL" if rec.score <= SELL_THRESHOLD else "HOLD"
    rec.components.append(
        {
            "name": "social_sentiment",
            "value": social["score"],
            "weight": weight,
            "label": social["label"],
            "source_refs": list(social.get("source_refs") or []),
        }
    )


def _with_learned(rec: Recommendation, *, view: dict[str, Any], weight: float) -> None:
    """Blend the learned analyst's score (``2 p(up) - 1``) into ``rec`` at ``weight`` > 0
    (``FINAGENT_ANALYSIS_LEARNED_WEIGHT``), after the social blend, as :func:`_with_social` does; a
    ``learned_model`` component records its version and cites its inputs' tool calls."""
    from agents.analysts.social import blend
    from agents.quant.scorer import BUY_THRESHOLD, SELL_THRESHOLD

    rec.score = blend(score=rec.score, social=float(view["score"]), weight=weight)
    rec.signal = "BUY" if rec.score >= BUY_THRESHOLD else "SELL" if rec.score <= SELL_THRESHOLD else "HOLD"
    rec.components.append(
        {
            "name": "learned_model",
            "value": view["score"],
            "weight": weight,
            "label": view["label"],
            "version": view["version"],
            "source_refs": list(view.get("source_refs") or []),
        }
    )


def _with_synthesis(
    *, state: FinancialAgentState, ctx: ToolContext, session: LLMSession, rec: Recommendation
) -> Recommendation:
    """The LLM synthesis over the analysts and the risk assessor's flags (docs/design.md, "Synthesis").

    Only a checked answer replaces the scorer (``agents.analysts.llm_agents.run_synthesis``:
    every number of its statements matches a cited output, and its signal is supported by
    them): then the signal, confidence, rationale and risk notes are the model's (``author``
    says so) and the scorer's reading is kept under ``deterministic``; risk flags, stop and risk
    per share stay the deterministic ones. Otherwise (failure, rejected signal, time budget
    spent in the analysis stage of this pass) the scorer's recommendation stands and
    ``rec.synthesis`` says why (errors recorded in ``state.errors`` here).
    """
    # lazy: the LLM analysts load only with a model configured (agents.analysts.outcome docstring)
    from agents.analysts.llm_agents import run_synthesis

    if any(e.code == "LLM_TIME_BUDGET_EXHAUSTED" and e.iteration == state.iteration for e in state.errors):
        rec.synthesis = {
            "source": "skipped",
            "model": None,
            "error": "the LLM time budget ran out in the analysis stage; the scorer's result stands",
        }
        return rec
    outcome = run_synthesis(
        ctx=ctx,
        session=session,
        symbol=state.stock_symbol,
        as_of=state.as_of,
        user_query=state.user_query,
        agents=(state.analysis.agents if state.analysis else None) or {},
        source_refs=state.source_refs,
        deterministic_rec=rec.model_dump(mode="json"),  # agents take plain values
    )
    record = apply_outcome(state, ctx=ctx, outcome=outcome)
    rec.synthesis = {k: v for k, v in record.items() if k != "result"}
    if record["source"] == "llm" and record["result"]:
        view = record["result"]
        rec.deterministic = rec.model_dump(
            mode="json", include={"signal", "confidence", "score", "rationale"}
        )
        rec.signal = view["signal"]
        rec.confidence = view["confidence"]
        rec.rationale = view["rationale"]
        rec.risk_notes = view["risks"]
        rec.author = Author(kind="llm", model=record["model"])
    return rec


def calibrated_probability(
    *, key: str, x: float, as_of: date, model: cal.CalibrationModel | None = None
) -> dict[str, Any]:
    """The ``Recommendation.probability`` record of a recommendation by ``key`` (rule-set label
    or prompt version) with raw value ``x`` at ``as_of``: p(outperform) at each horizon of
    ``agents.quant.calibration.HORIZONS`` from the shipped model (or ``model``), walk-forward
    (only rows known before ``as_of``). ``abstained``/``reason`` are the signal horizon's;
    ``record`` is ``key``'s measured hit rate of directional calls at the signal horizon and
    ``side_record`` that of calls on ``x``'s side (``CalibrationModel.call_record``, ``None``
    without such calls).
    Raises ``ValueError`` for ``x`` outside [-1, 1], ``CalibrationError`` for a broken artifact."""
    model = model or cal.load()
    horizons: dict[str, Any] = {}
    for h in cal.HORIZONS:
        pred = model.predict(key=key, x=x, as_of=as_of, horizon=h)
        horizons[str(h)] = {
            "p": round(pred.p, 4),
            "abstained": pred.abstained,
            "rows": pred.rows,
            "bin_rows": pred.bin_rows,
            "first": pred.first.isoformat() if pred.first else None,
            "last": pred.last.isoformat() if pred.last else None,
            "reason": pred.reason,
        }
    head = horizons[str(cal.SIGNAL_HORIZON)]
    side = cal.call_side(key, x)
    return {
        "version": model.version,
        "benchmark": model.benchmark,
        "key": key,
        "x": x,
        "signal_horizon": cal.SIGNAL_HORIZON,
        "margin": cal.MARGIN,
        "abstained": head["abstained"],
        "reason": head["reason"],
        "horizons": horizons,
        # the author's measured track record (all its rows, outcomes up to the fit limit): what
        # the report says in place of a raw confidence; it decides nothing
        "record": model.call_record(key=key, horizon=cal.SIGNAL_HORIZON),
        "side_record": (
            model.call_record(key=key, horizon=cal.SIGNAL_HORIZON, side=side) if side is not None else None
        ),
    }


def _calibrate(rec: Recommendation, *, as_of: date) -> None:
    """Replace ``rec.signal`` by the one the calibrated p at the signal horizon gives (HOLD when
    abstaining), keeping the author's signal in ``rec.raw_signal`` (docs/design.md, "Calibrated
    probability"). The key is the author's version: the prompt version for an LLM-authored
    signal, the rule-set label otherwise (``agents.analysts.versions``)."""
    from agents.analysts.versions import prompt_version, rules_version  # lazy: the LLM modules

    llm = rec.author is not None and rec.author.kind == "llm"
    key = prompt_version() if llm else rules_version()
    x = cal.raw_value(
        signal=rec.signal, confidence=rec.confidence, score=rec.score, author_kind="llm" if llm else None
    )
    rec.raw_signal = rec.signal
    rec.probability = calibrated_probability(key=key, x=x, as_of=as_of)
    head = rec.probability["horizons"][str(cal.SIGNAL_HORIZON)]
    rec.signal = cal.signal_from(head["p"], abstained=head["abstained"])


def _flat(technical: dict[str, Any]) -> dict[str, Any]:
    """Indicators plus the context values (close, 52-week range) in one mapping for the scorer."""
    flat = dict(technical.get("indicators") or {})
    for key in ("close", "high_52w", "low_52w", "pct_from_52w_high", "date", "bars_used", "dollar_volume_20"):
        if key in technical:
            flat[key] = technical[key]
    return flat


#: The analysts this stage runs by its own code (the LLM synthesis over the scorer), each a row of
#: ``agents.analysts.table`` with stage ``recommendation``: a row added there without code here
#: fails ``tests/pipeline/stages/test_stage_analysts.py`` instead of being silently skipped.
RECOMMENDATION_ANALYSTS: Final = frozenset({"synthesis"})
