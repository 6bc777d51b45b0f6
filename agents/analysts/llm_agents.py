"""LiteLLM analysts: technical, fundamental, sentiment (analysis stage), synthesis with the risk
assessor's flags (recommendation stage) and the grounding correction (review stage).

Order and context passing (seed 003 graph, seed 004 orchestrator): technical → fundamental →
sentiment → synthesis; each later agent receives the earlier agents' structured results. Agents
are pluggable: an agent is offered every registered tool among ``AgentSpec.tools``; one whose
data tools are all missing (``get_fundamentals``/``get_news`` need a configured source) and whose
context holds no data of its kind is *skipped without an LLM call* and says what it lacks. That
keeps the default configuration at ≤ 5 calls per analysis (docs/benchmarks.md).

Failures never invent a result: an answer still invalid after the repair round, an LLM error or
an exhausted budget → the deterministic analyst's result, with the failure recorded as a
non-critical error (the analysis completes) and shown in the report.

Analysts never see the pipeline state: they take plain values and return an
:class:`~agents.analysts.outcome.AnalystOutcome` (the answer, the tool calls made, the failures);
the stage that runs them applies those records to the state (``pipeline.stages.common``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date
from typing import Any

from agents.analysts import deterministic
from agents.analysts.models import (
    AGENT_MODELS,
    FundamentalView,
    SentimentView,
    SynthesisView,
    TechnicalView,
    _Result,
)
from agents.analysts.outcome import AnalystError, AnalystOutcome, ToolCallRecord
from agents.llm.config import Role
from agents.llm.loop import StructuredFailure, extract_json, run_agentic_loop, structured_answer
from agents.llm.runner import run_sync
from agents.llm.session import BudgetExhaustedError, LLMError, LLMSession
from agents.news.providers import news_configured
from agents.scorer import score_technical
from agents.tools.catalog import load_builtin_tools, run_tool
from agents.tools.fundamentals import fundamentals_configured
from agents.tools.registry import REGISTRY, ToolContext
from pipeline.core.settings import Settings

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
    ``get_fundamentals`` need their folders/providers configured; others always do.
    An analyst whose data tools are all unconfigured makes no LLM call."""
    if name == "get_news":
        return news_configured(settings)
    if name == "get_fundamentals":
        return fundamentals_configured(settings)
    return True


def available_tools(names: tuple[str, ...]) -> list[str]:
    """The registered tools among ``names`` (in order)."""
    load_builtin_tools()
    return [n for n in names if n in REGISTRY]


@dataclass
class _Log:
    """The tool calls and failures of one run, in order, until :meth:`outcome` freezes them."""

    tool_calls: list[ToolCallRecord] = field(default_factory=list)
    errors: list[AnalystError] = field(default_factory=list)

    def outcome[T](self, value: T) -> AnalystOutcome[T]:
        return AnalystOutcome(value=value, tool_calls=tuple(self.tool_calls), errors=tuple(self.errors))


def make_executor(
    *, ctx: ToolContext, allowed: list[str], calls: list[ToolCallRecord]
) -> Callable[[str, dict[str, Any]], dict[str, Any]]:
    """The loop's tool executor: ``run_tool`` (same registry, same ``tool_calls`` rows in
    ``ctx.rows``), each finished call appended to ``calls`` (the stage records it in the tool
    history and cites it on success); the envelope goes back to the model compacted.

    A failed tool call is returned to the model, not made an error of the analysis: the model
    chose the arguments, and the row records it. A tool outside ``allowed`` is refused with an
    ``INVALID_INPUT`` error without running anything (and without a record)."""

    def execute(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        if name not in allowed:
            return {
                "error": {"code": "INVALID_INPUT", "message": f"unknown tool {name!r}; use one of {allowed}"}
            }
        envelope = run_tool(name=name, arguments=arguments, ctx=ctx)
        calls.append(ToolCallRecord(name=name, envelope=envelope))
        result: dict[str, Any] = compact_for_llm(envelope.to_public(), ref=envelope.tool_call_id)
        return result

    return execute


def failure_of(*, agent: str, exc: Exception) -> AnalystError:
    """The non-critical error to record for LLM failure ``exc`` of ``agent``: code
    ``LLM_BUDGET_EXHAUSTED`` (``BudgetExhaustedError``), ``LLM_INVALID_OUTPUT``
    (``StructuredFailure``) or ``LLM_ERROR`` (anything else); the message is cut to 1,000
    characters before the note that the deterministic result was used. Raises nothing."""
    if isinstance(exc, BudgetExhaustedError):
        code = "LLM_BUDGET_EXHAUSTED"
    elif isinstance(exc, StructuredFailure):
        code = "LLM_INVALID_OUTPUT"
    else:
        code = "LLM_ERROR"
    return AnalystError(
        code=code, message=f"{agent}: {exc}"[:1000] + "; the deterministic result was used", critical=False
    )


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
        response_model=model,
    )
    answer = await structured_answer(session=session, agent=agent, role=role, result=result, model=model)
    return answer, result.models[-1]


