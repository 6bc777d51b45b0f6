"""The stored state keeps references to the tool results it repeats (``db.state_refs``) and
reads back whole (``db.repo.get_analysis``, the recovery takes), on SQLite and PostgreSQL;
retention never leaves a kept state pointing at nothing."""

from __future__ import annotations

import copy
import json
import uuid
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy import Engine

from core.parts import ResearchBundle
from core.state import FinancialAgentState
from db import ledger, progress_repo, repo, state_refs
from db.engine import get_engine, json_dumps
from db.retention import purge
from tests.support.rows import finish_row

QUOTE = {"symbol": "AAPL", "date": "2014-01-21", "current_price": 549.07, "previous_close": 543.1,
         "change": 5.97, "volume": 1000, "null_reasons": {"market_cap": "no source"}}  # fmt: skip
ENTRY = {"symbol": "AAPL", "pe_ratio": 13.81, "eps_actual": 39.76, "timestamp": "2014-01-21",
         "field_sources": {"pe_ratio": "aggregated_earnings.csv#AAPL@2013-01-23..2013-10-28"}}  # fmt: skip
FUNDAMENTALS = {"fundamentals": [ENTRY], "metrics": ["pe_ratio"], "as_of": "2014-01-21"}


def _texts_equal(a: Any, b: Any) -> bool:
    """Equal as the column stores JSON: same keys in the same order, same numbers as written."""
    return json_dumps(a) == json_dumps(b)


def _state(analysis_id: str, report: str | None = None) -> dict[str, Any]:
    """A real pipeline state (``FinancialAgentState.to_message``) whose research part copies
    two tool results: the quote whole, the fundamentals entry from inside a list."""
    state = FinancialAgentState(
        analysis_id=analysis_id,
        stock_symbol="AAPL",
        user_query="Analyse AAPL",
        as_of=date(2014, 1, 21),
        stock_data=ResearchBundle(
            status="success",
            quote=copy.deepcopy(QUOTE),
            quote_ref=f"{analysis_id}:quote",
            fundamentals=copy.deepcopy(ENTRY),
            fundamentals_ref=f"{analysis_id}:fund",
        ),
        final_report=report,
    )
    return state.to_message()


def _rows(analysis_id: str) -> list[dict[str, Any]]:
    base = {"stage": "research", "status": "success", "attempt": 1, "latency_ms": 1.0}
    return [
        {**base, "tool_call_id": f"{analysis_id}:quote", "tool": "get_stock_data", "result": QUOTE},
        {**base, "tool_call_id": f"{analysis_id}:fund", "tool": "get_fundamentals", "result": FUNDAMENTALS},
    ]


def test_pack_then_unpack_gives_the_state_back_key_for_key() -> None:
    state = _state("a")
    results = {"a:quote": QUOTE, "a:fund": FUNDAMENTALS}
    packed = state_refs.pack(state, results)
    assert packed["stock_data"]["quote"] == {"$result": ["a:quote"]}
    assert packed["stock_data"]["fundamentals"] == {"$result": ["a:fund", "fundamentals", 0]}
    assert len(json_dumps(packed)) < len(json_dumps(state)) - 200
    assert state_refs.refs(packed) == {"a:quote", "a:fund"}
    back = state_refs.unpack(packed, results)
    assert _texts_equal(back, state)
    restored = FinancialAgentState.from_message(back).to_message()
    assert _texts_equal(restored, FinancialAgentState.from_message(state).to_message())


def test_values_that_differ_small_values_and_marker_shaped_states_stay_inline() -> None:
    state = _state("a")
    # one number differs (1 vs 1.0 is another JSON text): the value is not the result
    other = {**QUOTE, "volume": 1000.0}
    assert state_refs.pack(state, {"a:quote": other})["stock_data"]["quote"] == QUOTE
    assert state_refs.pack(state, {"a:sym": {"symbol": "AAPL"}}) is state
    odd = {**state, "note": {"$result": ["x"]}}
    assert state_refs.pack(odd, {"a:quote": QUOTE}) is odd


def test_a_missing_result_is_a_key_error_naming_the_reference() -> None:
    packed = state_refs.pack(_state("a"), {"a:quote": QUOTE})
    with pytest.raises(KeyError, match="a:quote"):
        state_refs.unpack(packed, {})


@pytest.fixture(params=["sqlite", "postgresql"])
def engine(request: pytest.FixtureRequest) -> Engine:
    """A migrated database of its own per test (the purge test counts every analysis)."""
    if request.param == "sqlite":
        return get_engine(str(request.getfixturevalue("sqlite_url")))
    return get_engine(str(request.getfixturevalue("make_pg_database")(migrated=True)))


