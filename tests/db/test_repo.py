"""Repository functions against a real SQLite file and a real PostgreSQL database (no mocks)."""

from __future__ import annotations

import random
import threading
import time
import uuid
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy import Engine
from sqlalchemy.exc import IntegrityError

from core.stages import STAGES, Status
from db import repo
from db.attempt_rows import tool_call_row_id
from db.repo import AnalysisNotFoundError


def _state(
    analysis_id: str, *, iteration: int = 0, status: str = "researching", **extra: Any
) -> dict[str, Any]:
    return {
        "analysis_id": analysis_id,
        "stock_symbol": "AAPL",
        "user_query": "Analyse AAPL",
        "iteration": iteration,
        "max_iterations": 3,
        "status": status,
        "as_of": "2024-01-15",
        **extra,
    }


def _new_analysis(engine: Engine, *, symbol: str = "AAPL") -> str:
    analysis_id = str(uuid.uuid4())
    assert repo.create_analysis(
        engine=engine,
        analysis_id=analysis_id,
        symbol=symbol,
        as_of=date(2024, 1, 15),
        user_query=f"Analyse {symbol}",
        max_iterations=3,
        state=_state(analysis_id),
    )
    return analysis_id


def _row(
    tool_call_id: str,
    *,
    attempt: int = 1,
    status: str = "success",
    stage: str = "research",
    at: datetime | None = None,
    **extra: Any,
) -> dict[str, Any]:
    row: dict[str, Any] = {
        "tool_call_id": tool_call_id,
        "stage": stage,
        "tool": "stock_data_tool",
        "symbol": "AAPL",
        "status": status,
        "attempt": attempt,
        "latency_ms": 12.5,
        "timestamp": at or datetime(2024, 1, 15, 10, 30, 45, tzinfo=UTC) + timedelta(seconds=attempt),
        "result_summary": "Price: $150.25, Change: +2.15",
        "arguments": {"symbol": "AAPL"},
        "result": {"price": 150.25} if status == "success" else None,
    }
    if status == "error":
        row.update(error="timed out", error_code="NETWORK_ERROR", retry_hint="retry later", level="WARNING")
    row.update(extra)
    return row


def _count_tool_calls(engine: Engine, analysis_id: str) -> int:
    with engine.connect() as conn:
        return int(
            conn.execute(
                sa.select(sa.func.count())
                .select_from(repo.TOOL_CALLS)
                .where(repo.TOOL_CALLS.c.analysis_id == analysis_id)
            ).scalar_one()
        )


# ---------------------------------------------------------------------------------------------
# analyses
# ---------------------------------------------------------------------------------------------


def test_create_analysis_is_idempotent(engine: Engine) -> None:
    # given a created analysis
    analysis_id = _new_analysis(engine)
    # when the same id is created again with other values (a retried enqueue)
    again = repo.create_analysis(
        engine=engine,
        analysis_id=analysis_id,
        symbol="MSFT",
        as_of="2020-01-01",
        user_query="other",
        max_iterations=9,
        state=_state(analysis_id, iteration=5),
    )
    # then nothing is inserted and the first row is intact
    assert again is False
    row = repo.get_analysis(engine=engine, analysis_id=analysis_id)
    assert row is not None
    assert (row["symbol"], row["max_iterations"], row["iteration"]) == ("AAPL", 3, 0)


def test_get_analysis_round_trips_types(engine: Engine) -> None:
    analysis_id = _new_analysis(engine)
    row = repo.get_analysis(engine=engine, analysis_id=analysis_id)
    assert row is not None
    assert row["id"] == analysis_id
    assert row["as_of"] == date(2024, 1, 15)
    assert row["status"] == "queued"
    assert row["state"] == _state(analysis_id)
    assert row["created_at"].tzinfo is not None
    assert row["created_at"].utcoffset() == timedelta(0)
    assert abs(datetime.now(UTC) - row["created_at"]) < timedelta(minutes=1)
    assert row["report"] is None
    assert row["finished_at"] is None
    assert repo.get_analysis(engine=engine, analysis_id=str(uuid.uuid4())) is None


def test_status_of(engine: Engine) -> None:
    analysis_id = _new_analysis(engine)
    assert repo.status_of(engine=engine, analysis_id=analysis_id) == ("queued", 0)
    repo.save_stage(
        engine=engine,
        analysis_id=analysis_id,
        state=_state(analysis_id),
        status="analyzing",
        iteration=0,
        tool_calls=[],
    )
    assert repo.status_of(engine=engine, analysis_id=analysis_id) == ("analyzing", 0)
    assert repo.status_of(engine=engine, analysis_id="nope") is None


