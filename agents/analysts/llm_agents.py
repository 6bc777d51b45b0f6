"""LiteLLM analysts: technical, fundamental, sentiment (analysis stage) and synthesis with the
risk assessor's flags (recommendation stage), each answer grounded before it is passed on.

Order and context passing (docs/design.md, "Analyst graph"): technical → fundamental →
sentiment → synthesis; each later agent receives the earlier agents' *checked* results. Agents
are pluggable: an agent is offered every registered tool among ``AgentSpec.tools``; one whose
data tools are all missing (``get_fundamentals``/``get_news`` need a configured source) and whose
context holds no data of its kind is *skipped without an LLM call* and says what it lacks. That
keeps the default configuration at ≤ 5 calls per analysis (docs/benchmarks.md).

Grounding enforced per answer (:mod:`agents.analysts.enforce`): a statement whose numbers match
no cited tool output gets one correction round (the agent's own conversation continued, asking
it to copy or remove them); what is still unverified is dropped and listed. The synthesis's
signal must be supported by its remaining statements (scorer rule votes), else the scorer's
signal stands.

Failures never invent a result: an answer still invalid after the repair round, an LLM error or
an exhausted budget (tokens, USD, or the stage's time budget) → the deterministic analyst's
result, with the failure recorded as a non-critical one-line error (the analysis completes)
saying what was done instead.

Analysts never see the pipeline state: they take plain values and return an
:class:`~agents.analysts.outcome.AnalystOutcome` (the answer, the tool calls made, the failures);
the stage that runs them applies those records to the state (``pipeline.stages.common``).
"""

from __future__ import annotations

import html
import json
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date
from typing import Any, NamedTuple

from agents.analysts import deterministic
from agents.analysts.enforce import (
    Dropped,
    Sources,
    context_sources,
    count_numbers,
    drop_unverified,
    grounded_calculations,
    signal_support,
    unverified_of,
)
from agents.analysts.models import (
    SYNTHESIS_MAX_STATEMENTS,
    FundamentalView,
    SentimentView,
    SynthesisView,
    TechnicalView,
    _Result,
)
from agents.analysts.outcome import AnalystError, AnalystOutcome, ToolCallRecord
from agents.analysts.prompts import (
    FUNDAMENTAL_TOPIC,
    HEADLINES_SHOWN,
    QUOTE_KEYS,
    QUOTE_SHOWN,
    READINGS_LINE,
    answer_keys,
    copied_example,
    finished,
    fundamentals_digest,
    grammar_schema,
    headline_digest,
    news_topic,
    reading_problem,
    short_quote,
    short_technical,
    system_prompt,
)
from agents.analysts.readings import (
    fundamental_readings,
    scorer_inputs,
    sentiment_readings,
    technical_readings,
)
from agents.data.routing import news_configured
from agents.llm.config import Role
from agents.llm.loop import StructuredFailure, extract_json, run_agentic_loop, structured_answer
from agents.llm.runner import run_sync
from agents.llm.session import (
    MIN_ATTEMPT_S,
    BudgetExhaustedError,
    LLMError,
    LLMSession,
    TimeBudgetExhaustedError,
)
from agents.quant.scorer import score_technical
from agents.tools.catalog import load_builtin_tools, run_tool
from agents.tools.fundamentals import fundamentals_configured
from agents.tools.registry import REGISTRY, ToolContext
from core.settings import Settings

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
    "rule votes and the risk assessor's flags into one recommendation: signal BUY, HOLD or SELL, "
    "a confidence between 0 and 1 (a judgement), one to six rationale statements each citing the "
    "tool_call_ids it rests on, and short risk notes. A BUY or SELL is accepted only when your "
    "statements restate scorer rules (with their numbers) that vote its way. Do not repeat the "
    "confidence or any score in the text."
)


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


def one_line(text: str, limit: int = 300) -> str:
    """``text`` as one line for a report: the first line of each ``; ``-separated part, white
    space collapsed, repeats removed, cut to ``limit`` characters (LiteLLM errors are multi-line
    and repeat the provider's message; the full text stays in the ``llm_calls`` rows)."""
    parts = []
    for part in str(text).split("; "):
        first = " ".join(part.strip().splitlines()[0].split()) if part.strip() else ""
        if first and first not in parts:
            parts.append(first)
    line = "; ".join(parts)
    return line if len(line) <= limit else line[: limit - 1] + "…"


