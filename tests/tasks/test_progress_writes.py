"""Stage tasks write progress only; the full state is written at the end (docs/benchmarks.md
recommendations 2 and 4), in process on SQLite with the stage tasks' own adapter.

- a reader mid-run sees status/iteration and the tool_calls rows, never ``done`` without a
  report;
- a redelivered stage (same message) works without reloading the cited history and writes no
  duplicate rows;
- the report is the same whether later stages rebuild the history or reload it;
- the chain's error callback reports from the failed task's own argument.
"""

from __future__ import annotations

import re
import uuid
from datetime import date
from types import SimpleNamespace
from typing import Any

import pytest

from db import repo
from db.engine import get_engine
from db.migrate import ensure_schema
from pipeline.core.settings import get_settings
from pipeline.core.state import FinancialAgentState
from pipeline.stages.table import STAGE_FUNCTIONS
from tasks import factory
from tasks.stages import chain_failed, should_continue_task

pytestmark = pytest.mark.usefixtures("clean_settings")

_REF_RE = re.compile(r"\b[a-z_]+_[0-9a-f]{12}\b")


class FakeTask:
    """Enough of a bound Celery task for ``factory.run_stage``."""

    def __init__(self, task_id: str = "task-1") -> None:
        self.request = SimpleNamespace(id=task_id, retries=0, delivery_info={"redelivered": False})
        self.events: list[str] = []

    def send_event(self, kind: str, **_: Any) -> None:
        self.events.append(kind)

    def retry(self, **_: Any) -> BaseException:
        raise AssertionError("no stage should retry here")


def _engine() -> Any:
    url = get_settings().effective_database_url
    ensure_schema(url=url)
    return get_engine(url)


def _start(symbol: str = "AAPL", as_of: date = date(2012, 6, 29)) -> dict[str, Any]:
    state = FinancialAgentState(
        analysis_id=str(uuid.uuid4()), stock_symbol=symbol, user_query=f"Analyze {symbol}", as_of=as_of
    )
    assert repo.create_and_claim(
        engine=_engine(),
        analysis_id=state.analysis_id,
        symbol=symbol,
        as_of=as_of,
        user_query=state.user_query,
        max_iterations=state.max_iterations,
        state=state.to_message(),
    )
    return state.to_message()


def _stage(name: str, payload: dict[str, Any], task: FakeTask | None = None) -> dict[str, Any]:
    """Run stage ``name`` on ``payload`` through the tasks' adapter (``factory.run_stage``)."""
    return factory.run_stage(
        task=task or FakeTask(f"{name}-1"), fn=STAGE_FUNCTIONS[name], stage=name, payload=payload
    )


def _normalise(obj: Any, analysis_id: str) -> Any:
    """``obj`` with the analysis id and every tool_call_id replaced (they differ per analysis)."""
    if isinstance(obj, dict):
        return {k: _normalise(v, analysis_id) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_normalise(v, analysis_id) for v in obj]
    if isinstance(obj, str):
        return _REF_RE.sub("<ref>", obj.replace(analysis_id, "<id>"))
    return obj


def test_a_reader_mid_run_sees_progress_and_the_end_writes_everything() -> None:
    engine = _engine()
    payload = _start()
    analysis_id = payload["analysis_id"]
    seen = []
    for name in STAGE_FUNCTIONS:
        payload = _stage(name, payload)
        row = repo.get_analysis(engine=engine, analysis_id=analysis_id)
        assert row is not None
        seen.append(row["status"])
        # mid-run: progress and rows, not the state, never a terminal status without a report
        assert row["state"]["stock_data"] is None
        assert row["report"] is None and row["finished_at"] is None and row["signal"] is None
        assert repo.status_of(engine=engine, analysis_id=analysis_id) == (row["status"], 0)
    assert seen == ["analyzing", "recommending", "reviewing", "reviewing"]
    tools = {c["tool"] for c in repo.get_tool_calls(engine=engine, analysis_id=analysis_id)}
    assert {"get_stock_data", "get_history", "technical_indicators", "calculator"} <= tools
    assert payload["status"] == "done"  # the message carries the reviewed state

    out = should_continue_task(payload)
    assert out["decision"] == "end_done"
    row = repo.get_analysis(engine=engine, analysis_id=analysis_id)
    assert row is not None
    assert row["status"] == "done" and row["finished_at"] is not None
    assert row["report"].startswith("# AAPL") and row["report_json"]["signal"] == row["signal"]
    assert row["state"]["stock_data"]["history_ref"]
    assert row["state"]["recommendation"]["signal"] == row["signal"]


