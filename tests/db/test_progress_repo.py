"""Step claims, fenced checkpoints, leases and recovery takes (``db.progress_repo``) on SQLite
and PostgreSQL, including the races they exist for (threads on real connections)."""

from __future__ import annotations

import threading
import uuid
from datetime import UTC, date, datetime, timedelta
from typing import Any

from sqlalchemy import Engine

from db import progress_repo, repo
from db._sql import utc_now
from db.progress_repo import ClaimOutcome


def _new(engine: Engine) -> str:
    analysis_id = str(uuid.uuid4())
    state = {"analysis_id": analysis_id, "stock_symbol": "AAPL", "as_of": "2012-06-29", "iteration": 0}
    assert repo.create_analysis(
        engine=engine,
        analysis_id=analysis_id,
        symbol="AAPL",
        as_of=date(2012, 6, 29),
        user_query="Analyse AAPL",
        max_iterations=3,
        state=state,
        lease_seconds=60,
    )
    return analysis_id


def _claim(
    engine: Engine, analysis_id: str, step: str, owner: str, lease: float = 60
) -> progress_repo.StepClaim:
    return progress_repo.claim_step(
        engine=engine, analysis_id=analysis_id, iteration=0, step=step, owner=owner, lease_seconds=lease
    )


def _complete(engine: Engine, analysis_id: str, step: str, owner: str, status: str, **kw: Any) -> bool:
    return progress_repo.complete_step(
        engine=engine,
        analysis_id=analysis_id,
        iteration=0,
        step=step,
        owner=owner,
        state={"after": step},
        status=status,
        lease_seconds=60,
        **kw,
    )


def test_a_new_analysis_is_queued_with_a_running_lease(engine: Engine) -> None:
    analysis_id = _new(engine)
    row = repo.get_analysis(engine=engine, analysis_id=analysis_id)
    assert row is not None
    assert (row["status"], row["checkpoint"], row["attempt"], row["lease_owner"], row["recoveries"]) == (
        "queued",
        None,
        0,
        None,
        0,
    )
    assert timedelta(seconds=59) < row["lease_expires_at"] - row["created_at"] <= timedelta(seconds=61)


def test_steps_are_claimed_in_order_and_only_from_their_checkpoint(engine: Engine) -> None:
    analysis_id = _new(engine)
    assert _claim(engine, analysis_id, "analysis", "t1").outcome is ClaimOutcome.STALE  # research not done
    first = _claim(engine, analysis_id, "research", "t1")
    assert (first.outcome, first.attempt, first.status) == (ClaimOutcome.CLAIMED, 1, "researching")
    again = _claim(engine, analysis_id, "research", "t1")  # a Celery retry keeps its task id
    assert (again.outcome, again.attempt) == (ClaimOutcome.CLAIMED, 2)
    assert _claim(engine, analysis_id, "research", "t2").outcome is ClaimOutcome.BUSY
    assert _complete(engine, analysis_id, "research", "t1", "analyzing", tool_calls=[])
    row = repo.get_analysis(engine=engine, analysis_id=analysis_id)
    assert row is not None
    assert (row["status"], row["checkpoint"], row["attempt"], row["lease_owner"]) == (
        "analyzing",
        "research",
        0,
        None,
    )
    assert row["state"] == {"after": "research"}
    # a late copy of research is stale now; analysis may be claimed by anyone
    assert _claim(engine, analysis_id, "research", "t1").outcome is ClaimOutcome.STALE
    assert _claim(engine, analysis_id, "analysis", "t3").outcome is ClaimOutcome.CLAIMED


def test_a_lost_lease_fences_the_checkpoint_but_keeps_the_rows(engine: Engine) -> None:
    analysis_id = _new(engine)
    assert (
        _claim(engine, analysis_id, "research", "slow", lease=-1).outcome is ClaimOutcome.CLAIMED
    )  # expired
    assert _claim(engine, analysis_id, "research", "fresh").outcome is ClaimOutcome.CLAIMED  # takes it over
    row = {
        "tool_call_id": "get_quote_00000000abcd",
        "stage": "research",
        "tool": "get_quote",
        "status": "success",
        "attempt": 1,
        "latency_ms": 1.0,
    }
    assert not _complete(engine, analysis_id, "research", "slow", "analyzing", tool_calls=[row])
    stored = repo.get_analysis(engine=engine, analysis_id=analysis_id)
    assert stored is not None and stored["checkpoint"] is None and stored["lease_owner"] == "fresh"
    assert [c["tool_call_id"] for c in repo.get_tool_calls(engine=engine, analysis_id=analysis_id)] == [
        "get_quote_00000000abcd"
    ]


