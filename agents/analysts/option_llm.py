"""The option plan with LLM chart, options and research analysts (docs/design.md, "LLM option
analysts"), each grounded like the other LLM analysts (:mod:`agents.analysts.llm_agents`); one
module for both rights (a cash-secured put, a covered call).

The deterministic plan (:func:`agents.analysts.option_plan.run_option_plan`) always runs first: it is the
fallback of every step, and its computed views are the models' context. Each step asks a model
only when its role has one (``FINAGENT_LLM_MODEL_CHART`` / ``_OPTIONS`` / ``_RESEARCH``, or
``FINAGENT_LLM_MODEL`` for all) and the stage's time and token budgets allow.

The rules are a floor the models cannot lower (when in doubt, reject): a rule's reject
(no price history, no support below the close, a strong downtrend, earnings inside the DTE)
stands without asking a model; a model may add a reject, or confirm with its own reading.

* **Chart** (``ChartDecision``): given the computed view (trend, levels, Fibonacci confluence,
  extension), the model may call the chart tools and answers pass or reject. The strike cap
  stays the computed nearest support (numbers are computed in code).
* **Options** (``OptionsDecision``): given the chart view and the plan's rules, the model calls
  the option tools (``calculate_iv_hv``, ``filter_options`` for puts, ``filter_calls`` for calls,
  ...) and selects a contract the screen passed, or rejects.
* **Research** (``ResearchDecision``): given the proposed put and the earnings entry, the model
  may read news, earnings dates and fundamentals and answers pass or reject (red flags).

Checks before an answer is used, in order:

1. Grounding (rule 1 of :mod:`agents.analysts.enforce`): each rationale statement's numbers must
   match a tool output it cites; one correction round, then unverified statements are dropped;
   nothing left → the deterministic decision.
2. Support: a ``select`` stands only when its contract is in the ``passing`` list of a
   ``filter_options``/``filter_calls`` output that an accepted statement cites, AND it passes every
   floor of the plan itself: the model may have screened with looser arguments, so its row is
   checked again against the deterministic screen's rules (delta band, DTE, liquidity: open
   interest, volume, spread; income yield over the T-bill; the strike cap or floor; the earnings
   cutoff) and the IV/forecast floor; a contract failing one is refused, naming the rules. A
   ``reject`` of any analyst
   stands only when an accepted statement cites a tool output of its context or of its own data calls (not the
   calculator). Otherwise the deterministic decision stands (``LLM_DECISION_UNSUPPORTED``).
3. Failures (invalid answer, LLM error, token/USD or time budget) → the deterministic decision,
   recorded as a non-critical error.

The record's ``decided_by`` says which author (``llm``/``deterministic``) decided each step;
``<step>.llm`` holds each asked model's record (answer, grounding, llm_call_ids).
"""

from __future__ import annotations

import json
from typing import Any

from agents.analysts.enforce import Sources, context_sources, grounded_calculations
from agents.analysts.llm_agents import (
    GROUNDING_RULES,
    Log,
    available_tools,
    make_executor,
    record_of,
    run_agent,
    skip_reason,
)
from agents.analysts.models import ChartDecision, OptionsDecision, ResearchDecision, _Result
from agents.analysts.option_plan import OptionPlanInputs, research_view, run_option_plan
from agents.analysts.outcome import AnalystError, AnalystOutcome, ToolCallRecord
from agents.analysts.prompts import chart_example, options_example, research_example, system_prompt
from agents.llm.config import Role
from agents.llm.session import LLMSession
from agents.tools.registry import REGISTRY, ToolContext

#: Tools offered to the options analyst (the option tools plus the calculator).
OPTIONS_TOOLS = (
    "calculate_iv_hv",
    "filter_options",
    "filter_calls",
    "get_option_context",
    "get_option_chain",
    "get_option_greeks",
    "calculate_roc",
    "calculator",
)
#: A pick "at" the support cap may exceed it by this fraction: the cap is a support level read off
#: bars (× the chain/bars price ratio across a split), e.g. 88.57 × 7 = 619.99, and a 620 strike is
#: at that support for a trader; 0.1 % is far below the 0.4–0.8 % of one strike step there.
CAP_TOLERANCE = 0.001
#: The option tools whose output a reject may rest on.
_OPTION_DATA_TOOLS = frozenset(OPTIONS_TOOLS) - {"calculator"}
#: Tools offered to the chart analyst (its chart tools) and the research analyst.
CHART_TOOLS = ("technical_indicators", "find_support_resistance", "calculate_fib_levels", "calculator")
RESEARCH_TOOLS = ("get_earnings_dates", "get_news", "get_fundamentals", "calculator")