def test_a_redelivered_analysis_stage_rebuilds_the_history_and_writes_no_duplicates(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    engine = _engine()
    payload = _stage("research", _start())
    history_ref = payload["stock_data"]["history_ref"]
    assert payload["stock_data"]["history_check"]["digest"]
    loads: list[str] = []
    real = repo.get_tool_result

    def counting(*, engine: Any, tool_call_id: str) -> dict[str, Any] | None:
        loads.append(tool_call_id)
        return real(engine=engine, tool_call_id=tool_call_id)

    monkeypatch.setattr(repo, "get_tool_result", counting)
    task = FakeTask("analysis-same-message")
    first = _stage("analysis", payload, task)
    rows_after_first = len(repo.get_tool_calls(engine=engine, analysis_id=payload["analysis_id"]))
    second = _stage("analysis", payload, task)  # the broker delivers the same message again
    assert first == second
    assert len(repo.get_tool_calls(engine=engine, analysis_id=payload["analysis_id"])) == rows_after_first
    assert history_ref not in loads  # technical_indicators and both chart tools: no reload
    assert first["analysis"]["technical"]["indicators"]["sma_200"] is not None

    batches: list[list[str]] = []
    real_batch = repo.get_tool_results

    def counting_batch(*, engine: Any, tool_call_ids: list[str]) -> dict[str, dict[str, Any]]:
        batches.append(list(tool_call_ids))
        return real_batch(engine=engine, tool_call_ids=tool_call_ids)

    monkeypatch.setattr(repo, "get_tool_results", counting_batch)
    reviewed_from = _stage("recommendation", first)
    loads.clear()
    review_out = _stage("review", reviewed_from)
    assert loads == []  # grounding: the history rebuilt, every other cited output in one batch
    assert len(batches) == 1 and history_ref not in batches[0]
    assert reviewed_from["stock_data"]["quote_ref"] in batches[0]
    grounding = review_out["analysis"]["grounding"]
    assert grounding["numbers_checked"] > 0 and grounding["unverified"] == []


def test_the_report_is_the_same_rebuilt_or_reloaded() -> None:
    """Outputs for a fixed (symbol, as_of): later stages rebuilding the history (default) and
    reloading it from its row (the check removed, as from an older research task)."""
    engine = _engine()
    reports = []
    for keep_check in (True, False):
        payload = _stage("research", _start("MSFT", date(2010, 6, 30)))
        if not keep_check:
            del payload["stock_data"]["history_check"]
        for name in ("analysis", "recommendation", "review"):
            payload = _stage(name, payload)
        should_continue_task(payload)
        row = repo.get_analysis(engine=engine, analysis_id=payload["analysis_id"])
        assert row is not None and row["status"] == "done"
        reports.append(
            (
                _normalise(row["report_json"], payload["analysis_id"]),
                _normalise(row["report"], payload["analysis_id"]),
            )
        )
    assert reports[0] == reports[1]
    assert reports[0][0]["grounding"]["unverified"] == []


def test_chain_failed_reports_from_the_failed_tasks_argument() -> None:
    engine = _engine()
    payload = _stage("research", _start())
    request = SimpleNamespace(task="finagent.analysis", args=[payload])
    chain_failed(request, RuntimeError("boom"), None, analysis_id=payload["analysis_id"])
    row = repo.get_analysis(engine=engine, analysis_id=payload["analysis_id"])
    assert row is not None and row["status"] == "failed" and row["finished_at"] is not None
    assert "finagent.analysis failed: RuntimeError: boom" in row["error"]
    # the state of the last good stage (research), not the one stored at the start
    assert row["state"]["stock_data"]["history_ref"] == payload["stock_data"]["history_ref"]
    assert row["state"]["errors"][-1]["stage"] == "analysis"


def test_chain_failed_falls_back_to_the_stored_state() -> None:
    engine = _engine()
    payload = _start()
    chain_failed(
        SimpleNamespace(task="finagent.research", args=[]),
        ValueError("x"),
        None,
        analysis_id=payload["analysis_id"],
    )
    row = repo.get_analysis(engine=engine, analysis_id=payload["analysis_id"])
    assert row is not None and row["status"] == "failed"
    assert row["state"]["errors"][-1]["code"] == "STAGE_FAILED"
