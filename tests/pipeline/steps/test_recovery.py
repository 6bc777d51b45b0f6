"""The recovery sweep (``pipeline.steps.recovery``) in process on SQLite with the real stage
functions and the stage tasks' adapter: a lost message is re-driven from the row's checkpoint
and the analysis finishes with the same report; the cap fails it ``STALLED``; a backlog is not a
loss; a dry run changes nothing. The chain it publishes is captured here (``publish=``) and run
through the adapter; tests/fault runs the same sweep against real workers and brokers."""

from __future__ import annotations

from datetime import date, timedelta
from typing import Any

import pytest

from core.settings import get_settings
from core.state import FinancialAgentState
from db import ledger, progress_repo, repo
from db._sql import utc_now
from db.ledger import ClaimOutcome
from pipeline.stages.review import review
from pipeline.stages.table import STAGE_FUNCTIONS
from pipeline.steps.checkpoint import checkpoint
from pipeline.steps.context import make_context
from pipeline.steps.inventory import BrokerInventory
from pipeline.steps.recovery import LOST_SETTLE_S, Action, progress_of, redrive_lost, sweep
from tasks.stages import should_continue_task
from tests.support.celery_task import FakeTask, migrated_engine, run_stage_task, start_analysis_row

pytestmark = pytest.mark.usefixtures("clean_settings")


_engine = migrated_engine
_start = start_analysis_row


def _run_from(state: FinancialAgentState, step: str) -> None:
    """What the re-driven chain does: every step from ``step`` through the adapter, with new
    task ids (a re-drive publishes new messages)."""
    payload = state.to_message()
    names = list(STAGE_FUNCTIONS)
    for name in names[names.index(step) :] if step in names else []:
        payload = run_stage_task(FakeTask(f"redriven-{name}"), name, payload=payload)
    should_continue_task(payload)


def _later() -> Any:
    return utc_now() + timedelta(seconds=get_settings().durability.lease_seconds + 1)


def test_a_lost_message_is_re_driven_from_the_checkpoint_and_the_analysis_finishes() -> None:
    engine = _engine()
    payload = _start()
    analysis_id = payload["analysis_id"]
    payload = run_stage_task(FakeTask("r1"), "research", payload=payload)
    # the analysis stage's message is lost with Redis: nothing runs; the lease runs out
    assert (
        sweep(now=utc_now(), queue_depths=lambda _: {}, publish=lambda *_: None, settings=get_settings())
        == []
    )  # not yet
    published: list[tuple[FinancialAgentState, str]] = []
    found = sweep(
        now=_later(),
        queue_depths=lambda _: {},
        publish=lambda s, step: published.append((s, step)),
        settings=get_settings(),
    )
    assert [(r.analysis_id, r.action, r.step, r.recoveries) for r in found] == [
        (analysis_id, Action.REDRIVE, "analysis", 1)
    ]
    ((state, step),) = published
    assert step == "analysis" and state.to_message() == payload  # the checkpointed state, exactly
    _run_from(state, step)
    row = repo.get_analysis(engine=engine, analysis_id=analysis_id)
    assert row is not None and row["status"] == "done" and row["recoveries"] == 1
    assert row["report"].startswith("# AAPL")
    calls = repo.get_tool_calls(engine=engine, analysis_id=analysis_id)
    assert len({c["id"] for c in calls}) == len(calls)


