"""The analysts run from their row of the analyst table: the analysis stage's runner
(``pipeline.stages.analysis.row_analyst``) and their report sections (``pipeline.report_analysts``).
The end-to-end recipe (a toy analyst added as its module and one row) is in tests/test_recipes.py."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import date
from types import SimpleNamespace
from typing import Any

import pytest

from agents.analysts.table import AnalystRow
from core.state import FinancialAgentState
from pipeline import report_analysts
from pipeline.report import report_json, report_markdown
from pipeline.stages import analysis


def _row(name: str, **kw: Any) -> AnalystRow:
    fields: dict[str, Any] = {
        "stage": "analysis",
        "inputs": ("get_stock_data", "get_history"),
        "view": f"analysis.views.{name}",
        "fallback": "no view",
        "llm": None,
        "section": f"{name.upper()} view",
        "weight": "0",
        "scorecard": name,
        "analyze": lambda inputs: {"n": len(inputs)},
    }
    return AnalystRow(name=name, **(fields | kw))


def _state(**kw: Any) -> FinancialAgentState:
    return FinancialAgentState(analysis_id="a", stock_symbol="T", as_of=date(2017, 9, 1), **kw)


def test_each_view_is_a_cited_section_in_table_order_and_a_json_key(monkeypatch: pytest.MonkeyPatch) -> None:
    rows = (_row("b", markdown=None), _row("a", markdown=lambda view: [f"A says {view['label']}."]))
    monkeypatch.setattr(report_analysts, "run_from_row", lambda: rows)
    views = {
        "a": {"view": {"label": "up"}, "source_refs": ["get_stock_data_aaaaaaaaaaaa"]},
        "b": {"view": {"close": 1234.5, "label": "flat"}, "source_refs": ["get_history_bbbbbbbbbbbb"]},
        "gone": {"view": {"x": 1}, "source_refs": []},  # a stored view whose row was removed
    }
    state = _state(stock_data={"status": "success"}, analysis={"views": views})
    md = report_markdown(state)
    b_at = md.index("## B view `[get_history_bbbbbbbbbbbb]`\n\n- close: 1,234.5\n- label: flat\n")
    a_at = md.index("## A view `[get_stock_data_aaaaaaaaaaaa]`\n\nA says up.\n")
    assert b_at < a_at and "gone" not in md
    assert list(report_json(state)["analyst_views"]) == ["b", "a"]


def test_without_a_view_there_is_no_key_and_no_section() -> None:
    state = _state(stock_data={"status": "success"})
    assert "analyst_views" not in report_json(state)
    assert report_analysts.analyst_views_markdown(state) == []


class _Tools:
    """``call_tool`` of the stage, answering from a table: ``{tool: data}``, ``None`` = an error."""

    def __init__(self, answers: Mapping[str, Any]) -> None:
        self.answers, self.called = answers, []

    def __call__(self, *, state: Any, ctx: Any, name: str, arguments: dict[str, Any], critical: bool) -> Any:
        assert arguments == {"symbol": "T"} and critical is False
        self.called.append(name)
        data = self.answers[name]
        return SimpleNamespace(ok=data is not None, data=data, tool_call_id=f"{name}_{len(self.called):012d}")


def test_the_stage_hands_the_inputs_to_analyze_and_stores_the_view(monkeypatch: pytest.MonkeyPatch) -> None:
    tools = _Tools({"get_stock_data": {"close": 10.0}, "get_history": {"bars": 3}})
    monkeypatch.setattr(analysis, "call_tool", tools)
    seen: list[Mapping[str, Any]] = []
    row = _row(
        "x", analyze=lambda inputs: seen.append(inputs) or {"close": inputs["get_stock_data"]["close"]}
    )
    state = _state(stock_data={"status": "success"})
    analysis.row_analyst(row, state=state, ctx=SimpleNamespace())
    assert seen == [{"get_stock_data": {"close": 10.0}, "get_history": {"bars": 3}}]
    assert state.analysis is not None and state.analysis.views == {
        "x": {
            "view": {"close": 10.0},
            "source_refs": ["get_stock_data_000000000001", "get_history_000000000002"],
        }
    }


@pytest.mark.parametrize(
    ("stock", "answers", "analyze_result", "called"),
    [
        ({"status": "failed"}, {}, {"v": 1}, []),  # research failed: nothing is called
        ({"status": "success"}, {"get_stock_data": None, "get_history": {}}, {"v": 1}, ["get_stock_data"]),
        (
            {"status": "success"},
            {"get_stock_data": {}, "get_history": {}},
            None,
            ["get_stock_data", "get_history"],
        ),
    ],
)
def test_no_view_when_research_failed_an_input_failed_or_analyze_gives_none(
    monkeypatch: pytest.MonkeyPatch,
    stock: dict[str, Any],
    answers: dict[str, Any],
    analyze_result: dict[str, Any] | None,
    called: list[str],
) -> None:
    tools = _Tools(answers)
    monkeypatch.setattr(analysis, "call_tool", tools)
    state = _state(stock_data=stock)
    analysis.row_analyst(_row("x", analyze=lambda inputs: analyze_result), state=state, ctx=SimpleNamespace())
    assert tools.called == called
    assert state.analysis is None or not state.analysis.views