def test_list_analyses_filters_orders_and_pages(engine: Engine) -> None:
    symbol = f"T{uuid.uuid4().hex[:6].upper()}"  # unique, so the shared Postgres DB does not interfere
    ids = [_new_analysis(engine, symbol=symbol) for _ in range(3)]
    repo.save_stage(
        engine=engine, analysis_id=ids[1], state={}, status="done", iteration=0, tool_calls=[], finished=True
    )
    listed = repo.list_analyses(engine=engine, symbol=symbol)
    assert {r["id"] for r in listed} == set(ids)
    assert [r["created_at"] for r in listed] == sorted((r["created_at"] for r in listed), reverse=True)
    assert set(listed[0]) == {*repo.LIST_COLUMNS, "analysis_type", "headline"}  # no heavy columns
    done = repo.list_analyses(engine=engine, symbol=symbol, status="done")
    assert [r["id"] for r in done] == [ids[1]]
    page = repo.list_analyses(engine=engine, symbol=symbol, limit=2, offset=2)
    assert len(page) == 1
    with pytest.raises(ValueError, match="limit"):
        repo.list_analyses(engine=engine, limit=0)
    with pytest.raises(ValueError, match="status"):
        repo.list_analyses(engine=engine, status="bogus")


def test_list_analyses_filters_by_analysis_type(engine: Engine) -> None:
    # a state naming a type, one naming the default, one naming none (= the default type)
    symbol = f"T{uuid.uuid4().hex[:6].upper()}"
    csp, composite, unnamed = (_new_analysis(engine, symbol=symbol) for _ in range(3))
    for analysis_id, state in ((csp, {"analysis_type": "csp"}), (composite, {"analysis_type": "composite"})):
        repo.save_stage(
            engine=engine, analysis_id=analysis_id, state=state, status="done", iteration=0, tool_calls=[]
        )
    repo.save_stage(engine=engine, analysis_id=unnamed, state={}, status="done", iteration=0, tool_calls=[])

    def ids(analysis_type: str) -> set[str]:
        rows = repo.list_analyses(engine=engine, symbol=symbol, analysis_type=analysis_type)
        return {r["id"] for r in rows}

    assert ids("csp") == {csp}
    assert ids("composite") == {composite, unnamed}
    assert ids("technical") == set()
    listed = {r["id"]: r["analysis_type"] for r in repo.list_analyses(engine=engine, symbol=symbol)}
    assert listed == {csp: "csp", composite: "composite", unnamed: None}


# ---------------------------------------------------------------------------------------------
# save_stage
# ---------------------------------------------------------------------------------------------


def test_save_stage_twice_never_duplicates_tool_calls(engine: Engine) -> None:
    # given a research stage with one retried call (attempt 1 error, attempt 2 success) and one more call
    analysis_id = _new_analysis(engine)
    t0 = datetime(2024, 1, 15, 10, 30, tzinfo=UTC)
    rows = [
        _row("tc-hist", attempt=1, status="error", at=t0),
        _row("tc-hist", attempt=2, at=t0 + timedelta(seconds=1)),
        _row("tc-quote", at=t0 + timedelta(seconds=2)),
    ]
    rows = [{**r, "tool_call_id": f"{analysis_id}:{r['tool_call_id']}"} for r in rows]
    kwargs: dict[str, Any] = {
        "engine": engine,
        "analysis_id": analysis_id,
        "state": _state(analysis_id, status="analyzing"),
        "status": "analyzing",
        "iteration": 0,
        "tool_calls": rows,
    }
    # when the stage is saved, then saved again (a redelivered task)
    first = repo.save_stage(**kwargs)
    second = repo.save_stage(**kwargs)
    # then three rows exist, once each, and the redelivery still counts as applied (same keys)
    assert (first, second) == (True, True)
    assert _count_tool_calls(engine, analysis_id) == 3
    stored = repo.get_tool_calls(engine=engine, analysis_id=analysis_id)
    assert [(r["tool_call_id"].split(":")[1], r["attempt"]) for r in stored] == [
        ("tc-hist", 1),
        ("tc-hist", 2),
        ("tc-quote", 1),
    ]
    assert stored[0]["id"] == tool_call_row_id(tool_call_id=rows[0]["tool_call_id"], attempt=1)
    assert stored[0]["level"] == "WARNING"
    assert stored[1]["level"] == "INFO"
    assert all(r["analysis_id"] == analysis_id and r["iteration"] == 0 for r in stored)


