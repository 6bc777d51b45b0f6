"""Variance models against independent references: a hand-written EWMA loop on real AAPL returns,
``arch``'s own GARCH filter and forecast for the same fixed parameters, statsmodels OLS for HAR."""

from __future__ import annotations

import importlib.resources
import itertools
import math
import sys

import numpy as np
import pandas as pd
import pytest

from agents.quant.risk import volatility as vol

# AAPL adjusted closes, 2012-09-04 .. 2012-09-18, copied from stocknet's AAPL.csv (Yahoo).
AAPL_ADJ = [87.121140, 86.509338, 87.288956, 87.827171, 85.542564, 85.265068, 86.452538, 88.155037,
            89.226341, 90.323479, 90.598404]  # fmt: skip


def _log_returns(prices: list[float]) -> list[float]:
    return [math.log(b / a) for a, b in itertools.pairwise(prices)]


def test_ewma_matches_the_riskmetrics_recursion_by_hand_on_real_returns() -> None:
    r = _log_returns(AAPL_ADJ)
    r2 = [x * x for x in r]
    # RiskMetrics: v[k+1] = 0.94 v[k] + 0.06 r²[k], seeded with the mean of the first 3 squares
    expected = [sum(r2[:3]) / 3]
    for x in r2:
        expected.append(0.94 * expected[-1] + 0.06 * x)
    got = vol.ewma_variance(np.array(r2), lam=0.94, seed=3)
    assert got == pytest.approx(expected, rel=1e-12)
    # the first step worked by hand: r[0] = ln(86.509338/87.121140) = ln(0.9929776) = -0.0070472
    assert r[0] == pytest.approx(-0.0070472, abs=1e-7)
    assert got[1] == pytest.approx(0.94 * expected[0] + 0.06 * 0.0070472**2, rel=1e-4)


def test_ewma_refuses_empty_or_nan_input_and_bad_lambda() -> None:
    with pytest.raises(ValueError, match="finite"):
        vol.ewma_variance(np.array([]))
    with pytest.raises(ValueError, match="finite"):
        vol.ewma_variance(np.array([1e-4, np.nan]))
    with pytest.raises(ValueError, match="lam"):
        vol.ewma_variance(np.array([1e-4]), lam=1.0)


def test_hv20_is_the_mean_of_the_last_20_squares() -> None:
    r2 = np.arange(1.0, 31.0)
    got = vol.hv_variance(r2, window=20)
    assert np.isnan(got[19])
    assert got[20] == pytest.approx(np.mean(np.arange(1.0, 21.0)))
    assert got[30] == pytest.approx(np.mean(np.arange(11.0, 31.0)))


def _stocknet_returns(stocknet_dir, symbol: str, n: int) -> np.ndarray:  # type: ignore[no-untyped-def]
    import pandas as pd

    adj = pd.read_csv(stocknet_dir / f"{symbol}.csv")["Adj Close"].to_numpy(dtype=float)[: n + 1]
    return np.diff(np.log(adj))


@pytest.mark.shared_data
def test_garch_filter_and_forecast_match_arch_for_fixed_parameters(stocknet_dir) -> None:  # type: ignore[no-untyped-def]
    from arch import arch_model

    r = _stocknet_returns(stocknet_dir, "XOM", 600)
    params = vol.GarchParams(omega=2e-6, alpha=0.08, beta=0.9, nu=6.0)
    model = arch_model(100 * r, mean="Zero", vol="GARCH", p=1, q=1, dist="t", rescale=False)
    fixed = model.fix([params.omega * 1e4, params.alpha, params.beta, params.nu])
    ours = vol.garch_variance(r * r, params)
    # arch's conditional variance of each return, in percent² → fraction²
    assert ours[:-1] == pytest.approx(fixed.conditional_volatility**2 / 1e4, rel=1e-9)
    forecast = fixed.forecast(horizon=20, reindex=False).variance.to_numpy()[-1] / 1e4
    cum = vol.garch_cumulative(np.array([ours[-1]]), params, (1, 5, 20))[0]
    assert cum == pytest.approx([forecast[0], forecast[:5].sum(), forecast.sum()], rel=1e-9)


