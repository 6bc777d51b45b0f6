"""``forecast_risk`` on real stocknet bars: no look-ahead, the walk-forward engine agrees with the
single forecast, earnings days leave the volatility estimate, bad input is refused, and the numbers
hang together (quantiles, ranges, probabilities, JSON)."""

from __future__ import annotations

import itertools
from datetime import date
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from agents.data.market.csv_folder import CsvFolderProvider
from agents.quant.risk import RiskForecast, RiskInputError, RiskSpec, forecast_risk
from agents.quant.risk.earnings import company_events, earnings_mask
from agents.quant.risk.engine import run_path
from agents.quant.risk.forecast import build_forecast
from agents.quant.risk.inputs import prepare_bars
from agents.quant.risk.touch import BGK_BETA, touch_from_cdf

pytestmark = pytest.mark.shared_data
AS_OF = date(2015, 7, 17)  # AAPL reports on 2015-07-21 after the close: inside the 5-session window


def _bars(stocknet_dir: Path, symbol: str) -> pd.DataFrame:
    return CsvFolderProvider(data_dir=stocknet_dir).parsed(symbol=symbol).frame


@pytest.fixture(scope="module")
def aapl(stocknet_dir: Path) -> pd.DataFrame:
    return _bars(stocknet_dir, "AAPL")


@pytest.fixture(scope="module")
def stocknet_dir() -> Path:  # module scope for the module fixtures (the shared one is per test)
    from tests.conftest import STOCKNET_DIR

    if not STOCKNET_DIR.is_dir():
        pytest.skip(f"shared market data not found at {STOCKNET_DIR} (only present in the workplace)")
    return STOCKNET_DIR


@pytest.fixture(scope="module")
def forecast(aapl: pd.DataFrame) -> RiskForecast:
    return forecast_risk(aapl, symbol="AAPL", as_of=AS_OF)


def test_no_look_ahead_data_after_as_of_changes_nothing(aapl: pd.DataFrame, forecast: RiskForecast) -> None:
    cut = aapl.loc[: pd.Timestamp(AS_OF)]
    assert forecast_risk(cut, symbol="AAPL", as_of=AS_OF) == forecast
    # and a wild future (every price after as_of tripled, ranges torn) changes nothing either
    wild = aapl.copy()
    later = wild.index > pd.Timestamp(AS_OF)
    wild.loc[later, ["open", "high", "low", "close", "adj_close"]] *= 3.0
    wild.loc[later, "high"] *= 1.5
    assert forecast_risk(wild, symbol="AAPL", as_of=AS_OF) == forecast


def test_no_look_ahead_with_the_default_and_the_other_models(aapl: pd.DataFrame) -> None:
    for volatility in ("ewma", "garch_t", "har_log"):
        spec = RiskSpec(volatility=volatility)
        cut = aapl.loc[: pd.Timestamp("2014-11-03")]
        a = forecast_risk(cut, symbol="AAPL", as_of=date(2014, 11, 3), spec=spec)
        b = forecast_risk(aapl, symbol="AAPL", as_of=date(2014, 11, 3), spec=spec)
        assert a == b, volatility


def test_walk_forward_engine_agrees_with_the_single_forecast_at_a_refit(aapl: pd.DataFrame) -> None:
    spec = RiskSpec()
    prepared = prepare_bars(aapl, as_of=date(2015, 12, 31), min_bars=60)
    start = int(np.searchsorted(prepared.dates, np.datetime64("2015-06-01")))
    origins = np.arange(start, start + 45)
    path = run_path(
        prepared, events=company_events("AAPL"), origins=origins, horizons=(1, 5, 20, 60), spec=spec
    )
    for i in (0, spec.refit_every, 2 * spec.refit_every):  # refit sessions
        as_of = pd.Timestamp(prepared.dates[origins[i]]).date()
        single = forecast_risk(aapl, symbol="AAPL", as_of=as_of, spec=spec)
        walked = build_forecast(path, i, symbol="AAPL", spec=spec, dates=prepared.dates)
        assert walked == single


def test_earnings_sessions_leave_the_volatility_estimate(aapl: pd.DataFrame) -> None:
    spec = RiskSpec(volatility="ewma")
    with_cal = forecast_risk(aapl, symbol="AAPL", as_of=date(2015, 12, 31), spec=spec)
    # independent: pandas' EWMA of squared log returns on the sessions that are not reactions
    prepared = prepare_bars(aapl, as_of=date(2015, 12, 31))
    mask = earnings_mask(company_events("AAPL") or [], prepared.dates)
    r2 = pd.Series(prepared.log_ret[1:] ** 2)[~mask[1:]]
    ewm = r2.ewm(alpha=0.06, adjust=False).mean().iloc[-1]  # y = 0.94 y + 0.06 x; the seed has decayed
    assert with_cal.sigma_daily == pytest.approx(np.sqrt(ewm), rel=1e-9)
    assert mask.sum() >= 12  # AAPL's reports 2012..2015 were found
    without = forecast_risk(aapl, symbol="AAPL", as_of=date(2015, 12, 31), earnings=None, spec=spec)
    assert without.earnings.calendar_coverage is False
    assert without.sigma_daily != with_cal.sigma_daily


