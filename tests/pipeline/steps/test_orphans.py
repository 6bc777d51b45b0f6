"""A dead worker's analyses (``pipeline.steps.orphans.redrive_orphaned``) in process on SQLite
with the real stage functions: the deliveries no live worker lists in a heartbeat taken after
the first look are re-driven at once and removed from the broker; a live worker's are not; a
worker that was only slow writes no second state (the fence); the sweeper's dead-worker watch
(``apps.sweeper.DeadWorkers``) needs a silent heartbeat AND no answer to a ping. The broker
is a fake here; ``tests/fault`` kills a real worker."""

from __future__ import annotations

from datetime import date, datetime, timedelta
from typing import Any

import pytest

from apps.sweeper import DeadWorkers
from core.settings import get_settings
from core.state import FinancialAgentState
from db import ledger, repo
from db._sql import utc_now
from pipeline.steps.inventory import Deliveries
from pipeline.steps.orphans import WorkerBeat, redrive_orphaned
from pipeline.steps.recovery import Action
from tasks.base import Ignore
from tests.pipeline.steps.test_recovery import _run_from
from tests.support.celery_task import FakeTask, migrated_engine, run_stage_task, start_analysis_row

pytestmark = pytest.mark.usefixtures("clean_settings")


class Clock:
    """A clock the heartbeats are compared with; ``sleep`` moves it and lets workers beat."""

    def __init__(self) -> None:
        self.at = utc_now()
        self.on_sleep: list[Any] = []

    def now(self) -> datetime:
        return self.at

    def sleep(self, seconds: float) -> None:
        self.at += timedelta(seconds=seconds)
        for hook in self.on_sleep:
            hook()


def _deliveries(unacked: dict[str, tuple[str, str]], queued: tuple[str, ...] = ()) -> Deliveries:
    return Deliveries(frozenset(queued), frozenset(), dict(unacked))


def test_a_dead_workers_deliveries_are_re_driven_and_a_live_workers_are_not() -> None:
    engine = migrated_engine()
    clock = Clock()
    # a dead worker held: one analysis's research running (claimed) and one prefetched
    running = start_analysis_row()["analysis_id"]
    ledger.claim(
        engine=engine, analysis_id=running, iteration=0, step="research", owner="t-dead-1", lease_seconds=300
    )
    prefetched = start_analysis_row("MSFT", date(2011, 3, 31))["analysis_id"]
    # a live worker holds another analysis's research
    live = start_analysis_row("IBM", date(2010, 6, 30))["analysis_id"]
    ledger.claim(
        engine=engine, analysis_id=live, iteration=0, step="research", owner="t-live", lease_seconds=300
    )
    unacked = {"tag-1": ("t-dead-1", running), "tag-2": ("t-dead-2", prefetched), "tag-3": ("t-live", live)}
    beats = [
        WorkerBeat(
            "worker@h:1", "dead@h", clock.at - timedelta(seconds=60), frozenset({"t-dead-1", "t-dead-2"})
        ),
        WorkerBeat("worker@h:2", "live@h", clock.at - timedelta(seconds=3), frozenset({"t-live"})),
    ]

    def live_worker_beats() -> None:  # the live worker beats again after the first look
        beats[1] = WorkerBeat("worker@h:2", "live@h", clock.at, frozenset({"t-live"}))

    clock.on_sleep.append(live_worker_beats)
    published: list[tuple[str, str]] = []
    dropped: list[str] = []

    result = redrive_orphaned(
        deliveries=lambda _: _deliveries(unacked),
        beats=lambda: list(beats),
        drop=lambda tags: dropped.extend(tags) or len(tags),
        publish=lambda s, step: published.append((s.analysis_id, step)),
        sleep=clock.sleep,
        now=clock.now,
        settings=get_settings(),
    )

    assert result.judged and result.remaining == 0
    assert sorted((r.analysis_id, r.action, r.step, r.recoveries) for r in result.recoveries) == sorted(
        [(running, Action.REDRIVE, "research", 1), (prefetched, Action.REDRIVE, "research", 1)]
    )
    assert sorted(published) == sorted([(running, "research"), (prefetched, "research")])
    assert sorted(dropped) == ["tag-1", "tag-2"]  # the live worker's delivery stays
    row = repo.get_analysis(engine=engine, analysis_id=live)
    assert row is not None and row["recoveries"] == 0 and row["lease_owner"] == "t-live"
    # long before any lease ran out
    assert row["lease_expires_at"] > utc_now() + timedelta(seconds=200)