CHART_INSTRUCTIONS = (
    "You are the chart analyst of a {strategy} plan. Judge from the computed chart view "
    "whether the chart suits selling a {noun}. For a put we want an uptrend or a firm sideways "
    "range, a price not stretched far above its nearest support, and support levels (ideally with "
    "Fibonacci confluence) below the price; for a call, resistance above the price the shares may "
    "not break before expiry. You may call the chart tools to look closer. Answer pass or "
    "reject with your reading of trend direction, trend quality and extension risk; each "
    "rationale statement cites the tool_call_ids holding its numbers."
)
RESEARCH_INSTRUCTIONS = (
    "You are the research analyst of a {strategy} plan. Look for red flags that could gap "
    "the stock down before the {noun} expires: an earnings report inside the expiry, negative news, "
    "weak fundamentals. You may call get_earnings_dates, get_news and get_fundamentals. Be "
    "conservative: when a cited output shows a real risk, reject. Each rationale statement cites "
    "the tool_call_ids holding its facts."
)

OPTIONS_INSTRUCTIONS = (
    "You are the options analyst of a {strategy} plan. Given the chart analyst's view, decide "
    "whether to sell a {noun}. Check at-the-money IV against the real-world volatility forecast with "
    "calculate_iv_hv (iv_forecast_ratio at least the minimum given), then screen with {tool}, passing "
    "{bound_arg} ({bound}, in the chain's units) and expiry_before (the earnings cutoff given). Select "
    "one contract from a {tool} result's passing list, copying its OCC symbol into contract, or reject "
    "when IV is too low or nothing passes. The plan checks your pick again against its own floors "
    "(delta band, DTE, open interest, volume, spread, income yield over the T-bill, the strike bound, "
    "the earnings cutoff): a screen run with looser arguments does not make a contract acceptable. "
    "Each rationale statement cites the tool_call_ids holding its numbers."
)


def instructions(template: str, right: str) -> str:
    """An analyst's instructions for the plan's right (``put`` or ``call``)."""
    put = right == "put"
    return template.format(
        strategy="cash-secured put" if put else "covered call",
        noun=right,
        tool="filter_options" if put else "filter_calls",
        bound_arg="max_strike" if put else "min_strike",
        bound="strikes at or below the nearest support"
        if put
        else "strikes at or above the resistance and the cost basis",
    )


def _decision_support(
    decision: dict[str, Any], *, calls: list[ToolCallRecord], tool: str = "filter_options"
) -> tuple[dict[str, Any] | None, str | None]:
    """``(passing entry or None, reason it is unsupported or None)`` for a grounded decision;
    ``tool``: the plan's screen (``filter_options`` for puts, ``filter_calls`` for calls)."""
    cited = {ref for s in decision["rationale"] for ref in s["source_refs"]}
    if decision["recommendation"] == "select":
        for call in calls:
            env = call.envelope
            if call.name != tool or not env.ok or env.data is None:
                continue
            if env.tool_call_id not in cited:
                continue
            for entry in env.data.get("passing") or []:
                if entry.get("contract") == decision.get("contract"):
                    return entry, None
        return None, (
            f"contract {decision.get('contract')!r} is not in the passing list of a {tool} "
            "output its statements cite"
        )
    own = {c.envelope.tool_call_id for c in calls if c.name in _OPTION_DATA_TOOLS}
    if cited & own:
        return None, None
    return None, "no accepted statement cites an option tool output of its own"


def _ask(
    *,
    ctx: ToolContext,
    session: LLMSession,
    log: Log,
    agent: str,
    role: Role,
    instructions: str,
    model: type[_Result],
    tools: tuple[str, ...],
    user: str,
    context_refs: list[str],
    example: dict[str, Any],
) -> tuple[dict[str, Any], list[ToolCallRecord]]:
    """One grounded csp agent: ``(agent record, the model's own tool calls)``. The record's
    ``source`` is "skipped" (no model for ``role``, or the budget is spent), "deterministic" (an
    LLM failure, or nothing verifiable left) or "llm" (a checked answer in ``result``). The
    system prompt shows ``example`` (a filled answer, ``agents.analysts.prompts``) like the
    other analysts'; the bounded schema travels as ``response_format`` (``_agent_call``). A
    record of an asked model keeps the ``example`` it was shown (to measure copying)."""
    spent = skip_reason(session)
    if spent or not session.config.model_for(role):
        reason = spent or f"no model configured for the {role.value} role"
        return record_of(result=None, source="skipped", error=reason), []
    names = available_tools(tools)
    first = len(log.tool_calls)

    def sources() -> Sources:
        shown = context_sources(ctx=ctx, known=context_refs)
        calls = [(c.name, c.envelope.tool_call_id, c.envelope.data) for c in log.tool_calls[first:]]
        own = grounded_calculations([c for c in calls if c[2] is not None], sources=shown)
        return context_sources(ctx=ctx, known=[*context_refs, *own], base=context_refs)

    agent_record = run_agent(
        log=log,
        session=session,
        agent=agent,
        role=role,
        system=system_prompt(instructions=instructions, rules=GROUNDING_RULES, example=example),
        user=user,
        tools=[REGISTRY[n].openai_schema() for n in names],
        executor=make_executor(ctx=ctx, allowed=names, calls=log.tool_calls),
        model=model,
        fallback=lambda reason: None,
        context_refs=context_refs,
        sources=sources,
        example=example,
    )
    agent_record["example"] = example
    return agent_record, log.tool_calls[first:]


