"""The synthesis: one recommendation from the analysts' checked results, the scorer's rule votes
and the risk flags, accepted only when its signal is supported by its remaining statements."""

from __future__ import annotations

from datetime import date
from typing import Any

from agents.analysts.enforce import context_sources, signal_support
from agents.analysts.llm_agents.accept import run_agent
from agents.analysts.llm_agents.ask import skip_reason
from agents.analysts.llm_agents.check import notes_shown
from agents.analysts.llm_agents.context import synthesis_context
from agents.analysts.llm_agents.records import Log, record_of
from agents.analysts.llm_agents.specs import GROUNDING_RULES, SYNTHESIS_INSTRUCTIONS
from agents.analysts.models import SynthesisView
from agents.analysts.outcome import AnalystError, AnalystOutcome
from agents.analysts.prompts import answer_keys, system_prompt
from agents.llm.config import Role
from agents.llm.session import LLMSession
from agents.tools.registry import ToolContext


def run_synthesis(
    *,
    ctx: ToolContext,
    session: LLMSession,
    symbol: str,
    as_of: date | None,
    user_query: str,
    agents: dict[str, dict[str, Any]],
    source_refs: list[str],
    deterministic_rec: dict[str, Any],
) -> AnalystOutcome[dict[str, Any]]:
    """Synthesis + risk assessor (docs/design.md, "Synthesis"): an LLM recommendation from the analysts'
    results, the
    deterministic scorer's reading and the risk flags (NEAR_52W_HIGH, HIGH_VOLATILITY), grounded
    and checked before it is passed on (:mod:`agents.analysts.enforce`: rule 1 on every
    rationale statement and risk note, one correction round, drops; rule 2 on the signal).

    Args:
        ctx: the stage's tool context (loads the cited outputs for the grounding check).
        session: the LLM session.
        symbol / as_of / user_query: the analysis' ticker, date and request (prompt context).
        agents: :func:`run_analysts`' records (``{name: {source, result, ...}}``).
        source_refs: every tool_call_id the analysis cites so far (the sources the answer may
            cite, and the record's ``context_refs``).
        deterministic_rec: the scorer's recommendation (signal, confidence, score, rationale,
            components, risk_flags, stop_loss, risk_per_share).
    Returns:
        An outcome whose value is a record like :func:`run_analysts`' plus ``signal_check``
        (:class:`~agents.analysts.enforce.SignalCheck` as JSON). ``source`` is "llm" only when
        the checked answer stands; "rejected" when its signal is not supported by its accepted
        statements (``error`` says why; the caller keeps the scorer's recommendation);
        "deterministic"/"skipped" with ``result`` None on a failure or a spent budget.
    """
    log = Log()
    agents = agents or {}
    context = synthesis_context(
        symbol=symbol, as_of=as_of, user_query=user_query, agents=agents, deterministic_rec=deterministic_rec
    )
    system = system_prompt(
        instructions=SYNTHESIS_INSTRUCTIONS, rules=GROUNDING_RULES, keys=answer_keys(SynthesisView)
    )
    refs = list(source_refs)
    spent = skip_reason(session)
    if spent or not session.config.model_for(Role.SYNTHESIS):
        reason = spent or "no model configured for synthesis"
        return log.outcome(record_of(result=None, source="skipped", context_refs=refs, error=reason))
    record = run_agent(
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
        sources=lambda: context_sources(ctx=ctx, known=refs),
        # statements that are only the analysts' notes written back restate no rule
        shown=notes_shown(agents),
    )
    if record["source"] == "llm" and record["result"]:
        check = signal_support(
            signal=record["result"]["signal"],
            statements=record["result"]["rationale"],
            components=deterministic_rec.get("components") or [],
        )
        record["signal_check"] = check.to_json()
        if not check.accepted:
            record["source"] = "rejected"
            why = f"{check.reason}; the scorer's {deterministic_rec.get('signal')} stands"
            record["error"] = f"LLM_SIGNAL_UNSUPPORTED: {why}"
            log.errors.append(AnalystError(code="LLM_SIGNAL_UNSUPPORTED", message=f"synthesis: {why}"))
    return log.outcome(record)