def failure_of(
    *, agent: str, exc: Exception, consequence: str = "the deterministic result was used"
) -> AnalystError:
    """The non-critical error to record for LLM failure ``exc`` of ``agent``: code
    ``LLM_TIME_BUDGET_EXHAUSTED`` (``TimeBudgetExhaustedError``), ``LLM_BUDGET_EXHAUSTED``
    (``BudgetExhaustedError``), ``LLM_INVALID_OUTPUT`` (``StructuredFailure``) or ``LLM_ERROR``
    (anything else). The message is one line (:func:`one_line`: the details stay in the
    ``llm_calls`` rows) followed by ``consequence``, what was done instead. Raises nothing."""
    if isinstance(exc, TimeBudgetExhaustedError):
        code = "LLM_TIME_BUDGET_EXHAUSTED"
    elif isinstance(exc, BudgetExhaustedError):
        code = "LLM_BUDGET_EXHAUSTED"
    elif isinstance(exc, StructuredFailure):
        code = "LLM_INVALID_OUTPUT"
    else:
        code = "LLM_ERROR"
    detail = str(exc)
    if isinstance(exc, LLMError) and exc.errors and not isinstance(exc, TimeBudgetExhaustedError):
        # one entry per attempt, each possibly a multi-line LiteLLM text: first lines, counted
        firsts = Counter(" ".join(e.strip().splitlines()[0].split()) for e in exc.errors if e.strip())
        detail = "every model failed: " + "; ".join(f"{e} (x{n})" if n > 1 else e for e, n in firsts.items())
    detail = detail.removeprefix(f"{agent}: ")
    return AnalystError(code=code, message=f"{agent}: {one_line(detail)}; {consequence}", critical=False)


def _record(
    *,
    result: _Result | dict[str, Any] | None,
    source: str,
    model: str | None = None,
    context_refs: list[str] | None = None,
    llm_call_ids: list[str] | None = None,
    error: str | None = None,
    grounding: dict[str, Any] | None = None,
    answered_by: dict[str, Any] | None = None,
) -> dict[str, Any]:
    dumped = result.model_dump(mode="json") if isinstance(result, _Result) else result
    record: dict[str, Any] = {
        "source": source,
        "model": model,
        "result": dumped,
        "context_refs": [r for r in context_refs or [] if r],
        "llm_call_ids": llm_call_ids or [],
        "error": error,
    }
    if grounding is not None:
        record["grounding"] = grounding
    if answered_by:
        # how the answering deployment was asked (an LLM answer only: deterministic and skipped
        # records keep their shape)
        record.update(answered_by)
    return record


@dataclass
class _Answer:
    """A validated answer and the conversation that produced it (for the correction round)."""

    value: _Result
    model: str
    messages: list[dict[str, Any]]


async def _agent_call(
    *,
    session: LLMSession,
    agent: str,
    role: Role,
    system: str,
    user: str,
    tools: list[dict[str, Any]],
    executor: Callable[[str, dict[str, Any]], dict[str, Any]],
    model: type[_Result],
) -> _Answer:
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
        grammar=grammar_schema(model),
    )
    answer = await structured_answer(
        session=session, agent=agent, role=role, result=result, model=model, grammar=grammar_schema(model)
    )
    return _Answer(value=unescaped(answer), model=result.models[-1], messages=result.messages[:-1])


def _unescape(value: Any) -> Any:
    if isinstance(value, str):
        return html.unescape(value)
    if isinstance(value, list):
        return [_unescape(v) for v in value]
    if isinstance(value, dict):
        return {k: _unescape(v) for k, v in value.items()}
    return value


def unescaped[R: _Result](answer: R) -> R:
    """``answer`` with HTML character references in its texts decoded (``html.unescape``):
    the real 0.5B model wrote "the analyst&#39;s" and "(&#34;golden-cross&#34;)" for an
    apostrophe and a quote in four statements of two runs (docs/benchmarks.md), whose "39" and
    "34" the grounding check then read as invented numbers. A text without a reference is
    unchanged. Raises ValueError (pydantic) only if a decoded text breaks the model's bounds."""
    dumped = answer.model_dump(mode="json")
    decoded = _unescape(dumped)
    return answer if decoded == dumped else type(answer).model_validate(decoded)


