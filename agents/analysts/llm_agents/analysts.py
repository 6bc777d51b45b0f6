"""The technical, fundamental and sentiment analysts run in order, each shown the earlier ones'
checked judgements; an analyst without data, model or budget is skipped with its deterministic
result."""

from __future__ import annotations

from collections.abc import Callable
from datetime import date
from typing import Any

from agents.analysts import deterministic
from agents.analysts.enforce import Sources, context_sources, grounded_calculations
from agents.analysts.llm_agents.accept import run_agent
from agents.analysts.llm_agents.ask import (
    available_tools,
    make_executor,
    out_of_time,
    skip_reason,
    tool_configured,
)
from agents.analysts.llm_agents.check import notes_shown
from agents.analysts.llm_agents.context import AnalystContext, analyst_context, analyst_inputs
from agents.analysts.llm_agents.records import Log, record_of
from agents.analysts.llm_agents.specs import ANALYSTS, GROUNDING_RULES, AgentSpec
from agents.analysts.models import _Result
from agents.analysts.outcome import AnalystError, AnalystOutcome
from agents.analysts.prompts import answer_keys, system_prompt
from agents.analysts.readings import scorer_inputs
from agents.llm.session import LLMSession
from agents.quant.scorer import score_technical
from agents.tools.registry import REGISTRY, ToolContext


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

    Each answer is grounded (:func:`correct_answer`) before the next analyst sees it, so a number no
    cited tool output holds never reaches a later prompt. When the time or token budget runs
    out, the remaining analysts are skipped with their deterministic result and the reason.

    Args:
        ctx: the tool context of the stage (tool calls the models ask for run through it).
        session: the LLM session (model calls, ``llm_calls`` rows, budget, deadline).
        symbol / as_of / user_query: the analysis' ticker, date and request (prompt context).
        stock_data: the research summary (``quote``, ``quote_ref``, ``history_ref``).
        analysis: the analysis so far; requires ``analysis["technical"]`` (the indicators) and
            ``technical_ref``: without them the caller skips this.
    Returns:
        An outcome whose value is ``{name: {source: "llm"|"deterministic"|"skipped", model,
        result, context_refs, llm_call_ids, error, grounding}}`` (``result`` follows the agent's
        model in ``agents.analysts.models``), with the models' tool calls and the LLM failures
        in order.
    Raises:
        Whatever other than ``LLMError``/``StructuredFailure`` the LLM loop or a tool raises.
    """
    log = Log()
    analysis = analysis or {}
    stock = stock_data or {}
    inputs = analyst_inputs(
        ctx=ctx, symbol=symbol, as_of=as_of, user_query=user_query, stock=stock, analysis=analysis
    )
    records: dict[str, dict[str, Any]] = {}
    for spec in ANALYSTS:
        names = [n for n in available_tools(spec.tools) if tool_configured(n, ctx.settings)]
        has_data = any(n in names for n in spec.data_tools)  # data_tools ⊆ tools: checked once
        told = analyst_context(spec, inputs, records=records, has_data=has_data)
        context_refs = told.refs
        fallback = _fallback(spec.name, analysis=analysis, quote=inputs.quote, refs=context_refs)
        reason = _not_asked(log, session, spec, told)
        if reason is not None:
            records[spec.name] = record_of(
                result=fallback(reason), source="skipped", context_refs=context_refs, error=reason
            )
            continue
        # FINAGENT_LLM_MAX_ITERATIONS=0: no tool round, one JSON answer from the context
        tools = [REGISTRY[n].openai_schema() for n in names] if session.config.max_iterations > 0 else []
        system = system_prompt(
            instructions=spec.instructions, rules=GROUNDING_RULES, keys=answer_keys(spec.model)
        )
        first_call = len(log.tool_calls)

        def sources(refs: list[str] = context_refs, first: int = first_call) -> Sources:
            shown = context_sources(ctx=ctx, known=refs)
            calls = [(c.name, c.envelope.tool_call_id, c.envelope.data) for c in log.tool_calls[first:]]
            own = grounded_calculations([c for c in calls if c[2] is not None], sources=shown)
            return context_sources(ctx=ctx, known=[*refs, *own], base=refs)

        records[spec.name] = run_agent(
            log=log,
            session=session,
            agent=spec.name,
            role=spec.role,
            system=system,
            user=told.text,
            tools=tools,
            executor=make_executor(ctx=ctx, allowed=names, calls=log.tool_calls),
            model=spec.model,
            fallback=fallback,
            context_refs=context_refs,
            sources=sources,
            # an analyst writing an earlier analyst's notes back has not read its own data
            shown=notes_shown(records),
            data=told.data,
            topic=told.topic,
        )
    return log.outcome(records)


def _not_asked(log: Log, session: LLMSession, spec: AgentSpec, told: AnalystContext) -> str | None:
    """Why analyst ``spec`` is not asked (its data absent or missing, no model for its role, a
    spent time or token/USD budget), or ``None`` when it is; a data-holding analyst skipped for
    time is logged in ``log`` as ``LLM_TIME_BUDGET_EXHAUSTED``. Raises nothing."""
    has_data, absent = told.has_data, told.absent
    spent = skip_reason(session)
    if not (spent or absent or not has_data or not session.config.model_for(spec.role)):
        return None
    reason = (
        absent
        if absent
        else f"no data tool for it is registered ({', '.join(spec.data_tools)})"
        if not has_data
        else f"no model configured for the {spec.role.value} role"
        if not session.config.model_for(spec.role)
        else str(spent)
    )
    if has_data and not absent and out_of_time(session) and session.config.model_for(spec.role):
        log.errors.append(
            AnalystError(
                code="LLM_TIME_BUDGET_EXHAUSTED",
                message=f"{spec.name}: not asked, {reason}; the deterministic result was used",
            )
        )
    return reason


def _fallback(
    name: str, *, analysis: dict[str, Any], quote: dict[str, Any] | None, refs: list[str]
) -> Callable[[str], _Result]:
    """``fallback(reason)``: the deterministic result of analyst ``name`` from ``analysis`` (the
    indicators and their ref) and the research ``quote``, citing ``refs``."""

    def technical(reason: str) -> _Result:
        tech = analysis.get("technical") or {}
        signal = None
        if tech and analysis.get("technical_ref"):
            refs_of = {"indicators": analysis["technical_ref"]}
            signal = score_technical(indicators=scorer_inputs(tech), refs=refs_of).signal
        return deterministic.technical_view(technical=tech, signal=signal, refs=refs)

    if name == "technical":
        return technical
    if name == "fundamental":
        return lambda reason: deterministic.fundamental_view(quote=quote, refs=refs, reason=reason)
    return lambda reason: deterministic.sentiment_view(refs=refs, reason=reason)