def test_a_report_in_the_window_widens_it(forecast: RiskForecast, aapl: pd.DataFrame) -> None:
    h5 = forecast.horizon(5)
    assert [e.report_date for e in h5.earnings] == [date(2015, 7, 21)]
    assert h5.earnings[0].source == "announced" and h5.earnings[0].session == 3
    assert forecast.horizon(1).earnings == ()
    plain = forecast_risk(aapl, symbol="AAPL", as_of=AS_OF, earnings=None)
    assert h5.sigma > 1.3 * plain.horizon(5).sigma
    assert forecast.earnings.jump_source.startswith("own")


def test_quantiles_ranges_and_probabilities_hang_together(forecast: RiskForecast) -> None:
    close = forecast.close
    assert close == pytest.approx(129.619995)  # stocknet's AAPL close on 2015-07-17
    for h in forecast.horizons:
        q = h.quantiles.as_tuple()
        assert all(a < b for a, b in itertools.pairwise(q))
        assert h.var_95 == -h.quantiles.q05 and h.var_99 == -h.quantiles.q01
        assert h.es_975 > h.var_95
        r80 = h.range(0.8)
        assert r80.low == pytest.approx(close * (1 + h.quantiles.q10))
        assert r80.high == pytest.approx(close * (1 + h.quantiles.q90))
        below = forecast.prob_below(close * (1 + h.quantiles.q05), h.horizon)
        assert below == pytest.approx(0.05, abs=0.004)
        level = close * 0.95
        touch = forecast.prob_touch(level, h.horizon)
        assert touch >= forecast.prob_below(level, h.horizon)
        if h.horizon == 1:
            assert touch == forecast.prob_below(level, 1)
    assert forecast.prob_touch(close, 20) == 1.0
    assert forecast.prob_above(close * 1.1, 20) == pytest.approx(1 - forecast.prob_below(close * 1.1, 20))
    assert forecast.quantile(0.05, 20) == pytest.approx(forecast.horizon(20).quantiles.q05, abs=1e-4)


def test_each_number_is_the_one_its_own_reading_of_the_distribution_gives(forecast: RiskForecast) -> None:
    # the forecast reads every quantile, range and shortfall of a horizon in one inversion of the
    # mixture; each must be, to the last bit, what reading it alone from the distribution gives
    from agents.quant.risk import distribution as dist

    assert any(h.distribution.jumps != (0.0,) for h in forecast.horizons)  # the mixture path is met
    for h in forecast.horizons:
        t = h.distribution
        shape, jumps = np.asarray(t.shape), np.asarray(t.jumps)
        for key, level in zip(dist.QUANTILE_KEYS, dist.QUANTILE_LEVELS, strict=True):
            q = dist.quantile(np.array([level]), scale=t.scale, shape=shape, jumps=jumps)
            alone = float(np.expm1(q)[0])
            assert getattr(h.quantiles, key) == alone, (h.horizon, key)
        for r in h.ranges:
            bounds = np.array([(1 - r.probability) / 2, (1 + r.probability) / 2])
            lo, hi = np.expm1(dist.quantile(bounds, scale=t.scale, shape=shape, jumps=jumps))
            assert (r.low_return, r.high_return) == (float(lo), float(hi)), (h.horizon, r.probability)
            assert (r.low, r.high) == (forecast.close * (1 + float(lo)), forecast.close * (1 + float(hi)))
        assert h.es_975 == dist.expected_shortfall(0.975, scale=t.scale, shape=shape, jumps=jumps)


def test_level_odds_are_prob_below_and_prob_touch_of_each_horizon(forecast: RiskForecast) -> None:
    close = forecast.close
    for level in (close * 0.9, close * 0.995, close, close * 1.04, close * 2.0):
        odds = forecast.level_odds(level)
        assert [h for h, _, _ in odds] == [h.horizon for h in forecast.horizons]
        for horizon, below, touch in odds:
            assert below == forecast.prob_below(level, horizon), (level, horizon)
            assert touch == forecast.prob_touch(level, horizon), (level, horizon)
            # the touch by the reflection principle from the CDF read one point at a time
            table, x = forecast.horizon(horizon).distribution, float(np.log(level / close))
            shift = BGK_BETA * forecast.sigma_daily
            if x == 0.0:
                assert touch == 1.0
                continue
            if x < 0:
                f_end, f_shift = table.cdf(x), table.cdf(x - shift)
            else:
                f_end, f_shift = 1.0 - table.cdf(x), 1.0 - table.cdf(x + shift)
            want = touch_from_cdf(
                f_end=np.array([f_end]), f_shifted=np.array([f_shift]), horizons=np.array([horizon])
            )
            assert touch == float(want[0]), (level, horizon)
    with pytest.raises(ValueError, match="positive price"):
        forecast.level_odds(0.0)