def _unsupported(log: Log, agent_record: dict[str, Any], step: str, why: str) -> None:
    """Mark an answer whose decision its statements do not support: the rules' decision stands."""
    agent_record["source"] = "rejected"
    agent_record["error"] = f"LLM_DECISION_UNSUPPORTED: {why}; the deterministic decision stands"
    log.errors.append(
        AnalystError(
            code="LLM_DECISION_UNSUPPORTED", message=f"{step}: {why}; the deterministic decision stands"
        )
    )


def _reject(record: dict[str, Any], *, by: str, reasons: list[dict[str, Any]]) -> None:
    """End the plan early: rejected by ``by`` with ``reasons``; later steps' results dropped."""
    later = {
        "chart": ("options", "research", "suggestion", "alternatives"),
        "research": ("suggestion", "alternatives"),
    }
    for key in later.get(by, ()):
        record.pop(key, None)
    record.update(status="rejected", rejected_by=by, reasons=reasons)
    record["decided_by"][by] = "llm"


def _statements(result: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"text": s["text"], "source_refs": s["source_refs"]} for s in result["rationale"]]


def _cites_own_or_context(result: dict[str, Any], refs: set[str]) -> bool:
    return any(ref in refs for s in result["rationale"] for ref in s["source_refs"])


def _judged_pass(
    log: Log,
    record: dict[str, Any],
    agent_record: dict[str, Any],
    *,
    own: list[ToolCallRecord],
    context_refs: list[str],
    step: str,
) -> dict[str, Any] | None:
    """Apply a pass/reject answer of the chart or research analyst to ``record``: no checked
    answer → nothing (the rules' step stands); a reject citing no output of its context or own
    data calls → ``LLM_DECISION_UNSUPPORTED``; a supported reject ends the plan. Returns the
    checked answer when it is a pass (``decided_by[step]`` set to ``llm``), else ``None``."""
    if agent_record["source"] != "llm" or not agent_record["result"]:
        return None
    result: dict[str, Any] = agent_record["result"]
    if result["recommendation"] == "reject":
        refs = set(context_refs) | {c.envelope.tool_call_id for c in own if c.name != "calculator"}
        if not _cites_own_or_context(result, refs):
            _unsupported(log, agent_record, step, f"no accepted statement cites a {step} tool output")
        else:
            _reject(record, by=step, reasons=_statements(result))
        return None
    record["decided_by"][step] = "llm"
    return result


def _chart_step(
    *, ctx: ToolContext, session: LLMSession, log: Log, record: dict[str, Any], inputs: OptionPlanInputs
) -> None:
    """The LLM chart analyst over the rules' passing chart view (module docstring): a supported
    reject ends the plan; a pass adds the model's checked reading to the view's reasons."""
    symbol, as_of = inputs.symbol, inputs.as_of
    view = record["chart"]
    context_refs = [r for r in view.get("source_refs", []) if r]
    computed = {
        k: view.get(k)
        for k in (
            "close",
            "support_levels",
            "resistance_levels",
            "nearest_support",
            "nearest_resistance",
            "fib_confluence",
            "trend_direction",
            "trend_quality",
            "extension_risk",
        )
        if k in view
    }
    user = (
        f"Symbol {symbol}, analysis date {as_of}. Computed chart view (tool_call_ids {context_refs}): "
        f"{json.dumps(computed, default=str)}\n"
    )
    agent_record, own = _ask(
        ctx=ctx, session=session, log=log, agent="chart", role=Role.CHART,
        instructions=instructions(CHART_INSTRUCTIONS, inputs.right),
        model=ChartDecision, tools=CHART_TOOLS, user=user, context_refs=context_refs,
        example=chart_example(view=view, refs=context_refs, seed=f"chart|{symbol}|{as_of}"),
    )  # fmt: skip
    record["chart"] = view = {**view, "llm": agent_record}
    result = _judged_pass(log, record, agent_record, own=own, context_refs=context_refs, step="chart")
    if result is None:
        return
    view["reasons"] = [*view["reasons"], *_statements(result)]
    record["reasons"] = [*_statements(result), *record.get("reasons", [])]


