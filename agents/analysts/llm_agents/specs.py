"""What each LLM agent is: its role, answer model, tools and instructions, and the grounding
rules every one of them is given (hashed into ``agents.analysts.versions.prompt_version``)."""

from __future__ import annotations

from dataclasses import dataclass

from agents.analysts.models import FundamentalView, SentimentView, TechnicalView, _Result
from agents.llm.config import Role

GROUNDING_RULES = (
    "Rules: every number you write (in text or in numeric fields) must be copied exactly, with "
    "the same or fewer decimals, from a tool output shown to you; write thresholds and periods in "
    'words ("above seventy", "fifty-day"); never estimate or invent a number. List the '
    "tool_call_ids you relied on in source_refs. Answer with one JSON object only."
)


@dataclass(frozen=True)
class AgentSpec:
    """One LLM analyst: its role, result model, tools offered, data tools, and instructions.

    ``data_tools`` is a subset of ``tools`` (the analyst has data when one of them is offered).
    """

    name: str
    role: Role
    model: type[_Result]
    tools: tuple[str, ...]
    data_tools: tuple[str, ...]
    instructions: str


TECHNICAL = AgentSpec(
    name="technical",
    role=Role.TECHNICAL,
    model=TechnicalView,
    tools=(
        "technical_indicators",
        "find_support_resistance",
        "calculate_fib_levels",
        "calculate_trendline",
        "get_history",
        "get_stock_data",
        "calculator",
    ),
    data_tools=("technical_indicators",),
    instructions=(
        "You are a technical (chart) analyst. Judge trend direction and quality, support and "
        "resistance levels and extension risk from the indicator, chart-level and quote outputs "
        "given (the chart tools compute swing points, support/resistance, Fibonacci levels and "
        "trendlines from a get_history result). The indicators are already computed; call a "
        "tool only if you need something not shown."
    ),
)


FUNDAMENTAL = AgentSpec(
    name="fundamental",
    role=Role.FUNDAMENTAL,
    model=FundamentalView,
    tools=("get_fundamentals", "get_earnings_dates", "get_stock_data", "calculator"),
    data_tools=("get_fundamentals",),
    instructions=(
        "You are a fundamental analyst. Judge valuation and business quality only from the data "
        "given or fetched with your tools (get_earnings_dates gives the last quarters' EPS "
        "estimates, actuals and surprises and a report within 30 days); if data you need is "
        'missing, say so in missing_data and use outlook "unknown".'
    ),
)


SENTIMENT = AgentSpec(
    name="sentiment",
    role=Role.SENTIMENT,
    model=SentimentView,
    tools=("get_news", "get_earnings_dates"),
    data_tools=("get_news",),
    instructions=(
        "You are a news and sentiment analyst looking for red flags (earnings, lawsuits, "
        "downgrades; get_earnings_dates says whether a report falls within 30 days). Use only "
        'news fetched with your tools; with none, answer label "unknown".'
    ),
)


ANALYSTS = (TECHNICAL, FUNDAMENTAL, SENTIMENT)


SYNTHESIS_INSTRUCTIONS = (
    "You are the synthesis step. Combine the analysts' results, the deterministic scorer's "
    "rule votes and the risk assessor's flags into one recommendation: signal BUY, HOLD or SELL, "
    "a confidence between 0 and 1 (a judgement), one to six rationale statements each citing the "
    "tool_call_ids it rests on, and short risk notes. A BUY or SELL is accepted only when your "
    "statements restate scorer rules (with their numbers) that vote its way. Do not repeat the "
    "confidence or any score in the text."
)
