"""The ledger of the analyses row (``db.ledger``) on SQLite and PostgreSQL: its table refuses
every move it does not declare, and each declared move (step claims, fenced checkpoints and
ends, the pass boundary, leases, cancels and recovery takes) does what the table says, including
under the races it exists for (threads on real connections)."""

from __future__ import annotations

import re
import threading
import uuid
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import Engine

from core.stages import Status
from db import ledger, progress_repo, repo
from db._sql import utc_now
from db.ledger import ClaimOutcome
from db.repo import AnalysisNotFoundError


def _new(engine: Engine) -> str:
    analysis_id = str(uuid.uuid4())
    state = {"analysis_id": analysis_id, "stock_symbol": "AAPL", "as_of": "2012-06-29", "iteration": 0}
    assert ledger.create(
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


def _claim(engine: Engine, analysis_id: str, step: str, owner: str, lease: float = 60) -> ledger.StepClaim:
    return ledger.claim(
        engine=engine, analysis_id=analysis_id, iteration=0, step=step, owner=owner, lease_seconds=lease
    )


def _complete(engine: Engine, analysis_id: str, step: str, owner: str, status: str, **kw: Any) -> bool:
    end = ledger.StepEnd(
        analysis_id=analysis_id, iteration=0, step=step, owner=owner, state={"after": step}, **kw
    )
    return ledger.complete(engine=engine, end=end, status=status, lease_seconds=60)


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
    assert ledger.end(
        engine=engine,
        analysis_id=analysis_id,
        state={"analysis_id": analysis_id, "iteration": 0},
        status="failed",
        iteration=0,
        report=None,
        report_json=None,
        signal=None,
        confidence=None,
        error="STALLED: test",
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
    (seen,) = [
        r for r in progress_repo.stalled(engine=engine, now=later, limit=10_000) if r["id"] == analysis_id
    ]
    taken: list[dict[str, Any] | None] = []
    barrier = threading.Barrier(6)

    def take() -> None:
        barrier.wait()
        taken.append(ledger.take(engine=engine, seen=seen, lease_seconds=60, expired=True, now=later))

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
    assert ledger.wait(engine=engine, analysis_id=analysis_id, seconds=600)
    assert _claim(engine, analysis_id, "research", "t1").outcome is ClaimOutcome.CLAIMED
    assert not ledger.wait(engine=engine, analysis_id=analysis_id, seconds=600)
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
        taken.append(ledger.take(engine=engine, seen=seen, lease_seconds=60, expired=False))

    threads = [threading.Thread(target=take) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    (winner,) = [t for t in taken if t is not None]
    assert winner["recoveries"] == 1 and winner["state"]["analysis_id"] == analysis_id
    # its publish failed: the take is undone (no recovery spent) and the lease runs out now
    before = utc_now()
    assert ledger.give_back(engine=engine, taken=winner)
    row = repo.get_analysis(engine=engine, analysis_id=analysis_id)
    assert row is not None and row["recoveries"] == 0 and row["lease_expires_at"] >= before
    assert row["lease_expires_at"] <= utc_now()
    assert not ledger.give_back(engine=engine, taken=winner)  # once
    # a step claimed meanwhile is never taken for a loss seen before the claim
    (seen,) = progress_repo.progress_rows(engine=engine, analysis_ids=[analysis_id]).values()
    assert _claim(engine, analysis_id, "research", "t1").outcome is ClaimOutcome.CLAIMED
    assert ledger.take(engine=engine, seen=seen, lease_seconds=60, expired=False) is None


def test_a_retried_attempt_keeps_its_rows_and_extends_its_lease_in_one_write(engine: Engine) -> None:
    analysis_id = _new(engine)
    assert _claim(engine, analysis_id, "research", "t1").outcome is ClaimOutcome.CLAIMED
    claimed = repo.get_analysis(engine=engine, analysis_id=analysis_id)
    assert claimed is not None
    # a tag of its own: tool_call_id is unique across the session's shared PostgreSQL database
    tools, llms = _rich_rows(analysis_id, "b7c8")
    rows = [{**r, "analysis_id": analysis_id, "iteration": 0} for r in tools]
    llm_rows = [{**r, "analysis_id": analysis_id} for r in llms]
    assert ledger.keep(
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
    assert not ledger.keep(
        engine=engine, analysis_id=analysis_id, owner="t2", seconds=600, tool_calls=rows, llm_calls=llm_rows
    )
    assert len(repo.get_tool_calls(engine=engine, analysis_id=analysis_id)) == 2
    assert len(repo.get_llm_calls(engine=engine, analysis_id=analysis_id)) == 1


# --- the table --------------------------------------------------------------------------------

_STATUSES = [status.value for status in Status]


def test_the_table_declares_a_rule_for_every_move_and_only_stage_table_statuses() -> None:
    assert set(ledger.MOVES) == set(ledger.Move)
    for rule in ledger.MOVES.values():
        assert rule.sources <= set(_STATUSES)
        assert rule.targets is None or rule.targets <= set(_STATUSES)
        assert rule.fence


#: How many (from, to) pairs of the 8 x 8 (no row or a status, the status kept or one) each move
#: allows, counted from the table in docs/architecture.md ("The ledger"): 5 unfinished statuses
#: (queued and the 4 running ones), 4 running targets, 2 finished ones.
_ALLOWED_PAIRS = {
    "create": 1,  # no row → queued
    "claim": 20,  # unfinished → a running status
    "complete": 20,
    "finish": 10,  # unfinished → done | failed
    "hand_off": 5,  # unfinished → researching
    "end": 12,  # unfinished → done | failed, and done → done, failed → failed again
    "cancel": 1,  # queued → failed
    "keep": 5,  # unfinished, status kept
    "wait": 5,
    "take": 5,
    "give_back": 5,
}


def test_a_move_the_table_does_not_declare_is_refused() -> None:
    assert set(_ALLOWED_PAIRS) == {move.value for move in ledger.Move}
    for move in ledger.Move:
        allowed = 0
        for source in [None, *_STATUSES]:
            for target in [None, *_STATUSES]:
                if ledger.MOVES[move].allows(source, target):
                    ledger.check(move, source=source, target=target)  # passes
                    allowed += 1
                    continue
                with pytest.raises(
                    ledger.MoveRefused, match=f"no move {move.value} from {source or 'no row'}"
                ):
                    ledger.check(move, source=source, target=target)
        assert allowed == _ALLOWED_PAIRS[move.value], move
    refused = [
        (ledger.Move.CREATE, "queued", "queued"),  # the row exists
        (ledger.Move.CLAIM, "done", "researching"),  # a finished analysis is never claimed again
        (ledger.Move.COMPLETE, "researching", "done"),  # only the end of a pass finishes
        (ledger.Move.FINISH, "failed", "done"),
        (ledger.Move.HAND_OFF, "done", "researching"),
        (ledger.Move.END, "done", "failed"),  # failed never replaces done
        (ledger.Move.CANCEL, "researching", "failed"),  # a started analysis runs to its end
        (ledger.Move.KEEP, "researching", "analyzing"),  # a lease move keeps the status
        (ledger.Move.TAKE, "failed", None),
    ]
    for move, source, target in refused:
        with pytest.raises(ledger.MoveRefused):
            ledger.check(move, source=source, target=target)
    ledger.check(ledger.Move.END, source="done", target="done")  # a redelivered copy of the end
    ledger.check(ledger.Move.COMPLETE, source="queued", target="analyzing")  # research, unclaimed


def test_the_moves_refuse_a_status_outside_their_row_before_writing(engine: Engine) -> None:
    analysis_id = _new(engine)
    assert _claim(engine, analysis_id, "research", "t1").outcome is ClaimOutcome.CLAIMED
    with pytest.raises(ledger.MoveRefused, match="complete writes"):
        _complete(engine, analysis_id, "research", "t1", "done")
    with pytest.raises(ledger.MoveRefused, match=re.escape("finish writes done | failed")):
        ledger.finish(
            engine=engine,
            end=ledger.StepEnd(analysis_id=analysis_id, iteration=0, step="research", owner="t1", state={}),
            status="analyzing",
            report=None,
            report_json=None,
            signal=None,
            confidence=None,
            error=None,
        )
    with pytest.raises(ledger.MoveRefused, match="hand_off writes researching"):
        ledger.hand_off(
            engine=engine, analysis_id=analysis_id, state={"status": "done", "iteration": 1}, lease_seconds=60
        )
    with pytest.raises(ledger.MoveRefused, match=re.escape("end writes done | failed")):
        _end(engine, analysis_id, "reviewing")
    with pytest.raises(ledger.MoveRefused, match="not 'thinking'"):  # outside the stage table
        _complete(engine, analysis_id, "research", "t1", "thinking")
    row = repo.get_analysis(engine=engine, analysis_id=analysis_id)
    assert row is not None
    assert (row["status"], row["checkpoint"], row["lease_owner"]) == ("researching", None, "t1")


def _end(engine: Engine, analysis_id: str, status: str, iteration: int = 0, **results: Any) -> bool:
    state = {"analysis_id": analysis_id, "iteration": iteration, "marker": f"{status}@{iteration}"}
    return ledger.end(
        engine=engine,
        analysis_id=analysis_id,
        state=state,
        status=status,
        iteration=iteration,
        **{k: results.get(k) for k in ("report", "report_json", "signal", "confidence", "error")},
    )


def _hand_off(engine: Engine, analysis_id: str, iteration: int) -> bool:
    state = {"analysis_id": analysis_id, "iteration": iteration, "status": "researching"}
    return ledger.hand_off(
        engine=engine,
        analysis_id=analysis_id,
        state={**state, "marker": f"pass {iteration}"},
        lease_seconds=60,
    )


def _stored(engine: Engine, analysis_id: str) -> dict[str, Any]:
    row = repo.get_analysis(engine=engine, analysis_id=analysis_id)
    assert row is not None
    return row


def test_each_declared_move_does_what_its_row_says(engine: Engine) -> None:
    # create → claim → complete → finish: one worker's pass
    done_id = _new(engine)
    assert _stored(engine, done_id)["status"] == "queued"
    assert _claim(engine, done_id, "research", "t1").outcome is ClaimOutcome.CLAIMED
    assert (_stored(engine, done_id)["status"], _stored(engine, done_id)["lease_owner"]) == (
        "researching",
        "t1",
    )
    assert _complete(engine, done_id, "research", "t1", "analyzing")
    assert _stored(engine, done_id)["checkpoint"] == "research"
    end = ledger.StepEnd(analysis_id=done_id, iteration=0, step="analysis", owner="t2", state={"x": 1})
    assert _claim(engine, done_id, "analysis", "t2").outcome is ClaimOutcome.CLAIMED
    assert ledger.finish(
        engine=engine,
        end=end,
        status="done",
        report="# report",
        report_json={"headline": "h"},
        signal="HOLD",
        confidence=0.5,
        error=None,
    )
    row = _stored(engine, done_id)
    assert (row["status"], row["report"], row["signal"], row["checkpoint"], row["lease_expires_at"]) == (
        "done",
        "# report",
        "HOLD",
        None,
        None,
    )
    assert row["finished_at"] is not None and row["report_json"] == {"headline": "h"}
    # hand_off: the next pass starts from no checkpoint with a fresh lease
    next_id = _new(engine)
    assert _claim(engine, next_id, "research", "t1").outcome is ClaimOutcome.CLAIMED
    assert _hand_off(engine, next_id, 1)
    row = _stored(engine, next_id)
    assert (row["status"], row["iteration"], row["checkpoint"], row["lease_owner"]) == (
        "researching",
        1,
        None,
        None,
    )
    assert row["state"]["marker"] == "pass 1"
    # end: a failure outside the step, its error redacted
    assert _end(engine, next_id, "failed", 1, error="STALLED: token=sk-abcdefghijklmnopqrstuv")
    row = _stored(engine, next_id)
    assert row["status"] == "failed" and "sk-abcdefghijklmnopqrstuv" not in row["error"]
    # cancel: only a queued row nobody started
    queued, started = _new(engine), _new(engine)
    assert _claim(engine, started, "research", "t1").outcome is ClaimOutcome.CLAIMED
    assert ledger.cancel(engine=engine, analysis_ids=[queued, started, done_id], reason="test") == [queued]
    row = _stored(engine, queued)
    assert (row["status"], row["error"]) == ("failed", "CANCELLED: test") and row["finished_at"] is not None
    assert _stored(engine, started)["status"] == "researching"
    # keep, wait, take, give_back are exercised by the tests above; none moves a finished row
    (seen,) = progress_repo.progress_rows(engine=engine, analysis_ids=[done_id]).values()
    assert not ledger.keep(engine=engine, analysis_id=done_id, owner=None, seconds=60)
    assert not ledger.wait(engine=engine, analysis_id=done_id, seconds=60)
    assert ledger.take(engine=engine, seen=seen, lease_seconds=60, expired=False) is None
    assert not ledger.give_back(engine=engine, taken=seen)
    assert _stored(engine, done_id)["status"] == "done"


def test_the_pass_boundary_moves_forward_only(engine: Engine) -> None:
    analysis_id = _new(engine)
    # forward into the next pass is applied; a late copy of an earlier pass is not
    assert _hand_off(engine, analysis_id, 1)
    assert _hand_off(engine, analysis_id, 1)  # a copy of the same hand-off rewrites the same start
    assert not _hand_off(engine, analysis_id, 0)  # an older pass's does not
    assert _claim(engine, analysis_id, "research", "t1").outcome is ClaimOutcome.STALE  # pass 0's copy
    end = ledger.StepEnd(analysis_id=analysis_id, iteration=1, step="research", owner="t1", state={})
    assert (
        ledger.claim(
            engine=engine, analysis_id=analysis_id, iteration=1, step="research", owner="t1", lease_seconds=60
        ).outcome
        is ClaimOutcome.CLAIMED
    )
    assert ledger.complete(engine=engine, end=end, status="analyzing", lease_seconds=60)
    assert not _hand_off(engine, analysis_id, 1)  # a redelivered hand-off: the pass moved on
    assert not _end(engine, analysis_id, "done", 0, report="# stale")  # an older pass's end
    assert _stored(engine, analysis_id)["status"] == "analyzing"
    # done is final ...
    assert _end(engine, analysis_id, "done", 1, report="# final", signal="BUY", confidence=0.7)
    first = _stored(engine, analysis_id)
    assert not _end(engine, analysis_id, "failed", 1, error="late failure")
    assert not _hand_off(engine, analysis_id, 2)  # not even a later pass reopens it
    # ... except for a redelivered copy of the same end, which keeps what it does not repeat
    assert _end(engine, analysis_id, "done", 1)
    row = _stored(engine, analysis_id)
    assert (row["status"], row["report"], row["signal"], row["confidence"], row["error"]) == (
        "done",
        "# final",
        "BUY",
        0.7,
        None,
    )
    assert row["finished_at"] == first["finished_at"]


def test_an_end_of_an_unknown_analysis_raises_and_writes_nothing(engine: Engine) -> None:
    missing = str(uuid.uuid4())
    with pytest.raises(AnalysisNotFoundError):
        _end(engine, missing, "done")
    with pytest.raises(AnalysisNotFoundError):
        _hand_off(engine, missing, 1)
    assert repo.get_analysis(engine=engine, analysis_id=missing) is None


def test_a_finished_row_is_refused_by_every_step_move(engine: Engine) -> None:
    analysis_id = _new(engine)
    assert _end(engine, analysis_id, "failed", error="INVALID_SYMBOL: no such ticker (api_key=abc123)")
    assert _claim(engine, analysis_id, "research", "t1").outcome is ClaimOutcome.STALE
    assert not _complete(engine, analysis_id, "research", "t1", "analyzing", claimed=False)
    assert not _end(engine, analysis_id, "done")  # failed never becomes done
    assert ledger.cancel(engine=engine, analysis_ids=[analysis_id], reason="late") == []
    row = _stored(engine, analysis_id)
    assert (row["status"], row["error"]) == ("failed", "INVALID_SYMBOL: no such ticker (api_key=***)")


def _tool_row(tool_call_id: str, **extra: Any) -> dict[str, Any]:
    row = {
        "tool_call_id": tool_call_id,
        "stage": "research",
        "tool": "get_quote",
        "status": "success",
        "attempt": 1,
        "latency_ms": 1.0,
        "result": {"price": 1.0},
    }
    return {**row, **extra}


def test_a_step_end_is_one_transaction(engine: Engine) -> None:
    # given a batch whose second row cannot be stored (not JSON)
    analysis_id = _new(engine)
    assert _claim(engine, analysis_id, "research", "t1").outcome is ClaimOutcome.CLAIMED
    rows = [_tool_row(f"{analysis_id}:ok"), _tool_row(f"{analysis_id}:bad", result={"obj": object()})]
    # when the checkpoint fails mid-way
    with pytest.raises(Exception, match="not JSON serializable"):
        _complete(engine, analysis_id, "research", "t1", "analyzing", tool_calls=rows)
    # then neither the row's move nor any tool row survived
    row = _stored(engine, analysis_id)
    assert (row["status"], row["checkpoint"], row["lease_owner"]) == ("researching", None, "t1")
    assert repo.get_tool_calls(engine=engine, analysis_id=analysis_id) == []


def test_a_step_end_refuses_malformed_rows_before_writing(engine: Engine) -> None:
    analysis_id = _new(engine)
    assert _claim(engine, analysis_id, "research", "t1").outcome is ClaimOutcome.CLAIMED
    for rows, said in (
        ([_tool_row("x", querry="typo")], "unknown tool_calls keys"),
        ([{"tool_call_id": "x", "tool": "t"}], "lacks"),
        ([_tool_row("x", analysis_id="other")], "saved under"),
    ):
        with pytest.raises(ValueError, match=said):
            _complete(engine, analysis_id, "research", "t1", "analyzing", tool_calls=rows)
    with pytest.raises(KeyError, match="unknown stage"):
        _complete(engine, analysis_id, "thinking", "t1", "analyzing")
    row = _stored(engine, analysis_id)
    assert (row["status"], row["checkpoint"]) == ("researching", None)
    assert repo.get_tool_calls(engine=engine, analysis_id=analysis_id) == []
