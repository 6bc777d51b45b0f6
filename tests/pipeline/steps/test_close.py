"""``end_of_pass``: the analysis that ``should_continue`` ends as failed says why in its report
(Markdown and JSON), read back from the stored row; a done report says nothing more."""

from __future__ import annotations

import uuid
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy import Engine

from core.settings import get_settings
from core.state import FinancialAgentState, StageError, Status
from db import ledger, progress_repo, repo
from db.engine import get_engine
from db.migrate import ensure_schema
from pipeline.steps.close import _finish_lost_hand_off, end_of_pass

pytestmark = pytest.mark.usefixtures("clean_settings")


def _stored(state: FinancialAgentState) -> dict[str, Any]:
    """Create ``state``'s analysis row, run ``end_of_pass`` on it, return the row it wrote."""
    url = get_settings().service.effective_database_url
    ensure_schema(url=url)
    engine = get_engine(url)
    assert ledger.create_and_claim(
        engine=engine,
        analysis_id=state.analysis_id,
        symbol=state.stock_symbol,
        as_of=state.as_of or date(2012, 6, 29),
        user_query="Analyze AAPL",
        max_iterations=state.max_iterations,
        state=state.to_message(),
    )
    end_of_pass(payload=state.to_message(), celery_task_id="t-1", settings=get_settings())
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


# --- a lost claim of the next pass: who finishes the hand-off --------------------------------


def _claimed_next_pass(*, claimant: str, age: timedelta) -> tuple[str, Engine]:
    """An analysis in pass 0 (reviewing) whose pass 1 was claimed by ``claimant`` ``age`` ago
    and never written: the window between a should_continue's claim and its row write."""
    url = get_settings().service.effective_database_url
    ensure_schema(url=url)
    engine = get_engine(url)
    state = _state(status=Status.REVIEWING)
    assert ledger.create_and_claim(
        engine=engine,
        analysis_id=state.analysis_id,
        symbol="AAPL",
        as_of=date(2012, 6, 29),
        user_query="Analyze AAPL",
        max_iterations=state.max_iterations,
        state=state.to_message(),
    )
    assert ledger.claim_pass(
        engine=engine, analysis_id=state.analysis_id, iteration=1, celery_task_id=claimant
    )
    # back-date both: the row's last write (the review checkpoint) came just before the claim
    claimed_at = datetime.now(UTC) - age
    with engine.begin() as conn:
        conn.execute(
            sa.update(repo.ITERATIONS)
            .where(repo.ITERATIONS.c.analysis_id == state.analysis_id, repo.ITERATIONS.c.iteration == 1)
            .values(created_at=claimed_at)
        )
        conn.execute(
            sa.update(repo.ANALYSES)
            .where(repo.ANALYSES.c.id == state.analysis_id)
            .values(updated_at=claimed_at - timedelta(seconds=1))
        )
    return state.analysis_id, engine


def test_a_concurrent_duplicate_leaves_the_hand_off_to_the_live_claimant() -> None:
    analysis_id, engine = _claimed_next_pass(claimant="t-first", age=timedelta(seconds=1))
    assert not _finish_lost_hand_off(
        engine=engine,
        analysis_id=analysis_id,
        iteration=0,
        celery_task_id="t-second",
        settings=get_settings(),
    )
    assert not _finish_lost_hand_off(
        engine=engine, analysis_id=analysis_id, iteration=0, celery_task_id=None, settings=get_settings()
    )


def test_a_redelivery_of_the_claiming_message_finishes_its_own_hand_off() -> None:
    analysis_id, engine = _claimed_next_pass(claimant="t-first", age=timedelta(seconds=1))
    assert _finish_lost_hand_off(
        engine=engine, analysis_id=analysis_id, iteration=0, celery_task_id="t-first", settings=get_settings()
    )


def test_a_row_the_sweep_took_after_the_claim_is_finished_by_its_re_drive() -> None:
    # the claimant died between its claim and its write; the sweep took the row afterwards
    # (a lost message after a Redis restart, or an expired lease) and re-drives should_continue
    analysis_id, engine = _claimed_next_pass(claimant="t-first", age=timedelta(seconds=1))
    later = datetime.now(UTC) + timedelta(days=1)
    (seen,) = progress_repo.progress_rows(engine=engine, analysis_ids=[analysis_id]).values()
    assert ledger.take(engine=engine, seen=seen, lease_seconds=60, expired=True, now=later)
    assert _finish_lost_hand_off(
        engine=engine, analysis_id=analysis_id, iteration=0, celery_task_id="t-sweep", settings=get_settings()
    )


def test_a_claim_older_than_the_hard_time_limit_is_a_dead_claimant_s() -> None:
    limit = get_settings().durability.task_time_limit
    analysis_id, engine = _claimed_next_pass(claimant="t-first", age=timedelta(seconds=limit + 5))
    # the recovery sweep's re-drive (a new task id) finishes it
    assert _finish_lost_hand_off(
        engine=engine, analysis_id=analysis_id, iteration=0, celery_task_id="t-sweep", settings=get_settings()
    )
    # a row that already moved on to pass 1 needs nobody, however old the claim
    with engine.begin() as conn:
        conn.execute(sa.update(repo.ANALYSES).where(repo.ANALYSES.c.id == analysis_id).values(iteration=1))
    assert not _finish_lost_hand_off(
        engine=engine, analysis_id=analysis_id, iteration=0, celery_task_id="t-sweep", settings=get_settings()
    )