def _run(
    *,
    log: _Log,
    session: LLMSession,
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
        log: where a failure is recorded (an :class:`AnalystError`, in order).
        agent: the agent name of the failure and of the ``llm_calls`` rows.
        role / system / user / tools / executor / model: the :func:`_agent_call` arguments.
        fallback: ``fallback(reason)`` gives the deterministic result (``None``: none).
        context_refs: tool_call_ids the agent's context rests on (kept in the record).
    Returns:
        A :func:`_record` dict: ``source`` "llm" with the answering model, or "deterministic"
        with ``error`` "CODE: message"; ``llm_call_ids`` are the calls this agent made.
    Raises:
        Nothing for ``LLMError``/``StructuredFailure`` (recorded in ``log`` as non-critical
        errors); other exceptions propagate.
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
        error = failure_of(agent=agent, exc=exc)
        log.errors.append(error)
        failure = f"{error.code}: {exc}"
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
    *,
    ctx: ToolContext,
    session: LLMSession,
    symbol: str,
    as_of: date | None,
    user_query: str,
    stock_data: dict[str, Any] | None,
    analysis: dict[str, Any] | None,
) -> AnalystOutcome[dict[str, dict[str, Any]]]:
    """Run the technical, fundamental and sentiment analysts with context passing.

    Args:
        ctx: the tool context of the stage (tool calls the models ask for run through it).
        session: the LLM session (model calls, ``llm_calls`` rows, budget).
        symbol / as_of / user_query: the analysis' ticker, date and request (prompt context).
        stock_data: the research summary (``quote``, ``quote_ref``, ``history_ref``).
        analysis: the analysis so far; requires ``analysis["technical"]`` (the indicators) and
            ``technical_ref``: without them the caller skips this.
    Returns:
        An outcome whose value is ``{name: {source: "llm"|"deterministic"|"skipped", model,
        result, context_refs, llm_call_ids, error}}`` (``result`` follows the agent's model in
        ``agents.analysts.models``), with the models' tool calls and the LLM failures in order.
    Raises:
        Whatever other than ``LLMError``/``StructuredFailure`` the LLM loop or a tool raises.
    """
    log = _Log()
    analysis = analysis or {}
    stock = stock_data or {}
    technical = analysis.get("technical") or {}
    quote = stock.get("quote")
    tech_ref, quote_ref = analysis.get("technical_ref", ""), stock.get("quote_ref", "")
    records: dict[str, dict[str, Any]] = {}
    base = (
        f"Symbol {symbol}, analysis date {as_of}. User request: {user_query!r}.\n"
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
        fallback = _fallback(spec.name, analysis=analysis, quote=quote, refs=context_refs)
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
            log=log,
            session=session,
            agent=spec.name,
            role=spec.role,
            system=system,
            user=context,
            tools=tools,
            executor=make_executor(ctx=ctx, allowed=names, calls=log.tool_calls),
            model=spec.model,
            fallback=fallback,
            context_refs=context_refs,
        )
    return log.outcome(records)