def test_finished_analyses_cannot_be_claimed_and_clear_their_lease(engine: Engine) -> None:
    analysis_id = _new(engine)
    repo.save_stage(
        engine=engine,
        analysis_id=analysis_id,
        state=None,
        status="failed",
        iteration=0,
        tool_calls=[],
        finished=True,
    )
    row = repo.get_analysis(engine=engine, analysis_id=analysis_id)
    assert row is not None and row["lease_expires_at"] is None and row["lease_owner"] is None
    assert _claim(engine, analysis_id, "research", "t1").outcome is ClaimOutcome.STALE
    stalled = progress_repo.stalled(engine=engine, now=utc_now() + timedelta(days=1), limit=10_000)
    assert analysis_id not in {r["id"] for r in stalled}


def test_concurrent_claimers_of_one_step_have_exactly_one_winner(engine: Engine) -> None:
    analysis_id = _new(engine)
    outcomes: list[ClaimOutcome] = []
    barrier = threading.Barrier(8)

    def claim(i: int) -> None:
        barrier.wait()
        outcomes.append(_claim(engine, analysis_id, "research", f"copy-{i}").outcome)

    threads = [threading.Thread(target=claim, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(outcomes) == sorted([ClaimOutcome.CLAIMED] + [ClaimOutcome.BUSY] * 7)


def test_concurrent_sweepers_take_a_stalled_analysis_once(engine: Engine) -> None:
    analysis_id = _new(engine)
    later = utc_now() + timedelta(seconds=120)  # the 60 s lease has run out by then
    assert analysis_id in {r["id"] for r in progress_repo.stalled(engine=engine, now=later, limit=10_000)}
    taken: list[dict[str, Any] | None] = []
    barrier = threading.Barrier(6)

    def take() -> None:
        barrier.wait()
        taken.append(
            progress_repo.take_for_recovery(
                engine=engine, analysis_id=analysis_id, lease_seconds=60, now=later
            )
        )

    threads = [threading.Thread(target=take) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    winners = [t for t in taken if t is not None]
    assert (
        len(winners) == 1
        and winners[0]["recoveries"] == 1
        and winners[0]["state"]["analysis_id"] == analysis_id
    )
    row = repo.get_analysis(engine=engine, analysis_id=analysis_id)
    assert row is not None and row["recoveries"] == 1 and row["lease_expires_at"] > later


def test_a_waiting_lease_is_extended_only_while_nobody_holds_the_step(engine: Engine) -> None:
    analysis_id = _new(engine)
    assert progress_repo.extend_lease(engine=engine, analysis_id=analysis_id, owner=None, seconds=600)
    assert _claim(engine, analysis_id, "research", "t1").outcome is ClaimOutcome.CLAIMED
    assert not progress_repo.extend_lease(engine=engine, analysis_id=analysis_id, owner=None, seconds=600)
    if engine.dialect.name == "sqlite":  # a fresh file per test; the PostgreSQL database is shared
        assert progress_repo.count_stalled(engine=engine, before=utc_now() + timedelta(seconds=30)) == 0
        assert progress_repo.count_stalled(engine=engine, before=utc_now() + timedelta(seconds=90)) == 1


def _rich_rows(analysis_id: str, tag: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """A success and an error tool row and one LLM row with every kind of value a stage writes."""
    stamp = datetime(2026, 11, 26, 9, 30, 15, 123456, tzinfo=UTC)
    tools = [
        {
            "tool_call_id": f"get_history_{tag}0000",
            "stage": "research",
            "tool": "get_history",
            "symbol": "AAPL",
            "status": "success",
            "attempt": 1,
            "latency_ms": 2.5,
            "timestamp": stamp,
            "arguments": {"symbol": "AAPL", "period": "1y"},
            "result": {"history": [{"close": 584.0, "volume": None, "note": "é ✓"}], "nan": float("nan")},
            "source_refs": ["embedded:AAPL"],
            "result_summary": "1 bar",
        },
        {
            "tool_call_id": f"get_news_{tag}00000000",
            "stage": "research",
            "tool": "get_news",
            "status": "error",
            "attempt": 2,
            "latency_ms": 1.0,
            "timestamp": stamp,
            "error": "timeout calling https://x.test/?apikey=sk-abcdefghijklmnopqrstuv",
            "error_code": "TIMEOUT",
            "retry_hint": "later",
        },
    ]
    llms = [
        {
            "id": f"llm_{tag}#1",  # deterministic ids, as the LLM session writes them
            "llm_call_id": f"llm_{tag}",
            "stage": "research",
            "agent": "research",
            "iteration": 0,
            "model": "openai/gpt-4o-mini",
            "status": "success",
            "attempt": 1,
            "latency_ms": 800.0,
            "timestamp": stamp,
            "prompt_tokens": 10,
            "completion_tokens": 5,
            "request": {"messages": [{"role": "user", "content": "hi"}]},
            "response": {"content": "ok"},
        }
    ]
    return tools, llms


def _without_ids(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``rows`` without the columns that name their analysis or call, in a stable order."""
    ids = ("id", "analysis_id", "tool_call_id", "llm_call_id")
    return sorted(({k: v for k, v in r.items() if k not in ids} for r in rows), key=repr)


def test_a_checkpoint_stores_its_rows_exactly_as_the_batch_insert_does(engine: Engine) -> None:
    # given the same rows written by a checkpoint (one statement on PostgreSQL) and by the
    # separate batch inserts of the retry path
    by_checkpoint, by_insert = _new(engine), _new(engine)
    tools, llms = _rich_rows(by_checkpoint, "a1b2")
    assert _claim(engine, by_checkpoint, "research", "t1").outcome is ClaimOutcome.CLAIMED
    assert _complete(engine, by_checkpoint, "research", "t1", "analyzing", tool_calls=tools, llm_calls=llms)
    other_tools, other_llms = _rich_rows(by_insert, "e5f6")
    repo.insert_tool_calls(
        engine=engine, rows=[{**r, "analysis_id": by_insert, "iteration": 0} for r in other_tools]
    )
    repo.insert_llm_calls(engine=engine, rows=[{**r, "analysis_id": by_insert} for r in other_llms])
    # then every column reads back the same, values, types and time zone included
    stored = repo.get_tool_calls(engine=engine, analysis_id=by_checkpoint)
    assert len(stored) == 2
    assert _without_ids(stored) == _without_ids(repo.get_tool_calls(engine=engine, analysis_id=by_insert))
    stored_llm = repo.get_llm_calls(engine=engine, analysis_id=by_checkpoint)
    assert len(stored_llm) == 1
    assert _without_ids(stored_llm) == _without_ids(repo.get_llm_calls(engine=engine, analysis_id=by_insert))
    history = next(r for r in stored if r["tool"] == "get_history")
    assert history["result"] == {"history": [{"close": 584.0, "volume": None, "note": "é ✓"}], "nan": None}
    assert history["timestamp"] == datetime(2026, 11, 26, 9, 30, 15, 123456, tzinfo=UTC)
    error = next(r for r in stored if r["tool"] == "get_news")
    assert "sk-abcdefghijklmnopqrstuv" not in error["error"] and error["result"] is None
    # and a repeated checkpoint of the same rows (a redelivery) is fenced and inserts nothing
    assert not _complete(
        engine, by_checkpoint, "research", "t1", "analyzing", tool_calls=tools, llm_calls=llms
    )
    assert len(repo.get_tool_calls(engine=engine, analysis_id=by_checkpoint)) == 2


def test_concurrent_unclaimed_completions_have_exactly_one_winner_and_write_rows_once(engine: Engine) -> None:
    analysis_id = _new(engine)
    tools, _ = _rich_rows(analysis_id, "c3d4")
    results: list[bool] = []
    barrier = threading.Barrier(4)

    def complete(owner: str) -> None:
        barrier.wait()
        results.append(
            _complete(engine, analysis_id, "research", owner, "analyzing", tool_calls=tools, claimed=False)
        )

    threads = [threading.Thread(target=complete, args=(f"copy-{i}",)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == [False, False, False, True]
    row = repo.get_analysis(engine=engine, analysis_id=analysis_id)
    assert row is not None and (row["checkpoint"], row["lease_owner"], row["attempt"]) == (
        "research",
        None,
        0,
    )
    assert len(repo.get_tool_calls(engine=engine, analysis_id=analysis_id)) == 2


def test_concurrent_takes_of_a_lost_analysis_have_one_winner_and_a_give_back_undoes_it(
    engine: Engine,
) -> None:
    analysis_id = _new(engine)  # a live lease (60 s): the broker lost its message, not the lease
    (seen,) = progress_repo.progress_rows(engine=engine, analysis_ids=[analysis_id]).values()
    assert analysis_id in {r["id"] for r in progress_repo.unfinished(engine=engine, limit=100_000)}
    taken: list[dict[str, Any] | None] = []
    barrier = threading.Barrier(6)

    def take() -> None:
        barrier.wait()
        taken.append(progress_repo.take_lost(engine=engine, seen=seen, lease_seconds=60))

    threads = [threading.Thread(target=take) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    (winner,) = [t for t in taken if t is not None]
    assert winner["recoveries"] == 1 and winner["state"]["analysis_id"] == analysis_id
    # its publish failed: the take is undone (no recovery spent) and the lease runs out now
    before = utc_now()
    assert progress_repo.give_back(engine=engine, taken=winner)
    row = repo.get_analysis(engine=engine, analysis_id=analysis_id)
    assert row is not None and row["recoveries"] == 0 and row["lease_expires_at"] >= before
    assert row["lease_expires_at"] <= utc_now()
    assert not progress_repo.give_back(engine=engine, taken=winner)  # once
    # a step claimed meanwhile is never taken for a loss seen before the claim
    (seen,) = progress_repo.progress_rows(engine=engine, analysis_ids=[analysis_id]).values()
    assert _claim(engine, analysis_id, "research", "t1").outcome is ClaimOutcome.CLAIMED
    assert progress_repo.take_lost(engine=engine, seen=seen, lease_seconds=60) is None


def test_a_retried_attempt_keeps_its_rows_and_extends_its_lease_in_one_write(engine: Engine) -> None:
    analysis_id = _new(engine)
    assert _claim(engine, analysis_id, "research", "t1").outcome is ClaimOutcome.CLAIMED
    claimed = repo.get_analysis(engine=engine, analysis_id=analysis_id)
    assert claimed is not None
    # a tag of its own: tool_call_id is unique across the session's shared PostgreSQL database
    tools, llms = _rich_rows(analysis_id, "b7c8")
    rows = [{**r, "analysis_id": analysis_id, "iteration": 0} for r in tools]
    llm_rows = [{**r, "analysis_id": analysis_id} for r in llms]
    assert progress_repo.keep_attempt(
        engine=engine, analysis_id=analysis_id, owner="t1", seconds=600, tool_calls=rows, llm_calls=llm_rows
    )
    kept = repo.get_analysis(engine=engine, analysis_id=analysis_id)
    assert kept is not None and kept["lease_owner"] == "t1"
    # the claim's lease was 60 s; the retry's countdown and a lease: 600 s from now
    assert kept["lease_expires_at"] >= claimed["lease_expires_at"] + timedelta(seconds=500)
    assert len(repo.get_tool_calls(engine=engine, analysis_id=analysis_id)) == 2
    assert len(repo.get_llm_calls(engine=engine, analysis_id=analysis_id)) == 1
    # the same rows kept again (the next failed attempt carries them) are written once, and a
    # lease held by another task is not extended
    assert not progress_repo.keep_attempt(
        engine=engine, analysis_id=analysis_id, owner="t2", seconds=600, tool_calls=rows, llm_calls=llm_rows
    )
    assert len(repo.get_tool_calls(engine=engine, analysis_id=analysis_id)) == 2
    assert len(repo.get_llm_calls(engine=engine, analysis_id=analysis_id)) == 1