def test_save_stage_no_regress_rule(engine: Engine) -> None:
    analysis_id = _new_analysis(engine)

    def save(status: str, iteration: int, **kw: Any) -> bool:
        state = _state(analysis_id, iteration=iteration, status=status, marker=f"{status}@{iteration}")
        return repo.save_stage(
            engine=engine,
            analysis_id=analysis_id,
            state=state,
            status=status,
            iteration=iteration,
            tool_calls=[],
            **kw,
        )

    def stored() -> tuple[str, int, str]:
        row = repo.get_analysis(engine=engine, analysis_id=analysis_id)
        assert row is not None
        return row["status"], row["iteration"], row["state"]["marker"]

    # forward progress within an iteration and into the next one is applied
    assert save("analyzing", 0)
    assert save("reviewing", 0, report="# v0")
    assert save("researching", 1)  # should_continue re-enqueued iteration 1
    assert stored() == ("researching", 1, "researching@1")
    # a late copy of iteration 0's review changes nothing
    assert not save("reviewing", 0, report="# stale")
    assert stored() == ("researching", 1, "researching@1")
    # an earlier stage of the same iteration changes nothing
    assert save("recommending", 1)
    assert not save("analyzing", 1)
    assert stored() == ("recommending", 1, "recommending@1")
    # done is terminal ...
    assert save("done", 1, report="# final", signal="BUY", confidence=0.7, finished=True)
    first = repo.get_analysis(engine=engine, analysis_id=analysis_id)
    assert first is not None
    assert first["finished_at"] is not None
    assert not save("reviewing", 1, report="# late review")
    assert not save("failed", 1, error="late failure")
    assert not save("researching", 2)  # not even a later iteration reopens it
    # ... except for a redelivered copy of the same terminal save, which keeps finished_at
    assert save("done", 1, finished=True)
    row = repo.get_analysis(engine=engine, analysis_id=analysis_id)
    assert row is not None
    assert (row["status"], row["report"], row["signal"], row["confidence"]) == ("done", "# final", "BUY", 0.7)
    assert row["finished_at"] == first["finished_at"]
    assert row["error"] is None


def test_failed_is_terminal_too(engine: Engine) -> None:
    analysis_id = _new_analysis(engine)
    assert repo.save_stage(
        engine=engine,
        analysis_id=analysis_id,
        state={},
        status="failed",
        iteration=0,
        tool_calls=[],
        error="INVALID_SYMBOL: no such ticker (api_key=abc123)",
        finished=True,
    )
    assert not repo.save_stage(
        engine=engine, analysis_id=analysis_id, state={}, status="done", iteration=0, tool_calls=[]
    )
    row = repo.get_analysis(engine=engine, analysis_id=analysis_id)
    assert row is not None
    assert row["status"] == "failed"
    assert row["error"] == "INVALID_SYMBOL: no such ticker (api_key=***)"


def test_stale_stage_still_records_its_tool_calls(engine: Engine) -> None:
    analysis_id = _new_analysis(engine)
    repo.save_stage(
        engine=engine, analysis_id=analysis_id, state={}, status="reviewing", iteration=0, tool_calls=[]
    )
    applied = repo.save_stage(
        engine=engine,
        analysis_id=analysis_id,
        state={},
        status="researching",
        iteration=0,
        tool_calls=[_row(f"{analysis_id}:late")],
    )
    assert applied is False
    assert _count_tool_calls(engine, analysis_id) == 1


def test_save_stage_none_keeps_stored_results(engine: Engine) -> None:
    analysis_id = _new_analysis(engine)
    repo.save_stage(
        engine=engine,
        analysis_id=analysis_id,
        state={},
        status="reviewing",
        iteration=0,
        tool_calls=[],
        report="# Report",
        report_json={"signal": "HOLD", "sections": [1, 2]},
        signal="HOLD",
        confidence=0.5,
    )
    repo.save_stage(
        engine=engine, analysis_id=analysis_id, state={}, status="done", iteration=0, tool_calls=[]
    )
    row = repo.get_analysis(engine=engine, analysis_id=analysis_id)
    assert row is not None
    assert (row["report"], row["report_json"], row["signal"], row["confidence"]) == (
        "# Report",
        {"signal": "HOLD", "sections": [1, 2]},
        "HOLD",
        0.5,
    )
    assert row["finished_at"] is None  # finished was not asked for


