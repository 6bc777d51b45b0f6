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
from apps.scorecard import (
    ENTRY_TEXT,
    PriceBook,
    directional_hit,
    forward_return,
    hold_band,
    markdown,
    metrics,
    paired_difference,
    period_return,
    probability_of_outperformance,
    verdict,
)


def _adj(stocknet_dir: Path, symbol: str) -> list[tuple[str, float]]:
    with (stocknet_dir / f"{symbol}.csv").open() as fh:
        return [(r["Date"], float(r["Adj Close"])) for r in csv.DictReader(fh) if r["Adj Close"] != "null"]


def _series(rows: list[tuple[str, float]]) -> pd.Series:
    return pd.Series([v for _, v in rows], index=pd.DatetimeIndex([d for d, _ in rows]))


def _adj_open(stocknet_dir: Path, symbol: str) -> list[tuple[str, float]]:
    # the open on the adjusted closes' basis: Open × Adj Close / Close
    with (stocknet_dir / f"{symbol}.csv").open() as fh:
        return [
            (r["Date"], float(r["Open"]) * float(r["Adj Close"]) / float(r["Close"]))
            for r in csv.DictReader(fh)
            if r["Adj Close"] != "null"
        ]


@pytest.mark.shared_data
def test_open_entry_buys_at_the_next_sessions_open(stocknet_dir: Path) -> None:
    rows, opens = _adj(stocknet_dir, "AAPL"), _adj_open(stocknet_dir, "AAPL")
    dates = [d for d, _ in rows]
    closes, open_series = _series(rows), _series(opens)
    i = dates.index("2015-03-06")  # a Friday: the entry is Monday 2015-03-09's open
    assert dates[i + 1] == "2015-03-09"
    end, ret = forward_return(closes, as_of=date(2015, 3, 6), horizon=5, entry="open", opens=open_series)
    assert end.isoformat() == dates[i + 5]
    assert ret == pytest.approx(rows[i + 5][1] / opens[i + 1][1] - 1.0, rel=1e-12)
    with pytest.raises(ValueError, match="opens"):
        forward_return(closes, as_of=date(2015, 3, 6), horizon=5, entry="open")
    with pytest.raises(ValueError, match="entry"):
        forward_return(closes, as_of=date(2015, 3, 6), horizon=5, entry="vwap")
    # the book reads the same adjusted opens from the provider
    book = PriceBook(
        provider=CsvFolderProvider(data_dir=stocknet_dir),
        benchmark_symbol="SPY",
        benchmark_provider=CsvFolderProvider(data_dir=stocknet_dir),
    )
    got = book.opens("AAPL")
    assert got is not None
    assert float(got.loc["2015-03-09"]) == pytest.approx(opens[i + 1][1], rel=1e-12)
    # the universe benchmark entered at the open of 2015-03-09, out at the close of the 5th session
    ret_u, name = book.benchmark_return(
        start=date(2015, 3, 9), end=date.fromisoformat(dates[i + 5]), universe=["AAPL"], at_open=True
    ) or (None, None)
    assert name == "equal-weighted universe (1 symbol)"  # one symbol, in the singular
    assert ret_u == pytest.approx(ret, rel=1e-12)


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


def test_probability_and_the_directional_hit_by_hand() -> None:
    assert probability_of_outperformance("BUY", 0.6) == pytest.approx(0.8)
    assert probability_of_outperformance("SELL", 0.6) == pytest.approx(0.2)
    assert probability_of_outperformance("HOLD", 0.4) == 0.5
    with pytest.raises(ValueError, match="outside"):
        probability_of_outperformance("BUY", 1.5)
    assert directional_hit("BUY", 0.001) and not directional_hit("BUY", -0.001)
    assert directional_hit("SELL", -0.02) and not directional_hit("SELL", 0.0)
    assert directional_hit("HOLD", 0.0) is None  # HOLD makes no directional call
    assert hold_band(20) == pytest.approx(0.01 * math.sqrt(20))


def _five_rows() -> pd.DataFrame:
    d1, d2 = date(2015, 3, 6), date(2015, 3, 13)
    return pd.DataFrame(
        {
            "as_of": [d1, d1, d1, d2, d2],
            "signal": ["BUY", "BUY", "SELL", "HOLD", "SELL"],
            "confidence": [0.6, 0.2, 0.4, 0.3, 0.8],
            "score": [0.5, 0.3, -0.4, 0.0, -0.9],
            "excess_return": [0.02, -0.01, -0.03, 0.01, 0.015],
        }
    )