def _research_step(
    *,
    ctx: ToolContext,
    session: LLMSession,
    log: Log,
    record: dict[str, Any],
    inputs: OptionPlanInputs,
) -> None:
    """The LLM research analyst over a suggestion the research rules passed: a supported reject
    (red flags in cited earnings, news or fundamentals outputs) ends the plan; a pass adds its
    checked statements. It cannot pass what the rules reject (it is only asked after a pass)."""
    symbol, as_of = inputs.symbol, inputs.as_of
    suggestion = record["suggestion"]
    research = record.get("research") or {}
    context_refs = [r for r in [inputs.earnings_ref, *research.get("source_refs", [])] if r]
    context_refs = list(dict.fromkeys(context_refs))
    user = (
        f"Symbol {symbol}, analysis date {as_of}. Proposed: sell the {inputs.noun} {suggestion['contract']} "
        f"(strike {suggestion['strike']}, expiry {suggestion['expiry']}, {suggestion['dte']} DTE). "
        f"Research rules' view (tool_call_ids {context_refs}): "
        f"{json.dumps({k: research.get(k) for k in ('earnings_risk', 'reasons')}, default=str)}\n"
    )
    agent_record, own = _ask(
        ctx=ctx, session=session, log=log, agent="research", role=Role.RESEARCH,
        instructions=instructions(RESEARCH_INSTRUCTIONS, inputs.right), model=ResearchDecision,
        tools=RESEARCH_TOOLS, user=user, context_refs=context_refs,
        example=research_example(research=research, refs=context_refs, seed=f"research|{symbol}|{as_of}"),
    )  # fmt: skip
    record["research"] = {**research, "llm": agent_record}
    result = _judged_pass(log, record, agent_record, own=own, context_refs=context_refs, step="research")
    if result is None:
        return
    record["reasons"] = [*record.get("reasons", []), *_statements(result)]


def run_option_plan_llm(
    *, inputs: OptionPlanInputs, ctx: ToolContext, session: LLMSession
) -> AnalystOutcome[dict[str, Any]]:
    """The option plan with LLM chart, options and research analysts (module docstring).

    Args:
        inputs: the plan's inputs (:class:`agents.analysts.option_plan.OptionPlanInputs`).
        ctx / session: the stage's tool context and LLM session.
    Returns:
        The plan's outcome: its record (same shape as the deterministic one, plus ``decided_by:
        {chart, options, research}`` with ``llm``/``deterministic`` and, for each analyst the
        model was asked as, ``<step>.llm``: the agent record of :mod:`agents.analysts.llm_agents`
        with ``grounding``), the deterministic and the models' tool calls, and the LLM failures.
    Raises: whatever other than an LLM failure the loop or a tool raises.
    """
    det = run_option_plan(inputs)
    record = dict(det.value)
    record["decided_by"] = {"chart": "deterministic", "options": "deterministic", "research": "deterministic"}
    log = Log(tool_calls=list(det.tool_calls))
    # a rule's reject before the options (no data, no support, a strong downtrend, no shares) stands
    if record["rejected_by"] in ("chart", "position"):
        return log.outcome(record)
    _chart_step(ctx=ctx, session=session, log=log, record=record, inputs=inputs)
    if record["rejected_by"] == "chart":
        return log.outcome(record)
    _options_step(ctx=ctx, session=session, log=log, record=record, inputs=inputs)
    if record["status"] == "suggested":
        _research_step(ctx=ctx, session=session, log=log, record=record, inputs=inputs)
    return log.outcome(record)


def floor_failures(entry: dict[str, Any], det: dict[str, Any]) -> list[str]:
    """The plan's own floors ``entry`` (a screen row the model picked) fails: the rules of the
    deterministic screen (``det["rules"]``: delta, DTE, liquidity, yield over the T-bill, the
    strike bound, the earnings cutoff; :func:`agents.quant.options.economics.failed_rules`);
    ``["no_screen"]`` when the deterministic screen did not run (its rules are unknown)."""
    from dataclasses import fields
    from datetime import date as _date

    from agents.quant.options.economics import OptionRules, failed_rules

    rules = det.get("rules")
    if not rules:
        return ["no_screen"]
    known = {f.name for f in fields(OptionRules)}
    given = {k: v for k, v in rules.items() if k in known}
    if given.get("expiry_before"):
        given["expiry_before"] = _date.fromisoformat(str(given["expiry_before"]))
    return failed_rules(entry, OptionRules(**given))


