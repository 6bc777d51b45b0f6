"""The input rules of the services, shared by the CLI, the beat and the HTTP gateway: tickers
as sent, cron schedules (every schedule the stated pattern allows is one Celery parses), IANA
time zones, dates (``YYYY-MM-DD`` from 1900-01-01; not in the future where a date starts
work), and a watchlist run refused for its date before any row is written."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from apps import backtest, watchlists
from core.dates import DateRuleError, check_date, parse_iso_date
from core.settings import Settings
from core.tickers import strict_ticker
from db.engine import get_engine
from db.migrate import upgrade
from pipeline.service import InvalidRequestError, resolve_as_of

PROPERTY = settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))


def test_a_ticker_with_junk_names_the_characters_and_spaces_are_not_stripped() -> None:
    with pytest.raises(ValueError, match="';'"):
        strict_ticker("AAPL;DROP")
    with pytest.raises(ValueError, match="Invalid ticker format"):
        strict_ticker(" AAPL")
    assert strict_ticker("brk.b") == "BRK.B"


@PROPERTY
@given(st.from_regex(watchlists.SCHEDULE_PATTERN, fullmatch=True))
def test_every_schedule_the_pattern_allows_is_one_celery_parses_and_fires(schedule: str) -> None:
    if len(schedule) > watchlists.SCHEDULE_MAX_LENGTH:
        return
    assert watchlists.check_schedule(schedule) == schedule
    # the beat's computation over it does not fail (it may find no fire time: 31 February)
    watchlists.last_fire_time(schedule=schedule, timezone="UTC", now=datetime(2026, 11, 26, tzinfo=UTC))


@pytest.mark.parametrize(
    "schedule", ["30 21 * * 1-5", "0 8 * * mon-fri", "*/15 9-16 * * 1-5", "0 0 1 */3 *", "5 4 * * sun"]
)
def test_usual_schedules_match(schedule: str) -> None:
    assert watchlists.check_schedule(schedule) == schedule


@pytest.mark.parametrize(
    "schedule",
    [
        "30 21 * *",
        "60 21 * * *",
        "30 24 * * *",
        "0 0 0 * *",
        "*/0 * * * *",
        "0,,1 * * * *",
        "-1 * * * *",
        "5/2 * * * *",
        "30  21 * * 1-5",
        "0 0 * * 7",
    ],
)
def test_malformed_schedules_are_refused_before_celery_sees_them(schedule: str) -> None:
    with pytest.raises(watchlists.WatchlistError, match="5 cron fields"):
        watchlists.check_schedule(schedule)


def test_a_stored_schedule_celery_cannot_parse_is_a_watchlist_error() -> None:
    # "-1" made celery raise ParseException, which is no ValueError: it escaped as a 500
    with pytest.raises(watchlists.WatchlistError, match="schedule"):
        watchlists.parse_schedule("-1 * * * *")


def test_the_backtest_name_rule_is_the_watchlist_name_rule() -> None:
    assert backtest.NAME_RE.pattern == watchlists.NAME_PATTERN


@pytest.mark.parametrize(
    "value",
    [
        0,
        20120629,
        "0",
        "20120629",
        "2012-06-29T00:00:00",
        "0001-01-01",
        "1899-12-31",
        "2013-02-30",
        " 2012-06-29",
        "2012-6-29",
        True,
        None,
        1.5,
    ],
)
def test_dates_in_other_forms_or_before_1900_are_refused(value: object) -> None:
    with pytest.raises(DateRuleError):
        parse_iso_date(value, field="run_date")


def test_the_future_is_refused_only_where_a_today_is_given() -> None:
    assert check_date(date(2999, 1, 1), field="since") == date(2999, 1, 1)
    with pytest.raises(DateRuleError, match=r"as_of 2999-01-01 is in the future \(today is 2026-11-26 UTC\)"):
        check_date(date(2999, 1, 1), field="as_of", today=date(2026, 11, 26))
    with pytest.raises(DateRuleError, match="before 1900-01-01"):
        check_date(date(1, 1, 1), field="as_of")


def test_a_run_date_is_checked_against_today_in_the_watchlists_zone() -> None:
    # 2026-11-26 12:00 UTC is already 2026-11-27 in Kiritimati (UTC+14), still the 26th in New York
    now = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)
    assert watchlists.check_run_date(date(2026, 11, 27), timezone="Pacific/Kiritimati", now=now)
    with pytest.raises(watchlists.WatchlistError, match="run_date 2026-11-27 is in the future"):
        watchlists.check_run_date(date(2026, 11, 27), timezone="America/New_York", now=now)


def test_an_as_of_before_1900_is_refused_before_any_date_arithmetic() -> None:
    # 0001-01-01 - 14 days raised OverflowError (a 500) before the rule existed
    from agents.data.routing import get_provider

    provider = get_provider(settings=Settings())
    with pytest.raises(InvalidRequestError, match="as_of 0001-01-01 is before 1900-01-01"):
        resolve_as_of(provider=provider, symbol="AAPL", as_of=date(1, 1, 1))


@pytest.fixture
def sqlite_settings(tmp_path: Path) -> Settings:
    """Settings of a migrated SQLite file with watchlist ``wl`` (zone America/New_York)."""
    url = f"sqlite:///{tmp_path / 'rules.sqlite3'}"
    upgrade(url=url)
    settings = Settings(service_database_url=url, service_state_dir=tmp_path)
    watchlists.create_watchlist(name="wl", tickers=["AAPL"], timezone="America/New_York", settings=settings)
    return settings


@pytest.mark.parametrize("run_date", [date(9999, 12, 31), date(1, 1, 1), date(1899, 12, 31)])
def test_a_refused_run_date_leaves_no_run_row(sqlite_settings: Settings, run_date: date) -> None:
    with pytest.raises(watchlists.WatchlistError, match=f"run_date {run_date.isoformat()}"):
        watchlists.start_run(name="wl", run_date=run_date, trigger="manual", settings=sqlite_settings)
    with pytest.raises(watchlists.WatchlistError, match="run_date"):
        watchlists.run_date_for(name="wl", run_date=run_date, settings=sqlite_settings)
    with get_engine(sqlite_settings.service.effective_database_url).connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM watchlist_runs")).scalar_one() == 0


def test_new_watchlists_follow_the_schedule_and_zone_rules(sqlite_settings: Settings) -> None:
    with pytest.raises(watchlists.WatchlistError, match="5 cron fields"):
        watchlists.create_watchlist(
            name="a", tickers=["AAPL"], schedule="-1 * * * *", settings=sqlite_settings
        )
    with pytest.raises(watchlists.WatchlistError, match="unknown time zone"):
        watchlists.create_watchlist(
            name="a", tickers=["AAPL"], timezone="A" * 10_000, settings=sqlite_settings
        )
    with pytest.raises(watchlists.WatchlistError, match="max_iterations"):
        watchlists.create_watchlist(
            name="a", tickers=["AAPL"], options={"max_iterations": True}, settings=sqlite_settings
        )
    with pytest.raises(watchlists.WatchlistError, match="unknown time zone 'localtime'"):
        watchlists.update_watchlist(name="wl", timezone="localtime", settings=sqlite_settings)


def test_a_beat_run_keeps_the_schedulers_own_date_and_a_repeat_finds_it(sqlite_settings: Settings) -> None:
    # beat's date comes from the cron fire time of the tick's clock (a tick may carry a
    # simulated now, a beat host's clock may run ahead); only a new run a person asks for is
    # checked against today
    # a ticker the data lacks: the run is made, its analysis refused, nothing is enqueued
    watchlists.create_watchlist(name="nodata", tickers=["ZZZZ"], settings=sqlite_settings)
    later = datetime.now(UTC).date() + timedelta(days=2)  # after today in New York
    with pytest.raises(watchlists.WatchlistError, match="in the future"):
        watchlists.start_run(name="nodata", run_date=later, trigger="api", settings=sqlite_settings)
    started = watchlists.start_run(
        name="nodata", run_date=later, trigger="beat", schedule_finalize=False, settings=sqlite_settings
    )
    assert started.created and started.run["run_date"] == later and list(started.refused) == ["ZZZZ"]
    # a repeat of that run is never refused: it returns the run
    again = watchlists.start_run(
        name="nodata", run_date=later, trigger="manual", schedule_finalize=False, settings=sqlite_settings
    )
    assert not again.created and again.run["id"] == started.run["id"]
    assert watchlists.run_date_for(name="nodata", run_date=later, settings=sqlite_settings) == later
