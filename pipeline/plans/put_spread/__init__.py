"""The put credit spread (``put_spread``): sell a put, buy a lower put of the same expiry, a
defined loss (docs/options.md, "Put credit spreads"). Built on the option plan's analysts for the
short put; the long put chosen by ``width`` or ``long_delta`` (:mod:`pipeline.plans.put_spread.step`);
its options and record are :mod:`pipeline.plans.put_spread.models`."""

from __future__ import annotations

from typing import Any

from agents.llm.session import LLMSession
from agents.tools.registry import ToolContext
from core.plans import plan_spec
from core.state import FinancialAgentState
from pipeline.plans.base import Plan
from pipeline.plans.option import answers_without_history
from pipeline.plans.put_spread.models import PutSpreadOptions, PutSpreadResult

NAME = "put_spread"


def _record(state: FinancialAgentState) -> dict[str, Any] | None:
    return state.plan_result if state.analysis_type == NAME else None


def run(state: FinancialAgentState, ctx: ToolContext, llm: LLMSession | None) -> None:
    """The plan's step of the analysis stage (:func:`pipeline.plans.put_spread.step.put_spread_plan`)."""
    from pipeline.plans.put_spread.step import put_spread_plan  # lazy: the option tools

    put_spread_plan(state, ctx, llm)


def headline(state: FinancialAgentState) -> str | None:
    """The verdict (:func:`pipeline.plans.put_spread.report.headline`)."""
    from pipeline.plans.put_spread.report import headline as verdict

    return verdict(_record(state))


def report_markdown(state: FinancialAgentState) -> list[str]:
    """The "Put credit spread" section."""
    from pipeline.plans.put_spread.report import section

    return section(_record(state))


def _stored(state: dict[str, Any]) -> PutSpreadResult | None:
    raw = state.get("plan_result") if state.get("analysis_type") == NAME else None
    return PutSpreadResult.model_validate(raw) if raw else None


def chart_marks(state: dict[str, Any]) -> dict[str, float]:
    """Short strike, long strike and breakeven of a suggestion, in the bars' units."""
    rec = _stored(state)
    if rec is None or rec.status != "suggested" or rec.spread is None:
        return {}
    f, s = rec.price_factor(), rec.spread
    return {
        "short put": round(float(s["short_strike"]) / f, 4),
        "long put": round(float(s["long_strike"]) / f, 4),
        "breakeven": round(float(s["breakeven"]) / f, 4),
    }


def chart_overlay(state: dict[str, Any]) -> dict[str, Any]:
    """The expiry, the ±1σ cone, the earnings estimate and the spread's payoff at expiry."""
    rec = _stored(state)
    if rec is None or rec.status != "suggested" or rec.spread is None:
        return {}
    f, s, options = rec.price_factor(), rec.spread, rec.options or {}
    spot = float(options.get("spot") or s["short_strike"])
    sigma = (options.get("real_world") or {}).get("sigma_annual") or (
        rec.suggestion.iv if rec.suggestion else 0.3
    )
    cutoff = (rec.research or {}).get("cutoff") or {}
    events = (
        [{"date": cutoff["earnings_date"], "label": "earnings (estimated)"}]
        if cutoff.get("earnings_date")
        else []
    )
    return {
        "option": {
            "expiry": s.get("last_trading_day") or s["expiry"],
            "sigma": sigma,
            "spot": round(spot / f, 4),
            "events": events,
            "payoff": {
                "kind": "put_spread",
                "strike": round(float(s["short_strike"]) / f, 4),
                "long_strike": round(float(s["long_strike"]) / f, 4),
                "spot": round(spot / f, 4),
                "net": float(s["credit"]),
                "multiplier": round(100.0 * f, 6),
                "contracts": int((rec.sizing or {}).get("contracts") or 1),
            },
        }
    }


#: The put credit spread's row.
PLANS: tuple[Plan, ...] = (
    Plan(
        spec=plan_spec(NAME),
        options_model=PutSpreadOptions,
        run=run,
        answered=lambda state: state.analysis_type == NAME and _record(state) is not None,
        headline=headline,
        result_json=_record,
        report_markdown=report_markdown,
        chart_marks=chart_marks,
        chart_overlay=chart_overlay,
        answers_without_history=answers_without_history,
    ),
)