def test_metrics_by_hand_on_five_rows() -> None:
    m = metrics(_five_rows(), horizon=5, step=5)
    # directional calls: BUY +, BUY −, SELL −, SELL + → 2 of 4; the HOLD is not counted
    assert m["directional"]["successes"] == 2 and m["directional"]["n"] == 4
    assert m["hit_rate"] == pytest.approx(0.5)
    assert m["directional"]["low"] < 0.5 < m["directional"]["high"]
    assert m["signals"]["BUY"]["n"] == 2 and m["signals"]["BUY"]["hit_rate"] == 0.5
    assert m["signals"]["BUY"]["mean_excess"] == pytest.approx(0.005)
    assert m["signals"]["SELL"]["mean_excess"] == pytest.approx(-0.0075)
    # HOLD: |0.01| < 0.0224 → 1 of 1 in the band; over all rows |x| < 0.0224: 0.02, 0.01, 0.015,
    # 0.01 (−0.01) → 4 of 5 (always-HOLD's share)
    assert (m["signals"]["HOLD"]["in_band"]["successes"], m["signals"]["HOLD"]["in_band"]["n"]) == (1, 1)
    assert (m["hold_base"]["successes"], m["hold_base"]["n"]) == (4, 5)
    assert (m["up_share"]["successes"], m["up_share"]["n"]) == (3, 5)
    # signed: 0.02, −0.01, 0.03 | 0, −0.015 → row mean 0.005; per date 0.04/3 and −0.0075
    assert m["mean_signed_excess"] == pytest.approx(0.005)
    assert m["signed_excess_by_date"] is None  # two dates: no standard error
    assert (m["dates"], m["lags"]) == (2, 0)
    # IC per date: d1 scores 0.5, 0.3, −0.4 vs excess 0.02, −0.01, −0.03 → ranks 3,2,1 vs 3,2,1 → 1;
    # d2 has two rows → no IC
    assert m["ic"] == pytest.approx(1.0)
    # p = 0.8, 0.6, 0.3, 0.5, 0.1; y = 1, 0, 0, 1, 1
    p, y = [0.8, 0.6, 0.3, 0.5, 0.1], [1, 0, 0, 1, 1]
    assert m["p_source"] == "confidence"
    assert m["brier"] == pytest.approx(sum((a - b) ** 2 for a, b in zip(p, y, strict=True)) / 5)
    # bins: [0.1]→y 1, [0.3]→0, [0.5]→1, [0.6]→0, [0.8]→1: each |y − p| / 5
    assert m["ece"] == pytest.approx((0.9 + 0.3 + 0.5 + 0.6 + 0.2) / 5)
    assert [b["n"] for b in m["calibration"]] == [1, 1, 1, 1, 1]


def test_a_calibrated_probability_column_replaces_the_mapped_confidence() -> None:
    frame = _five_rows().assign(p_outperform=[0.5] * 5)
    m = metrics(frame, horizon=5, step=5)
    assert m["p_source"] == "p_outperform"
    assert m["brier"] == pytest.approx(0.25)


def test_metrics_without_confidence_have_no_brier_and_constant_scores_no_ic() -> None:
    frame = pd.DataFrame(
        {
            "as_of": [date(2015, 3, 6)] * 4,
            "signal": ["BUY"] * 4,
            "score": [1.0] * 4,
            "excess_return": [0.01, -0.02, 0.03, 0.0],
        }
    )
    m = metrics(frame, horizon=20)
    assert m["brier"] is None and m["ece"] is None and m["ic"] is None
    assert m["hit_rate"] == pytest.approx(0.5)
    assert metrics(frame.iloc[:0], horizon=5)["n"] == 0


def _weekly(n_dates: int, per_date: list[float], signal: str) -> pd.DataFrame:
    rows = []
    for k in range(n_dates):
        day = date.fromordinal(date(2014, 1, 3).toordinal() + 7 * k)
        for j, x in enumerate(per_date):
            rows.append(
                {"as_of": day, "signal": signal, "score": float(j), "excess_return": x + 0.001 * (k % 3)}
            )
    return pd.DataFrame(rows)


def test_paired_difference_and_the_verdict_claim_only_what_separates() -> None:
    # the pipeline earns +1 % more than the baseline on every date: a difference that separates
    mine = _weekly(10, [0.01, 0.02, 0.03], "BUY")
    other = mine.assign(excess_return=mine["excess_return"] - 0.01 - 0.002 * (mine.index % 2))
    diff = paired_difference(mine, other, horizon=5, step=5)
    assert diff is not None and diff["n"] == 10 and diff["low"] > 0
    m = metrics(mine, horizon=5, step=5)
    card = {
        "horizons": [5],
        "strategies": {"pipeline": {"5": m}},
        "comparisons": {"5": {"other": diff, "noisy": {**diff, "low": -0.01, "high": 0.02}}},
    }
    text = " ".join(verdict(card))
    assert "beats other" in text
    assert "does not differ from noisy" in text
    assert "rank" not in text
    # every call right: the directional hit separates from 50 %
    assert "is above 50 %" in text