def test_save_stage_unknown_analysis_writes_nothing(engine: Engine) -> None:
    missing = str(uuid.uuid4())
    with pytest.raises(AnalysisNotFoundError):
        repo.save_stage(
            engine=engine,
            analysis_id=missing,
            state={},
            status="analyzing",
            iteration=0,
            tool_calls=[_row("x")],
        )
    assert _count_tool_calls(engine, missing) == 0


def test_save_stage_is_one_transaction(engine: Engine) -> None:
    # given a batch whose second row cannot be serialised (the UPDATE runs before the insert)
    analysis_id = _new_analysis(engine)
    rows = [_row(f"{analysis_id}:ok"), _row(f"{analysis_id}:bad", result={"obj": object()})]
    # when saving fails mid-way
    with pytest.raises(Exception, match="not JSON serializable"):
        repo.save_stage(
            engine=engine, analysis_id=analysis_id, state={}, status="analyzing", iteration=0, tool_calls=rows
        )
    # then neither the update nor any row survived
    assert repo.status_of(engine=engine, analysis_id=analysis_id) == ("queued", 0)
    assert _count_tool_calls(engine, analysis_id) == 0


def test_save_stage_rejects_bad_input_before_writing(engine: Engine) -> None:
    analysis_id = _new_analysis(engine)
    with pytest.raises(ValueError, match="status"):
        repo.save_stage(
            engine=engine, analysis_id=analysis_id, state={}, status="paused", iteration=0, tool_calls=[]
        )
    with pytest.raises(ValueError, match="unknown tool_calls keys"):
        repo.save_stage(
            engine=engine,
            analysis_id=analysis_id,
            state={},
            status="analyzing",
            iteration=0,
            tool_calls=[_row("x", querry="typo")],
        )
    with pytest.raises(ValueError, match="lacks"):
        repo.save_stage(
            engine=engine,
            analysis_id=analysis_id,
            state={},
            status="analyzing",
            iteration=0,
            tool_calls=[{"tool_call_id": "x", "tool": "t"}],
        )
    with pytest.raises(ValueError, match="saved under"):
        repo.save_stage(
            engine=engine,
            analysis_id=analysis_id,
            state={},
            status="analyzing",
            iteration=0,
            tool_calls=[_row("x", analysis_id="other")],
        )
    assert repo.status_of(engine=engine, analysis_id=analysis_id) == ("queued", 0)


# ---------------------------------------------------------------------------------------------
# tool calls
# ---------------------------------------------------------------------------------------------


def test_insert_tool_calls_counts_only_new_rows(engine: Engine) -> None:
    # given direct tool use (no analysis), with an ISO 8601 timestamp
    tcid = f"direct-{uuid.uuid4()}"
    rows = [
        _row(tcid, attempt=1, status="error", iteration=0, timestamp="2024-01-15T10:30:45Z"),
        _row(tcid, attempt=2, iteration=0, timestamp="2024-01-15T10:30:46Z"),
    ]
    # when inserted twice, the second batch with a duplicate inside it
    assert repo.insert_tool_calls(engine=engine, rows=rows) == 2
    assert repo.insert_tool_calls(engine=engine, rows=[*rows, rows[0]]) == 0
    assert repo.insert_tool_calls(engine=engine, rows=[]) == 0
    # then the timestamps are UTC-aware and the result resolves
    with engine.connect() as conn:
        stamps = (
            conn.execute(
                sa.select(repo.TOOL_CALLS.c.timestamp)
                .where(repo.TOOL_CALLS.c.tool_call_id == tcid)
                .order_by(repo.TOOL_CALLS.c.attempt)
            )
            .scalars()
            .all()
        )
    assert stamps == [
        datetime(2024, 1, 15, 10, 30, 45, tzinfo=UTC),
        datetime(2024, 1, 15, 10, 30, 46, tzinfo=UTC),
    ]
    assert repo.get_tool_result(engine=engine, tool_call_id=tcid) == {"price": 150.25}


def test_insert_tool_calls_unknown_analysis_is_an_integrity_error(engine: Engine) -> None:
    with pytest.raises(IntegrityError):
        repo.insert_tool_calls(engine=engine, rows=[_row("x", iteration=0, analysis_id=str(uuid.uuid4()))])


