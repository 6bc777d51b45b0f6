"""Which later splits a source divided out of its prices, on real bars: the embedded data (as
traded), stocknet's CSVs (split-adjusted to 2017), and a series whose basis cannot be told."""

from __future__ import annotations

from datetime import date
from fractions import Fraction

import pandas as pd
import pytest

from agents.data.fundamentals.share_basis import ShareBasis, rebase, source_share_basis
from agents.data.market.embedded import EmbeddedProvider
from agents.tools.bars import fetch_bars, share_basis_of
from core.settings import get_settings
from tests.conftest import STOCKNET_DIR


def test_as_traded_bars_need_nothing() -> None:
    # the embedded Close shows AAPL's 2-for-1 of 2005-02-28 (88.99 -> 44.86): nothing to undo
    basis = source_share_basis(EmbeddedProvider(), "AAPL", date(2005, 2, 1))
    assert basis == ShareBasis()
    # a split after the source's last bar (2013-03-01) cannot be in its prices
    assert source_share_basis(EmbeddedProvider(), "AAPL", date(2012, 6, 29)) == ShareBasis()
    # a symbol the split table does not list is served as the source gives it
    assert source_share_basis(EmbeddedProvider(), "ZZZZ", date(2012, 6, 29)) == ShareBasis()


def test_stocknet_divided_out_the_2014_split() -> None:
    if not (STOCKNET_DIR / "AAPL.csv").is_file():
        pytest.skip(f"stocknet CSVs not found at {STOCKNET_DIR} (only present in the workplace)")
    from agents.data.market.csv_folder import CsvFolderProvider

    provider = CsvFolderProvider(data_dir=STOCKNET_DIR)
    before = source_share_basis(provider, "AAPL", date(2014, 6, 6))
    assert before.factor == Fraction(7) and [s.ex_date for s in before.undone] == [date(2014, 6, 9)]
    assert before.reason is None
    # from the ex-date on, the file is on the traded basis (the 2020 split is after its last bar)
    assert source_share_basis(provider, "AAPL", date(2014, 6, 9)) == ShareBasis()
    # GOOG before 2014-04-03 was the class A share: the class C dividend halved it in the file
    goog = source_share_basis(provider, "GOOG", date(2014, 3, 7))
    assert goog.factor == Fraction(2)
    bars = fetch_bars(
        provider=provider,
        symbol="AAPL",
        start=date(2014, 6, 2),
        end=date(2014, 6, 6),
        settings=get_settings(),
    )
    raw = provider.bars(symbol="AAPL", start=date(2014, 6, 2), end=date(2014, 6, 6))
    assert share_basis_of(bars).factor == Fraction(7)
    assert bars["close"].iloc[-1] == pytest.approx(645.57, abs=0.01)  # Lean's raw close that day
    assert (bars["volume"] * 7).to_numpy() == pytest.approx(raw["volume"].to_numpy())
    # one factor for the window: every close-to-close return is the file's
    assert bars["close"].pct_change().dropna().to_numpy() == pytest.approx(
        raw["close"].pct_change().dropna().to_numpy()
    )


class _Jumpy(EmbeddedProvider):
    """Embedded MSFT bars with a 3x drop written in at AAPL's 2014 ex-date: neither as traded (7x)
    nor divided out (1x)."""

    def latest_date(self, *, symbol: str) -> date:
        return date(2015, 1, 2)

    def bars(self, *, symbol: str, start: date | None, end: date) -> pd.DataFrame:
        days = pd.DatetimeIndex(pd.bdate_range("2014-05-30", "2014-06-13"), name="date")
        close = [300.0 if d < pd.Timestamp("2014-06-09") else 100.0 for d in days]
        frame = pd.DataFrame(
            {"open": close, "high": close, "low": close, "close": close, "adj_close": close, "volume": 1e6},
            index=days,
        )
        return frame[(frame.index >= pd.Timestamp(start or days[0])) & (frame.index <= pd.Timestamp(end))]


def test_a_basis_that_cannot_be_told_is_said_and_left_alone() -> None:
    basis = source_share_basis(_Jumpy(), "AAPL", date(2014, 6, 2))
    assert basis.factor == 1 and basis.reason is not None and "cannot be told" in basis.reason
    frame = _Jumpy().bars(symbol="AAPL", start=None, end=date(2014, 6, 6))
    assert rebase(frame, basis) is frame
