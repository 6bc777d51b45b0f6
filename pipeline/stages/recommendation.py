"""Recommendation stage (seed 001 step 4): signal, confidence, stop level via the calculator."""

from __future__ import annotations

from typing import Any

from agents.llm.session import LLMSession, current_session
from agents.tools.registry import ToolContext
from pipeline.core.state import FinancialAgentState, Status
from pipeline.stages.common import apply_outcome, call_tool, note

#: Stop distance in ATRs. 2 × ATR(14) below the close is the common volatility stop
#: (Wilder 1978 used ATR multiples for stops); it sizes risk per share, it is not advice.
ATR_STOP_MULTIPLE = 2


def _earnings_inputs(stock: dict[str, Any], refs: dict[str, str]) -> tuple[str | None, str | None]:
    """(next earnings date, checked-through date) for EARNINGS_SOON, and the ref to cite in
    ``refs["earnings"]``: the earnings calendar (``get_earnings_dates``) first, else
    ``get_fundamentals``'s ``earnings_date`` (e.g. Yahoo online), else (None, None)."""
    calendar = stock.get("earnings") or {}
    nxt = calendar.get("next") or {}
    if stock.get("earnings_ref") and (nxt.get("date") or calendar.get("checked_through")):
        refs["earnings"] = stock["earnings_ref"]
        return nxt.get("date"), calendar.get("checked_through")
    fundamentals = stock.get("fundamentals") or {}
    if stock.get("fundamentals_ref"):
        refs["earnings"] = stock["fundamentals_ref"]
    return fundamentals.get("earnings_date"), None


def recommendation(*, state: FinancialAgentState, ctx: ToolContext) -> FinancialAgentState:
    """Score the indicators deterministically (``agents.scorer.score_technical``) and compute
    the ATR stop and risk per share with the ``calculator`` tool (so those numbers are logged
    tool outputs too).

    Sets ``state.recommendation = {signal, confidence, score, rationale, components, risk_flags,
    stop_loss, risk_per_share}`` (stop values ``None`` without ATR); status → reviewing.
    """
    from agents.scorer import score_technical  # keeps pandas-free imports cheap for the CLI

    technical = (state.analysis or {}).get("technical")
    if technical:
        stock = state.stock_data or {}
        refs = {
            "history": stock.get("history_ref", ""),
            "quote": stock.get("quote_ref", ""),
            "indicators": (state.analysis or {}).get("technical_ref", ""),
        }
        earnings_date, checked_through = _earnings_inputs(stock, refs)
        result = score_technical(
            indicators=_flat(technical),
            quote=stock.get("quote"),
            refs=refs,
            earnings_date=earnings_date,
            earnings_checked_through=checked_through,
            as_of=state.as_of.isoformat() if state.as_of else None,
        )
        rec: dict[str, Any] = result.model_dump(mode="json")
        rec["stop_loss"] = None
        rec["risk_per_share"] = None
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
                rec["stop_loss"] = {
                    "value": stop.data["result"],
                    "expression": stop.data["expression"],
                    "rule": f"close - {ATR_STOP_MULTIPLE} x ATR(14)",
                    "source_refs": [stop.tool_call_id, refs["indicators"]],
                }
            if risk.ok and risk.data:
                rec["risk_per_share"] = {
                    "fraction": risk.data["result"],
                    "expression": risk.data["expression"],
                    "source_refs": [risk.tool_call_id, refs["indicators"]],
                }
        session = current_session()
        if session is not None and (state.analysis or {}).get("agents"):
            rec = _with_synthesis(state=state, ctx=ctx, session=session, rec=rec)
        state.recommendation = rec
        note(state, stage="recommendation", content=f"{rec['signal']} (confidence {rec['confidence']}).")
    state.status = Status.REVIEWING
    return state


def _with_synthesis(
    *, state: FinancialAgentState, ctx: ToolContext, session: LLMSession, rec: dict[str, Any]
) -> dict[str, Any]:
    """The LLM synthesis over the analysts and the risk assessor's flags (seed 003).

    On success the signal, confidence and rationale are the model's (``author`` says so) and the
    scorer's reading is kept under ``deterministic``; risk flags, stop and risk per share stay
    the deterministic ones. On failure the scorer's recommendation stands (the agent's error is
    recorded in ``state.errors`` here).
    """
    from agents.analysts.llm_agents import run_synthesis

    outcome = run_synthesis(
        session=session,
        symbol=state.stock_symbol,
        as_of=state.as_of,
        user_query=state.user_query,
        agents=(state.analysis or {}).get("agents") or {},
        source_refs=state.source_refs,
        deterministic_rec=rec,
    )
    record = apply_outcome(state, ctx=ctx, outcome=outcome)
    rec = {**rec, "synthesis": {k: v for k, v in record.items() if k != "result"}}
    if record["source"] == "llm" and record["result"]:
        view = record["result"]
        rec["deterministic"] = {k: rec.get(k) for k in ("signal", "confidence", "score", "rationale")}
        rec.update(
            signal=view["signal"],
            confidence=view["confidence"],
            rationale=view["rationale"],
            risk_notes=view["risks"],
            author={"kind": "llm", "model": record["model"]},
        )
    return rec


def _flat(technical: dict[str, Any]) -> dict[str, Any]:
    """Indicators plus the context values (close, 52-week range) in one mapping for the scorer."""
    flat = dict(technical.get("indicators") or {})
    for key in ("close", "high_52w", "low_52w", "pct_from_52w_high", "date", "bars_used", "dollar_volume_20"):
        if key in technical:
            flat[key] = technical[key]
    return flat