def _options_step(
    *, ctx: ToolContext, session: LLMSession, log: Log, record: dict[str, Any], inputs: OptionPlanInputs
) -> None:
    """The LLM options analyst (module docstring, checks 1–3); updates ``record`` in place."""
    symbol, as_of = inputs.symbol, inputs.as_of
    tool = "filter_options" if inputs.right == "put" else "filter_calls"
    view = record["chart"]
    context_refs = [r for r in view.get("source_refs", []) if r]
    det = record.get("options") or {}
    rules = det.get("rules") or {}
    cutoff = ((record.get("research") or {}).get("cutoff") or {}).get("first_excluded")
    shown_view = {k: v for k, v in view.items() if k != "llm"}
    bound = (
        f"max_strike {det.get('max_strike')}"
        if inputs.right == "put"
        else f"min_strike {det.get('min_strike')}"
    )
    user = (
        f"Symbol {symbol}, analysis date {as_of}. Minimum IV/forecast ratio {inputs.min_iv_forecast}; "
        f"{bound}; expiry_before {cutoff}. The plan's floors: {json.dumps(rules, default=str)}.\n"
        f"Chart analyst (tool_call_ids {context_refs}): {json.dumps(shown_view, default=str)}\n"
    )
    agent, own = _ask(
        ctx=ctx, session=session, log=log, agent="options", role=Role.OPTIONS,
        instructions=instructions(OPTIONS_INSTRUCTIONS, inputs.right), model=OptionsDecision,
        tools=OPTIONS_TOOLS, user=user, context_refs=context_refs,
        example=options_example(view=view, refs=context_refs, seed=f"options|{symbol}|{as_of}"),
    )  # fmt: skip
    record["options"] = {**det, "llm": agent}
    if agent["source"] != "llm" or not agent["result"]:
        return
    decision = agent["result"]
    entry, unsupported = _decision_support(decision, calls=own, tool=tool)
    # the rules are a floor for a selection too: the IV/forecast floor, and every floor of the
    # plan's own screen (the model may have screened with looser arguments)
    ratio = (
        det.get("iv_forecast_ratio") if det.get("iv_forecast_ratio") is not None else det.get("iv_hv_ratio")
    )
    if entry is not None and ratio is not None and ratio < inputs.min_iv_forecast:
        unsupported = f"IV/forecast {ratio} is below the rule's {inputs.min_iv_forecast}"
    elif entry is not None and (failed := floor_failures(entry, det)):
        unsupported = f"{entry['contract']} fails the plan's floors: {', '.join(failed)}"
    if unsupported:
        _unsupported(log, agent, "options", unsupported)
        return
    reasons = _statements(decision)
    record["decided_by"]["options"] = "llm"
    for key in ("research", "suggestion", "alternatives"):
        record.pop(key, None)
    if entry is None:  # a supported reject
        record.update(status="rejected", rejected_by="options", reasons=reasons)
        return
    research = research_view(
        expiry=entry.get("last_trading_day") or entry["expiry"], noun=inputs.noun, earnings=inputs.earnings,
        earnings_ref=inputs.earnings_ref, as_of=as_of,
    )  # fmt: skip
    record["research"] = research
    if research["recommendation"] == "reject":
        record.update(status="rejected", rejected_by="research", reasons=research["reasons"])
        return
    opts = record["options"]
    cited = list(dict.fromkeys(r for s in reasons for r in s["source_refs"]))
    passing = [
        p
        for c in own
        if c.name == tool and c.envelope.data and entry in (c.envelope.data.get("passing") or [])
        for p in c.envelope.data["passing"]
    ]
    alternatives: list[dict[str, Any]] = []
    for p in passing:
        # the model's alternatives pass the plan's floors too (the earnings cutoff among them)
        if p != entry and p not in alternatives and not floor_failures(p, det):
            alternatives.append(p)
    # the suggestion rests on the model's own tool calls; the deterministic ones stay listed
    record["options"] = {
        **opts,
        "source_refs": cited,
        "deterministic_source_refs": opts.get("source_refs"),
        "candidates": [entry, *alternatives],
    }
    record.update(
        status="suggested",
        rejected_by=None,
        suggestion={**entry, "iv_hv_ratio": opts.get("iv_hv_ratio"), "hv": opts.get("hv")},
        alternatives=alternatives[:3],
        reasons=view["reasons"] + reasons + research["reasons"],
    )