def test_get_tool_result_returns_the_successful_attempt(engine: Engine) -> None:
    analysis_id = _new_analysis(engine)
    tcid = f"{analysis_id}:history"
    rows = [
        _row(tcid, attempt=1, status="error"),
        _row(tcid, attempt=2, status="error"),
        _row(tcid, attempt=3, result={"bars": [[1, 2]], "attempt": 3}),
        _row(f"{analysis_id}:failed", attempt=1, status="error", error_code="INVALID_SYMBOL"),
    ]
    repo.save_stage(
        engine=engine, analysis_id=analysis_id, state={}, status="analyzing", iteration=0, tool_calls=rows
    )
    assert repo.get_tool_result(engine=engine, tool_call_id=tcid) == {"bars": [[1, 2]], "attempt": 3}
    assert repo.get_tool_result(engine=engine, tool_call_id=f"{analysis_id}:failed") is None
    assert repo.get_tool_result(engine=engine, tool_call_id="never-called") is None


def test_get_tool_calls_is_ordered_by_timestamp_then_attempt(engine: Engine) -> None:
    analysis_id = _new_analysis(engine)
    t0 = datetime(2024, 1, 15, 10, 0, tzinfo=UTC)
    rows = [
        _row(f"{analysis_id}:b", attempt=2, at=t0),
        _row(f"{analysis_id}:c", attempt=1, at=t0 + timedelta(seconds=1)),
        _row(f"{analysis_id}:a", attempt=1, at=t0),
    ]
    repo.save_stage(
        engine=engine, analysis_id=analysis_id, state={}, status="analyzing", iteration=0, tool_calls=rows
    )
    got = [
        (r["tool_call_id"].split(":")[1], r["attempt"])
        for r in repo.get_tool_calls(engine=engine, analysis_id=analysis_id)
    ]
    assert got == [("a", 1), ("b", 2), ("c", 1)]


def test_secrets_never_reach_rows(engine: Engine) -> None:
    analysis_id = _new_analysis(engine)
    row = _row(
        f"{analysis_id}:news",
        status="error",
        arguments={
            "query": "AAPL earnings",
            "api_key": "sk-live-123",
            "headers": {"Authorization": "Bearer abc"},
        },
        error="401 from https://user:hunter2@news.example/v1?apikey=sk-live-123",
        retry_hint="check APCA-API-SECRET-KEY: sk-live-123",
    )
    repo.save_stage(
        engine=engine, analysis_id=analysis_id, state={}, status="analyzing", iteration=0, tool_calls=[row]
    )
    (stored,) = repo.get_tool_calls(engine=engine, analysis_id=analysis_id)
    assert stored["arguments"] == {
        "query": "AAPL earnings",
        "api_key": "***",
        "headers": {"Authorization": "***"},
    }
    assert "sk-live-123" not in str(stored)
    assert "hunter2" not in str(stored)


def test_json_round_trip_of_a_50kb_result(engine: Engine) -> None:
    # given ~50 KB of bars (the size of 500 daily bars), floats with full precision, unicode, nesting
    rng = random.Random(7)
    day0 = date(2022, 1, 3)
    bars = [
        {
            "date": (day0 + timedelta(days=i)).isoformat(),
            "open": rng.uniform(100, 200),
            "high": rng.uniform(100, 200),
            "low": rng.uniform(100, 200),
            "close": rng.uniform(100, 200),
            "adj_close": rng.uniform(100, 200),
            "volume": float(rng.randrange(10**6, 10**8)),
        }
        for i in range(500)
    ]
    result = {
        "symbol": "AAPL",
        "bars": bars,
        "meta": {"source": "bokeh_sampledata — stocks", "split": [2, 1]},
    }
    analysis_id = _new_analysis(engine)
    tcid = f"{analysis_id}:history"
    row = _row(tcid, result=result)
    from db.engine import json_dumps

    size = len(json_dumps(result))
    assert size > 50_000
    # when stored and read back
    repo.save_stage(
        engine=engine, analysis_id=analysis_id, state={}, status="analyzing", iteration=0, tool_calls=[row]
    )
    # then it is identical (floats included)
    assert repo.get_tool_result(engine=engine, tool_call_id=tcid) == result


