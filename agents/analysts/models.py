"""Result models of the analysts (docs/design.md, "Analyst graph" and "LLM option analysts").

Every model is what an LLM agent must answer (validated; invalid → one repair round) and what
the deterministic analyst produces, so later agents and the report read one shape whichever
produced it. ``source_refs`` are the ``tool_call_id``s the result rests on. Numbers in text and
in numeric fields must come from those tool outputs (checked by review); ``OPINION_FIELDS`` name
the numeric fields that are judgements, not facts (not grounding-checked); ``CHECKED_LABELS``
the labels and levels held to the cited data (``agents.analysts.claims.label_problems``).
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field


class _Result(BaseModel):
    model_config = ConfigDict(extra="forbid")

    OPINION_FIELDS: ClassVar[frozenset[str]] = frozenset()
    #: Judgement labels and price levels the cited outputs can contradict
    #: (``agents.analysts.claims.label_problems``), checked with the numbers.
    CHECKED_LABELS: ClassVar[tuple[str, ...]] = ()


class TechnicalView(_Result):
    """Technical/chart analyst (without options and chart images).

    Levels are prices in USD copied from tool outputs (moving averages, Bollinger bands,
    52-week range, bars): supports below the close, resistances above it. The labels and
    levels are held to the indicators (``CHECKED_LABELS``): a trend "down" with the close above
    both SMAs is a contradiction like a wrong number.
    """

    CHECKED_LABELS: ClassVar[tuple[str, ...]] = (
        "trend_direction",
        "trend_quality",
        "extension_risk",
        "support_levels",
        "resistance_levels",
    )

    recommendation: Literal["bullish", "bearish", "neutral"]
    trend_direction: Literal["up", "down", "sideways"]
    trend_quality: Literal["strong", "moderate", "weak"]
    support_levels: list[float] = Field(default_factory=list, max_length=8)
    resistance_levels: list[float] = Field(default_factory=list, max_length=8)
    extension_risk: Literal["low", "moderate", "high"]
    notes: str = Field(max_length=2000)
    source_refs: list[str] = Field(default_factory=list)


class FundamentalView(_Result):
    """Fundamental analyst: valuation and business data it could see, and what it lacked."""

    outlook: Literal["positive", "negative", "neutral", "unknown"]
    missing_data: list[str] = Field(default_factory=list, description="Inputs it needed but had no tool for.")
    notes: str = Field(max_length=2000)
    source_refs: list[str] = Field(default_factory=list)


class SentimentView(_Result):
    """Sentiment/research analyst: the headlines' tone and the news risks."""

    label: Literal["positive", "negative", "neutral", "unknown"]
    news_risk: Literal["low", "moderate", "high", "unknown"]
    missing_data: list[str] = Field(default_factory=list)
    notes: str = Field(max_length=2000)
    source_refs: list[str] = Field(default_factory=list)


class CitedStatement(BaseModel):
    """One rationale sentence and the ``tool_call_id``s it rests on (same shape as the scorer's)."""

    model_config = ConfigDict(extra="forbid")

    text: str = Field(min_length=1, max_length=600)
    source_refs: list[str] = Field(min_length=1)


#: Most rationale statements a synthesis may give: one per scorer rule (``agents.quant.scorer.WEIGHTS``
#: has six), the most the prompt shows it (``agents.analysts.llm_agents._scorer_digest``).
SYNTHESIS_MAX_STATEMENTS = 6


class SynthesisView(_Result):
    """Synthesis (docs/design.md, "Synthesis"): the recommendation.

    ``confidence`` in [0, 1] is a judgement (not grounding-checked); ``rationale`` statements
    must cite tool calls; ``risks``: short notes on the risk assessor's flags and gaps.
    """

    OPINION_FIELDS: ClassVar[frozenset[str]] = frozenset({"confidence"})

    signal: Literal["BUY", "HOLD", "SELL"]
    confidence: float = Field(ge=0.0, le=1.0)
    rationale: list[CitedStatement] = Field(min_length=1, max_length=SYNTHESIS_MAX_STATEMENTS)
    risks: list[str] = Field(default_factory=list, max_length=8)


class OptionsDecision(_Result):
    """Options analyst of the csp plan: select one put the CSP screen passed, or reject.

    ``contract``: the OCC symbol copied from a ``filter_options`` result's ``passing`` list it
    cites (required for ``select``); ``rationale``: one to four statements, each citing the
    tool_call_ids whose outputs hold its numbers (IV, HV, strike, delta, ROC, ...).
    """

    recommendation: Literal["select", "reject"]
    contract: str | None = Field(default=None, max_length=40)
    rationale: list[CitedStatement] = Field(min_length=1, max_length=4)


class ChartDecision(_Result):
    """Chart analyst of the csp plan: pass the chart to the options analyst, or reject.

    The trend and extension judgements read the computed indicators and levels; ``rationale``:
    one to four statements, each citing the tool_call_ids whose outputs hold its numbers (close,
    moving averages, ADX, support and Fibonacci levels). The strike cap stays the computed
    nearest support: the model judges the chart, it does not set a number.
    """

    recommendation: Literal["pass", "reject"]
    trend_direction: Literal["up", "down", "sideways"]
    trend_quality: Literal["strong", "moderate", "weak"]
    extension_risk: Literal["low", "moderate", "high"]
    rationale: list[CitedStatement] = Field(min_length=1, max_length=4)


class ResearchDecision(_Result):
    """Research analyst of the csp plan: red flags for the chosen put until its expiry.

    ``rationale``: one to four statements citing the tool_call_ids of the earnings, news or
    fundamentals outputs they rest on.
    """

    recommendation: Literal["pass", "reject"]
    earnings_risk: Literal["low", "moderate", "high", "unknown"]
    news_risk: Literal["low", "moderate", "high", "unknown"]
    rationale: list[CitedStatement] = Field(min_length=1, max_length=4)


AGENT_MODELS: dict[str, type[_Result]] = {
    "technical": TechnicalView,
    "fundamental": FundamentalView,
    "sentiment": SentimentView,
    "synthesis": SynthesisView,
}