def _fallback(
    name: str, *, analysis: dict[str, Any], quote: dict[str, Any] | None, refs: list[str]
) -> Callable[[str], _Result]:
    """``fallback(reason)``: the deterministic result of analyst ``name`` from ``analysis`` (the
    indicators and their ref) and the research ``quote``, citing ``refs``."""

    def technical(reason: str) -> _Result:
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
    *,
    session: LLMSession,
    symbol: str,
    as_of: date | None,
    user_query: str,
    agents: dict[str, dict[str, Any]],
    source_refs: list[str],
    deterministic_rec: dict[str, Any],
) -> AnalystOutcome[dict[str, Any]]:
    """Synthesis + risk assessor (seed 003): an LLM recommendation from the analysts' results, the
    deterministic scorer's reading and the risk flags (NEAR_52W_HIGH, HIGH_VOLATILITY).

    Args:
        session: the LLM session.
        symbol / as_of / user_query: the analysis' ticker, date and request (prompt context).
        agents: :func:`run_analysts`' records (``{name: {source, result, ...}}``).
        source_refs: every tool_call_id the analysis cites so far (offered to the model, and
            the record's ``context_refs``).
        deterministic_rec: the scorer's recommendation (signal, confidence, score, rationale,
            risk_flags, stop_loss, risk_per_share).
    Returns:
        An outcome whose value is a record like :func:`run_analysts`' (``result`` a
        ``SynthesisView`` dump, or ``None`` with ``source`` "deterministic" when it failed: the
        caller keeps the scorer's recommendation), with the LLM failure if any. No tool calls.
    """
    log = _Log()
    agents = agents or {}
    scorer = {k: deterministic_rec.get(k) for k in ("signal", "confidence", "score")}
    scorer["rationale"] = deterministic_rec.get("rationale", [])
    flags = deterministic_rec.get("risk_flags", [])
    analysts = {k: {"source": v["source"], **v["result"]} for k, v in agents.items()}
    stops = {k: deterministic_rec.get(k) for k in ("stop_loss", "risk_per_share")}
    context = (
        f"Symbol {symbol}, analysis date {as_of}. User request: {user_query!r}.\n"
        f"Analysts: {json.dumps(analysts, default=str)}\n"
        f"Deterministic scorer: {json.dumps(scorer, default=str)}\n"
        f"Risk assessor flags: {json.dumps(flags, default=str)}\n"
        f"Stop and risk per share: {json.dumps(stops, default=str)}\n"
        f"Known tool_call_ids: {source_refs}\n"
    )
    system = (
        f"{SYNTHESIS_INSTRUCTIONS}\n{GROUNDING_RULES}\nJSON schema of your answer: {_schema(SynthesisView)}"
    )
    refs = list(source_refs)
    if session.exhausted or not session.config.model_for(Role.SYNTHESIS):
        reason = "the LLM budget is spent" if session.exhausted else "no model configured for synthesis"
        return log.outcome(
            {
                "source": "skipped",
                "model": None,
                "result": None,
                "context_refs": refs,
                "llm_call_ids": [],
                "error": reason,
            }
        )
    record = _run(
        log=log,
        session=session,
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
    return log.outcome(record)


def correct_numbers(
    *,
    session: LLMSession,
    parts: dict[str, dict[str, Any]],
    sources: dict[str, Any],
) -> AnalystOutcome[dict[str, dict[str, Any]]]:
    """The grounding correction round: ONE call asking the synthesis model to rewrite the
    LLM-written ``parts`` (``{name: {"result": ..., "unverified": [...]}}``) without the listed
    numbers, given the cited tool outputs ``sources`` (``{tool_call_id: data}``).

    Returns an outcome whose value is ``{name: corrected result dict}`` for each part that came
    back valid; parts that are missing or invalid are left out (they stay unverified). An LLM
    error (the budget included) gives ``{}`` with the failure as a non-critical error, like the
    agents'; a spent budget before the call gives ``{}`` with nothing recorded. No tool calls.
    """
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
        return AnalystOutcome(value={})
    try:
        text = run_sync(call())
    except LLMError as exc:
        return AnalystOutcome(value={}, errors=(failure_of(agent="grounding_correction", exc=exc),))
    try:
        data = extract_json(text)
    except ValueError:
        return AnalystOutcome(value={})
    out: dict[str, dict[str, Any]] = {}
    for name in parts:
        model = AGENT_MODELS.get(name)
        if model is None or not isinstance(data.get(name), dict):
            continue
        try:
            out[name] = model.model_validate(data[name]).model_dump(mode="json")
        except ValueError:
            continue
    return AnalystOutcome(value=out)
