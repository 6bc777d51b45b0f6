"""The recovery sweeper's heartbeat and its loop (``apps.sweeper``) on a SQLite database:
``GET /health``'s ``sweeper`` check says whether a sweeper swept recently, independently of any
worker; a sweep that fails writes no heartbeat, a loss of broker messages is re-driven again
until that works. tests/integration/test_sweeper.py runs ``finagent sweeper`` against a real
Redis and PostgreSQL."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

import pytest

from apps.api.app import check_health
from apps.sweeper import HEARTBEAT_KIND, Sweeper, heartbeat_check, heartbeat_limit
from core.settings import Settings
from db import heartbeat_repo
from db._sql import utc_now
from db.engine import get_engine
from db.migrate import ensure_schema
from pipeline.steps.recovery import Action, Recovery

pytestmark = pytest.mark.usefixtures("clean_settings")


def _service_settings(tmp_path: Path) -> Settings:
    """Service-mode settings (a broker URL nobody listens on: nothing here talks to it) over a
    migrated SQLite file."""
    url = f"sqlite:///{tmp_path / 'ops.sqlite3'}"
    ensure_schema(url=url)
    return Settings(
        service_broker_url="redis://127.0.0.1:1/0", service_database_url=url, durability_sweep_seconds=60
    )


def _beat(settings: Settings, *, age: float, detail: dict | None = None) -> datetime:
    """A heartbeat ``age`` s before the returned moment (the one the check is asked about)."""
    now = utc_now()
    heartbeat_repo.beat(
        engine=get_engine(settings.service.effective_database_url),
        kind=HEARTBEAT_KIND,
        host="ops-host",
        pid=4242,
        started_at=now - timedelta(hours=1),
        detail=detail or {},
        now=now - timedelta(seconds=age),
    )
    return now


def test_no_sweeper_ever_is_a_failing_check_naming_the_command(tmp_path: Path) -> None:
    settings = _service_settings(tmp_path)
    said = heartbeat_check(settings=settings)
    assert not said.startswith("ok") and "start `finagent sweeper`" in said


def test_a_recent_sweep_is_ok_and_a_stale_one_fails(tmp_path: Path) -> None:
    settings = _service_settings(tmp_path)
    now = _beat(settings, age=12, detail={"broker_lost_messages_at": "2026-11-26T10:00:00+00:00",
                                    "last_lost_sweep": {"redriven": 17, "failed": 1}})  # fmt: skip
    said = heartbeat_check(settings=settings, now=now)
    assert said.startswith("ok (swept 12 s ago by sweeper@ops-host:4242")
    assert "broker lost its messages at 2026-11-26T10:00:00+00:00, 17 re-driven, 1 failed STALLED" in said

    now = _beat(settings, age=heartbeat_limit(settings) + 1)  # the same process, silent since
    said = heartbeat_check(settings=settings, now=now)
    assert not said.startswith("ok")
    assert "last sweep is 151 s old (sweeper@ops-host:4242; it sweeps every 60 s)" in said


def test_a_recent_error_is_shown_next_to_a_fresh_sweep_an_old_one_is_not(tmp_path: Path) -> None:
    settings = _service_settings(tmp_path)
    stamp = utc_now()
    recent = {"at": (stamp - timedelta(seconds=30)).isoformat(timespec="seconds"), "what": "sweep failed: X"}
    now = _beat(settings, age=2, detail={"error": recent})
    assert heartbeat_check(settings=settings, now=now).endswith(
        f"; error at {recent['at']}: sweep failed: X)"
    )
    old = {"at": (stamp - timedelta(seconds=heartbeat_limit(settings) + 30)).isoformat(), "what": "gone"}
    now = _beat(settings, age=2, detail={"error": old})
    assert heartbeat_check(settings=settings, now=now) == "ok (swept 2 s ago by sweeper@ops-host:4242)"


def test_embedded_mode_has_no_sweeper_and_health_says_why() -> None:
    embedded = check_health(settings=Settings())
    assert embedded.checks["sweeper"].startswith("ok (embedded mode: no sweeper; `finagent recover`")
    assert "sweeper" not in embedded.failing


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class _Marker:
    """The broker marker as :class:`apps.sweeper.BrokerEpoch` answers (``lost``): here a
    script of answers, since the real one needs a Redis (tests/integration/test_sweeper.py)."""

    def __init__(self, answers: list[bool]) -> None:
        self.answers = answers

    def lost(self) -> bool:
        return self.answers.pop(0) if self.answers else False

    def close(self) -> None:
        pass


def test_the_loop_sweeps_on_time_retries_a_lost_message_sweep_and_beats_only_after_success(
    tmp_path: Path,
) -> None:
    settings = _service_settings(tmp_path)
    clock = _Clock()
    calls: list[str] = []
    lost_outcomes: list[object] = [OSError("database away"), []]
    recovered = Recovery("a1", "AAPL", "queued", "research", None, 1, Action.REDRIVE, "re-driven")

    def lost() -> list[Recovery]:
        calls.append("lost")
        outcome = lost_outcomes.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return [recovered]

    def lease() -> list[Recovery]:
        calls.append("lease")
        return []

    sweeper = Sweeper(
        settings=settings,
        clock=clock,
        lease_sweep=lease,
        lost_sweep=lost,
        epoch=_Marker([False, True]),
    )

    def beat_at() -> object:
        row = heartbeat_repo.latest(
            engine=get_engine(settings.service.effective_database_url), kind=HEARTBEAT_KIND
        )
        return row and row["beat_at"]

    # at start: a lease sweep at once, then a heartbeat; the next step is due within the probe
    assert sweeper.step() == 5.0 and calls == ["lease"]
    first = beat_at()
    assert first is not None
    # the broker lost its messages; the re-drive fails (database away): no heartbeat, retried
    clock.now += 5
    sweeper.step()
    assert calls == ["lease", "lost"] and beat_at() == first
    error = sweeper.detail["error"]
    assert error["what"] == "re-drive of lost messages failed (tried again): OSError: database away"
    clock.now += 5
    sweeper.step()
    assert calls == ["lease", "lost", "lost"] and beat_at() != first
    row = heartbeat_repo.latest(
        engine=get_engine(settings.service.effective_database_url), kind=HEARTBEAT_KIND
    )
    assert row is not None and row["detail"]["last_lost_sweep"]["redriven"] == 1
    # /health shows a recent error next to the sweep that worked after it
    said = heartbeat_check(settings=settings, now=row["beat_at"])
    assert said.startswith("ok (swept 0 s ago") and f"error at {error['at']}: re-drive of lost" in said
    # nothing lost any more; the lease sweep comes again after sweep_seconds
    clock.now += 5
    sweeper.step()
    assert calls == ["lease", "lost", "lost"]
    clock.now = 1000.0 + settings.durability.sweep_seconds
    sweeper.step()
    assert calls == ["lease", "lost", "lost", "lease"]