def test_a_dead_worker_s_step_and_a_lost_end_of_pass_are_re_driven() -> None:
    engine = _engine()
    payload = _start("MSFT", date(2010, 6, 30))
    analysis_id = payload["analysis_id"]
    *middle, last = STAGE_FUNCTIONS
    for name in middle:
        payload = run_stage_task(FakeTask(f"t-{name}"), name, payload=payload)
    # the last stage's worker wrote its checkpoint but the should_continue message that hands
    # off to the next pass was lost (close.hand_on): the row is reviewed, checkpoint review.
    # The stage's own work (review), without the end of its pass: should_continue ends it
    state = FinancialAgentState.from_message(payload)
    claim = ledger.claim(
        engine=engine, analysis_id=analysis_id, iteration=0, step=last, owner="t-last", lease_seconds=300
    )
    assert claim.outcome is ClaimOutcome.CLAIMED
    ctx = make_context(state=state, stage=last, task_id="t-last", retries=0, settings=get_settings())
    assert last == "review"
    reviewed = review(state=state, ctx=ctx).advance(stage=last)
    assert checkpoint(state=reviewed, stage=last, owner="t-last", rows=ctx.rows, settings=get_settings())
    payload = reviewed.to_message()
    published: list[tuple[FinancialAgentState, str]] = []
    sweep(
        now=_later(),
        queue_depths=lambda _: {},
        publish=lambda s, step: published.append((s, step)),
        settings=get_settings(),
    )
    ((state, step),) = published
    assert step == "should_continue"
    should_continue_task(state.to_message())
    row = repo.get_analysis(engine=engine, analysis_id=analysis_id)
    assert (
        row is not None and row["status"] == "done" and row["signal"] == payload["recommendation"]["signal"]
    )

    # a worker claims research of a new analysis and dies (kill -9): its lease runs out
    other = _start("IBM", date(2013, 2, 28))
    ledger.claim(
        engine=engine,
        analysis_id=other["analysis_id"],
        iteration=0,
        step="research",
        owner="dead",
        lease_seconds=300,
    )
    before = progress_of(
        repo.get_analysis(engine=engine, analysis_id=other["analysis_id"]) or {}, settings=get_settings()
    )
    assert before.running and not before.stale and before.step == "research"
    stale = progress_of(
        repo.get_analysis(engine=engine, analysis_id=other["analysis_id"]) or {},
        settings=get_settings(),
        now=_later(),
    )
    assert stale.stale and "will re-drive it from research (recovery 1 of 3)" in stale.note
    published.clear()
    sweep(
        now=_later(),
        queue_depths=lambda _: {},
        publish=lambda s, step: published.append((s, step)),
        settings=get_settings(),
    )
    ((state, step),) = published
    _run_from(state, step)
    row = repo.get_analysis(engine=engine, analysis_id=other["analysis_id"])
    assert row is not None and row["status"] == "done"