def test_markdown_states_the_entry_rule_on_every_table_and_prints_the_reliability_table() -> None:
    m = metrics(_weekly(6, [0.01, -0.02, 0.03], "BUY").assign(confidence=0.5), horizon=5, step=5)
    card = {
        "selection": {"backtest": "grid", "since": None, "tenant": None},
        "entry": "open",
        "entry_rule": ENTRY_TEXT["open"],
        "benchmark": ["SPY"],
        "benchmark_spec": "SPY via provider csv",
        "recommendations": 18,
        "horizons": [5],
        "stale": 0,
        "notes": ["Survivorship: a fixed list."],
        "strategies": {"pipeline": {"5": m}},
        "comparisons": {"5": {}},
        "breakdown": {"model": {"rules": {"5": m}}},
        "verdict": verdict({"horizons": [5], "strategies": {"pipeline": {"5": m}}, "comparisons": {}}),
        "plots": {},
    }
    text = markdown(card)
    assert "## 5 trading days (open entry: entry at the next session's open" in text
    assert "## By model (open entry)" in text
    # p = 0.75 for every BUY at confidence 0.5: one bin, 18 rows, 12 of them above the benchmark
    assert "| 0.7–0.8 | 18 | 0.750 | 0.667 |" in text
    assert "against 0.25 for always saying 0.5 (no view)" in text
    assert "> Survivorship: a fixed list." in text
    assert "rank" not in text


def test_brier_reads_the_stated_calibrated_p_when_every_row_has_one() -> None:
    frame = pd.DataFrame(
        {
            "as_of": [date(2014, 1, 3), date(2014, 1, 3), date(2014, 1, 10)],
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


def test_a_baseline_is_scored_at_its_own_p_of_one_half_not_the_pipelines(tmp_path: Path) -> None:
    """A baseline row copies the pipeline row's returns; it must not copy its probability. It
    states none, so it is scored at p = 0.5: Brier exactly 0.25 and ECE |base rate − 0.5|."""
    from apps.scorecard import NO_STATED_P, baseline_rows

    days = pd.bdate_range("2013-01-01", "2014-12-31")
    closes = pd.Series([100.0 + 0.1 * i for i in range(len(days))], index=days)

    class Book:
        def closes(self, symbol: str) -> pd.Series | None:
            return closes if symbol == "AAPL" else None

    pipeline_rows = pd.DataFrame(
        {
            "symbol": ["AAPL"] * 4,
            "as_of": [date(2014, 6, 6), date(2014, 6, 13), date(2014, 6, 20), date(2014, 6, 27)],
            "signal": ["SELL"] * 4,
            "score": [-0.6] * 4,
            "confidence": [0.8] * 4,
            # a pipeline that states p = 0.9 of beating SPY on every row
            "p_outperform": [0.9] * 4,
            "excess_return": [0.01, -0.02, 0.03, 0.01],
            "horizon": [5] * 4,
        }
    )
    rows = baseline_rows(pipeline_rows, book=Book())  # type: ignore[arg-type]
    hold = rows[rows["strategy"] == "buy_and_hold"]
    assert len(hold) == 4
    m = metrics(hold, horizon=5, step=5)
    assert m["p_source"] == NO_STATED_P
    assert m["brier"] == pytest.approx(0.25, abs=1e-12)
    # 3 of 4 beat the benchmark: one bin at p = 0.5 realising 0.75
    assert m["ece"] == pytest.approx(0.25)
    mine = metrics(pipeline_rows, horizon=5, step=5)
    assert mine["brier"] == pytest.approx((0.1**2 * 3 + 0.9**2) / 4)  # the pipeline keeps its own p


def test_a_plot_drawn_alone_is_the_plot_drawn_with_the_other(clean_settings: None, tmp_path: Path) -> None:
    # the console's plot route asks for one plot: it gets the same PNG, and the other is not drawn
    from apps.scorecard import build_scorecard
    from core.settings import get_settings
    from db.migrate import ensure_schema
    from tests.apps.api.test_scorecard import _scored

    settings = get_settings()
    ensure_schema(url=settings.service.effective_database_url)
    _scored(settings, analysis_id="a1", tenant="default", signal="BUY", model="m1")
    _scored(settings, analysis_id="a2", tenant="default", signal="SELL", model="m1")
    both = build_scorecard(settings=settings, score_first=False, plots_dir=tmp_path / "both")
    assert sorted(both["plots"]) == ["calibration", "cumulative_excess"]
    for name in ("calibration", "cumulative_excess"):
        alone = build_scorecard(settings=settings, score_first=False, plots_dir=tmp_path / name, plots=[name])
        assert list(alone["plots"]) == [name]
        assert sorted(p.name for p in (tmp_path / name).iterdir()) == [Path(alone["plots"][name]).name]
        assert Path(alone["plots"][name]).read_bytes() == Path(both["plots"][name]).read_bytes()
    with pytest.raises(ValueError, match="no plot"):
        build_scorecard(settings=settings, score_first=False, plots_dir=tmp_path / "x", plots=["pie"])
