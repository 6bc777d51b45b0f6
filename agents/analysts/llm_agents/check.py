"""Check: an answer's grounding and reading checks: its unfinished last sentence cut, its
unverified statements dropped (``agents.analysts.enforce``), and why a checked answer is no
reading of the data (``agents.analysts.prompts.reading_problem``, ``copied_example``)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, NamedTuple

from agents.analysts.enforce import Sources, drop_unverified
from agents.analysts.models import _Result
from agents.analysts.prompts import copied_example, finished, reading_problem


def without_unfinished(result: Any, *, grounding: dict[str, Any], agent: str, whole: bool = False) -> Any:
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


class Checked(NamedTuple):
    """An answer after its unverified statements were dropped: ``result`` (``None`` when what
    is left no longer validates as the answer's model) and the ``dropped`` entries as JSON
    (``{part, text, numbers}`` each)."""

    result: dict[str, Any] | None
    dropped: list[dict[str, Any]]


def dropped_valid(result: dict[str, Any], *, sources: Sources, agent: str, model: type[_Result]) -> Checked:
    """``result`` without its unverified statements (``enforce.drop_unverified``), as
    :class:`Checked`."""
    kept, dropped = drop_unverified(result, sources=sources, name=agent, labels=model.CHECKED_LABELS)
    entries = [d.to_json() for d in dropped]
    try:
        model.model_validate(kept)
    except ValueError:
        return Checked(None, entries)
    return Checked(kept, entries)


@dataclass(frozen=True)
class Refusal:
    """Why a checked answer is refused: the error ``code``, the ``error`` text after it, the
    logged ``message`` and the answer as the model gave it (``answered``, kept for the audit
    and the bench)."""

    code: str
    error: str
    message: str
    answered: dict[str, Any] | None = None


def notes_shown(records: dict[str, dict[str, Any]]) -> dict[str, str]:
    """``{"the <name> analyst's notes": notes}`` of analyst ``records`` (:func:`record_of` dicts;
    "" without a result): the prose an agent is shown, for ``reading_problem``'s ``shown``."""
    return {
        f"the {k} analyst's notes": str((v.get("result") or {}).get("notes") or "")
        for k, v in records.items()
    }


@dataclass(frozen=True)
class Reading:
    """What an agent's answer must be a reading of: the ``agent``'s name, the prose it was
    ``shown`` (``{name: text}``, earlier analysts' notes), the ``data`` it was shown and the
    ``topic`` words naming that data (``None``: not checked), and the ``example`` answer its
    prompt showed (``None``: none) — the arguments of ``prompts.reading_problem`` and
    ``prompts.copied_example``."""

    agent: str
    shown: dict[str, str] | None = None
    data: str | None = None
    topic: re.Pattern[str] | None = None
    example: dict[str, Any] | None = None


def refusal(
    reading: Reading, checked: dict[str, Any] | None, how: dict[str, Any]
) -> tuple[Refusal | None, Any]:
    """Why the checked answer ``checked`` (grounding ``how``) is refused, or ``None``, and
    the answer as it stands (its unfinished whole note cut): nothing verifiable left
    (``LLM_UNGROUNDED``), no reading of the data (``LLM_NO_READING``: empty, a few words, a
    text it was shown or the correction request written back) or the example answer copied
    (``LLM_COPIED_EXAMPLE``). Raises nothing."""
    agent, shown, data, topic, example = (
        reading.agent,
        reading.shown,
        reading.data,
        reading.topic,
        reading.example,
    )
    if checked is None:
        numbers = sorted({n for d in how["dropped"] for n in d["numbers"]})
        return Refusal(
            "LLM_UNGROUNDED",
            f"{agent}: nothing verifiable left after dropping numbers {numbers}",
            f"{agent}: nothing verifiable left after dropping {numbers}; the deterministic result was used",
        ), checked
    seen = (
        {**(shown or {}), "the correction request": "; ".join(how["listed"])} if how.get("listed") else shown
    )
    no_reading = reading_problem(checked, shown=seen, data=data, topic=topic)
    if no_reading is None:
        # then without an unfinished whole note (left for the checks above): nothing is left
        checked = without_unfinished(checked, grounding=how, agent=agent)
        no_reading = reading_problem(checked, shown=seen, data=data, topic=topic)
    if no_reading is not None:
        # prose emptied by grounding is named as such: the model wrote something, unverified
        after = " after its statements with unverified numbers were dropped" if how["dropped"] else ""
        message = (
            f"{agent}: the answer's text is no reading of the data ({no_reading}{after}); "
            "the deterministic result was used"
        )
        return Refusal("LLM_NO_READING", message, message, answered=checked), checked
    if example is not None and copied_example(checked, example):
        message = f"{agent}: the answer repeats the example answer's text; the deterministic result was used"
        return Refusal("LLM_COPIED_EXAMPLE", message, message, answered=checked), checked
    return None, checked
