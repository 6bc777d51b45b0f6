"""Scorecard arithmetic against hand-computed values on real bars (stocknet CSVs read with the
csv module, independently of the product's parsers and of empyrical)."""

from __future__ import annotations

import csv
import math
from datetime import date
from pathlib import Path

import pandas as pd
import pytest

from agents.data.market.csv_folder import CsvFolderProvider
from pipeline.scorecard import (
    PriceBook,
    calibration_bins,
    forward_return,
    hit,
    metrics,
    period_return,
    probability_of_outperformance,
)


def _adj(stocknet_dir: Path, symbol: str) -> list[tuple[str, float]]:
    with (stocknet_dir / f"{symbol}.csv").open() as fh:
        return [(r["Date"], float(r["Adj Close"])) for r in csv.DictReader(fh) if r["Adj Close"] != "null"]


def _series(rows: list[tuple[str, float]]) -> pd.Series:
    return pd.Series([v for _, v in rows], index=pd.DatetimeIndex([d for d, _ in rows]))


@pytest.mark.shared_data
def test_forward_return_is_the_adjusted_close_h_bars_later_over_the_close_of_as_of(
    stocknet_dir: Path,
) -> None:
    rows = _adj(stocknet_dir, "AAPL")
    dates = [d for d, _ in rows]
    closes = _series(rows)
    # 2016-03-04 is a Friday and a trading day
    i = dates.index("2016-03-04")
    for h in (5, 20, 60):
        end, ret = forward_return(closes, as_of=date(2016, 3, 4), horizon=h)
        assert end.isoformat() == dates[i + h]
        assert ret == pytest.approx(rows[i + h][1] / rows[i][1] - 1.0, rel=1e-12)
    # Saturday 2016-03-05: the last bar on or before it is the Friday's
    assert forward_return(closes, as_of=date(2016, 3, 5), horizon=5) == forward_return(
        closes, as_of=date(2016, 3, 4), horizon=5
    )
    # the horizon has not passed at the end of the data
    assert forward_return(closes, as_of=date.fromisoformat(dates[-3]), horizon=5) is None
    assert forward_return(closes, as_of=date(2001, 1, 2), horizon=5) is None


@pytest.mark.shared_data
def test_equal_weighted_universe_benchmark_when_no_spy_covers_the_window(stocknet_dir: Path) -> None:
    provider = CsvFolderProvider(data_dir=stocknet_dir)  # stocknet has no SPY.csv
    book = PriceBook(provider=provider, benchmark_symbol="SPY", benchmark_provider=provider)
    start, end = date(2016, 3, 4), date(2016, 4, 1)
    expected = []
    for symbol in ("AAPL", "XOM", "KO"):
        series = dict(_adj(stocknet_dir, symbol))
        expected.append(series[end.isoformat()] / series[start.isoformat()] - 1.0)
    ret, name = book.benchmark_return(start=start, end=end, universe=["AAPL", "XOM", "KO"])
    assert name == "equal-weighted universe (3 symbols)"
    assert ret == pytest.approx(sum(expected) / 3, rel=1e-12)