def _new(engine: Engine) -> str:
    analysis_id = str(uuid.uuid4())
    assert ledger.create(
        engine=engine, analysis_id=analysis_id, symbol="AAPL", as_of=date(2014, 1, 21),
        user_query="Analyse AAPL", max_iterations=1, state={"analysis_id": analysis_id},
        lease_seconds=60,
    )  # fmt: skip
    return analysis_id


def _raw_state(engine: Engine, analysis_id: str) -> Any:
    with engine.connect() as conn:
        return conn.execute(
            sa.select(repo.ANALYSES.c.state).where(repo.ANALYSES.c.id == analysis_id)
        ).scalar_one()


def _finish(engine: Engine, analysis_id: str, report: str = "# AAPL") -> dict[str, Any]:
    state = _state(analysis_id, report)
    finish_row(engine, analysis_id, state=copy.deepcopy(state), tool_calls=_rows(analysis_id), report=report)
    return state


def test_a_finished_state_stores_references_and_reads_whole(engine: Engine) -> None:
    analysis_id = _new(engine)
    state = _finish(engine, analysis_id)
    raw = _raw_state(engine, analysis_id)
    assert raw["stock_data"]["quote"] == {"$result": [f"{analysis_id}:quote"]}
    assert raw["final_report"] == repo.REPORT_IN_COLUMN
    row = repo.get_analysis(engine=engine, analysis_id=analysis_id)
    assert row is not None and _texts_equal(row["state"], state)
    # the tool calls still hold what each tool returned (the point-in-time audit's view)
    results = repo.get_tool_results(
        engine=engine, tool_call_ids=[f"{analysis_id}:quote", f"{analysis_id}:fund"]
    )
    assert results == {f"{analysis_id}:quote": QUOTE, f"{analysis_id}:fund": FUNDAMENTALS}


def test_a_checkpoint_references_its_own_results_and_the_end_every_stages(engine: Engine) -> None:
    analysis_id = _new(engine)
    state = _state(analysis_id)
    owner = "worker-1"
    assert ledger.claim(
        engine=engine, analysis_id=analysis_id, iteration=0, step="research", owner=owner, lease_seconds=60
    ).attempt
    # research: the quote row is written by the checkpoint's own statement
    quote_row, fund_row = _rows(analysis_id)
    end = ledger.StepEnd(
        analysis_id=analysis_id, iteration=0, step="research", owner=owner, state=copy.deepcopy(state),
        tool_calls=[quote_row],
    )  # fmt: skip
    assert ledger.complete(engine=engine, end=end, status="analyzing", lease_seconds=60)
    assert _raw_state(engine, analysis_id)["stock_data"]["quote"] == {"$result": [f"{analysis_id}:quote"]}
    # analysis: the quote row is an earlier stage's (a checkpoint reads no rows back: the quote
    # stays inline in this transient state), the fundamentals row this one's
    assert ledger.claim(
        engine=engine, analysis_id=analysis_id, iteration=0, step="analysis", owner=owner, lease_seconds=60
    ).attempt
    end = ledger.StepEnd(
        analysis_id=analysis_id, iteration=0, step="analysis", owner=owner, state=copy.deepcopy(state),
        tool_calls=[fund_row],
    )  # fmt: skip
    assert ledger.complete(engine=engine, end=end, status="recommending", lease_seconds=60)
    raw = _raw_state(engine, analysis_id)
    assert state_refs.refs(raw) == {f"{analysis_id}:fund"}
    assert raw["stock_data"]["quote"] == QUOTE
    # the recovery sweep's take hands the state on whole
    later = datetime.now(UTC) + timedelta(hours=1)
    (seen,) = progress_repo.progress_rows(engine=engine, analysis_ids=[analysis_id]).values()
    taken = ledger.take(engine=engine, seen=seen, lease_seconds=60, expired=True, now=later)
    assert taken is not None and _texts_equal(taken["state"], state)
    # the end of the analysis (a last step without rows of its own) references both stages' rows
    for step in ("recommendation", "review"):
        assert ledger.claim(
            engine=engine, analysis_id=analysis_id, iteration=0, step=step, owner=owner, lease_seconds=60
        ).attempt
        end = ledger.StepEnd(
            analysis_id=analysis_id, iteration=0, step=step, owner=owner, state=copy.deepcopy(state)
        )  # fmt: skip
        if step == "recommendation":
            assert ledger.complete(engine=engine, end=end, status="reviewing", lease_seconds=60)
    assert ledger.finish(
        engine=engine, end=end, status="done", report=None, report_json=None, signal=None,
        confidence=None, error=None,
    )  # fmt: skip
    assert state_refs.refs(_raw_state(engine, analysis_id)) == {f"{analysis_id}:quote", f"{analysis_id}:fund"}
    row = repo.get_analysis(engine=engine, analysis_id=analysis_id)
    assert row is not None and _texts_equal(row["state"], state)


