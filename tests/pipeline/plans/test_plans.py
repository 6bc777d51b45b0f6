"""The plan table and the csp plan's typed result part: states the code before the table
wrote (fixtures/: three embedded csp runs, rejected by the chart and the options analysts,
and one suggestion, with the reports that code
printed) load, round-trip and report byte for byte; the shared code finds each type's
behaviour through the table."""

from __future__ import annotations

import difflib
import json
import re
from datetime import date
from pathlib import Path
from typing import Any, get_args

import click
import pytest
from pydantic import ValidationError

from agents.analysts.versions import rules_version
from core.parts import AnalysisResult, CspContract, CspResult
from core.plans import ANALYSIS_TYPES, PLANS, AnalysisType, backtest_types, cli_choices, plan_spec
from core.state import FinancialAgentState
from pipeline.cli import main
from pipeline.plan_hooks import plan_for, result_plans
from pipeline.query import QUERY_SCHEMA, analysis_type_of
from pipeline.report import report_json, report_markdown

FIXTURES = Path(__file__).parent / "fixtures"
OLD_STATES = sorted(FIXTURES.glob("csp_state_*.json"))


def _load(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def test_there_are_old_states_of_every_outcome() -> None:
    outcomes = {
        (d["state"]["analysis"]["csp"]["status"], d["state"]["analysis"]["csp"]["rejected_by"])
        for d in map(_load, OLD_STATES)
    }
    assert outcomes == {("rejected", "chart"), ("rejected", "options"), ("suggested", None)}


@pytest.mark.parametrize("path", OLD_STATES, ids=lambda p: p.stem)
def test_an_old_state_loads_typed_and_round_trips_key_for_key(path: Path) -> None:
    old = _load(path)["state"]
    state = FinancialAgentState.model_validate(old)
    assert state.analysis is not None and isinstance(state.analysis.csp, CspResult)
    # the message (and the analyses.state column) is the JSON the old code wrote, in its key order
    assert json.dumps(state.to_message()) == json.dumps(old)
    again = FinancialAgentState.model_validate(json.loads(json.dumps(state.to_message())))
    assert again == state


@pytest.mark.parametrize("path", OLD_STATES, ids=lambda p: p.stem)
def test_an_old_state_reports_what_the_old_code_reported(path: Path) -> None:
    data = _load(path)
    state = FinancialAgentState.model_validate(data["state"])
    grounding = state.analysis.grounding if state.analysis else None
    _check_markdown_as_reported_now(
        data["markdown"], report_markdown(state, grounding=grounding), data["json"]
    )
    assert json.dumps(report_json(state, grounding=grounding)) == json.dumps(
        _as_reported_now(data["json"], data["markdown"])
    )


_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?")


def _check_markdown_as_reported_now(old: str, new: str, old_json: dict[str, Any]) -> None:
    """The old report, line for line, but for what changed on purpose since: the stock's signal
    line under the options verdict names no confidence; prices, levels and indicators print to
    two decimals and fractions labelled as percentages (change_percent, HV(20)) as percentages,
    each the old number rounded; the raw reading moved to a details section before Sources."""
    a, b = old.splitlines(), new.splitlines()
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        if tag == "insert":
            added = b[j1:j2]
            assert added[1:3] == ["## Details of the direction call", ""], added
            assert "## Sources" in b[j2 : j2 + 2]
            (raw,) = [line for line in added if line.startswith("- Raw rule score")]
            assert f"confidence {old_json['confidence']:.2f}" in raw
            assert f"({old_json['signal']}, rule set" in raw and "written before calibration" in raw
            continue
        assert tag == "replace" and i2 - i1 == j2 - j1, (a[i1:i2], b[j1:j2])
        for before, after in zip(a[i1:i2], b[j1:j2], strict=True):
            if before.startswith("Stock signal (context, not the verdict)"):
                assert after == (
                    f"Stock direction (context, not the verdict): {old_json['signal']}: written before "
                    "calibration: the author's raw signal, not evidence."
                )
                continue
            percent = "change_percent" in before or "HV(20)" in before
            assert _NUMBER.sub("#", before) == _NUMBER.sub("#", after).replace(" %", ""), (before, after)
            olds = [float(x.replace(",", "")) for x in _NUMBER.findall(before)]
            news = [float(x.replace(",", "")) for x in _NUMBER.findall(after)]
            assert len(olds) == len(news)
            for x, y in zip(olds, news, strict=True):
                if percent and x != 20:  # the 20 of "HV(20)" is a label
                    x *= 100
                assert abs(round(x, 2) - y) < 0.0051, (before, after)
    # no raw confidence above the details section
    assert "confidence" not in new.split("## Details of the direction call")[0]


def _as_reported_now(old: dict[str, Any], old_markdown: str) -> dict[str, Any]:
    """The old report JSON with what changed since it was written: the calibration keys (null:
    an old state has no calibrated probability) after ``prompt_version``, the rule-set label of
    the reporting code (``agents.analysts.versions``: not stored in the state), the one-line
    ``headline`` (the options verdict of the old report's headline, without its emphasis and
    pointer) and the plain ``direction`` after ``signal``, and the raw signal, score and
    confidence moved from the top level into ``details``."""
    verdict = next(
        (line for line in old_markdown.splitlines() if line.startswith(("**Cash-secured put", "**No cash"))),
        None,
    )
    out: dict[str, Any] = {}
    for key, value in old.items():
        if key == "prompt_version" and str(value).startswith("rules-"):
            value = rules_version()
        if key in ("confidence", "score"):
            continue
        out[key] = value
        if key == "signal":
            out["headline"] = verdict.replace("**", "").split(" (see ")[0] if verdict else None
            out["direction"] = (
                {
                    "signal": value,
                    "evidence": False,
                    "text": "written before calibration: the author's raw signal, not evidence.",
                    "record": None,
                }
                if value
                else None
            )
        if key == "prompt_version":
            out.update({"p_outperform": None, "probability_text": None, "probability": None})
            out["details"] = (
                {
                    "raw_signal": None,
                    "score": old["score"],
                    "confidence": old["confidence"],
                    "key": out["prompt_version"],
                    "record": None,
                }
                if old.get("signal")
                else None
            )
    return out


def test_the_suggestion_is_typed_and_keeps_the_numbers_types() -> None:
    state = FinancialAgentState.model_validate(_load(FIXTURES / "csp_state_suggested.json")["state"])
    assert state.analysis is not None and state.analysis.csp is not None
    csp = state.analysis.csp
    assert isinstance(csp.suggestion, CspContract)
    assert csp.suggestion.contract == "AAPL140627P00620000" and csp.suggestion.dte == 21
    assert [r.text for r in csp.reasons] == ["strike at or below support"]
    # an int strike stays an int: "610" in the report, not "610.0"
    assert isinstance(csp.alternatives[1].strike, int)
    assert csp.price_factor() == 7.0


def test_a_record_rejects_a_wrong_type() -> None:
    with pytest.raises(ValidationError, match="status"):
        CspResult.model_validate({"status": "maybe"})
    with pytest.raises(ValidationError, match="dte"):
        CspResult.model_validate(
            {"suggestion": {"contract": "X", "expiry": "2014-06-27", "dte": "soon", "strike": 1}}
        )


def test_the_table_names_every_type_once_and_the_literal_agrees() -> None:
    assert get_args(AnalysisType) == tuple(spec.name for spec in PLANS) == ANALYSIS_TYPES
    assert set(ANALYSIS_TYPES) == {
        "technical",
        "fundamental",
        "sentiment",
        "composite",
        "csp",
        "covered_call",
    }
    assert QUERY_SCHEMA["properties"]["analysis_type"]["enum"] == list(ANALYSIS_TYPES)


@pytest.mark.parametrize("name", ANALYSIS_TYPES)
def test_every_row_has_its_plan_and_its_result_field(name: str) -> None:
    plan = plan_for(name)
    assert plan.spec is plan_spec(name)
    if plan.spec.result_field is not None:
        assert plan.spec.result_field in AnalysisResult.model_fields


def test_an_unknown_type_is_refused() -> None:
    with pytest.raises(KeyError):
        plan_for("covered_call_typo")


def test_the_cli_offers_the_table_with_the_default_first() -> None:
    analyze = main.get_command(click.Context(main), "analyze")
    option = next(p for p in analyze.params if p.name == "analysis_type")
    assert isinstance(option.type, click.Choice)
    assert list(option.type.choices) == [
        "composite",
        "technical",
        "fundamental",
        "sentiment",
        "csp",
        "covered_call",
    ]
    assert cli_choices()[0] == "composite"
    backtest = main.get_command(click.Context(main), "backtest")
    option = next(p for p in backtest.params if p.name == "analysis_type")
    assert isinstance(option.type, click.Choice)
    assert set(option.type.choices) == {"technical", "fundamental", "sentiment", "composite"}
    assert "csp" not in backtest_types() and "covered_call" not in backtest_types()


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("sell puts on AAPL near support", "csp"),
        ("cash-secured put for MSFT", "csp"),
        ("RSI of IBM", "technical"),
        ("IBM valuation", "fundamental"),
        ("news about TSLA", "sentiment"),
        ("what about AAPL", "composite"),
    ],
)
def test_the_query_keywords_come_from_the_table(text: str, kind: str) -> None:
    assert analysis_type_of(text) == kind