def correction_request(problems: list[Dropped]) -> str:
    """The user message of a correction round: each statement and its unverified numbers."""
    listing = "; ".join(f"{d.part}: {', '.join(d.numbers)} in {d.text!r}" for d in problems)
    return (
        f"These numbers match no tool output you were shown, or not the measure the sentence "
        f"names, or these claims say the opposite of the data: {listing}. Rewrite your answer: "
        "copy every number exactly from a tool output, next to the name of what it measures, "
        "cite the tool_call_id named for a number (in its statement's source_refs), "
        "compare as the readings do, or remove the claim. Reply with only the corrected JSON "
        "object (same schema)."
    )


async def _correct(
    *,
    session: LLMSession,
    agent: str,
    role: Role,
    answer: _Answer,
    problems: list[Dropped],
    model: type[_Result],
) -> _Result:
    """ONE correction call continuing the agent's conversation; the reply must validate."""
    messages = [
        *answer.messages,
        {"role": "assistant", "content": json.dumps(answer.value.model_dump(mode="json"))},
        {"role": "user", "content": correction_request(problems)},
    ]
    completion = await session.complete(
        agent=f"{agent}.correction",
        role=role,
        messages=messages,
        json_mode=True,
        response_schema=grammar_schema(model),
    )
    try:
        return unescaped(model.model_validate(extract_json(completion.content)))
    except ValueError as exc:  # pydantic's ValidationError is a ValueError
        raise StructuredFailure(f"invalid correction: {one_line(str(exc), 200)}") from None


def _enforce(
    *,
    log: _Log,
    session: LLMSession,
    agent: str,
    role: Role,
    answer: _Answer,
    model: type[_Result],
    sources: Sources,
) -> tuple[dict[str, Any] | None, dict[str, Any], _Checked | None]:
    """Rule 1 of :mod:`agents.analysts.enforce` on one answer: cut the unfinished last sentence
    of its notes (:func:`_without_unfinished`), check, one correction round when a statement
    holds unverified numbers (its reply cut likewise), then drop what is still unverified.

    Returns ``(result or None, grounding, first)``: ``result`` is the checked answer as a dict
    (``None`` when what is left no longer validates as ``model``, e.g. no rationale left);
    ``first`` is, when a correction reply came, the first answer checked the same way
    (:class:`_Checked`), for the caller to keep if the reply is refused (``None`` without a
    reply); ``grounding`` is
    ``{numbers_checked, corrected, dropped: [{part, text, numbers}], listed}`` (``listed``: the
    problems the correction request named, when there was one) with ``corrected`` None
    (no round needed), "fixed" (the reply holds no unverified number), "unfixed" (it still does:
    those statements are dropped), "skipped" (budget) or "failed" (LLM error, invalid reply);
    :func:`_run` sets "refused" when it keeps ``first`` instead of a refused reply. A failed or
    skipped round is recorded in ``log`` as a non-critical error saying what really happened.
    """
    grounding: dict[str, Any] = {"corrected": None, "dropped": []}
    # a last sentence the server's length bound cut is no claim: checked, "the 200-day SMA
    # 486.5" (486.5971 cut short) was an unverified number whose correction round wrecked the
    # whole note of the real 0.5B model (docs/benchmarks.md, fifteenth run)
    result = _without_unfinished(
        answer.value.model_dump(mode="json"), grounding=grounding, agent=agent, whole=True
    )
    grounding["numbers_checked"] = count_numbers(result)
    labels = model.CHECKED_LABELS
    problems = unverified_of(result, sources=sources, name=agent, labels=labels)
    if not problems:
        return result, grounding, None
    count = len(problems)
    original = result
    # what the correction request listed: a reply that only writes it back is no reading
    grounding["listed"] = [n for d in problems for n in d.numbers]
    try:
        corrected = run_sync(
            _correct(session=session, agent=agent, role=role, answer=answer, problems=problems, model=model)
        )
        result = _without_unfinished(
            corrected.model_dump(mode="json"), grounding=grounding, agent=agent, whole=True
        )
        grounding["numbers_checked"] += count_numbers(result)
        still = unverified_of(result, sources=sources, name=agent, labels=labels)
        grounding["corrected"] = "unfixed" if still else "fixed"
    except (LLMError, StructuredFailure) as exc:
        skipped = isinstance(exc, BudgetExhaustedError)
        grounding["corrected"] = "skipped" if skipped else "failed"
        what = "skipped" if skipped else "failed"
        log.errors.append(
            failure_of(
                agent=f"{agent}.correction",
                exc=exc,
                consequence=f"correction {what}; {count} statement(s) with unverified numbers dropped",
            )
        )
    checked = _dropped_valid(result, sources=sources, agent=agent, model=model)
    grounding["dropped"] = checked.dropped
    replied = grounding["corrected"] in ("fixed", "unfixed")
    first = _dropped_valid(original, sources=sources, agent=agent, model=model) if replied else None
    return checked.result, grounding, first