def test_only_the_latest_successful_attempt_is_referenced(engine: Engine) -> None:
    analysis_id = _new(engine)
    first, second = _rows(analysis_id)[0], _rows(analysis_id)[0]
    newer = {**QUOTE, "current_price": 550.0}
    second.update(attempt=2, result=newer)
    state = _state(analysis_id)  # copies attempt 1's result, which attempt 2 superseded
    finish_row(engine, analysis_id, state=copy.deepcopy(state), tool_calls=[first, second])
    assert _raw_state(engine, analysis_id)["stock_data"]["quote"] == QUOTE
    row = repo.get_analysis(engine=engine, analysis_id=analysis_id)
    assert row is not None and _texts_equal(row["state"], state)


def test_a_state_written_before_references_reads_unchanged(engine: Engine) -> None:
    analysis_id = _new(engine)
    state = _finish(engine, analysis_id)
    # the row as the layout before references stored it: the results inline
    with engine.begin() as conn:
        conn.execute(
            sa.update(repo.ANALYSES)
            .where(repo.ANALYSES.c.id == analysis_id)
            .values(state={**state, "final_report": repo.REPORT_IN_COLUMN})
        )
    row = repo.get_analysis(engine=engine, analysis_id=analysis_id)
    assert row is not None and _texts_equal(row["state"], state)


def test_purge_keeps_what_a_kept_state_references(engine: Engine) -> None:
    old, kept = _new(engine), _new(engine)
    _finish(engine, old)
    state = _finish(engine, kept)
    with engine.begin() as conn:
        conn.execute(
            sa.update(repo.ANALYSES)
            .where(repo.ANALYSES.c.id == old)
            .values(created_at=datetime(2020, 1, 1, tzinfo=UTC))
        )
    report = purge(engine=engine, before=date(2021, 1, 1))
    assert (report.analyses, report.tool_calls) == (1, 2)
    assert repo.get_analysis(engine=engine, analysis_id=old) is None
    row = repo.get_analysis(engine=engine, analysis_id=kept)
    assert row is not None and _texts_equal(row["state"], state)
    assert json.loads(json_dumps(row["state"]))["stock_data"]["fundamentals"] == ENTRY


def test_the_report_json_references_the_state_but_keeps_what_sql_reads(engine: Engine) -> None:
    packed_id, plain_id = _new(engine), _new(engine)
    state = _state(packed_id, "# AAPL")
    state["messages"] = [{"role": "assistant", "name": "research", "content": "AAPL " + "research " * 12}]
    report_json = {"symbol": "AAPL", "messages": copy.deepcopy(state["messages"]),
                   "quote": copy.deepcopy(QUOTE),
                   "views": {"fundamental": copy.deepcopy(ENTRY)}, "score": 0.4,
                   "fundamentals": copy.deepcopy(ENTRY)}  # fmt: skip
    finish_row(
        engine, packed_id, state=copy.deepcopy(state), tool_calls=_rows(packed_id), report="# AAPL",
        report_json=copy.deepcopy(report_json),
    )  # fmt: skip
    with engine.connect() as conn:
        raw = conn.execute(
            sa.select(repo.ANALYSES.c.report_json).where(repo.ANALYSES.c.id == packed_id)
        ).scalar_one()
        # the same report written as it is, as the column stored every report before
        conn.execute(
            sa.update(repo.ANALYSES).where(repo.ANALYSES.c.id == plain_id).values(report_json=report_json)
        )
        conn.commit()
    # the state's own values are referenced; its copies of tool results are references to the
    # tool rows there, so the report keeps them inline (an altered tool row never changes it)
    assert raw["messages"] == {"$result": ["$state", "messages"]}
    assert raw["quote"] == QUOTE and raw["fundamentals"] == ENTRY
    assert raw["views"] == {"fundamental": ENTRY} and raw["score"] == 0.4  # read by SQL: inline
    packed, plain = (repo.get_analysis(engine=engine, analysis_id=i) for i in (packed_id, plain_id))
    assert packed is not None and plain is not None
    # key for key, in the order the column hands back a report written whole
    assert _texts_equal(packed["report_json"], plain["report_json"])
    assert packed["report_json"] == report_json