def test_the_forecast_round_trips_through_json(forecast: RiskForecast) -> None:
    text = forecast.model_dump_json()
    back = RiskForecast.model_validate_json(text)
    assert back == forecast
    assert back.prob_touch(forecast.close * 0.9, 60) == forecast.prob_touch(forecast.close * 0.9, 60)


def test_a_weekend_as_of_uses_the_session_before(aapl: pd.DataFrame, forecast: RiskForecast) -> None:
    assert forecast_risk(aapl, symbol="AAPL", as_of=date(2015, 7, 19)) == forecast  # a Sunday


def test_close_only_series_is_accepted(aapl: pd.DataFrame) -> None:
    closes = aapl[["adj_close"]].rename(columns={"adj_close": "close"})
    got = forecast_risk(closes, as_of=AS_OF, earnings=None)
    assert got.sigma_daily > 0 and got.horizon(1).var_95 > 0
    assert "closes only" in got.model.label


def test_an_unreadable_calendar_is_said_not_hidden(
    aapl: pd.DataFrame, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agents.data.fundamentals.earnings import CalendarUnavailableError
    from agents.quant.risk import forecast as fc

    def broken(symbol: str) -> None:
        raise CalendarUnavailableError("the HistoricalEarningsData package is not installed")

    monkeypatch.setattr(fc, "company_events", broken)
    got = forecast_risk(aapl, symbol="AAPL", as_of=AS_OF)
    assert got.earnings.calendar_coverage is False
    assert "could not be read" in got.earnings.jump_source


def test_bad_input_is_refused_with_a_reason(aapl: pd.DataFrame) -> None:
    nan = aapl.copy()
    nan.iloc[500, nan.columns.get_loc("close")] = np.nan
    with pytest.raises(RiskInputError, match="NaN"):
        forecast_risk(nan, symbol="AAPL", as_of=AS_OF)
    # a NaN after as_of is never read
    late = aapl.copy()
    late.iloc[-1, late.columns.get_loc("close")] = np.nan
    assert forecast_risk(late, symbol="AAPL", as_of=AS_OF).sigma_daily > 0
    with pytest.raises(RiskInputError, match="at least 60"):
        forecast_risk(aapl.iloc[:40], symbol="AAPL")
    with pytest.raises(RiskInputError, match="beyond the data"):
        forecast_risk(aapl.loc[:"2015-06-30"], symbol="AAPL", as_of=AS_OF)
    with pytest.raises(RiskInputError, match="before the first bar"):
        forecast_risk(aapl, symbol="AAPL", as_of=date(2010, 1, 4))
    with pytest.raises(RiskInputError, match="ascending"):
        forecast_risk(aapl.iloc[::-1], symbol="AAPL", as_of=AS_OF)
    with pytest.raises(RiskInputError, match="lack"):
        forecast_risk(aapl.drop(columns=["low"]), symbol="AAPL", as_of=AS_OF)
    with pytest.raises(RiskInputError, match="horizons"):
        forecast_risk(aapl, symbol="AAPL", as_of=AS_OF, horizons=(0, 5))
    with pytest.raises(ValueError, match="positive"):
        forecast_risk(aapl, symbol="AAPL", as_of=AS_OF).prob_below(-1.0, 5)
    with pytest.raises(ValueError, match="no forecast"):
        forecast_risk(aapl, symbol="AAPL", as_of=AS_OF).prob_below(100.0, 7)


def test_a_name_without_calendar_coverage_says_so(stocknet_dir: Path) -> None:
    got = forecast_risk(_bars(stocknet_dir, "BHP"), symbol="BHP", as_of=date(2015, 6, 1))
    assert got.earnings.calendar_coverage is False
    assert "no earnings calendar" in got.earnings.jump_source
    assert all(h.earnings == () for h in got.horizons)


def test_sessions_without_trading_do_not_blow_up_the_range_model(stocknet_dir: Path) -> None:
    # AGFS (listed 2014-11) has 65 sessions with high = low (no trade) before 2016: their range
    # variance is 0, whose log once sent the HAR forecast to σ = 1e10 on 2015-12-18.
    bars = _bars(stocknet_dir, "AGFS")
    got = forecast_risk(bars, symbol="AGFS", as_of=date(2015, 12, 18))
    assert got.model.volatility == "har_log"
    assert 0.005 < got.sigma_daily < 0.15
    assert got.horizon(1).quantiles.q99 < 0.5
