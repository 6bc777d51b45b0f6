"""``end_of_pass``: the analysis that ``should_continue`` ends as failed says why in its report
(Markdown and JSON), read back from the stored row; a done report says nothing more."""

from __future__ import annotations

import uuid
from datetime import date
from typing import Any

import pytest

from core.settings import get_settings
from core.state import FinancialAgentState, StageError, Status
from db import repo
from db.engine import get_engine
from db.migrate import ensure_schema
from pipeline.steps.close import end_of_pass

pytestmark = pytest.mark.usefixtures("clean_settings")


def _stored(state: FinancialAgentState) -> dict[str, Any]:
    """Create ``state``'s analysis row, run ``end_of_pass`` on it, return the row it wrote."""
    url = get_settings().service.effective_database_url
    ensure_schema(url=url)
    engine = get_engine(url)
    assert repo.create_and_claim(
        engine=engine,
        analysis_id=state.analysis_id,
        symbol=state.stock_symbol,
        as_of=state.as_of or date(2012, 6, 29),
        user_query="Analyze AAPL",
        max_iterations=state.max_iterations,
        state=state.to_message(),
    )
    end_of_pass(payload=state.to_message(), celery_task_id="t-1")
    row = repo.get_analysis(engine=engine, analysis_id=state.analysis_id)
    assert row is not None
    return row


def _state(**fields: Any) -> FinancialAgentState:
    return FinancialAgentState(
        analysis_id=str(uuid.uuid4()), stock_symbol="AAPL", as_of=date(2012, 6, 29), **fields
    )


def _error(code: str) -> StageError:
    return StageError(stage="research", iteration=0, code=code, message=f"{code} happened")


def test_two_critical_errors_are_the_stated_stop_reason() -> None:
    row = _stored(_state(errors=[_error("TIMEOUT"), _error("RATE_LIMITED")]))
    assert row["status"] == "failed" and row["error"] == "2 critical errors"
    assert row["report_json"]["stop_reason"] == "2 critical errors"
    head = row["report"].splitlines()[:5]
    assert "Stopped: 2 critical errors" in head, head


def test_the_iteration_cap_is_the_stated_stop_reason() -> None:
    # the last allowed pass ended without a reviewed report (stock data still missing)
    row = _stored(_state(iteration=2, max_iterations=3, status=Status.REVIEWING))
    reason = "iteration cap reached (3 of 3 passes)"
    assert row["status"] == "failed" and row["error"] == reason
    assert row["report_json"]["stop_reason"] == reason
    assert f"Stopped: {reason}" in row["report"].splitlines()[:5]


def test_a_done_analysis_states_no_stop_reason() -> None:
    row = _stored(_state(status=Status.DONE, stock_data={"status": "success"}))
    assert row["status"] == "done" and row["error"] is None
    assert row["report_json"]["stop_reason"] is None
    assert "Stopped:" not in row["report"]
