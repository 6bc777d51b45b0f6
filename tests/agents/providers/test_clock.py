"""The market clock: offline data's "today" is its last bar, online data's the last completed
NYSE session (hand-checked against the NYSE 2026 schedule: Thanksgiving Thursday 2026-11-26
closed, Friday 2026-11-27 closes early at 13:00 New York = 18:00 UTC)."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest

from agents.data.market.clock import is_offline, last_completed_session, market_today
from agents.data.market.csv_folder import CsvFolderProvider
from agents.data.market.embedded import EmbeddedProvider
from agents.data.market.yfinance_provider import YFinanceProvider
from tests.conftest import SHARED_DATA

STOCKNET = SHARED_DATA / "ohlcv" / "stocknet"


@pytest.mark.parametrize(
    ("now", "session"),
    [
        # Monday 2026-11-23 15:00 New York (before the 16:00 close) → Friday 2026-11-20
        (datetime(2026, 11, 23, 20, 0, tzinfo=UTC), date(2026, 11, 20)),
        # the same Monday at 16:30 New York → that Monday
        (datetime(2026, 11, 23, 21, 30, tzinfo=UTC), date(2026, 11, 23)),
        # Sunday → Friday
        (datetime(2026, 11, 22, 12, 0, tzinfo=UTC), date(2026, 11, 20)),
        # Thanksgiving (closed) → Wednesday 2026-11-25
        (datetime(2026, 11, 26, 23, 0, tzinfo=UTC), date(2026, 11, 25)),
        # the day after, one minute before and after its 13:00 early close
        (datetime(2026, 11, 27, 17, 59, tzinfo=UTC), date(2026, 11, 25)),
        (datetime(2026, 11, 27, 18, 1, tzinfo=UTC), date(2026, 11, 27)),
    ],
)
def test_last_completed_session(now: datetime, session: date) -> None:
    assert last_completed_session(now) == session


def test_a_naive_clock_is_refused() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        last_completed_session(datetime(2026, 11, 23, 12, 0))


def test_embedded_today_is_the_datas_last_day() -> None:
    provider = EmbeddedProvider()
    assert is_offline(provider)
    # bokeh_sampledata's stocks end 2013-03-01 for all five symbols (data README)
    clock = market_today(provider=provider)
    assert (clock.day, clock.basis) == (date(2013, 3, 1), "data_end")
    assert clock.describe() == "data ends 2013-03-01 (embedded)"
    # an unknown symbol is skipped (the tool reports it), the known one decides
    clock = market_today(provider=provider, symbols=["ZZZZ", "FB"])
    assert clock.day == date(2013, 3, 1) and clock.symbols == ("FB",)


def test_csv_today_is_the_folders_last_day() -> None:
    if not STOCKNET.is_dir():
        pytest.skip(f"stocknet CSVs not found at {STOCKNET} (only present in the workplace)")
    clock = market_today(provider=CsvFolderProvider(data_dir=STOCKNET), symbols=["AAPL"])
    assert clock.day == date(2017, 9, 1)  # AAPL.csv's last row: 2017-09-01
    assert clock.as_dict()["note"] == "data ends 2017-09-01 (csv)"


def test_online_today_is_the_last_completed_session() -> None:
    provider = YFinanceProvider(timeout=1.0)
    assert not is_offline(provider)
    clock = market_today(provider=provider, symbols=["AAPL"], now=datetime(2026, 11, 23, 20, 0, tzinfo=UTC))
    assert (clock.day, clock.basis) == (date(2026, 11, 20), "exchange_session")
    assert clock.describe() == "last completed XNYS session 2026-11-20 (yfinance)"
