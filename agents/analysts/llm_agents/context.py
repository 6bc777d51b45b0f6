"""What each agent is shown: the analysts' context messages (the research digests, the earlier
analysts' judgements and the computed readings) and the synthesis's (hashed into
``agents.analysts.versions.prompt_version``: a change here changes what a model reads)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import date
from typing import Any

from agents.analysts.llm_agents.specs import AgentSpec
from agents.analysts.models import SYNTHESIS_MAX_STATEMENTS
from agents.analysts.prompts import (
    FUNDAMENTAL_TOPIC,
    HEADLINES_SHOWN,
    QUOTE_KEYS,
    QUOTE_SHOWN,
    READINGS_LINE,
    fundamentals_digest,
    headline_digest,
    news_topic,
    short_quote,
    short_technical,
)
from agents.analysts.readings import fundamental_readings, sentiment_readings, technical_readings
from agents.tools.registry import ToolContext


def scorer_digest(deterministic_rec: dict[str, Any]) -> dict[str, Any]:
    """What the synthesis is shown of the scorer: signal, score, confidence and one statement
    per evaluated rule (at most ``len(agents.quant.scorer.WEIGHTS)`` = 6, within the schema's
    ``SYNTHESIS_MAX_STATEMENTS``), each with its vote; the summary, quote and skipped-rule
    statements are left out to keep the prompt short, and so are the score and the confidence
    (the answer must not repeat them)."""
    components = deterministic_rec.get("components") or []
    return {
        "signal": deterministic_rec.get("signal"),
        "rules": [
            {
                "rule": c.get("name"),
                "vote": c.get("vote"),
                "text": c.get("text"),
                "source_refs": c.get("source_refs"),
            }
            for c in components[:SYNTHESIS_MAX_STATEMENTS]
        ],
    }


def synthesis_context(
    *,
    symbol: str,
    as_of: date | None,
    user_query: str,
    agents: dict[str, dict[str, Any]],
    deterministic_rec: dict[str, Any],
) -> str:
    """The synthesis's user message: the analysts' checked judgements (their labels and notes,
    with the refs their notes were checked against; levels and missing data left out), the
    scorer's rule votes with their statements and refs, and the risk flags (a compact JSON line
    each; kept short for small local models)."""
    analysts = {
        k: {**judgement(v.get("result") or {}), "source_refs": checked_refs(v)} for k, v in agents.items()
    }
    flags = [
        {"flag": f.get("flag"), "text": f.get("text"), "source_refs": f.get("source_refs")}
        for f in deterministic_rec.get("risk_flags", [])
    ]
    dump = json.dumps
    return (
        f"Symbol {symbol}, analysis date {as_of}. User request: {user_query!r}.\n"
        f"Analysts: {dump(analysts, default=str)}\n"
        f"Deterministic scorer: {dump(scorer_digest(deterministic_rec), default=str)}\n"
        f"Risk assessor flags: {dump(flags, default=str)}\n"
    )


#: The fields of an analyst's result the synthesis is shown (labels and notes).
JUDGEMENT_KEYS = (
    "recommendation",
    "trend_direction",
    "trend_quality",
    "extension_risk",
    "outlook",
    "label",
    "news_risk",
    "notes",
)


def checked_refs(record: dict[str, Any]) -> list[str]:
    """The refs an analyst record's notes were checked against: its answer's ``source_refs``
    and the outputs it was shown (``context_refs``), in that order, once each. Shown the notes
    without them, the real 0.5B model restated "the previous close 186.18" of the technical
    notes citing only the indicators (the one ref near it), and the statement was dropped
    (docs/benchmarks.md, seventh run)."""
    cited = [*((record.get("result") or {}).get("source_refs") or []), *(record.get("context_refs") or [])]
    return [r for r in dict.fromkeys(cited) if r]


def judgement(result: dict[str, Any]) -> dict[str, Any]:
    """``result`` cut to :data:`JUDGEMENT_KEYS` (what the synthesis needs of an analyst)."""
    return {k: result[k] for k in JUDGEMENT_KEYS if k in result}


@dataclass(frozen=True)
class AnalystInputs:
    """What the analysts may be shown of one analysis, read once before the first is asked:
    the ``header`` line (symbol, date, request), the research ``quote`` and the indicators
    (``technical``) with their refs, the fundamentals' digest and the news output (``news``, the
    stored ``get_news`` data) with its headline digest. Refs are "" when absent."""

    header: str
    quote: dict[str, Any] | None
    quote_ref: str
    technical: dict[str, Any]
    tech_ref: str
    history_ref: str
    fund_ref: str
    fund_digest: dict[str, Any]
    news_ref: str
    news: dict[str, Any] | None
    headlines: list[dict[str, Any]]


def analyst_inputs(
    *,
    ctx: ToolContext,
    symbol: str,
    as_of: date | None,
    user_query: str,
    stock: dict[str, Any],
    analysis: dict[str, Any],
) -> AnalystInputs:
    """The :class:`AnalystInputs` of an analysis from the research summary ``stock`` and the
    analysis so far (``analysis``); the news output is loaded through ``ctx``. Raises nothing
    of its own (``ctx.result_data``'s errors propagate)."""
    technical = analysis.get("technical") or {}
    quote = stock.get("quote")
    tech_ref, quote_ref = analysis.get("technical_ref", ""), stock.get("quote_ref", "")
    fund_ref, news_ref = stock.get("fundamentals_ref") or "", stock.get("news_ref") or ""
    fund_digest = fundamentals_digest(stock.get("fundamentals"))
    # the stored get_news output; without it, the research view's top headlines (no source)
    top = ((stock.get("views") or {}).get("sentiment") or {}).get("top") or []
    news = ctx.result_data(news_ref) if news_ref else None
    headlines = headline_digest(news or {"news": top}) if news_ref else []
    header = f"Symbol {symbol}, analysis date {as_of}. User request: {user_query!r}.\n"
    return AnalystInputs(
        header=header,
        quote=quote,
        quote_ref=quote_ref,
        technical=technical,
        tech_ref=tech_ref,
        history_ref=stock.get("history_ref", ""),
        fund_ref=fund_ref,
        fund_digest=fund_digest,
        news_ref=news_ref,
        news=news,
        headlines=headlines,
    )


@dataclass(frozen=True)
class AnalystContext:
    """One analyst's user message (``text``) and the refs it rests on (``refs``); whether it
    holds data to judge (``has_data``), what that data is (``data``, ``None``: nothing to
    judge) and the ``topic`` words naming it (``None``: not checked), and why the data leaves
    nothing to judge (``absent``, ``None`` when it does not)."""

    text: str
    refs: list[str]
    has_data: bool
    data: str | None = None
    topic: re.Pattern[str] | None = None
    absent: str | None = None


def analyst_context(
    spec: AgentSpec, inputs: AnalystInputs, *, records: dict[str, dict[str, Any]], has_data: bool
) -> AnalystContext:
    """What analyst ``spec`` is shown: the header, the earlier analysts' checked judgements
    (``records``, not their notes; not for the technical analyst), the quote keys it sees
    (``prompts.QUOTE_SHOWN``), its data (indicators, fundamentals digest or headlines) and the
    computed readings of that data last. ``has_data``: whether a data tool of it is offered.
    Raises nothing."""
    quote, quote_ref = inputs.quote, inputs.quote_ref
    quote_keys = QUOTE_SHOWN.get(spec.name, QUOTE_KEYS)  # what this analyst sees of the quote
    shown_quote = json.dumps(short_quote(quote, keys=quote_keys), default=str)
    quote_line = f"Quote (tool_call_id {quote_ref}): {shown_quote}\n" if quote_keys else ""
    # the data last, its computed readings closing the context: the small model writes
    # about what it read last ("the analyst's results ..." when that was the earlier labels)
    readings: list[str] = []
    data: str | None = None
    topic: re.Pattern[str] | None = None  # the words naming ``data`` (reading_problem)
    absent: str | None = None  # why the data tool's output leaves nothing to judge
    if spec.name == "technical":
        tech_ref, technical = inputs.tech_ref, inputs.technical
        context_refs = [tech_ref, quote_ref, inputs.history_ref]
        indicators = json.dumps(short_technical(technical), default=str)
        context = inputs.header + quote_line + f"Indicators (tool_call_id {tech_ref}): {indicators}\n"
        # comparisons are code's job: the 0.5B model got them wrong from the bare numbers
        readings = technical_readings(technical=technical, quote=quote)
        has_data = has_data and bool(technical)
        data = "the indicators"
    else:
        context_refs = [quote_ref] if quote_keys else []
        # only checked results travel on (their unverified statements are already dropped),
        # and only their judgements: shown the technical analyst's notes, the real 0.5B
        # model wrote them back as its own fundamental and sentiment notes (docs/llm.md,
        # "Prompts for small models"); the synthesis still sees every analyst's notes
        earlier = {
            k: {
                "source": v["source"],
                **{j: x for j, x in judgement(v["result"] or {}).items() if j != "notes"},
            }
            for k, v in records.items()
        }
        context = inputs.header + f"Earlier analysts' judgements: {json.dumps(earlier, default=str)}\n"
        context += quote_line
        # what research already fetched, digested: with no tool offered (max_iterations 0)
        # the analyst would see none of it, and with tools it saves a round
        fund_ref, fund_digest, news_ref = inputs.fund_ref, inputs.fund_digest, inputs.news_ref
        if spec.name == "fundamental":
            if fund_ref and fund_digest:
                context_refs = [fund_ref, quote_ref]
                context += f"Fundamentals (tool_call_id {fund_ref}): {json.dumps(fund_digest)}\n"
                readings = fundamental_readings(fund_digest)
                has_data, data, topic = True, "the fundamentals", FUNDAMENTAL_TOPIC
            elif quote and any(quote.get(k) is not None for k in ("market_cap", "pe_ratio")):
                # the quote's P/E is the one valuation figure there is: its rule of thumb
                readings = fundamental_readings(short_quote(quote))
                has_data, data = True, "the quote's P/E and market cap"
                topic = FUNDAMENTAL_TOPIC
        if spec.name == "sentiment" and news_ref:
            context_refs = [news_ref]
            shown = json.dumps(inputs.headlines, ensure_ascii=False)
            context += f"Headlines (tool_call_id {news_ref}, highest impact first): {shown}\n"
            readings = sentiment_readings(inputs.news)
            has_data, data, topic = True, HEADLINES_SHOWN, news_topic(inputs.headlines)
            if not inputs.headlines:
                # nothing to judge: asked anyway, the real 0.5B model wrote of the quote
                # ("the quote does not contain any relevant information") in two of three
                # answers, and a correct answer only restates that the window is empty
                absent = f"no headline names the company in the news window ({news_ref})"
    if readings:
        context += f"{READINGS_LINE} {json.dumps(readings)}\n"
    return AnalystContext(context, context_refs, has_data, data=data, topic=topic, absent=absent)