def test_non_finite_floats_are_stored_as_null(engine: Engine) -> None:
    analysis_id = _new_analysis(engine)
    tcid = f"{analysis_id}:nan"
    row = _row(tcid, result={"volume": [1.0, float("nan"), float("inf")]})
    repo.save_stage(
        engine=engine, analysis_id=analysis_id, state={}, status="analyzing", iteration=0, tool_calls=[row]
    )
    assert repo.get_tool_result(engine=engine, tool_call_id=tcid) == {"volume": [1.0, None, None]}


# ---------------------------------------------------------------------------------------------
# iteration guard
# ---------------------------------------------------------------------------------------------


def test_claim_iteration_once(engine: Engine) -> None:
    analysis_id = _new_analysis(engine)
    assert repo.claim_iteration(engine=engine, analysis_id=analysis_id, iteration=1, celery_task_id="t-1")
    assert not repo.claim_iteration(engine=engine, analysis_id=analysis_id, iteration=1, celery_task_id="t-2")
    assert repo.claim_iteration(engine=engine, analysis_id=analysis_id, iteration=2)
    with pytest.raises(IntegrityError):
        repo.claim_iteration(engine=engine, analysis_id=str(uuid.uuid4()), iteration=1)


def test_claim_iteration_has_one_winner_under_8_threads(engine: Engine) -> None:
    # given 8 redelivered should_continue copies racing for the same iteration
    analysis_id = _new_analysis(engine)
    barrier = threading.Barrier(8)
    results: list[bool] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def claim(i: int) -> None:
        try:
            barrier.wait(timeout=10)
            won = repo.claim_iteration(
                engine=engine, analysis_id=analysis_id, iteration=1, celery_task_id=f"t-{i}"
            )
            with lock:
                results.append(won)
        except BaseException as exc:  # collected, asserted below
            errors.append(exc)

    threads = [threading.Thread(target=claim, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    # then exactly one wins and nobody errors
    assert errors == []
    assert sorted(results) == [False] * 7 + [True]


def test_insert_tool_calls_counts_a_partly_new_batch(engine: Engine) -> None:
    tcid = f"direct-{uuid.uuid4()}"
    rows = [_row(f"{tcid}:{i}", iteration=0) for i in range(10)]
    assert repo.insert_tool_calls(engine=engine, rows=rows[:4]) == 4
    assert repo.insert_tool_calls(engine=engine, rows=rows) == 6


def test_batch_insert_rate(engine: Engine) -> None:
    """Measurement, printed, not asserted: insert_tool_calls rows/s and a typical save_stage."""
    n = 2000
    tcid = f"bench-{uuid.uuid4()}"
    rows = [_row(f"{tcid}:{i}", iteration=0) for i in range(n)]
    started = time.perf_counter()
    inserted = repo.insert_tool_calls(engine=engine, rows=rows)
    elapsed = time.perf_counter() - started
    assert inserted == n
    # a research stage: 10 attempt rows, one of them a ~50 KB bar history, plus the state update
    analysis_id = _new_analysis(engine)
    bars = {"bars": [[20240101 + i, 150.0 + i, 151.0, 149.0, 150.5, 150.5, 1.0e7] for i in range(700)]}
    stage_rows = [_row(f"{analysis_id}:{i}", result=bars if i == 0 else {"p": i}) for i in range(10)]
    runs = 20
    started = time.perf_counter()
    for _ in range(runs):
        repo.save_stage(
            engine=engine,
            analysis_id=analysis_id,
            state=_state(analysis_id),
            status="analyzing",
            iteration=0,
            tool_calls=stage_rows,
        )
    stage_ms = (time.perf_counter() - started) * 1000 / runs
    print(
        f"\n[{engine.dialect.name}] insert_tool_calls: {n} rows in {elapsed * 1000:.0f} ms"
        f" = {n / elapsed:,.0f} rows/s; save_stage with 10 rows (one ~50 KB): {stage_ms:.1f} ms"
    )


def test_concurrent_stage_writers_and_a_poller(engine: Engine) -> None:
    """Embedded mode: worker threads write while the CLI thread polls; nobody sees "locked"."""
    ids = [_new_analysis(engine) for _ in range(4)]
    errors: list[BaseException] = []
    stop = threading.Event()
    statuses = ["analyzing", "recommending", "reviewing", "done"]

    def work(analysis_id: str) -> None:
        try:
            for iteration in range(3):
                for status in statuses[:-1] if iteration < 2 else statuses:
                    repo.save_stage(
                        engine=engine,
                        analysis_id=analysis_id,
                        state=_state(analysis_id, iteration=iteration),
                        status=status,
                        iteration=iteration,
                        tool_calls=[_row(f"{analysis_id}:{iteration}:{status}")],
                    )
        except BaseException as exc:  # asserted below
            errors.append(exc)

    def poll() -> None:
        try:
            while not stop.is_set():
                for analysis_id in ids:
                    repo.status_of(engine=engine, analysis_id=analysis_id)
        except BaseException as exc:  # asserted below
            errors.append(exc)

    poller = threading.Thread(target=poll)
    poller.start()
    workers = [threading.Thread(target=work, args=(a,)) for a in ids]
    for t in workers:
        t.start()
    for t in workers:
        t.join(timeout=60)
    stop.set()
    poller.join(timeout=10)
    assert errors == []
    for analysis_id in ids:
        assert repo.status_of(engine=engine, analysis_id=analysis_id) == ("done", 2)
        assert _count_tool_calls(engine, analysis_id) == 10


# ---------------------------------------------------------------------------------------------
# progress writes and the producer's single transaction (docs/benchmarks.md recs 4 and 5)
# ---------------------------------------------------------------------------------------------


def test_save_stage_without_state_keeps_the_stored_state(engine: Engine) -> None:
    analysis_id = _new_analysis(engine)
    row = _row("get_history_0123456789ab")
    assert repo.save_stage(
        engine=engine, analysis_id=analysis_id, state=None, status="analyzing", iteration=0, tool_calls=[row]
    )
    stored = repo.get_analysis(engine=engine, analysis_id=analysis_id)
    assert stored is not None
    assert stored["state"] == _state(analysis_id)  # untouched
    assert (stored["status"], stored["iteration"]) == ("analyzing", 0)
    assert _count_tool_calls(engine, analysis_id) == 1
    # the no-regress rule holds for progress writes too
    assert not repo.save_stage(
        engine=engine, analysis_id=analysis_id, state=None, status="researching", iteration=0, tool_calls=[]
    )


def test_create_and_claim_is_one_idempotent_transaction(engine: Engine) -> None:
    analysis_id = str(uuid.uuid4())
    llm_row = {
        "id": "parse_query_1#1",
        "llm_call_id": "parse_query_1",
        "stage": "query",
        "agent": "parse_query",
        "iteration": 0,
        "model": "openai/scripted",
        "status": "success",
        "attempt": 1,
        "latency_ms": 3.0,
        "prompt_tokens": 10,
        "completion_tokens": 2,
    }
    kw: dict[str, Any] = {
        "engine": engine,
        "analysis_id": analysis_id,
        "symbol": "AAPL",
        "as_of": date(2024, 1, 15),
        "user_query": "Analyse AAPL",
        "max_iterations": 3,
        "state": _state(analysis_id),
        "llm_calls": [llm_row],
    }
    assert repo.create_and_claim(**kw)  # the first producer enqueues
    assert not repo.create_and_claim(**kw)  # a repeated one does not
    row = repo.get_analysis(engine=engine, analysis_id=analysis_id)
    assert row is not None and row["status"] == "queued" and row["state"] == _state(analysis_id)
    assert not repo.claim_iteration(engine=engine, analysis_id=analysis_id, iteration=0)
    assert [r["id"] for r in repo.get_llm_calls(engine=engine, analysis_id=analysis_id)] == [
        "parse_query_1#1"
    ]
    # a malformed llm row writes nothing at all
    other = {**kw, "analysis_id": str(uuid.uuid4()), "llm_calls": [{"id": "x"}]}
    with pytest.raises(ValueError, match="llm call row lacks"):
        repo.create_and_claim(**other)
    assert repo.get_analysis(engine=engine, analysis_id=other["analysis_id"]) is None


def test_get_tool_results_is_get_tool_result_for_many(engine: Engine) -> None:
    analysis_id = _new_analysis(engine)
    rows = [
        _row("get_stock_data_aaaaaaaaaaaa", result={"price": 1.5}),
        _row("get_history_bbbbbbbbbbbb", attempt=1, status="error", error="timeout"),
        _row("get_history_bbbbbbbbbbbb", attempt=2, result={"count": 3}),
        _row("calculator_cccccccccccc", status="error", error="bad"),
    ]
    rows = [{**r, "analysis_id": analysis_id, "iteration": 0} for r in rows]
    repo.insert_tool_calls(engine=engine, rows=rows)
    ids = ["get_stock_data_aaaaaaaaaaaa", "get_history_bbbbbbbbbbbb", "calculator_cccccccccccc", "nope"]
    found = repo.get_tool_results(engine=engine, tool_call_ids=ids)
    assert found == {"get_stock_data_aaaaaaaaaaaa": {"price": 1.5}, "get_history_bbbbbbbbbbbb": {"count": 3}}
    assert found == {i: r for i in ids if (r := repo.get_tool_result(engine=engine, tool_call_id=i))}
    assert repo.get_tool_results(engine=engine, tool_call_ids=[]) == {}


# Statuses come from the stage table (core.stages): the repository accepts exactly
# those, and the no-regress rank follows the table's order.


def _new_status_row(engine: Engine, analysis_id: str) -> None:
    repo.create_analysis(
        engine=engine,
        analysis_id=analysis_id,
        symbol="AAPL",
        as_of=date(2012, 6, 29),
        user_query="Analyze AAPL",
        max_iterations=3,
        state={},
    )


def test_repo_refuses_a_status_outside_the_stage_table(engine: Engine) -> None:
    _new_status_row(engine, "a-1")
    with pytest.raises(ValueError, match="status must be one of"):
        repo.save_stage(
            engine=engine, analysis_id="a-1", state=None, status="thinking", iteration=0, tool_calls=[]
        )
    assert repo.get_analysis(engine=engine, analysis_id="a-1")["status"] == "queued"


def test_status_moves_forward_in_table_order_only(engine: Engine) -> None:
    _new_status_row(engine, "a-2")
    last = STAGES[-1].status.value
    repo.save_stage(engine=engine, analysis_id="a-2", state=None, status=last, iteration=0, tool_calls=[])
    # an earlier stage of the same pass (a late redelivery) does not move the row back
    repo.save_stage(
        engine=engine,
        analysis_id="a-2",
        state=None,
        status=STAGES[0].status.value,
        iteration=0,
        tool_calls=[],
    )
    assert repo.get_analysis(engine=engine, analysis_id="a-2")["status"] == last
    # the next pass starts over at the first stage
    repo.save_stage(
        engine=engine,
        analysis_id="a-2",
        state=None,
        status=STAGES[0].status.value,
        iteration=1,
        tool_calls=[],
    )
    row = repo.get_analysis(engine=engine, analysis_id="a-2")
    assert (row["status"], row["iteration"]) == (Status.RESEARCHING.value, 1)


def test_create_and_claim_writes_the_row_create_analysis_writes(engine: Engine) -> None:
    # given the same request through the producer's one-statement path and the plain insert
    claimed_id, plain_id = str(uuid.uuid4()), str(uuid.uuid4())
    common: dict[str, Any] = {
        "engine": engine,
        "symbol": "MSFT",
        "as_of": date(2013, 3, 1),
        "user_query": "Analyse MSFT",
        "max_iterations": 2,
        "lease_seconds": 90,
    }
    assert repo.create_and_claim(analysis_id=claimed_id, state=_state(claimed_id), **common)
    assert repo.create_analysis(analysis_id=plain_id, state=_state(plain_id), **common)
    claimed = repo.get_analysis(engine=engine, analysis_id=claimed_id)
    plain = repo.get_analysis(engine=engine, analysis_id=plain_id)
    assert claimed is not None and plain is not None
    # then every column matches but the id, the state naming it and the clock
    varying = {"id", "state", "created_at", "updated_at", "lease_expires_at"}
    assert {k: v for k, v in claimed.items() if k not in varying} == {
        k: v for k, v in plain.items() if k not in varying
    }
    assert claimed["state"] == _state(claimed_id) and claimed["created_at"] == claimed["updated_at"]
    assert claimed["lease_expires_at"] - claimed["created_at"] == timedelta(seconds=90)
    assert (claimed["tenant"], claimed["api_key_id"], claimed["status"]) == ("default", None, "queued")
    owned_id = str(uuid.uuid4())
    assert repo.create_and_claim(
        analysis_id=owned_id, state=_state(owned_id), tenant="acme", api_key_id="key-1", **common
    )
    owned = repo.get_analysis(engine=engine, analysis_id=owned_id)
    assert owned is not None and (owned["tenant"], owned["api_key_id"]) == ("acme", "key-1")
    # and pass 0 is claimed: nobody else may enqueue it
    assert not repo.claim_iteration(engine=engine, analysis_id=claimed_id, iteration=0)
    assert repo.get_llm_calls(engine=engine, analysis_id=claimed_id) == []
