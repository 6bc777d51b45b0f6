"""Online, a ticker's splits come from the provider's own split history (yfinance's
``Ticker.splits``), not the hand-kept table, so a past ``as_of`` of NVDA (not in the table) is
put on the shares traded then.

Through the real yfinance code path against a local stand-in for Yahoo that serves a real
recorded chart response (``tests/agents/providers/fixtures/yahoo_chart_NVDA_2021-02-01_2022-01-31.json``,
provenance in that folder's README): NVDA's daily bars of 2021-02 .. 2022-01 and, among its
events, the 4-for-1 split of 2021-07-20. Yahoo's closes there are split-adjusted (no drop on
2021-07-20), so a window ending before the split is multiplied by 4. The recording was made in
2025, after NVDA's 10-for-1 split of 2024-06-10, which is outside its range and not among its
events: the numbers below are the recording's, times the one split it reports.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import date
from fractions import Fraction
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yfinance as yf
from yfinance import cache as yf_cache

from agents.data.fundamentals.share_basis import ShareBasis, source_share_basis
from agents.data.market.base import SplitEvent, SplitHistorySource
from agents.data.market.yfinance_provider import YFinanceProvider
from agents.tools.bars import fetch_bars, share_basis_of
from core.settings import get_settings
from tests.support.yahoo_http import QuietHandler, reset_yfinance, session_for, start_server

FIXTURES = Path(__file__).resolve().parents[1] / "providers" / "fixtures"
RECORDING = FIXTURES / "yahoo_chart_NVDA_2021-02-01_2022-01-31.json"
CHART: dict[str, Any] = json.loads(RECORDING.read_text(encoding="utf-8"))["response"]["bodyJson"]
#: NVDA's recorded close of 2021-06-30 (on the shares of the recording day).
RECORDED_CLOSE_2021_06_30 = 20.002500534057617

pytestmark = [
    pytest.mark.usefixtures("clean_settings"),
    # yfinance 1.7 calls pandas with inplace=True, deprecated in pandas 3.1: not ours to fix.
    pytest.mark.filterwarnings("ignore:The inplace keyword:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore::pandas.errors.Pandas4Warning"),
]


class _State:
    """What the stand-in answers: the recording, or an HTTP status for every chart request."""

    def __init__(self) -> None:
        self.status: int | None = None
        self.chart_requests: list[str] = []


@pytest.fixture
def yahoo(tmp_path: Path) -> Iterator[tuple[_State, YFinanceProvider]]:
    state = _State()

    class Handler(QuietHandler):
        def do_GET(self) -> None:
            if self.path.startswith("/v1/test/getcrumb"):
                self._send(200, b"local-test-crumb", "text/plain")
            elif self.path.startswith("/v8/finance/chart/"):
                state.chart_requests.append(self.path)
                if state.status is not None:
                    self._send(state.status, b"<html><body>Internal Server Error</body></html>", "text/html")
                elif self.path.split("?")[0].endswith("/NVDA"):
                    self._json(200, CHART)
                else:
                    self._json(404, {"chart": {"result": None, "error": {"code": "Not Found"}}})
            else:  # the cookie pages
                self._send(200, b"<html><body></body></html>", "text/html")

    previous_cache = yf_cache._TzDBManager.get_location()
    yf.set_tz_cache_location(str(tmp_path / "yfinance-cache"))
    server = start_server(Handler)
    try:
        yield state, YFinanceProvider(timeout=2.0, session=session_for(server.server_address[1]))
    finally:
        server.shutdown()
        server.server_close()
        reset_yfinance()
        yf.set_tz_cache_location(previous_cache)


def test_the_provider_reports_the_split_history_yahoo_sends(yahoo: tuple[_State, YFinanceProvider]) -> None:
    state, provider = yahoo
    assert isinstance(provider, SplitHistorySource)
    assert provider.split_events(symbol="NVDA") == (SplitEvent(date(2021, 7, 20), Fraction(4)),)
    # through yfinance's Ticker.splits: a chart request for the whole history with its events
    # (after yfinance's own time-zone lookup)
    assert any("events=" in path and "splits" in path for path in state.chart_requests)
    asked = len(state.chart_requests)
    provider.split_events(symbol="NVDA")
    assert len(state.chart_requests) == asked  # kept for the process (SPLITS_TTL_SECONDS)
    assert "NVDA" in provider.split_source_ref(symbol="NVDA")


def test_a_window_before_the_split_is_on_the_shares_traded_then(
    yahoo: tuple[_State, YFinanceProvider],
) -> None:
    _, provider = yahoo
    bars = fetch_bars(
        provider=provider,
        symbol="NVDA",
        start=date(2021, 6, 1),
        end=date(2021, 6, 30),
        settings=get_settings(),
    )
    basis = share_basis_of(bars)
    assert basis.factor == Fraction(4) and basis.reason is None
    assert [(s.ex_date, s.ratio) for s in basis.undone] == [(date(2021, 7, 20), Fraction(4))]
    assert "Yahoo Finance split history NVDA" in basis.undone[0].source
    assert bars.loc[pd.Timestamp("2021-06-30"), "close"] == pytest.approx(4 * RECORDED_CLOSE_2021_06_30)
    # a window from the ex-date on is as Yahoo sends it
    after = fetch_bars(
        provider=provider,
        symbol="NVDA",
        start=date(2021, 7, 20),
        end=date(2021, 8, 2),
        settings=get_settings(),
    )
    assert share_basis_of(after) == ShareBasis()


def test_a_split_history_that_cannot_be_read_leaves_the_basis_unknown(
    yahoo: tuple[_State, YFinanceProvider],
) -> None:
    state, provider = yahoo
    state.status = 500
    basis = source_share_basis(provider, "NVDA", date(2021, 6, 30), last=date(2022, 1, 28))
    assert basis.factor == 1
    assert basis.reason is not None and "cannot read NVDA's split history" in basis.reason
