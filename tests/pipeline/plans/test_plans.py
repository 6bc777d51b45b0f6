"""The plan table and the plans the packages declare: every row has one plan, each package
imported in code by ``pipeline/plans/table.py``; each plan validates its own options; states
stored before the plans answered in ``plan_result`` (fixtures/: three embedded csp runs,
rejected by the chart and the options analysts, and one suggestion) load, round-trip key for key
and still report their verdict and reasons; the shared code finds each type's behaviour through the table."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path
from typing import Any, get_args

import click
import pytest
from pydantic import ValidationError

from agents.analysts.versions import rules_version
from apps.cli import main
from core.parts import CspContract, CspResult
from core.plans import ANALYSIS_TYPES, PLANS, AnalysisType, backtest_types, cli_choices, plan_spec
from core.state import FinancialAgentState
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
def test_an_old_state_still_reports_its_verdict_and_reasons(path: Path) -> None:
    """An old record is rendered by today's section: its verdict, every reason with its
    citations, under the key it was stored under (the layout of the section is today's)."""
    data = _load(path)
    state = FinancialAgentState.model_validate(data["state"])
    grounding = state.analysis.grounding if state.analysis else None
    markdown = report_markdown(state, grounding=grounding)
    old = data["state"]["analysis"]["csp"]
    assert "## Cash-secured put" in markdown
    for reason in old["reasons"]:
        assert reason["text"] in markdown
        assert all(f"`[{ref}]`" in markdown for ref in reason["source_refs"])
    if old["status"] == "rejected":
        assert f"**No cash-secured put**: rejected by the {old['rejected_by']} analyst" in markdown
    else:
        assert f"**Sell 1 {old['suggestion']['contract']}**" in markdown
    assert report_json(state, grounding=grounding)["csp"] == old
    # the JSON is what the reporting code writes today (main's changes since), the record as stored;
    # the headline is today's verdict, which opens as the old one did
    got = report_json(state, grounding=grounding)
    want = _as_reported_now(data["json"], data["markdown"])
    headline, expected = got.pop("headline"), want.pop("headline")
    if expected is None:
        assert headline is None
    else:
        assert (
            headline.split(": strike")[0].split(" analyst")[0]
            == expected.split(": strike")[0].split(" analyst")[0]
        )
    assert json.dumps(got) == json.dumps(want)


def _as_reported_now(old: dict[str, Any], old_markdown: str) -> dict[str, Any]:
    """The old report JSON with what changed since it was written: the calibration keys (null:
    an old state has no calibrated probability) after ``prompt_version``, the rule-set label of
    the reporting code (``agents.analysts.versions``: not stored in the state), the one-line
    ``headline`` (the options verdict of the old report's headline, without its emphasis and
    pointer), ``risk`` (null: no forecast in an old state) and the plain ``direction`` after
    ``signal``, and the raw signal, score and
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
            out["risk"] = None  # an old state has no risk forecast
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
        "put_spread",
    }
    assert QUERY_SCHEMA["properties"]["analysis_type"]["enum"] == list(ANALYSIS_TYPES)


@pytest.mark.parametrize("name", ANALYSIS_TYPES)
def test_every_row_has_its_registered_plan(name: str) -> None:
    plan = plan_for(name)
    assert plan.spec is plan_spec(name)
    # a plan with a result of its own validates its request options with its own model
    assert (plan.options_model is not None) == (plan.spec.result_field is not None)


def test_a_second_plan_under_one_name_is_refused() -> None:
    from pipeline.plan_hooks import Plan, register_plan

    with pytest.raises(RuntimeError, match="two plans register the analysis type 'csp'"):
        register_plan(Plan(spec=plan_spec("csp")))


def test_every_plan_package_is_imported_in_code_by_the_plan_table() -> None:
    """No plan package is found by walking a folder or imported by a name built at run time: the
    table imports each package of ``pipeline/plans`` in code, so import-linter sees every edge."""
    root = Path(__file__).parents[3] / "pipeline"
    packages = sorted(p.parent.name for p in (root / "plans").glob("*/__init__.py"))
    table = (root / "plans" / "table.py").read_text()
    assert f"from pipeline.plans import {', '.join(packages)}\n" in table
    for path in (root / "plan_hooks.py", root / "plans" / "table.py"):
        source = path.read_text()
        assert "importlib" not in source and "pkgutil" not in source and "__import__" not in source


def test_each_plan_validates_its_own_options() -> None:
    from pipeline.plan_hooks import validate_plan_options

    assert validate_plan_options("covered_call", {"cost_basis": 600, "shares": 700}) == {
        "cost_basis": 600.0, "shares": 700,
    }  # fmt: skip
    assert validate_plan_options("csp", {"account_value": 250000, "delta_max": 0.3}) == {
        "delta_max": 0.3, "account_value": 250000.0,
    }  # fmt: skip
    assert validate_plan_options("csp", None) is None and validate_plan_options("csp", {}) is None
    with pytest.raises(ValueError, match=r"csp plan options: cost_basis: Extra inputs are not permitted"):
        validate_plan_options("csp", {"cost_basis": 600})
    with pytest.raises(ValueError, match="shares needs cost_basis"):
        validate_plan_options("covered_call", {"shares": 700})
    with pytest.raises(ValueError, match=r"delta_min 0\.3 exceeds delta_max 0\.2"):
        validate_plan_options("csp", {"delta_min": 0.3, "delta_max": 0.2})
    with pytest.raises(ValueError, match="the composite analysis takes no plan options"):
        validate_plan_options("composite", {"width": 5})


def test_a_state_carries_plan_options_and_result_only_when_set() -> None:
    bare = FinancialAgentState(analysis_id="a", stock_symbol="AAPL", as_of=date(2014, 6, 6))
    assert "plan_options" not in bare.to_message() and "plan_result" not in bare.to_message()
    full = bare.model_copy(
        update={"plan_options": {"cost_basis": 600.0}, "plan_result": {"status": "rejected"}}
    )
    again = FinancialAgentState.as_received(full.to_message())
    assert again.plan_options == {"cost_basis": 600.0} and again.plan_result == {"status": "rejected"}


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
        "put_spread",
    ]
    assert cli_choices()[0] == "composite"
    backtest = main.get_command(click.Context(main), "backtest")
    option = next(p for p in backtest.params if p.name == "analysis_type")
    assert isinstance(option.type, click.Choice)
    assert set(option.type.choices) == {"technical", "fundamental", "sentiment", "composite"}
    assert not {"csp", "covered_call", "put_spread"} & set(backtest_types())


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
    assert [p.spec.result_field for p in result_plans()] == ["csp", "covered_call", "put_spread"]
    data = report_json(_state(None, None))
    # csp's key is null in every report; the newer covered_call row leaves its key out of the
    # reports of other types (their JSON stays what it was)
    assert data["csp"] is None and list(data)[-1] == "csp"
    assert "covered_call" not in data and "put_spread" not in data


def test_chart_marks_of_a_suggestion_are_in_the_bars_units() -> None:
    state = _load(FIXTURES / "csp_state_suggested.json")["state"]
    # strike 620 and breakeven 620 - 4.1 = 615.9, chain quoted 7x the bars (a 7:1 split)
    assert plan_for("csp").chart_marks(state) == {"put strike": 88.5714, "breakeven": 87.9857}
    rejected = _load(FIXTURES / "csp_state_GOOG_2015-12-24.json")["state"]
    assert plan_for("csp").chart_marks(rejected) == {}
    assert plan_for("composite").chart_marks(state) == {}