def _state(kind: AnalysisType | None, csp: dict[str, Any] | None) -> FinancialAgentState:
    return FinancialAgentState(
        analysis_id="a",
        stock_symbol="AAPL",
        as_of=date(2014, 6, 6),
        analysis_type=kind,
        analysis=None if csp is None else {"csp": csp},
    )


def test_review_rule_a_csp_record_answers_only_a_csp_analysis() -> None:
    rejected = {
        "status": "rejected",
        "rejected_by": "chart",
        "reasons": [{"text": "NO_DATA", "source_refs": []}],
    }
    assert plan_for("csp").answered(_state("csp", rejected)) is True
    assert plan_for("csp").answered(_state("csp", None)) is False
    assert plan_for("composite").answered(_state("composite", rejected)) is False
    assert plan_for(None).answered(_state(None, None)) is False


def test_the_json_report_has_one_key_per_result_plan() -> None:
    assert [p.spec.result_field for p in result_plans()] == ["csp", "covered_call"]
    data = report_json(_state(None, None))
    # csp's key is null in every report; the newer covered_call row leaves its key out of the
    # reports of other types (their JSON stays what it was)
    assert data["csp"] is None and list(data)[-1] == "csp" and "covered_call" not in data


def test_chart_marks_of_a_suggestion_are_in_the_bars_units() -> None:
    state = _load(FIXTURES / "csp_state_suggested.json")["state"]
    # strike 620 and breakeven 620 - 4.1 = 615.9, chain quoted 7x the bars (a 7:1 split)
    assert plan_for("csp").chart_marks(state) == {"CSP strike": 88.5714, "breakeven": 87.9857}
    rejected = _load(FIXTURES / "csp_state_GOOG_2015-12-24.json")["state"]
    assert plan_for("csp").chart_marks(rejected) == {}
    assert plan_for("composite").chart_marks(state) == {}