class _Checked(NamedTuple):
    """An answer after its unverified statements were dropped: ``result`` (``None`` when what
    is left no longer validates as the answer's model) and the ``dropped`` entries as JSON
    (``{part, text, numbers}`` each)."""

    result: dict[str, Any] | None
    dropped: list[dict[str, Any]]


def _dropped_valid(result: dict[str, Any], *, sources: Sources, agent: str, model: type[_Result]) -> _Checked:
    """``result`` without its unverified statements (``enforce.drop_unverified``), as
    :class:`_Checked`."""
    kept, dropped = drop_unverified(result, sources=sources, name=agent, labels=model.CHECKED_LABELS)
    entries = [d.to_json() for d in dropped]
    try:
        model.model_validate(kept)
    except ValueError:
        return _Checked(None, entries)
    return _Checked(kept, entries)


@dataclass(frozen=True)
class _Refusal:
    """Why a checked answer is refused: the error ``code``, the ``error`` text after it, the
    logged ``message`` and the answer as the model gave it (``answered``, kept for the audit
    and the bench)."""

    code: str
    error: str
    message: str
    answered: dict[str, Any] | None = None


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
    sources: Callable[[], Sources],
    example: dict[str, Any] | None = None,
    shown: dict[str, str] | None = None,
    data: str | None = None,
    topic: re.Pattern[str] | None = None,
) -> dict[str, Any]:
    """Run one agent (:func:`_agent_call`, blocking) and enforce grounding on its answer
    (:func:`_enforce`) before anything is passed on; on an LLM failure, when nothing
    verifiable is left, when the checked answer's prose is no reading of the data (empty, a few
    words, or the prompt's description of a key written back:
    ``agents.analysts.prompts.reading_problem``, ``LLM_NO_READING``), or when it copies
    ``example`` (the example answer an options-plan prompt showed;
    ``agents.analysts.prompts.copied_example``: ``LLM_COPIED_EXAMPLE``), use its deterministic
    result. A refused answer is kept in the record as ``refused_answer``.

    Args:
        log: where a failure is recorded (an :class:`AnalystError`, in order).
        agent: the agent name of the failure and of the ``llm_calls`` rows.
        role / system / user / tools / executor / model: the :func:`_agent_call` arguments.
        fallback: ``fallback(reason)`` gives the deterministic result (``None``: none).
        context_refs: tool_call_ids the agent's context rests on (kept in the record).
        sources: called after the answer: the outputs the answer may cite (its context and the
            tool calls it made).
        shown: prose the agent was shown, ``{name: text}`` (earlier analysts' notes): an
            answer writing one back is no reading (``reading_problem``).
        data: what data the agent was shown (``"the fundamentals"``; ``None``: nothing to
            judge): an answer saying the data is absent is no reading (``reading_problem``).
        topic: the words naming that data (``prompts.FUNDAMENTAL_TOPIC``,
            ``prompts.news_topic``): an answer naming none of them speaks of other data and is
            no reading (``reading_problem``); ``None``: not checked.
    Returns:
        A :func:`_record` dict: ``source`` "llm" with the answering model and ``grounding``, or
        "deterministic" with ``error`` "CODE: message"; ``llm_call_ids`` are the calls this
        agent made.
    Raises:
        Nothing for ``LLMError``/``StructuredFailure`` (recorded in ``log`` as non-critical
        errors); other exceptions propagate.
    """
    before = len(session.rows)
    try:
        answer = run_sync(
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
        consequence = "the deterministic result was used"
        if isinstance(exc, TimeBudgetExhaustedError):
            consequence += ", and for every later LLM step of this pass"
        error = failure_of(agent=agent, exc=exc, consequence=consequence)
        log.errors.append(error)
        failure = f"{error.code}: {error.message}"
        return _record(
            result=fallback(failure[:300]),
            source="deterministic",
            context_refs=context_refs,
            llm_call_ids=_call_ids_since(session, before),
            error=failure[:1000],
        )
    result, grounding, first = _enforce(
        log=log, session=session, agent=agent, role=role, answer=answer, model=model, sources=sources()
    )

    def refusal(checked: dict[str, Any] | None, how: dict[str, Any]) -> tuple[_Refusal | None, Any]:
        """Why the checked answer ``checked`` (grounding ``how``) is refused, or ``None``, and
        the answer as it stands (its unfinished whole note cut)."""
        if checked is None:
            numbers = sorted({n for d in how["dropped"] for n in d["numbers"]})
            return _Refusal(
                "LLM_UNGROUNDED",
                f"{agent}: nothing verifiable left after dropping numbers {numbers}",
                f"{agent}: nothing verifiable left after dropping {numbers}; the deterministic "
                "result was used",
            ), checked
        seen = (
            {**(shown or {}), "the correction request": "; ".join(how["listed"])}
            if how.get("listed")
            else shown
        )
        no_reading = reading_problem(checked, shown=seen, data=data, topic=topic)
        if no_reading is None:
            # then without an unfinished whole note (left for the checks above): nothing is left
            checked = _without_unfinished(checked, grounding=how, agent=agent)
            no_reading = reading_problem(checked, shown=seen, data=data, topic=topic)
        if no_reading is not None:
            # prose emptied by grounding is named as such: the model wrote something, unverified
            after = " after its statements with unverified numbers were dropped" if how["dropped"] else ""
            message = (
                f"{agent}: the answer's text is no reading of the data ({no_reading}{after}); "
                "the deterministic result was used"
            )
            return _Refusal("LLM_NO_READING", message, message, answered=checked), checked
        if example is not None and copied_example(checked, example):
            message = (
                f"{agent}: the answer repeats the example answer's text; the deterministic result was used"
            )
            return _Refusal("LLM_COPIED_EXAMPLE", message, message, answered=checked), checked
        return None, checked

    refused_why, result = refusal(result, grounding)
    if refused_why is not None and first is not None:
        # the correction reply is refused (no reading, nothing verifiable left, a copied
        # example): the first answer, checked the same way, may stand
        # (the 0.5B model's replies dropped a good note for one wrong label, or changed the
        # signal and wrote back an analyst's notes: docs/benchmarks.md, sixteenth run)
        kept = {
            **grounding,
            "listed": [],
            "dropped": first.dropped,
            "corrected": "refused",
            "refused_reply": refused_why.message,
        }
        why_first, result_first = refusal(first.result, kept)
        if why_first is None:
            refused_why, result, grounding = None, result_first, kept
    if refused_why is not None:
        log.errors.append(AnalystError(code=refused_why.code, message=refused_why.message))
        why = f"{refused_why.code}: {refused_why.error}"
        record = _record(
            result=fallback(why),
            source="deterministic",
            context_refs=context_refs,
            llm_call_ids=_call_ids_since(session, before),
            error=why,
            grounding=grounding,
        )
        if refused_why.answered is not None:
            record["refused_answer"] = refused_why.answered  # what the model said, for the audit
        if refused_why.code == "LLM_COPIED_EXAMPLE":
            record["example"] = example
        return record
    call_ids = _call_ids_since(session, before)
    return _record(
        result=result,
        source="llm",
        model=answer.model,
        context_refs=context_refs,
        llm_call_ids=call_ids,
        grounding=grounding,
        answered_by=_answered_by(session, call_ids, role=role),
    )


def _without_unfinished(result: Any, *, grounding: dict[str, Any], agent: str, whole: bool = False) -> Any:
    """``result`` (a result model or dict) with the unfinished last sentence of its ``notes``
    cut (``prompts.finished``: the server's length bound or a correction round left "... is
    above the"); what was cut is recorded under ``grounding["unfinished"]`` as ``{part,
    text}``. ``whole``: notes that are one unfinished sentence are left whole (the checks then
    say what they are: an echoed key description ends on "rests on"). Other results are
    returned as they are. Raises nothing."""
    notes = result.get("notes") if isinstance(result, dict) else getattr(result, "notes", None)
    if not isinstance(notes, str):
        return result
    kept = finished(notes)
    if kept == notes.strip() or (whole and not kept):
        return result
    grounding.setdefault("unfinished", []).append(
        {"part": f"{agent}.notes", "text": notes[len(kept) :].strip()}
    )
    if isinstance(result, dict):
        return {**result, "notes": kept}
    return result.model_copy(update={"notes": kept})


def _notes_shown(records: dict[str, dict[str, Any]]) -> dict[str, str]:
    """``{"the <name> analyst's notes": notes}`` of analyst ``records`` (:func:`_record` dicts;
    "" without a result): the prose an agent is shown, for ``reading_problem``'s ``shown``."""
    return {
        f"the {k} analyst's notes": str((v.get("result") or {}).get("notes") or "")
        for k, v in records.items()
    }


def _answered_by(session: LLMSession, call_ids: list[str], *, role: Role) -> dict[str, Any]:
    """How the last answered call of ``call_ids`` was served: ``response_format`` (the
    structured-output form of its successful attempt, ``agents.llm.session.RESPONSE_FORMS``;
    ``None`` for a call that asked for no JSON) and ``fallback`` (true when the deployment that
    answered is not the role's primary). Read from ``session.rows``; raises nothing."""
    wanted = set(call_ids)
    ok = [r for r in session.rows if r["llm_call_id"] in wanted and r["status"] == "success"]
    if not ok:
        return {}
    last = ok[-1]
    request = last.get("request") or {}
    primary = session.config.model_for(role)
    return {
        "response_format": request.get("response_format") if isinstance(request, dict) else None,
        "fallback": primary is not None and last["model"] != primary,
    }


def _call_ids_since(session: LLMSession, before: int) -> list[str]:
    """The distinct ``llm_call_id`` values of ``session.rows[before:]`` in first-seen order (one
    logical call has a row per attempt). ``before``: a row count taken earlier. Raises nothing."""
    return list(dict.fromkeys(r["llm_call_id"] for r in session.rows[before:]))


def out_of_time(session: LLMSession) -> bool:
    """True when the session's LLM time budget has run out (less than one attempt's minimum
    left, ``agents.llm.session.MIN_ATTEMPT_S``): the remaining agents run deterministically."""
    left = session.time_left()
    return left is not None and left < MIN_ATTEMPT_S


def skip_reason(session: LLMSession) -> str | None:
    """Why no more LLM call is made in this session (time budget, token/USD budget), or ``None``."""
    if out_of_time(session):
        return "the LLM time budget of this stage ran out"
    if session.exhausted:
        return "the LLM token/USD budget is spent"
    return None


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

    Each answer is grounded (:func:`_enforce`) before the next analyst sees it, so a number no
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
    log = _Log()
    analysis = analysis or {}
    stock = stock_data or {}
    technical = analysis.get("technical") or {}
    quote = stock.get("quote")
    tech_ref, quote_ref = analysis.get("technical_ref", ""), stock.get("quote_ref", "")
    records: dict[str, dict[str, Any]] = {}
    fund_ref, news_ref = stock.get("fundamentals_ref") or "", stock.get("news_ref") or ""
    fund_digest = fundamentals_digest(stock.get("fundamentals"))
    # the stored get_news output; without it, the research view's top headlines (no source)
    top = ((stock.get("views") or {}).get("sentiment") or {}).get("top") or []
    news = ctx.result_data(news_ref) if news_ref else None
    headlines = headline_digest(news or {"news": top}) if news_ref else []
    header = f"Symbol {symbol}, analysis date {as_of}. User request: {user_query!r}.\n"
    for spec in ANALYSTS:
        quote_keys = QUOTE_SHOWN.get(spec.name, QUOTE_KEYS)  # what this analyst sees of the quote
        shown_quote = json.dumps(short_quote(quote, keys=quote_keys), default=str)
        quote_line = f"Quote (tool_call_id {quote_ref}): {shown_quote}\n" if quote_keys else ""
        names = [n for n in available_tools(spec.tools) if tool_configured(n, ctx.settings)]
        has_data = any(n in names for n in spec.data_tools)  # data_tools ⊆ tools: checked once
        # the data last, its computed readings closing the context: the small model writes
        # about what it read last ("the analyst's results ..." when that was the earlier labels)
        readings: list[str] = []
        data: str | None = None
        topic: re.Pattern[str] | None = None  # the words naming ``data`` (reading_problem)
        absent: str | None = None  # why the data tool's output leaves nothing to judge
        if spec.name == "technical":
            context_refs = [tech_ref, quote_ref, stock.get("history_ref", "")]
            indicators = json.dumps(short_technical(technical), default=str)
            context = header + quote_line + f"Indicators (tool_call_id {tech_ref}): {indicators}\n"
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
                    **{j: x for j, x in _judgement(v["result"] or {}).items() if j != "notes"},
                }
                for k, v in records.items()
            }
            context = header + f"Earlier analysts' judgements: {json.dumps(earlier, default=str)}\n"
            context += quote_line
            # what research already fetched, digested: with no tool offered (max_iterations 0)
            # the analyst would see none of it, and with tools it saves a round
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
                shown = json.dumps(headlines, ensure_ascii=False)
                context += f"Headlines (tool_call_id {news_ref}, highest impact first): {shown}\n"
                readings = sentiment_readings(news)
                has_data, data, topic = True, HEADLINES_SHOWN, news_topic(headlines)
                if not headlines:
                    # nothing to judge: asked anyway, the real 0.5B model wrote of the quote
                    # ("the quote does not contain any relevant information") in two of three
                    # answers, and a correct answer only restates that the window is empty
                    absent = f"no headline names the company in the news window ({news_ref})"
        if readings:
            context += f"{READINGS_LINE} {json.dumps(readings)}\n"
        fallback = _fallback(spec.name, analysis=analysis, quote=quote, refs=context_refs)
        spent = skip_reason(session)
        if spent or absent or not has_data or not session.config.model_for(spec.role):
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
            records[spec.name] = _record(
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
            sources=sources,
            # an analyst writing an earlier analyst's notes back has not read its own data
            shown=_notes_shown(records),
            data=data,
            topic=topic,
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
            refs_of = {"indicators": analysis["technical_ref"]}
            signal = score_technical(indicators=scorer_inputs(tech), refs=refs_of).signal
        return deterministic.technical_view(technical=tech, signal=signal, refs=refs)

    if name == "technical":
        return technical
    if name == "fundamental":
        return lambda reason: deterministic.fundamental_view(quote=quote, refs=refs, reason=reason)
    return lambda reason: deterministic.sentiment_view(refs=refs, reason=reason)


def _scorer_digest(deterministic_rec: dict[str, Any]) -> dict[str, Any]:
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
        k: {**_judgement(v.get("result") or {}), "source_refs": _checked_refs(v)} for k, v in agents.items()
    }
    flags = [
        {"flag": f.get("flag"), "text": f.get("text"), "source_refs": f.get("source_refs")}
        for f in deterministic_rec.get("risk_flags", [])
    ]
    dump = json.dumps
    return (
        f"Symbol {symbol}, analysis date {as_of}. User request: {user_query!r}.\n"
        f"Analysts: {dump(analysts, default=str)}\n"
        f"Deterministic scorer: {dump(_scorer_digest(deterministic_rec), default=str)}\n"
        f"Risk assessor flags: {dump(flags, default=str)}\n"
    )


