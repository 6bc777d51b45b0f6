"""Tolerant validation of small-model answers: only repairs that cannot change a fact."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from agents.analysts.models import SynthesisView, TechnicalView
from agents.llm.lenient import SchemaEchoError, lenient_data
from agents.llm.loop import _validate

STATEMENT = {"text": "RSI(14) is 48.2.", "source_refs": ["technical_indicators_0123456789ab"]}
SYNTHESIS = {"signal": "HOLD", "confidence": 0.4, "rationale": [STATEMENT], "risks": []}


def test_unknown_fields_are_dropped_at_every_level() -> None:
    answer = {**SYNTHESIS, "target_price": 987.65, "rationale": [{**STATEMENT, "weight": 2}]}
    data, notes = lenient_data(answer, SynthesisView)
    view = SynthesisView.model_validate(data)
    assert "987.65" not in view.model_dump_json()
    assert notes == ["dropped unknown field rationale[0].weight", "dropped unknown field target_price"]


def test_a_list_over_its_limit_keeps_its_first_items_with_a_note() -> None:
    nine = [{"text": f"Statement {i}.", "source_refs": ["r"]} for i in range(1, 10)]
    data, notes = lenient_data({**SYNTHESIS, "rationale": nine}, SynthesisView)
    view = SynthesisView.model_validate(data)
    # SynthesisView allows six rationale items (one per scorer rule)
    assert [s.text for s in view.rationale] == [f"Statement {i}." for i in range(1, 7)]
    assert notes == ["kept the first 6 of 9 items of rationale"]


def test_a_schema_echo_with_values_is_unwrapped_and_a_bare_echo_is_refused() -> None:
    filled = {"type": "object", "title": "SynthesisView", "properties": SYNTHESIS}
    data, notes = lenient_data(filled, SynthesisView)
    assert SynthesisView.model_validate(data).signal == "HOLD" and "unwrapped" in notes[0]
    with pytest.raises(SchemaEchoError, match="repeats the JSON schema"):
        lenient_data(TechnicalView.model_json_schema(), TechnicalView)


def test_prose_around_json_is_read_and_wrong_values_still_fail() -> None:
    text = (
        "Sure! Here is my analysis:\n"
        + '{"signal": "HOLD", "confidence": 0.4, "rationale": [{"text": "x", "source_refs": ["r"]}]}'
        + "\nHope this helps."
    )
    assert _validate(text, SynthesisView).signal == "HOLD"
    with pytest.raises(ValueError, match="signal"):  # a wrong enum value is never guessed
        _validate(
            '{"signal": "STRONG BUY", "confidence": 0.4, "rationale": [{"text": "x", "source_refs": ["r"]}]}',
            SynthesisView,
        )
    with pytest.raises(ValidationError):
        SynthesisView.model_validate(lenient_data({**SYNTHESIS, "confidence": 1.7}, SynthesisView)[0])