def test_after_max_recoveries_the_analysis_fails_stalled(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FINAGENT_DURABILITY_MAX_RECOVERIES", "2")
    get_settings.cache_clear()
    engine = _engine()
    analysis_id = _start()["analysis_id"]
    clock = utc_now()
    for n in (1, 2):  # each re-drive is lost too
        clock += timedelta(seconds=get_settings().durability.lease_seconds + 1)
        (rec,) = sweep(now=clock, queue_depths=lambda _: {}, publish=lambda *_: None, settings=get_settings())
        assert (rec.action, rec.recoveries) == (Action.REDRIVE, n)
    clock += timedelta(seconds=get_settings().durability.lease_seconds + 1)
    (rec,) = sweep(now=clock, queue_depths=lambda _: {}, publish=lambda *_: None, settings=get_settings())
    assert rec.action is Action.FAIL and rec.detail.startswith(
        "STALLED after 2 recoveries: no progress in research"
    )
    row = repo.get_analysis(engine=engine, analysis_id=analysis_id)
    assert row is not None and row["status"] == "failed" and row["finished_at"] is not None
    assert row["error"].startswith("STALLED after 2 recoveries")
    assert row["state"]["errors"][-1]["code"] == "STALLED" and "STALLED after 2 recoveries" in row["report"]
    assert (
        sweep(
            now=clock + timedelta(days=1),
            queue_depths=lambda _: {},
            publish=lambda *_: None,
            settings=get_settings(),
        )
        == []
    )


def test_a_backlog_is_not_a_loss_and_a_dry_run_changes_nothing() -> None:
    engine = _engine()
    analysis_id = _start()["analysis_id"]
    later = _later()
    (dry,) = sweep(
        now=later,
        dry_run=True,
        queue_depths=lambda _: {},
        publish=lambda *_: pytest.fail("published"),
        settings=get_settings(),
    )
    assert dry.action is Action.REDRIVE and dry.recoveries == 1
    row = repo.get_analysis(engine=engine, analysis_id=analysis_id)
    assert row is not None and row["recoveries"] == 0 and row["lease_expires_at"] < later

    (wait,) = sweep(
        now=later,
        # a backlog in the stage's batch queue holds the step's message as well as its own
        queue_depths=lambda queues: {q: (7 if q == "research.batch" else 0) for q in queues},
        queue_consumers=lambda queues: set(queues),  # a live worker consumes it
        publish=lambda *_: pytest.fail("published"),
        settings=get_settings(),
    )
    assert wait.action is Action.WAIT
    assert "waiting behind 7 message(s) in queue research/research.batch" in wait.detail
    row = repo.get_analysis(engine=engine, analysis_id=analysis_id)
    assert row is not None and row["recoveries"] == 0 and row["lease_expires_at"] > utc_now()


def test_a_backlog_nobody_consumes_is_re_driven_then_failed_not_waited_for_forever() -> None:
    """Every worker died with messages in the queue: the lease is not extended behind a queue
    that does not drain; the analysis is re-driven, then failed STALLED past its recoveries."""
    engine = _engine()
    analysis_id = _start()["analysis_id"]
    asked: list[set[str]] = []

    def nobody(queues: set[str]) -> set[str]:
        asked.append(set(queues))
        return set()

    published: list[str] = []
    (rec,) = sweep(
        now=_later(),
        queue_depths=lambda queues: {q: (5 if q == "research" else 0) for q in queues},
        queue_consumers=nobody,
        publish=lambda s, step: published.append(step),
        settings=get_settings(),
    )
    assert asked == [{"research"}]  # only the queues that hold messages are asked about
    assert rec.action is Action.REDRIVE and published == ["research"]
    limit = get_settings().durability.max_recoveries
    clock = _later()
    for _ in range(limit - 1):
        clock += timedelta(seconds=get_settings().durability.lease_seconds + 1)
        (rec,) = sweep(
            now=clock,
            queue_depths=lambda qs: dict.fromkeys(qs, 5),
            queue_consumers=nobody,
            publish=lambda *_: None,
            settings=get_settings(),
        )
        assert rec.action is Action.REDRIVE
    clock += timedelta(seconds=get_settings().durability.lease_seconds + 1)
    (rec,) = sweep(
        now=clock,
        queue_depths=lambda qs: dict.fromkeys(qs, 5),
        queue_consumers=nobody,
        publish=lambda *_: None,
        settings=get_settings(),
    )
    assert rec.action is Action.FAIL and rec.detail.startswith(f"STALLED after {limit} recoveries")
    row = repo.get_analysis(engine=engine, analysis_id=analysis_id)
    assert row is not None and row["status"] == "failed"


def test_a_consumed_backlog_that_never_drains_is_waited_for_only_so_long() -> None:
    """A message that kills its worker process is put back and taken again forever: its queue
    holds messages and is consumed, but the analysis never moves. Within
    ``backlog_wait_seconds`` of its last progress it is waited for; past it, re-driven, then
    failed STALLED past its recoveries."""
    engine = _engine()
    analysis_id = _start()["analysis_id"]
    durability = get_settings().durability
    row = repo.get_analysis(engine=engine, analysis_id=analysis_id)
    assert row is not None
    progressed = row["updated_at"]
    served = dict(queue_depths=lambda qs: dict.fromkeys(qs, 1), queue_consumers=lambda qs: set(qs))
    # a lease later, well within the wait: a backlog, its lease extended, updated_at unchanged
    (rec,) = sweep(
        now=_later(), publish=lambda *_: pytest.fail("published"), **served, settings=get_settings()
    )
    assert rec.action is Action.WAIT
    row = repo.get_analysis(engine=engine, analysis_id=analysis_id)
    assert row is not None and row["updated_at"] == progressed
    # past the wait without progress: not a backlog any more
    clock = progressed + timedelta(seconds=durability.backlog_wait_seconds + 1)
    published: list[str] = []
    (rec,) = sweep(
        now=clock, publish=lambda s, step: published.append(step), **served, settings=get_settings()
    )
    assert rec.action is Action.REDRIVE and published == ["research"]
    for _ in range(durability.max_recoveries):
        clock += timedelta(seconds=durability.backlog_wait_seconds + 1)
        (rec,) = sweep(now=clock, publish=lambda *_: None, **served, settings=get_settings())
    assert rec.action is Action.FAIL and rec.detail.startswith("STALLED after")
    row = repo.get_analysis(engine=engine, analysis_id=analysis_id)
    assert row is not None and row["status"] == "failed"


def test_the_backlog_wait_is_at_least_a_lease() -> None:
    from pydantic import ValidationError

    from core.settings import Settings

    with pytest.raises(ValidationError, match="FINAGENT_DURABILITY_BACKLOG_WAIT_SECONDS must be at least"):
        Settings(durability_lease_seconds=600, durability_backlog_wait_seconds=300)


def test_when_the_consumers_cannot_be_read_a_backlog_is_still_waited_for() -> None:
    _engine()
    _start()
    (rec,) = sweep(
        now=_later(),
        queue_depths=lambda queues: dict.fromkeys(queues, 3),
        queue_consumers=lambda _: None,  # the control broadcast failed
        publish=lambda *_: pytest.fail("published"),
        settings=get_settings(),
    )
    assert rec.action is Action.WAIT


# --- after the broker lost its messages: re-drive at once, whatever the lease -------------------


def _inventory(*, analyses: tuple[str, ...] = (), tasks: tuple[str, ...] = ()) -> BrokerInventory:
    return BrokerInventory(frozenset(analyses), frozenset(tasks), len(analyses) + len(tasks))


def test_after_a_broker_loss_an_analysis_without_a_message_is_re_driven_before_its_lease_ends() -> None:
    engine = _engine()
    queued = _start()["analysis_id"]  # its research message was lost with the broker
    between = run_stage_task(
        FakeTask("r1"), "research", payload=_start("MSFT")
    )  # research done, its analysis message lost
    running = _start("IBM", date(2013, 2, 28))["analysis_id"]
    ledger.claim(
        engine=engine, analysis_id=running, iteration=0, step="research", owner="t-gone", lease_seconds=300
    )  # a worker took research; the broker lost the message, the worker's task was cancelled
    held_waiting = _start("GOOG", date(2012, 6, 29))["analysis_id"]  # its message is still queued
    held_running = _start("AAPL", date(2011, 6, 30))["analysis_id"]
    ledger.claim(
        engine=engine,
        analysis_id=held_running,
        iteration=0,
        step="research",
        owner="t-live",
        lease_seconds=300,
    )  # its message is delivered to a live worker, unacked
    broker = _inventory(analyses=(held_waiting,), tasks=("t-live",))
    published: list[tuple[str, str]] = []
    waits: list[float] = []

    found = redrive_lost(
        inventory=lambda queues: broker,
        publish=lambda s, step: published.append((s.analysis_id, step)),
        sleep=waits.append,
        settings=get_settings(),
    )

    assert waits == [LOST_SETTLE_S]  # two readings, some seconds apart
    assert sorted((r.analysis_id, r.action, r.step, r.recoveries) for r in found) == sorted(
        [
            (queued, Action.REDRIVE, "research", 1),
            (between["analysis_id"], Action.REDRIVE, "analysis", 1),
            (running, Action.REDRIVE, "research", 1),
        ]
    )
    assert sorted(published) == sorted(
        [(queued, "research"), (between["analysis_id"], "analysis"), (running, "research")]
    )
    for analysis_id in (queued, between["analysis_id"], running):
        row = repo.get_analysis(engine=engine, analysis_id=analysis_id)
        assert row is not None and row["recoveries"] == 1 and row["lease_owner"] is None
    # the leases had not run out: the lease sweep would have waited
    assert (
        sweep(
            now=utc_now(),
            queue_depths=lambda _: {},
            publish=lambda *_: pytest.fail("published"),
            settings=get_settings(),
        )
        == []
    )
    for analysis_id in (held_waiting, held_running):
        row = repo.get_analysis(engine=engine, analysis_id=analysis_id)
        assert row is not None and row["recoveries"] == 0
    # the re-driven step runs and the analysis finishes; the dead task's late checkpoint is fenced
    _run_from(FinancialAgentState.from_message(between), "analysis")
    row = repo.get_analysis(engine=engine, analysis_id=between["analysis_id"])
    assert row is not None and row["status"] == "done" and row["recoveries"] == 1
    assert (
        ledger.claim(
            engine=engine,
            analysis_id=running,
            iteration=0,
            step="research",
            owner="redriven",
            lease_seconds=300,
        ).outcome
        is ClaimOutcome.CLAIMED
    )


def test_a_row_that_moves_or_a_message_that_shows_up_between_the_readings_is_not_lost() -> None:
    engine = _engine()
    claimed = _start()["analysis_id"]
    appeared = _start("MSFT")["analysis_id"]
    readings = iter([_inventory(), _inventory(analyses=(appeared,))])

    def meanwhile(_: float) -> None:
        # a worker's BRPOP had taken claimed's message (in no list, not yet in the unacked hash):
        # it claims the step; appeared's message was being published by its producer
        ledger.claim(
            engine=engine, analysis_id=claimed, iteration=0, step="research", owner="t1", lease_seconds=300
        )

    found = redrive_lost(
        inventory=lambda _: next(readings),
        publish=lambda *_: pytest.fail("published"),
        sleep=meanwhile,
        settings=get_settings(),
    )
    assert found == []
    for analysis_id in (claimed, appeared):
        row = repo.get_analysis(engine=engine, analysis_id=analysis_id)
        assert row is not None and row["recoveries"] == 0


def test_a_lost_take_is_guarded_by_the_row_as_read() -> None:
    engine = _engine()
    analysis_id = _start()["analysis_id"]
    (seen,) = [r for r in progress_repo.unfinished(engine=engine) if r["id"] == analysis_id]
    ledger.claim(
        engine=engine, analysis_id=analysis_id, iteration=0, step="research", owner="t1", lease_seconds=300
    )
    assert ledger.take(engine=engine, seen=seen, lease_seconds=300, expired=False) is None  # it moved
    (now,) = [r for r in progress_repo.unfinished(engine=engine) if r["id"] == analysis_id]
    taken = ledger.take(engine=engine, seen=now, lease_seconds=300, expired=False)
    assert taken is not None and taken["recoveries"] == 1 and taken["lease_owner"] is None
    assert ledger.take(engine=engine, seen=now, lease_seconds=300, expired=False) is None  # taken once


def test_without_an_inventory_nothing_is_re_driven_early() -> None:
    _start()
    # RabbitMQ (no inventory): its messages survive a restart; the lease decides
    assert (
        redrive_lost(
            inventory=lambda _: None, publish=lambda *_: pytest.fail("published"), settings=get_settings()
        )
        == []
    )


def test_a_lost_analysis_past_its_recoveries_fails_stalled_and_a_dry_run_changes_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("FINAGENT_DURABILITY_MAX_RECOVERIES", "0")
    get_settings.cache_clear()
    engine = _engine()
    analysis_id = _start()["analysis_id"]
    (dry,) = redrive_lost(
        inventory=lambda _: _inventory(),
        publish=lambda *_: pytest.fail("published"),
        sleep=lambda _: None,
        dry_run=True,
        settings=get_settings(),
    )
    assert dry.action is Action.FAIL
    row = repo.get_analysis(engine=engine, analysis_id=analysis_id)
    assert row is not None and row["status"] == "queued"
    (rec,) = redrive_lost(
        inventory=lambda _: _inventory(),
        publish=lambda *_: pytest.fail("published"),
        sleep=lambda _: None,
        settings=get_settings(),
    )
    assert rec.action is Action.FAIL and rec.detail.startswith(
        "STALLED after 0 recoveries: no message left in the broker for research"
    )
    row = repo.get_analysis(engine=engine, analysis_id=analysis_id)
    assert row is not None and row["status"] == "failed" and row["error"].startswith("STALLED after 0")


def test_a_re_drive_whose_publish_fails_is_given_back_and_counts_no_recovery() -> None:
    engine = _engine()
    analysis_id = _start()["analysis_id"]

    def broker_down(*_: Any) -> None:
        raise ConnectionError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")

    with pytest.raises(ConnectionError):
        redrive_lost(
            inventory=lambda _: _inventory(),
            publish=broker_down,
            sleep=lambda _: None,
            settings=get_settings(),
        )
    row = repo.get_analysis(engine=engine, analysis_id=analysis_id)
    assert row is not None and row["recoveries"] == 0 and row["lease_expires_at"] <= utc_now()
    # the next lease sweep (the broker back) re-drives it as recovery 1
    published: list[str] = []
    (rec,) = sweep(
        now=utc_now(),
        queue_depths=lambda _: {},
        publish=lambda s, step: published.append(step),
        settings=get_settings(),
    )
    assert (rec.action, rec.recoveries, published) == (Action.REDRIVE, 1, ["research"])

    with pytest.raises(ConnectionError):  # the lease sweep gives back the same way
        sweep(now=_later(), queue_depths=lambda _: {}, publish=broker_down, settings=get_settings())
    row = repo.get_analysis(engine=engine, analysis_id=analysis_id)
    assert row is not None and row["recoveries"] == 1
