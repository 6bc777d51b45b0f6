"""Accept: one agent run end to end (ask, check and correct, then accept the checked answer or
fall back to the deterministic result, saying why)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from agents.analysts.enforce import Sources
from agents.analysts.llm_agents.ask import agent_call
from agents.analysts.llm_agents.check import Checked, Reading, Refusal, refusal
from agents.analysts.llm_agents.correct import correct_answer
from agents.analysts.llm_agents.records import Log, answered_by, call_ids_since, failure_of, record_of
from agents.analysts.models import _Result
from agents.analysts.outcome import AnalystError
from agents.llm.config import Role
from agents.llm.loop import StructuredFailure
from agents.llm.runner import run_sync
from agents.llm.session import LLMError, LLMSession, TimeBudgetExhaustedError


def run_agent(
    *,
    log: Log,
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
    """Run one agent (:func:`agent_call`, blocking) and enforce grounding on its answer
    (:func:`correct_answer`) before anything is passed on; on an LLM failure, when nothing
    verifiable is left, when the checked answer's prose is no reading of the data (empty, a few
    words, or the prompt's description of a key written back:
    ``agents.analysts.prompts.reading_problem``, ``LLM_NO_READING``), or when it copies
    ``example`` (the example answer an options-plan prompt showed;
    ``agents.analysts.prompts.copied_example``: ``LLM_COPIED_EXAMPLE``), use its deterministic
    result. A refused answer is kept in the record as ``refused_answer``.

    Args:
        log: where a failure is recorded (an :class:`AnalystError`, in order).
        agent: the agent name of the failure and of the ``llm_calls`` rows.
        role / system / user / tools / executor / model: the :func:`agent_call` arguments.
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
        A :func:`record_of` dict: ``source`` "llm" with the answering model and ``grounding``, or
        "deterministic" with ``error`` "CODE: message"; ``llm_call_ids`` are the calls this
        agent made.
    Raises:
        Nothing for ``LLMError``/``StructuredFailure`` (recorded in ``log`` as non-critical
        errors); other exceptions propagate.
    """
    before = len(session.rows)
    try:
        answer = run_sync(
            agent_call(
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
        return _failed(
            log=log,
            session=session,
            agent=agent,
            exc=exc,
            fallback=fallback,
            context_refs=context_refs,
            before=before,
        )
    result, grounding, first = correct_answer(
        log=log, session=session, agent=agent, role=role, answer=answer, model=model, sources=sources()
    )
    reading = Reading(agent=agent, shown=shown, data=data, topic=topic, example=example)
    refused_why, result, grounding = accept(reading, result=result, grounding=grounding, first=first)
    if refused_why is not None:
        log.errors.append(AnalystError(code=refused_why.code, message=refused_why.message))
        return _refused(
            refused_why,
            fallback=fallback,
            context_refs=context_refs,
            llm_call_ids=call_ids_since(session, before),
            grounding=grounding,
            example=example,
        )
    call_ids = call_ids_since(session, before)
    return record_of(
        result=result,
        source="llm",
        model=answer.model,
        context_refs=context_refs,
        llm_call_ids=call_ids,
        grounding=grounding,
        answered_by=answered_by(session, call_ids, role=role),
    )


def _refused(
    refused_why: Refusal,
    *,
    fallback: Callable[[str], _Result | None],
    context_refs: list[str],
    llm_call_ids: list[str],
    grounding: dict[str, Any],
    example: dict[str, Any] | None,
) -> dict[str, Any]:
    """The deterministic record standing for a refused answer (``error`` "CODE: why"), keeping
    the answer as the model gave it (``refused_answer``) and, for a copied example, the
    ``example``. Raises nothing."""
    why = f"{refused_why.code}: {refused_why.error}"
    record = record_of(
        result=fallback(why),
        source="deterministic",
        context_refs=context_refs,
        llm_call_ids=llm_call_ids,
        error=why,
        grounding=grounding,
    )
    if refused_why.answered is not None:
        record["refused_answer"] = refused_why.answered  # what the model said, for the audit
    if refused_why.code == "LLM_COPIED_EXAMPLE":
        record["example"] = example
    return record


def _failed(
    *,
    log: Log,
    session: LLMSession,
    agent: str,
    exc: LLMError | StructuredFailure,
    fallback: Callable[[str], _Result | None],
    context_refs: list[str],
    before: int,
) -> dict[str, Any]:
    """The deterministic record of ``agent`` whose call failed with ``exc`` (its failure logged
    in ``log``; ``before``: the session's row count before the call). Raises nothing."""
    consequence = "the deterministic result was used"
    if isinstance(exc, TimeBudgetExhaustedError):
        consequence += ", and for every later LLM step of this pass"
    error = failure_of(agent=agent, exc=exc, consequence=consequence)
    log.errors.append(error)
    failure = f"{error.code}: {error.message}"
    return record_of(
        result=fallback(failure[:300]),
        source="deterministic",
        context_refs=context_refs,
        llm_call_ids=call_ids_since(session, before),
        error=failure[:1000],
    )


def accept(
    reading: Reading, *, result: dict[str, Any] | None, grounding: dict[str, Any], first: Checked | None
) -> tuple[Refusal | None, Any, dict[str, Any]]:
    """Accept the checked answer ``result`` (grounding ``grounding``) or say why not; when a
    correction reply is refused (no reading, nothing verifiable left, a copied example) the
    first answer ``first``, checked the same way, may stand (its grounding then says
    ``corrected`` "refused" and the refused reply). Returns ``(refusal or None, the answer as it
    stands, its grounding)``. Raises nothing."""
    refused_why, result = refusal(reading, result, grounding)
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
        why_first, result_first = refusal(reading, first.result, kept)
        if why_first is None:
            refused_why, result, grounding = None, result_first, kept
    return refused_why, result, grounding
