"""The backtest grid: steps, trading-day mapping on real bars, deterministic ids, validation."""

from __future__ import annotations

from datetime import date, timedelta
from pathlib import Path

import pytest

from agents.data.market.csv_folder import CsvFolderProvider
from apps.backtest import (
    BacktestError,
    _check,
    analysis_id_for,
    grid_dates,
    map_to_trading_days,
    parse_every,
)


def test_every_and_grid_dates() -> None:
    assert parse_every("5d") == timedelta(days=5)
    assert parse_every("2W") == timedelta(days=14)
    for bad in ("5", "0d", "1m", "d5", ""):
        with pytest.raises(BacktestError):
            parse_every(bad)
    assert grid_dates(start=date(2016, 1, 1), end=date(2016, 1, 15), every=timedelta(days=7)) == [
        date(2016, 1, 1),
        date(2016, 1, 8),
        date(2016, 1, 15),
    ]
    with pytest.raises(BacktestError):
        grid_dates(start=date(2016, 2, 1), end=date(2016, 1, 1), every=timedelta(days=1))


@pytest.mark.shared_data
def test_non_trading_days_map_to_the_previous_trading_day_of_the_data(stocknet_dir: Path) -> None:
    provider = CsvFolderProvider(data_dir=stocknet_dir)
    dates = [
        date(2015, 7, 3),  # Independence Day observed: NYSE closed → Thursday 07-02
        date(2015, 7, 4),  # Saturday → 07-02 as well: dropped, one analysis per trading day
        date(2015, 7, 6),  # a Monday, a trading day
        date(2012, 1, 3),  # before the folder's first bar (2012-09-04)
        date(2017, 12, 29),  # after its last (2017-09-01)
    ]
    points = map_to_trading_days(provider=provider, symbol="AAPL", dates=dates)
    mapped = [(p.requested, p.as_of) for p in points if p.as_of]
    assert mapped == [(date(2015, 7, 3), date(2015, 7, 2)), (date(2015, 7, 6), date(2015, 7, 6))]
    assert [p.moved for p in points if p.as_of] == [True, False]
    errors = {p.requested: p.error for p in points if p.as_of is None}
    assert "on or before" in errors[date(2012, 1, 3)] and "after the data" in errors[date(2017, 12, 29)]
    unknown = map_to_trading_days(provider=provider, symbol="ZZZZ", dates=[date(2015, 7, 6)])
    assert unknown[0].as_of is None and "INVALID_SYMBOL" in (unknown[0].error or "")


def test_ids_are_deterministic_per_attempt_and_requests_are_validated() -> None:
    a = analysis_id_for(name="bt", symbol="AAPL", as_of=date(2015, 7, 2), attempt=0)
    assert a == analysis_id_for(name="bt", symbol="AAPL", as_of=date(2015, 7, 2), attempt=0)
    assert a != analysis_id_for(name="bt", symbol="AAPL", as_of=date(2015, 7, 2), attempt=1)
    ok = {"start": date(2015, 1, 1), "end": date(2015, 2, 1), "every": "1w", "analysis_type": "composite"}
    assert _check(name="bt-1", symbols=["aapl", "AAPL", "msft"], **ok)[0] == ["AAPL", "MSFT"]
    for bad in (
        {"name": "bad name", "symbols": ["AAPL"]},
        {"name": "bt", "symbols": []},
        {"name": "bt", "symbols": ["AAPL;DROP"]},
    ):
        with pytest.raises(BacktestError):
            _check(**bad, **ok)  # type: ignore[arg-type]
    with pytest.raises(BacktestError, match="at most"):
        _check(
            name="bt",
            symbols=[a + b for a in "ABCDEFGHIJ" for b in "KLMNOPQRST"],
            start=date(2010, 1, 1),
            end=date(2017, 1, 1),
            every="1d",
            analysis_type="composite",
        )
