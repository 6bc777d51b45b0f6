"""The bar cache of ``agents.tools.bars.fetch_bars`` (the remote path with Redis is in
``tests/agents/providers/test_shared.py``)."""

from __future__ import annotations

import weakref
from datetime import date

import pandas as pd
import pytest

from agents.data.market.embedded import EmbeddedProvider
from agents.tools import bars
from agents.tools.bars import iso_dates
from core.settings import get_settings


def test_bar_cache_never_serves_another_providers_frame() -> None:
    """A new provider may reuse a collected one's id(): the cache checks identity on a hit."""

    class Marked(EmbeddedProvider):
        def bars(self, **kw):  # type: ignore[no-untyped-def,override]
            frame = super().bars(**kw).copy()
            frame.attrs["marked"] = True
            return frame

    old, new = EmbeddedProvider(), Marked()
    window = ("IBM", date(2012, 1, 3), date(2012, 3, 30))
    stale = bars.fetch_bars(
        provider=old, symbol=window[0], start=window[1], end=window[2], settings=get_settings()
    )
    # simulate id reuse: an entry under the new provider's id whose owner is another object
    with bars._cache_lock:
        bars._cache[(id(new), *window)] = (weakref.ref(old), stale)
    fresh = bars.fetch_bars(
        provider=new, symbol=window[0], start=window[1], end=window[2], settings=get_settings()
    )
    assert fresh.attrs.get("marked") is True


@pytest.mark.parametrize("tz", [None, "UTC", "America/New_York", "Asia/Tokyo"])
def test_iso_dates_are_each_bars_own_calendar_day(tz: str | None) -> None:
    # a New York close stamped at midnight local time is 05:00 UTC: its day is the local one
    index = pd.DatetimeIndex(["2012-06-28 00:00", "2012-06-29 23:30", "2013-01-02 00:00"]).tz_localize(tz)
    assert iso_dates(index) == ["2012-06-28", "2012-06-29", "2013-01-02"]
    assert iso_dates(index[:0]) == []


def test_iso_dates_before_1970_and_late_in_the_day() -> None:
    index = pd.DatetimeIndex(["1969-12-31 23:30", "1962-01-02 10:00", "2012-06-29 23:59:59"])
    assert iso_dates(index) == ["1969-12-31", "1962-01-02", "2012-06-29"]
    assert iso_dates(index) == ["1969-12-31", "1962-01-02", "2012-06-29"]  # from the day cache


def test_iso_dates_of_an_object_index_of_timestamps() -> None:
    index = pd.Index([pd.Timestamp("2012-06-28"), pd.Timestamp("2012-06-29")], dtype=object)
    assert iso_dates(index) == ["2012-06-28", "2012-06-29"]


def test_a_window_is_made_once_and_its_storage_basis_is_the_sources() -> None:
    from agents.data.market.base import point_in_time_adj_close
    from agents.tools.registry import ToolContext

    provider = EmbeddedProvider()
    ctx = ToolContext(settings=get_settings(), as_of=date(2012, 6, 29), provider=provider)
    first, basis = bars.history_window_basis(ctx=ctx, symbol="AAPL", period="6mo", interval="1d")
    assert bars.history_window(ctx=ctx, symbol="AAPL", period="6mo", interval="1d") is first
    # the window is the source's bars with the point-in-time adjusted close, and the basis
    # gives that close back from the source's own values
    source = provider.bars(symbol="AAPL", start=date(2011, 12, 29), end=date(2012, 6, 29))
    pd.testing.assert_frame_equal(first, point_in_time_adj_close(source))
    assert basis is not None
    assert basis[0] == source["adj_close"].tolist()
    assert [v * basis[1] for v in basis[0]] == first["adj_close"].tolist()
    # the last five sessions: their own window, with the basis of those bars only
    tail, tail_basis = bars.history_window_basis(ctx=ctx, symbol="AAPL", period="5d", interval="1d")
    assert tail.index.equals(first.index[-5:]) and tail_basis == (basis[0][-5:], basis[1])
    # another provider object never gets this one's window (an id may be reused)
    other = ToolContext(settings=get_settings(), as_of=date(2012, 6, 29), provider=EmbeddedProvider())
    assert bars.history_window(ctx=other, symbol="AAPL", period="6mo", interval="1d") is not first
    # a window is not kept past the source frame it came from: fetched again, it is made again
    with bars._cache_lock:
        bars._cache.clear()
    again = bars.history_window(ctx=ctx, symbol="AAPL", period="6mo", interval="1d")
    assert again is not first
    pd.testing.assert_frame_equal(again, first)
    # nor does another date or period
    later = ToolContext(settings=get_settings(), as_of=date(2012, 7, 2), provider=provider)
    assert (
        bars.history_window(ctx=later, symbol="AAPL", period="6mo", interval="1d").index[-1] > first.index[-1]
    )
