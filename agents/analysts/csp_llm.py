"""The csp plan with an LLM options analyst (seed 004 Options Analyst), grounded like the other
LLM analysts (:mod:`agents.analysts.llm_agents`).

The deterministic plan (:func:`agents.analysts.csp.run_csp_plan`) always runs first: it is the
fallback and its chart view is the options analyst's context. When the chart passes and a model
is configured for the ``options`` role, the model gets the chart view and the CSP rules and
calls the option tools itself (``calculate_iv_hv``, ``filter_options``, ``get_option_chain``,
``get_option_greeks``, ``calculate_roc``, ``calculator``), then answers an
:class:`~agents.analysts.models.OptionsDecision`.

Checks before the decision is used, in order:

1. Grounding (rule 1 of :mod:`agents.analysts.enforce`): each rationale statement's numbers must
   match a tool output it cites; one correction round, then unverified statements are dropped;
   nothing left → the deterministic decision.
2. Support: a ``select`` stands only when its contract is in the ``passing`` list of a
   ``filter_options`` output that an accepted statement cites (the screen applied the rules, the
   model only chooses among passing puts); a ``reject`` stands only when an accepted statement
   cites one of the model's own option tool calls. Otherwise the deterministic decision stands
   (``LLM_DECISION_UNSUPPORTED``).
3. Failures (invalid answer, LLM error, token/USD or time budget) → the deterministic decision,
   recorded as a non-critical error.

The research analyst then judges the chosen expiry deterministically. The record's
``decided_by`` says which author (``llm``/``deterministic``) decided each analyst's step.
"""

from __future__ import annotations

import json
from datetime import date
from typing import Any

from agents.analysts.csp import Runner, research_view, run_csp_plan
from agents.analysts.enforce import Sources, context_sources, grounded_calculations
from agents.analysts.llm_agents import (
    GROUNDING_RULES,
    _Log,
    _record,
    _run,
    _schema,
    available_tools,
    make_executor,
    skip_reason,
)
from agents.analysts.models import OptionsDecision
from agents.analysts.outcome import AnalystError, AnalystOutcome, ToolCallRecord
from agents.llm.config import Role
from agents.llm.session import LLMSession
from agents.tools.registry import REGISTRY, ToolContext

#: Tools offered to the options analyst (seed 004 options tools plus the calculator).
OPTIONS_TOOLS = (
    "calculate_iv_hv",
    "filter_options",
    "get_option_chain",
    "get_option_greeks",
    "calculate_roc",
    "calculator",
)
#: The option tools whose output a reject may rest on.
_OPTION_DATA_TOOLS = frozenset(OPTIONS_TOOLS) - {"calculator"}

OPTIONS_INSTRUCTIONS = (
    "You are the options analyst of a cash-secured put plan. Given the chart analyst's view, "
    "decide whether to sell a put. Check IV against HV with calculate_iv_hv (premiums should be "
    "rich: IV at least the HV times the minimum ratio given), then screen the puts with "
    "filter_options, passing max_strike (strikes at or below the nearest support, in the chain's "
    "units). Select one contract from a filter_options result's passing list, copying its OCC "
    "symbol into contract, or reject when IV is too low or nothing passes. Each rationale "
    "statement cites the tool_call_ids holding its numbers."
)


def _decision_support(
    decision: dict[str, Any], *, calls: list[ToolCallRecord]
) -> tuple[dict[str, Any] | None, str | None]:
    """``(passing entry or None, reason it is unsupported or None)`` for a grounded decision."""
    cited = {ref for s in decision["rationale"] for ref in s["source_refs"]}
    if decision["recommendation"] == "select":
        for call in calls:
            env = call.envelope
            if call.name != "filter_options" or not env.ok or env.data is None:
                continue
            if env.tool_call_id not in cited:
                continue
            for entry in env.data.get("passing") or []:
                if entry.get("contract") == decision.get("contract"):
                    return entry, None
        return None, (
            f"contract {decision.get('contract')!r} is not in the passing list of a filter_options "
            "output its statements cite"
        )
    own = {c.envelope.tool_call_id for c in calls if c.name in _OPTION_DATA_TOOLS}
    if cited & own:
        return None, None
    return None, "no accepted statement cites an option tool output of its own"