@pytest.mark.shared_data
def test_fit_garch_recovers_arch_estimates_in_fraction_units(stocknet_dir) -> None:  # type: ignore[no-untyped-def]
    from arch import arch_model

    r = _stocknet_returns(stocknet_dir, "JNJ", 800)
    res = arch_model(100 * r, mean="Zero", vol="GARCH", p=1, q=1, dist="t", rescale=False).fit(disp="off")
    got = vol.fit_garch(r)
    if got.converged and res.params["alpha[1]"] + res.params["beta[1]"] < 1:
        assert got.omega == pytest.approx(res.params["omega"] / 1e4, rel=1e-4)
        assert got.beta == pytest.approx(res.params["beta[1]"], rel=1e-4)
        assert got.nu == pytest.approx(res.params["nu"], rel=1e-4)


def test_fit_garch_refuses_short_series() -> None:
    with pytest.raises(ValueError, match="at least 100"):
        vol.fit_garch(np.full(50, 0.01))


def test_har_regressors_are_the_day_week_and_month_means() -> None:
    x = np.arange(1.0, 41.0)
    reg = vol.har_regressors(x)
    assert np.isnan(reg[20, 3]) and not np.isnan(reg[21, 3])
    assert reg[30].tolist() == pytest.approx([1.0, 31.0, np.mean(x[26:31]), np.mean(x[9:31])])


@pytest.mark.shared_data
def test_fit_har_level_equals_statsmodels_ols_on_the_same_design(stocknet_dir) -> None:  # type: ignore[no-untyped-def]
    import pandas as pd
    import statsmodels.api as sm

    frame = pd.read_csv(stocknet_dir / "KO.csv").iloc[:500]
    r = np.diff(np.log(frame["Adj Close"].to_numpy(dtype=float)))
    x = (np.log(frame["High"] / frame["Low"]).to_numpy() ** 2)[1:]
    h = 5
    params = vol.fit_har(x, r * r, end=len(x) - 1, horizons=(h,), log=False)
    # the same regression built by hand: target = mean of the next h squared returns
    rows = np.arange(21, len(x) - h)
    y = np.array([np.mean((r * r)[k + 1 : k + 1 + h]) for k in rows])
    design = np.column_stack(
        [
            x[rows],
            [np.mean(x[k - 4 : k + 1]) for k in rows],
            [np.mean(x[k - 21 : k + 1]) for k in rows],
        ]
    )
    ols = sm.OLS(y, sm.add_constant(design)).fit()
    assert params.coefs[h] == pytest.approx(tuple(ols.params), rel=1e-8)
    # and its forecast is h × the fitted daily level
    cum = vol.har_variance(x, params, (h,))
    k = len(x) - 1
    manual = ols.params @ [1.0, x[k], np.mean(x[k - 4 : k + 1]), np.mean(x[k - 21 : k + 1])]
    assert cum[k, 0] == pytest.approx(h * min(max(manual, params.floor), params.ceiling), rel=1e-10)


def _real_squared_returns(ticker: str) -> np.ndarray:
    """Squared daily log returns of ``ticker``'s adjusted closes in the embedded data (fractions²)."""
    path = importlib.resources.files("bokeh_sampledata") / "_data/stocks.csv.gz"
    with path.open("rb") as fh:
        raw = pd.read_csv(fh, compression="gzip")
    closes = raw.loc[raw["Ticker"] == ticker, "Adj Close"].to_numpy(dtype=np.float64)
    returns = np.diff(np.log(closes))
    return np.asarray(returns * returns, dtype=np.float64)


@pytest.mark.parametrize("ticker", ["AAPL", "IBM", "GOOG"])
def test_the_variance_filters_give_the_same_bits_with_and_without_scipy(
    ticker: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """EWMA and GARCH run their recursion in scipy's lfilter where scipy.signal is loaded (a
    worker) and in Python elsewhere (a CLI analysis): the variances must agree to the last bit,
    on thousands of real returns. The compiled side is scipy's own lfilter called here."""
    import scipy.signal

    r2 = _real_squared_returns(ticker)
    assert len(r2) > 2000
    params = vol.GarchParams(omega=2e-6, alpha=0.08, beta=0.9, nu=6.0)
    lam, v0 = 0.94, float(np.mean(r2[:20]))
    by_scipy = scipy.signal.lfilter([1.0 - lam], [1.0, -lam], r2, zi=[lam * v0])[0]
    ewma, garch = vol.ewma_variance(r2, lam=lam), vol.garch_variance(r2, params)
    assert np.array_equal(ewma[1:], by_scipy)
    monkeypatch.delitem(sys.modules, "scipy.signal")  # the Python path
    assert np.array_equal(vol.ewma_variance(r2, lam=lam), ewma)
    assert np.array_equal(vol.garch_variance(r2, params), garch)
    assert not np.array_equal(vol.ewma_variance(r2, lam=0.95), ewma)  # the check can fail