@pytest.mark.shared_data
def test_spy_is_the_benchmark_where_its_data_covers_the_window(stocknet_dir: Path, tmp_path: Path) -> None:
    # the real SPY bars of ../shared/data/ohlcv/lean/SPY.csv (raw closes) in the Yahoo layout
    lean = stocknet_dir.parent / "lean" / "SPY.csv"
    if not lean.is_file():
        pytest.skip(f"{lean} not found")
    with lean.open() as fh, (tmp_path / "SPY.csv").open("w", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(["Date", "Open", "High", "Low", "Close", "Adj Close", "Volume"])
        spy = {}
        for r in csv.DictReader(fh):
            writer.writerow([r["Date"], r["Open"], r["High"], r["Low"], r["Close"], r["Close"], r["Volume"]])
            spy[r["Date"]] = float(r["Close"])
    book = PriceBook(
        provider=CsvFolderProvider(data_dir=stocknet_dir),
        benchmark_symbol="SPY",
        benchmark_provider=CsvFolderProvider(data_dir=tmp_path),
    )
    ret, name = book.benchmark_return(start=date(2016, 3, 4), end=date(2016, 4, 1), universe=["AAPL"])
    assert name == "SPY"
    assert ret == pytest.approx(spy["2016-04-01"] / spy["2016-03-04"] - 1.0, rel=1e-12)
    # outside SPY's data (it ends 2021-03-31) the universe takes over
    closes = _series(_adj(stocknet_dir, "AAPL"))
    assert period_return(closes, start=date(2030, 1, 2), end=date(2030, 2, 1)) is None


def test_probability_hit_and_calibration_bins_by_hand() -> None:
    assert probability_of_outperformance("BUY", 0.6) == pytest.approx(0.8)
    assert probability_of_outperformance("SELL", 0.6) == pytest.approx(0.2)
    assert probability_of_outperformance("HOLD", 0.4) == 0.5
    with pytest.raises(ValueError, match="outside"):
        probability_of_outperformance("BUY", 1.5)
    assert hit("BUY", 0.001, 5) and not hit("BUY", -0.001, 5)
    assert hit("SELL", -0.02, 20) and not hit("SELL", 0.0, 20)
    # HOLD band: 1 % × √20 = 4.47 %
    assert hit("HOLD", 0.044, 20) and not hit("HOLD", 0.045, 20)
    bins = calibration_bins([0.05, 0.08, 0.55, 1.0], [0, 1, 1, 1])
    assert [(b["lower"], b["n"], b["observed"]) for b in bins] == [
        (0.0, 2, 0.5),
        (0.5, 1, 1.0),
        (0.9, 1, 1.0),
    ]


def test_metrics_by_hand_on_five_rows() -> None:
    frame = pd.DataFrame(
        {
            "signal": ["BUY", "BUY", "SELL", "HOLD", "SELL"],
            "confidence": [0.6, 0.2, 0.4, 0.3, 0.8],
            "score": [0.5, 0.3, -0.4, 0.0, -0.9],
            "excess_return": [0.02, -0.01, -0.03, 0.01, 0.015],
        }
    )
    m = metrics(frame, horizon=5)
    # hits: BUY +, BUY −, SELL −, HOLD |0.01| < 0.0224, SELL + → 1, 0, 1, 1, 0
    assert m["hit_rate"] == pytest.approx(3 / 5)
    assert m["signals"]["BUY"] == {"n": 2, "hit_rate": 0.5, "mean_excess": 0.005, "median_excess": 0.005}
    assert m["signals"]["SELL"]["mean_excess"] == pytest.approx(-0.0075)
    assert m["signals"]["HOLD"]["hit_rate"] == 1.0
    # signed: 0.02, -0.01, 0.03, 0, -0.015 → mean 0.005
    assert m["mean_signed_excess"] == pytest.approx(0.005)
    # Spearman by hand: score ranks 5,4,2,3,1; excess ranks 5,2,1,3,4; d² = 0,4,1,0,9 = 14
    assert m["ic"] == pytest.approx(1 - 6 * 14 / (5 * (25 - 1)))
    # p = 0.8, 0.6, 0.3, 0.5, 0.1; y = 1, 0, 0, 1, 1
    p, y = [0.8, 0.6, 0.3, 0.5, 0.1], [1, 0, 0, 1, 1]
    assert m["brier"] == pytest.approx(sum((a - b) ** 2 for a, b in zip(p, y, strict=True)) / 5)
    # bins: [0.1]→y 1, [0.3]→0, [0.5]→1, [0.6]→0, [0.8]→1: each |y − p| / 5
    assert m["ece"] == pytest.approx((0.9 + 0.3 + 0.5 + 0.6 + 0.2) / 5)
    spread = pd.Series([0.02, -0.01, 0.03, 0.0, -0.015]).std(ddof=1)
    assert m["t_signed_excess"] == pytest.approx(0.005 / (spread / math.sqrt(5)), abs=1e-3)


def test_metrics_without_confidence_have_no_brier_and_constant_scores_no_ic() -> None:
    frame = pd.DataFrame(
        {"signal": ["BUY"] * 4, "score": [1.0] * 4, "excess_return": [0.01, -0.02, 0.03, 0.0]}
    )
    m = metrics(frame, horizon=20)
    assert m["brier"] is None and m["ece"] is None and m["ic"] is None
    assert m["hit_rate"] == pytest.approx(0.5)
    assert metrics(frame.iloc[:0], horizon=5)["n"] == 0


def test_brier_reads_the_stated_calibrated_p_when_every_row_has_one() -> None:
    frame = pd.DataFrame(
        {
            "signal": ["BUY", "HOLD", "SELL"],
            "confidence": [0.9, 0.9, 0.9],  # raw: would read as p = 0.95, 0.5, 0.05
            "p_outperform": [0.56, 0.5, 0.44],
            "score": [0.6, 0.0, -0.6],
            "excess_return": [0.01, -0.01, 0.02],
        }
    )
    m = metrics(frame, horizon=5)
    # y = 1, 0, 1 against the stated p
    assert m["brier"] == pytest.approx(((0.56 - 1) ** 2 + 0.5**2 + (0.44 - 1) ** 2) / 3)
    # one row without a stated p (a report written before calibration): the raw mapping for all
    mixed = frame.assign(p_outperform=[0.56, float("nan"), 0.44])
    raw = metrics(mixed, horizon=5)
    assert raw["brier"] == pytest.approx(((0.95 - 1) ** 2 + 0.5**2 + (0.05 - 1) ** 2) / 3)
