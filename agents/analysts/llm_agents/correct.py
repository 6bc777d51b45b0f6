"""Correct: one correction round for an answer whose statements hold unverified numbers (the
agent's own conversation continued), then the drop of what is still unverified."""

from __future__ import annotations

import json
from typing import Any

from agents.analysts.enforce import Dropped, Sources, count_numbers, unverified_of
from agents.analysts.llm_agents.ask import Answer, unescaped
from agents.analysts.llm_agents.check import Checked, dropped_valid, without_unfinished
from agents.analysts.llm_agents.records import Log, failure_of, one_line
from agents.analysts.models import _Result
from agents.analysts.prompts import grammar_schema
from agents.llm.config import Role
from agents.llm.loop import StructuredFailure, extract_json
from agents.llm.runner import run_sync
from agents.llm.session import BudgetExhaustedError, LLMError, LLMSession


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


async def correct(
    *,
    session: LLMSession,
    agent: str,
    role: Role,
    answer: Answer,
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


def correct_answer(
    *,
    log: Log,
    session: LLMSession,
    agent: str,
    role: Role,
    answer: Answer,
    model: type[_Result],
    sources: Sources,
) -> tuple[dict[str, Any] | None, dict[str, Any], Checked | None]:
    """Rule 1 of :mod:`agents.analysts.enforce` on one answer: cut the unfinished last sentence
    of its notes (:func:`without_unfinished`), check, one correction round when a statement
    holds unverified numbers (its reply cut likewise), then drop what is still unverified.

    Returns ``(result or None, grounding, first)``: ``result`` is the checked answer as a dict
    (``None`` when what is left no longer validates as ``model``, e.g. no rationale left);
    ``first`` is, when a correction reply came, the first answer checked the same way
    (:class:`Checked`), for the caller to keep if the reply is refused (``None`` without a
    reply); ``grounding`` is
    ``{numbers_checked, corrected, dropped: [{part, text, numbers}], listed}`` (``listed``: the
    problems the correction request named, when there was one) with ``corrected`` None
    (no round needed), "fixed" (the reply holds no unverified number), "unfixed" (it still does:
    those statements are dropped), "skipped" (budget) or "failed" (LLM error, invalid reply);
    :func:`run_agent` sets "refused" when it keeps ``first`` instead of a refused reply. A failed or
    skipped round is recorded in ``log`` as a non-critical error saying what really happened.
    """
    grounding: dict[str, Any] = {"corrected": None, "dropped": []}
    # a last sentence the server's length bound cut is no claim: checked, "the 200-day SMA
    # 486.5" (486.5971 cut short) was an unverified number whose correction round wrecked the
    # whole note of the real 0.5B model (docs/benchmarks.md, fifteenth run)
    result = without_unfinished(
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
            correct(session=session, agent=agent, role=role, answer=answer, problems=problems, model=model)
        )
        result = without_unfinished(
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
    checked = dropped_valid(result, sources=sources, agent=agent, model=model)
    grounding["dropped"] = checked.dropped
    replied = grounding["corrected"] in ("fixed", "unfixed")
    first = dropped_valid(original, sources=sources, agent=agent, model=model) if replied else None
    return checked.result, grounding, first
