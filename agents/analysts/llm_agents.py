"""LiteLLM analysts: technical, fundamental, sentiment (analysis stage), synthesis with the risk
assessor's flags (recommendation stage) and the grounding correction (review stage).

Order and context passing (seed 003 graph, seed 004 orchestrator): technical → fundamental →
sentiment → synthesis; each later agent receives the earlier agents' structured results. Agents
are pluggable: an agent is offered every registered tool among ``AgentSpec.tools``; one whose
data tools are all missing (``get_fundamentals``/``get_news`` arrive with issue 4) and whose
context holds no data of its kind is *skipped without an LLM call* and says what it lacks. That
keeps the default configuration at ≤ 5 calls per analysis (docs/benchmarks.md).

Failures never invent a result: an answer still invalid after the repair round, an LLM error or
an exhausted budget → the deterministic analyst's result, with the failure in ``state.errors``
(non-critical: the analysis completes) and in the report.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agents.analysts import deterministic
from agents.analysts.models import (
    FundamentalView,
    SentimentView,
    SynthesisView,
    TechnicalView,
    _Result,
)
from agents.llm.config import Role
from agents.llm.loop import StructuredFailure, run_agentic_loop, structured_answer
from agents.llm.runner import run_sync
from agents.llm.session import BudgetExhaustedError, LLMError, LLMSession
from agents.tools.catalog import load_builtin_tools, run_tool
from agents.tools.registry import REGISTRY, ToolContext
from pipeline.core.settings import Settings
from pipeline.core.state import FinancialAgentState, StageError
from pipeline.stages.common import record_call

#: Lists longer than this are cut to their last items before a tool output goes to a model
#: (500 bars of history are ~15k tokens; the full output stays in the tool_calls row).
MAX_LIST_ITEMS_FOR_LLM = 10

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
    "reading and the risk assessor's flags into one recommendation: signal BUY, HOLD or SELL, a "
    "confidence between 0 and 1 (a judgement; lower it for missing analysts and for risk flags), "
    "two to five rationale statements each citing the tool_call_ids it rests on, and short risk "
    "notes. Do not repeat the confidence or any score in the text."
)


def _schema(model: type[_Result]) -> str:
    return json.dumps(model.model_json_schema(), separators=(",", ":"))


def compact_for_llm(obj: Any, *, ref: str = "") -> Any:
    """``obj`` with long lists cut to their last ``MAX_LIST_ITEMS_FOR_LLM`` items (with a note)."""
    if isinstance(obj, dict):
        out: dict[str, Any] = {}
        for key, value in obj.items():
            if isinstance(value, list) and len(value) > MAX_LIST_ITEMS_FOR_LLM:
                out[key] = [compact_for_llm(v) for v in value[-MAX_LIST_ITEMS_FOR_LLM:]]
                out[f"{key}_note"] = (
                    f"last {MAX_LIST_ITEMS_FOR_LLM} of {len(value)} items; all are in tool output {ref}"
                )
            else:
                out[key] = compact_for_llm(value, ref=ref)
        return out
    if isinstance(obj, list):
        return [compact_for_llm(v, ref=ref) for v in obj]
    return obj


def tool_configured(name: str, settings: Settings) -> bool:
    """Whether tool ``name`` has a data source in ``settings``: ``get_news`` and
    ``get_fundamentals`` need their folders/providers configured (issue 4); others always do.
    An analyst whose data tools are all unconfigured makes no LLM call."""
    if name == "get_news":
        from agents.news.providers import news_configured

        return news_configured(settings)
    if name == "get_fundamentals":
        from agents.tools.fundamentals import fundamentals_configured

        return fundamentals_configured(settings)
    return True


def available_tools(names: tuple[str, ...]) -> list[str]:
    """The registered tools among ``names`` (in order)."""
    load_builtin_tools()
    return [n for n in names if n in REGISTRY]


def make_executor(
    *, state: FinancialAgentState, ctx: ToolContext, allowed: list[str]
) -> Callable[[str, dict[str, Any]], dict[str, Any]]:
    """The loop's tool executor: ``run_tool`` (same registry, same ``tool_calls`` rows), the call
    recorded in ``state.tool_history`` and cited on success; the envelope goes back compacted.
    A failed tool call is returned to the model, not added to ``state.errors``: the model chose
    the arguments, and the row records it."""

    def execute(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        if name not in allowed:
            return {
                "error": {"code": "INVALID_INPUT", "message": f"unknown tool {name!r}; use one of {allowed}"}
            }
        envelope = run_tool(name=name, arguments=arguments, ctx=ctx)
        record_call(state=state, ctx=ctx, name=name, envelope=envelope)
        result: dict[str, Any] = compact_for_llm(envelope.to_public(), ref=envelope.tool_call_id)
        return result

    return execute


def record_failure(state: FinancialAgentState, *, stage: str, agent: str, exc: Exception) -> str:
    """Append the non-critical ``StageError`` for an LLM failure; returns its code."""
    if isinstance(exc, BudgetExhaustedError):
        code = "LLM_BUDGET_EXHAUSTED"
    elif isinstance(exc, StructuredFailure):
        code = "LLM_INVALID_OUTPUT"
    else:
        code = "LLM_ERROR"
    state.errors.append(
        StageError(
            stage=stage,
            iteration=state.iteration,
            code=code,
            message=f"{agent}: {exc}"[:1000] + "; the deterministic result was used",
            critical=False,
        )
    )
    return code


def _record(
    *,
    result: _Result | None,
    source: str,
    model: str | None = None,
    context_refs: list[str] | None = None,
    llm_call_ids: list[str] | None = None,
    error: str | None = None,
) -> dict[str, Any]:
    return {
        "source": source,
        "model": model,
        "result": result.model_dump(mode="json") if result is not None else None,
        "context_refs": [r for r in context_refs or [] if r],
        "llm_call_ids": llm_call_ids or [],
        "error": error,
    }


async def _agent_call[M: _Result](
    *,
    session: LLMSession,
    agent: str,
    role: Role,
    system: str,
    user: str,
    tools: list[dict[str, Any]],
    executor: Callable[[str, dict[str, Any]], dict[str, Any]],
    model: type[M],
) -> tuple[M, str]:
    result = await run_agentic_loop(
        session=session,
        agent=agent,
        role=role,
        system_prompt=system,
        user_message=user,
        tools=tools,
        executor=executor,
        max_iterations=session.config.max_iterations,
        json_mode=True,
    )
    answer = await structured_answer(session=session, agent=agent, role=role, result=result, model=model)
    return answer, result.models[-1]


def _run(
    *,
    state: FinancialAgentState,
    session: LLMSession,
    stage: str,
    agent: str,
    role: Role,
    system: str,
    user: str,
    tools: list[dict[str, Any]],
    executor: Callable[[str, dict[str, Any]], dict[str, Any]],
    model: type[_Result],
    fallback: Callable[[str], _Result | None],
    context_refs: list[str],
) -> dict[str, Any]:
    """Run one agent (:func:`_agent_call`, blocking); on an LLM failure use its deterministic result.

    Args:
        stage / agent: where a failure is recorded in ``state.errors`` and the rows' agent name.
        role / system / user / tools / executor / model: the :func:`_agent_call` arguments.
        fallback: ``fallback(reason)`` gives the deterministic result (``None``: none).
        context_refs: tool_call_ids the agent's context rests on (kept in the record).
    Returns:
        A :func:`_record` dict: ``source`` "llm" with the answering model, or "deterministic"
        with ``error`` "CODE: message"; ``llm_call_ids`` are the calls this agent made.
    Raises:
        Nothing for ``LLMError``/``StructuredFailure`` (recorded as non-critical errors); other
        exceptions propagate.
    """
    before = len(session.rows)
    try:
        result, used_model = run_sync(
            _agent_call(
                session=session,
                agent=agent,
                role=role,
                system=system,
                user=user,
                tools=tools,
                executor=executor,
                model=model,
            )
        )
    except (LLMError, StructuredFailure) as exc:
        failure = f"{record_failure(state, stage=stage, agent=agent, exc=exc)}: {exc}"
        return _record(
            result=fallback(failure[:300]),
            source="deterministic",
            context_refs=context_refs,
            llm_call_ids=_call_ids_since(session, before),
            error=failure[:1000],
        )
    return _record(
        result=result,
        source="llm",
        model=used_model,
        context_refs=context_refs,
        llm_call_ids=_call_ids_since(session, before),
    )


def _call_ids_since(session: LLMSession, before: int) -> list[str]:
    """The distinct ``llm_call_id`` values of ``session.rows[before:]`` in first-seen order (one
    logical call has a row per attempt). ``before``: a row count taken earlier. Raises nothing."""
    return list(dict.fromkeys(r["llm_call_id"] for r in session.rows[before:]))


def run_analysts(
    *, state: FinancialAgentState, ctx: ToolContext, session: LLMSession
) -> dict[str, dict[str, Any]]:
    """Run the technical, fundamental and sentiment analysts with context passing.

    Returns ``{name: {source: "llm"|"deterministic"|"skipped", model, result, context_refs,
    llm_call_ids, error}}``; ``result`` follows the agent's model in ``agents.analysts.models``.
    Requires ``state.analysis["technical"]`` (the indicators); without it the caller skips this.
    """
    analysis = state.analysis or {}
    stock = state.stock_data or {}
    technical = analysis.get("technical") or {}
    quote = stock.get("quote")
    tech_ref, quote_ref = analysis.get("technical_ref", ""), stock.get("quote_ref", "")
    records: dict[str, dict[str, Any]] = {}
    base = (
        f"Symbol {state.stock_symbol}, analysis date {state.as_of}. User request: {state.user_query!r}.\n"
        f"Quote (tool_call_id {quote_ref}): {json.dumps(compact_for_llm(quote), default=str)}\n"
    )
    for spec in ANALYSTS:
        names = [n for n in available_tools(spec.tools) if tool_configured(n, ctx.settings)]
        has_data = any(n in names for n in spec.data_tools)  # data_tools ⊆ tools: checked once
        if spec.name == "technical":
            context_refs = [tech_ref, quote_ref, stock.get("history_ref", "")]
            indicators = json.dumps(compact_for_llm(technical), default=str)
            context = base + f"Indicators (tool_call_id {tech_ref}): {indicators}\n"
            has_data = has_data and bool(technical)
        else:
            context_refs = [quote_ref]
            earlier = {k: {"source": v["source"], **v["result"]} for k, v in records.items()}
            context = base + f"Earlier analysts' results: {json.dumps(earlier, default=str)}\n"
            if (
                spec.name == "fundamental"
                and quote
                and any(quote.get(k) is not None for k in ("market_cap", "pe_ratio"))
            ):
                has_data = True
        fallback = _fallback(spec.name, state=state, refs=context_refs)
        if session.exhausted or not has_data or not session.config.model_for(spec.role):
            reason = (
                "the LLM budget is spent"
                if session.exhausted
                else f"no data tool for it is registered ({', '.join(spec.data_tools)})"
                if not has_data
                else f"no model configured for the {spec.role.value} role"
            )
            records[spec.name] = _record(
                result=fallback(reason), source="skipped", context_refs=context_refs, error=reason
            )
            continue
        tools = [REGISTRY[n].openai_schema() for n in names]
        system = f"{spec.instructions}\n{GROUNDING_RULES}\nJSON schema of your answer: {_schema(spec.model)}"
        records[spec.name] = _run(
            state=state,
            session=session,
            stage=ctx.stage,
            agent=spec.name,
            role=spec.role,
            system=system,
            user=context,
            tools=tools,
            executor=make_executor(state=state, ctx=ctx, allowed=names),
            model=spec.model,
            fallback=fallback,
            context_refs=context_refs,
        )
    return records


def _fallback(name: str, *, state: FinancialAgentState, refs: list[str]) -> Callable[[str], _Result]:
    analysis = state.analysis or {}
    quote = (state.stock_data or {}).get("quote")

    def technical(reason: str) -> _Result:
        from agents.scorer import score_technical

        tech = analysis.get("technical") or {}
        signal = None
        if tech and analysis.get("technical_ref"):
            flat = {
                **(tech.get("indicators") or {}),
                **{k: tech[k] for k in ("close", "high_52w", "pct_from_52w_high") if k in tech},
            }
            signal = score_technical(indicators=flat, refs={"indicators": analysis["technical_ref"]}).signal
        return deterministic.technical_view(technical=tech, signal=signal, refs=refs)

    if name == "technical":
        return technical
    if name == "fundamental":
        return lambda reason: deterministic.fundamental_view(quote=quote, refs=refs, reason=reason)
    return lambda reason: deterministic.sentiment_view(refs=refs, reason=reason)


def run_synthesis(
    *, state: FinancialAgentState, ctx: ToolContext, session: LLMSession, deterministic_rec: dict[str, Any]
) -> dict[str, Any]:
    """Synthesis + risk assessor (seed 003): an LLM recommendation from the analysts' results, the
    deterministic scorer's reading and the risk flags (NEAR_52W_HIGH, HIGH_VOLATILITY).

    Returns a record like :func:`run_analysts`' (``result`` a ``SynthesisView`` dump, or ``None``
    with ``source`` "deterministic" when it failed: the caller keeps the scorer's recommendation).
    """
    agents = (state.analysis or {}).get("agents") or {}
    scorer = {k: deterministic_rec.get(k) for k in ("signal", "confidence", "score")}
    scorer["rationale"] = deterministic_rec.get("rationale", [])
    flags = deterministic_rec.get("risk_flags", [])
    analysts = {k: {"source": v["source"], **v["result"]} for k, v in agents.items()}
    stops = {k: deterministic_rec.get(k) for k in ("stop_loss", "risk_per_share")}
    context = (
        f"Symbol {state.stock_symbol}, analysis date {state.as_of}. User request: {state.user_query!r}.\n"
        f"Analysts: {json.dumps(analysts, default=str)}\n"
        f"Deterministic scorer: {json.dumps(scorer, default=str)}\n"
        f"Risk assessor flags: {json.dumps(flags, default=str)}\n"
        f"Stop and risk per share: {json.dumps(stops, default=str)}\n"
        f"Known tool_call_ids: {state.source_refs}\n"
    )
    system = (
        f"{SYNTHESIS_INSTRUCTIONS}\n{GROUNDING_RULES}\nJSON schema of your answer: {_schema(SynthesisView)}"
    )
    refs = list(state.source_refs)
    if session.exhausted or not session.config.model_for(Role.SYNTHESIS):
        reason = "the LLM budget is spent" if session.exhausted else "no model configured for synthesis"
        return {
            "source": "skipped",
            "model": None,
            "result": None,
            "context_refs": refs,
            "llm_call_ids": [],
            "error": reason,
        }
    return _run(
        state=state,
        session=session,
        stage=ctx.stage,
        agent="synthesis",
        role=Role.SYNTHESIS,
        system=system,
        user=context,
        tools=[],
        executor=lambda n, a: {},
        model=SynthesisView,
        fallback=lambda reason: None,
        context_refs=refs,
    )


def correct_numbers(
    *,
    state: FinancialAgentState,
    ctx: ToolContext,
    session: LLMSession,
    parts: dict[str, dict[str, Any]],
    sources: dict[str, Any],
) -> dict[str, dict[str, Any]]:
    """The grounding correction round: ONE call asking the synthesis model to rewrite the
    LLM-written ``parts`` (``{name: {"result": ..., "unverified": [...]}}``) without the listed
    numbers, given the cited tool outputs ``sources`` (``{tool_call_id: data}``).

    Returns ``{name: corrected result dict}`` for each part that came back valid; parts that are
    missing or invalid are left out (they stay unverified). LLM errors and the budget are
    recorded like the agents' (non-critical) and give ``{}``.
    """
    from agents.analysts.models import AGENT_MODELS

    payload = {name: part["result"] for name, part in parts.items()}
    listing = {name: part["unverified"] for name, part in parts.items()}
    system = (
        "You correct analysis texts. Some numbers in them match no tool output. Rewrite each part so "
        "that every number is copied exactly from the tool outputs below, or remove the claim. Keep "
        "everything else (fields, signal, citations) unchanged. Answer with one JSON object with the "
        "same keys as the parts given."
    )
    user = (
        f"Unverified numbers per part: {json.dumps(listing)}\n"
        f"Parts: {json.dumps(payload, default=str)}\n"
        f"Tool outputs: {json.dumps(compact_for_llm(sources), default=str)}"
    )
    messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]

    async def call() -> str:
        completion = await session.complete(
            agent="grounding_correction", role=Role.SYNTHESIS, messages=messages, json_mode=True
        )
        return completion.content

    if session.exhausted:
        return {}
    try:
        text = run_sync(call())
    except LLMError as exc:
        record_failure(state, stage=ctx.stage, agent="grounding_correction", exc=exc)
        return {}
    from agents.llm.loop import extract_json

    try:
        data = extract_json(text)
    except ValueError:
        return {}
    out: dict[str, dict[str, Any]] = {}
    for name in parts:
        model = AGENT_MODELS.get(name)
        if model is None or not isinstance(data.get(name), dict):
            continue
        try:
            out[name] = model.model_validate(data[name]).model_dump(mode="json")
        except ValueError:
            continue
    return out