def test_no_judgement_until_every_live_worker_beat_after_the_first_look() -> None:
    migrated_engine()
    clock = Clock()
    analysis = start_analysis_row()["analysis_id"]
    # the live worker's last beat is older than the first look and it never beats again: the
    # delivery may be its own, received after that beat
    beats = [WorkerBeat("worker@h:2", "live@h", clock.at - timedelta(seconds=1), frozenset())]
    result = redrive_orphaned(
        deliveries=lambda _: _deliveries({"tag-1": ("t-new", analysis)}),
        beats=lambda: list(beats),
        drop=lambda tags: pytest.fail("dropped"),
        publish=lambda *_: pytest.fail("published"),
        sleep=clock.sleep,
        now=clock.now,
        settings=get_settings(),
    )
    assert not result.judged and result.recoveries == []


def test_an_analysis_with_a_queued_or_live_copy_or_that_moved_is_not_re_driven() -> None:
    engine = migrated_engine()
    clock = Clock()
    queued_copy = start_analysis_row()["analysis_id"]
    moved = start_analysis_row("MSFT", date(2011, 3, 31))["analysis_id"]
    unacked = {"tag-1": ("t-dead-1", queued_copy), "tag-2": ("t-dead-2", moved)}

    looks: list[int] = []

    def look(_: object) -> Deliveries:
        looks.append(1)
        if len(looks) == 2:  # between the two looks a worker claims the second one's research
            ledger.claim(
                engine=engine, analysis_id=moved, iteration=0, step="research", owner="t-x", lease_seconds=300
            )
        return _deliveries(unacked, queued=(queued_copy,))

    beats = [WorkerBeat("worker@h:2", "live@h", clock.at + timedelta(seconds=1), frozenset())]
    result = redrive_orphaned(
        deliveries=look,
        beats=lambda: list(beats),
        drop=lambda tags: pytest.fail("dropped"),
        publish=lambda *_: pytest.fail("published"),
        sleep=clock.sleep,
        now=clock.now,
        settings=get_settings(),
    )
    # the moved one is looked at again later; the queued copy's message will run
    assert result.recoveries == [] and result.remaining == 1


def test_a_worker_that_was_only_slow_writes_no_second_state() -> None:
    engine = migrated_engine()
    clock = Clock()
    payload = start_analysis_row()
    analysis_id = payload["analysis_id"]
    beats = [WorkerBeat("worker@h:1", "slow@h", clock.at - timedelta(seconds=60), frozenset({"t-slow"}))]
    published: list[tuple[FinancialAgentState, str]] = []
    # the "dead" worker (silent, not answering) took research, unclaimed (a quant stage's first
    # delivery claims in its checkpoint): the sweeper re-drives it
    result = redrive_orphaned(
        deliveries=lambda _: _deliveries({"tag-1": ("t-slow", analysis_id)}),
        beats=lambda: list(beats),
        drop=lambda tags: len(tags),
        publish=lambda s, step: published.append((s, step)),
        sleep=clock.sleep,
        now=clock.now,
        settings=get_settings(),
    )
    assert [r.action for r in result.recoveries] == [Action.REDRIVE]
    ((state, step),) = published
    # the re-driven copy runs to the end ...
    _run_from(state, step)
    done = repo.get_analysis(engine=engine, analysis_id=analysis_id)
    assert done is not None and done["status"] == "done"
    # ... and the slow worker, waking up, runs its research and tries to checkpoint: fenced out
    with pytest.raises(Ignore):  # its message is dropped: "fenced out"
        run_stage_task(FakeTask("t-slow"), "research", payload=payload)
    after = repo.get_analysis(engine=engine, analysis_id=analysis_id)
    assert after is not None and after["status"] == "done" and after["report"] == done["report"]
    assert after["finished_at"] == done["finished_at"] and after["recoveries"] == 1
    calls = repo.get_tool_calls(engine=engine, analysis_id=analysis_id)
    assert len({(c["tool_call_id"], c["attempt"]) for c in calls}) == len(calls)


def test_a_worker_is_dead_when_silent_and_not_answering_a_ping_and_reported_once() -> None:
    settings = get_settings()
    now = utc_now()
    silent = now - timedelta(seconds=settings.durability.worker_dead_seconds + 1)
    beats = [
        WorkerBeat("worker@h:1", "dead@h", silent, frozenset({"t1"})),
        WorkerBeat("worker@h:2", "busy@h", silent, frozenset()),  # silent, but answers: not dead
        WorkerBeat("worker@h:3", "fine@h", now - timedelta(seconds=2), frozenset()),
    ]
    pinged: list[list[str]] = []

    def ping(hostnames: list[str]) -> set[str]:
        pinged.append(sorted(hostnames))
        return {"busy@h"}

    watch = DeadWorkers(settings=settings, beats=lambda: beats, ping=ping)
    assert [b.hostname for b in watch.newly_dead(now=now)] == ["dead@h"]
    assert pinged == [["busy@h", "dead@h"]]  # only the silent ones are asked
    assert [b.hostname for b in watch.newly_dead(now=now)] == []  # reported once
