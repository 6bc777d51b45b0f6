"""Offline option chains: the three real formats, point in time, and the AAPL 7:1 split days."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest

from agents.data.options.chains import ChainNotFoundError, find_chain, occ_symbol


def test_lean_goog_chain_of_christmas_eve_2015(options_dir: Path) -> None:
    chain = find_chain(options_dir=options_dir, symbol="GOOG", as_of=date(2015, 12, 24))
    assert chain.source == "lean_eod" and chain.quote_date == date(2015, 12, 24)
    assert chain.underlying_price == pytest.approx(748.40)  # README: underlying close 748.40
    by = chain.by_contract()
    # README: the 2016-01-15 750 call/put mids are 12.35 / 13.90 (put-call parity checked there)
    assert by[occ_symbol("GOOG", date(2016, 1, 15), "put", 750)].mid == pytest.approx(13.90)
    assert by[occ_symbol("GOOG", date(2016, 1, 15), "call", 750)].mid == pytest.approx(12.35)
    # the file's row 2016-01-29 put 700: bid_close 9.7, ask_close 11.6, open interest 59
    put700 = by["GOOG160129P00700000"]
    assert (put700.bid, put700.ask, put700.open_interest) == (9.7, 11.6, 59)
    # Lean's own universe values are attached (universes/20151224.csv: 0.9109100, -0.3515373)
    assert put700.source_iv == pytest.approx(0.9109100) and put700.source_delta == pytest.approx(-0.3515373)
    assert all(c.expiry >= chain.quote_date for c in chain.contracts)


def test_a_chain_quoted_after_as_of_is_never_used(options_dir: Path) -> None:
    with pytest.raises(ChainNotFoundError, match="2015-12-23, 2015-12-24"):
        find_chain(options_dir=options_dir, symbol="GOOG", as_of=date(2015, 12, 22))
    # 12-23 asks get the 12-23 file, not the later 12-24 one
    chain = find_chain(options_dir=options_dir, symbol="GOOG", as_of=date(2015, 12, 23))
    assert chain.quote_date == date(2015, 12, 23) and chain.underlying_price == pytest.approx(750.31)


def test_unknown_symbol_has_no_chain(options_dir: Path) -> None:
    with pytest.raises(ChainNotFoundError, match="no snapshot of this symbol"):
        find_chain(options_dir=options_dir, symbol="MSFT", as_of=date(2015, 12, 24))


def test_aapl_split_days_do_not_mix_pre_and_post_split_strikes(options_dir: Path) -> None:
    before = find_chain(options_dir=options_dir, symbol="AAPL", as_of=date(2014, 6, 6))
    after = find_chain(options_dir=options_dir, symbol="AAPL", as_of=date(2014, 6, 9))
    assert before.underlying_price == pytest.approx(645.57) and after.underlying_price == pytest.approx(93.70)
    # pre-split strikes are quoted around 645; post-split ones around 93.70 = 645.57 / 7 (less a day's move)
    assert min(c.strike for c in before.puts()) >= 190
    assert max(c.strike for c in after.puts()) <= 200
    assert {c.strike for c in after.contracts} & {650.0, 645.0, 600.0} == set()
    # README: 92.86 = 650/7 is a post-split strike quoted on 2014-06-09; expired 06-06 rows are gone
    assert any(abs(c.strike - 92.86) < 1e-9 for c in after.contracts)
    assert all(c.expiry >= date(2014, 6, 9) for c in after.contracts)


def test_cboe_spy_chain(options_dir: Path) -> None:
    chain = find_chain(options_dir=options_dir, symbol="SPY", as_of=date(2025, 5, 16))
    assert chain.source == "cboe_quotedata" and chain.underlying_price == pytest.approx(589.25)
    q = chain.by_contract()["SPY250530P00555000"]
    # file row: Fri May 30 2025 ... 555.00, SPY250530P00555000, 0.41, -0.445, 0.4, 0.41, 4268, 0.2062, -0.0425
    assert (q.bid, q.ask, q.volume, q.open_interest) == (0.4, 0.41, 4268, 29624)
    assert q.source_iv == pytest.approx(0.2062) and q.source_delta == pytest.approx(-0.0425)
    assert {c.expiry for c in chain.contracts} >= {date(2025, 5, 16), date(2025, 5, 30)}


def test_yfinance_capture_has_no_underlying(options_dir: Path) -> None:
    chain = find_chain(options_dir=options_dir, symbol="GOOGL", as_of=date(2026, 1, 1))
    assert chain.source == "yfinance_capture" and chain.underlying_price is None
    assert {c.expiry for c in chain.contracts} == {date(2026, 1, 9)}
    assert all(c.source_iv is not None for c in chain.contracts)


def test_missing_folder_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ChainNotFoundError, match="does not exist"):
        find_chain(options_dir=tmp_path / "nowhere", symbol="GOOG", as_of=date(2015, 12, 24))