def run_csp_plan_llm(
    *,
    ctx: ToolContext,
    session: LLMSession,
    symbol: str,
    as_of: date,
    technical: dict[str, Any] | None,
    technical_ref: str | None,
    chart: dict[str, Any] | None,
    earnings: dict[str, Any] | None,
    earnings_ref: str | None,
    run: Runner,
    hv_period: int = 20,
    min_iv_hv: float = 1.0,
) -> AnalystOutcome[dict[str, Any]]:
    """The csp plan with the LLM options analyst (module docstring); arguments as
    :func:`agents.analysts.csp.run_csp_plan` plus the stage's ``ctx`` and LLM ``session``.

    Returns the plan's outcome: the ``csp`` record (same shape as the deterministic one, plus
    ``decided_by: {chart, options, research}`` with ``llm``/``deterministic`` and, when the model
    was asked, ``options.llm``: the agent record of :mod:`agents.analysts.llm_agents` with
    ``grounding``), the deterministic and the model's tool calls, and the LLM failures.
    Raises: whatever other than an LLM failure the loop or a tool raises.
    """
    det = run_csp_plan(
        symbol=symbol,
        as_of=as_of,
        technical=technical,
        technical_ref=technical_ref,
        chart=chart,
        earnings=earnings,
        earnings_ref=earnings_ref,
        run=run,
        hv_period=hv_period,
        min_iv_hv=min_iv_hv,
    )
    record = dict(det.value)
    record["decided_by"] = {"chart": "deterministic", "options": "deterministic", "research": "deterministic"}
    log = _Log(tool_calls=list(det.tool_calls))
    if record["rejected_by"] == "chart":
        return log.outcome(record)
    view = record["chart"]
    context_refs = [r for r in view.get("source_refs", []) if r]
    names = available_tools(OPTIONS_TOOLS)
    spent = skip_reason(session)
    if spent or not session.config.model_for(Role.OPTIONS):
        reason = spent or "no model configured for the options role"
        record["options"] = {**record["options"], "llm": _record(result=None, source="skipped", error=reason)}
        return log.outcome(record)
    rules = {
        k: getattr(ctx.settings, k)
        for k in dir(ctx.settings)
        if k.startswith("csp_") and isinstance(getattr(ctx.settings, k), int | float)
    }
    user = (
        f"Symbol {symbol}, analysis date {as_of}. HV period {hv_period} days; minimum IV/HV ratio "
        f"{min_iv_hv}. CSP rules (settings): {json.dumps(rules)}.\n"
        f"Chart analyst (tool_call_ids {context_refs}): {json.dumps(view, default=str)}\n"
    )
    system = (
        f"{OPTIONS_INSTRUCTIONS}\n{GROUNDING_RULES}\nJSON schema of your answer: {_schema(OptionsDecision)}"
    )
    first = len(log.tool_calls)

    def sources() -> Sources:
        shown = context_sources(ctx=ctx, known=context_refs)
        calls = [(c.name, c.envelope.tool_call_id, c.envelope.data) for c in log.tool_calls[first:]]
        own = grounded_calculations([c for c in calls if c[2] is not None], sources=shown)
        return context_sources(ctx=ctx, known=[*context_refs, *own], base=context_refs)

    agent = _run(
        log=log,
        session=session,
        agent="options",
        role=Role.OPTIONS,
        system=system,
        user=user,
        tools=[REGISTRY[n].openai_schema() for n in names],
        executor=make_executor(ctx=ctx, allowed=names, calls=log.tool_calls),
        model=OptionsDecision,
        fallback=lambda reason: None,
        context_refs=context_refs,
        sources=sources,
    )
    record["options"] = {**record["options"], "llm": agent}
    if agent["source"] != "llm" or not agent["result"]:
        return log.outcome(record)
    decision = agent["result"]
    entry, unsupported = _decision_support(decision, calls=log.tool_calls[first:])
    if unsupported:
        agent["source"] = "rejected"
        agent["error"] = f"LLM_DECISION_UNSUPPORTED: {unsupported}; the deterministic decision stands"
        log.errors.append(
            AnalystError(
                code="LLM_DECISION_UNSUPPORTED",
                message=f"options: {unsupported}; the deterministic decision stands",
            )
        )
        return log.outcome(record)
    reasons = [{"text": s["text"], "source_refs": s["source_refs"]} for s in decision["rationale"]]
    record["decided_by"]["options"] = "llm"
    for key in ("research", "suggestion", "alternatives"):
        record.pop(key, None)
    if entry is None:  # a supported reject
        record.update(status="rejected", rejected_by="options", reasons=reasons)
        return log.outcome(record)
    research = research_view(
        expiry=entry["expiry"], earnings=earnings, earnings_ref=earnings_ref, as_of=as_of
    )
    record["research"] = research
    if research["recommendation"] == "reject":
        record.update(status="rejected", rejected_by="research", reasons=research["reasons"])
        return log.outcome(record)
    opts = record["options"]
    cited = list(dict.fromkeys(r for s in reasons for r in s["source_refs"]))
    # the suggestion rests on the model's own tool calls; the deterministic ones stay listed
    record["options"] = opts = {
        **opts,
        "source_refs": cited,
        "deterministic_source_refs": opts["source_refs"],
    }
    passing = [
        p
        for c in log.tool_calls[first:]
        if c.name == "filter_options" and c.envelope.data and entry in (c.envelope.data.get("passing") or [])
        for p in c.envelope.data["passing"]
    ]
    alternatives: list[dict[str, Any]] = []
    for p in passing:
        if p != entry and p not in alternatives:
            alternatives.append(p)
    record.update(
        status="suggested",
        rejected_by=None,
        suggestion={**entry, "iv_hv_ratio": opts.get("iv_hv_ratio"), "hv": opts.get("hv")},
        alternatives=alternatives[:3],
        reasons=view["reasons"] + reasons + research["reasons"],
    )
    return log.outcome(record)