#: The fields of an analyst's result the synthesis is shown (labels and notes).
_JUDGEMENT_KEYS = (
    "recommendation",
    "trend_direction",
    "trend_quality",
    "extension_risk",
    "outlook",
    "label",
    "news_risk",
    "notes",
)


def _checked_refs(record: dict[str, Any]) -> list[str]:
    """The refs an analyst record's notes were checked against: its answer's ``source_refs``
    and the outputs it was shown (``context_refs``), in that order, once each. Shown the notes
    without them, the real 0.5B model restated "the previous close 186.18" of the technical
    notes citing only the indicators (the one ref near it), and the statement was dropped
    (docs/benchmarks.md, seventh run)."""
    cited = [*((record.get("result") or {}).get("source_refs") or []), *(record.get("context_refs") or [])]
    return [r for r in dict.fromkeys(cited) if r]


def _judgement(result: dict[str, Any]) -> dict[str, Any]:
    """``result`` cut to :data:`_JUDGEMENT_KEYS` (what the synthesis needs of an analyst)."""
    return {k: result[k] for k in _JUDGEMENT_KEYS if k in result}


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
    log = _Log()
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
        return log.outcome(_record(result=None, source="skipped", context_refs=refs, error=reason))
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
        sources=lambda: context_sources(ctx=ctx, known=refs),
        # statements that are only the analysts' notes written back restate no rule
        shown=_notes_shown(agents),
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
