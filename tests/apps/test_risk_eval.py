"""``finagent eval risk`` on a small real subset (three stocknet names, half a year): the forecasts
CSV can be checked without our code, the tables add up, and bad input is refused."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from agents.quant.risk import forecast_risk
from apps.cli import main
from apps.risk_eval import CSV_COLUMNS, load_bars

pytestmark = pytest.mark.shared_data
SYMBOLS = "AAPL,BHP,KO"


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, pd.DataFrame, Path]:  # type: ignore[type-arg]
    from tests.conftest import STOCKNET_DIR

    if not STOCKNET_DIR.is_dir():
        pytest.skip(f"shared market data not found at {STOCKNET_DIR} (only present in the workplace)")
    out = tmp_path_factory.mktemp("risk") / "forecasts.csv"
    result = CliRunner(mix_stderr=False).invoke(
        main,
        ["eval", "risk", "--from", "2015-03-02", "--to", "2015-08-31", "--symbols", SYMBOLS, "--prices",
         str(STOCKNET_DIR), "--json", "--forecasts", str(out), "--processes", "1"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    return summary, pd.read_csv(out), STOCKNET_DIR


def test_forecasts_csv_has_the_promised_columns_and_rows(run) -> None:  # type: ignore[no-untyped-def]
    _, table, prices = run
    assert tuple(table.columns) == CSV_COLUMNS
    bars = load_bars(prices, "KO")
    sessions = bars.loc["2015-03-02":"2015-08-31"].index
    ko = table[table["symbol"] == "KO"]
    assert len(ko) == 4 * len(sessions)  # every session of the period, horizons 1, 5, 20, 60
    assert sorted(ko["horizon"].unique()) == [1, 5, 20, 60]
    assert ko["as_of"].iloc[0] == "2015-03-02" and ko["as_of"].iloc[-1] == "2015-08-31"
    q = table[[c for c in CSV_COLUMNS if c.startswith("q")]].to_numpy()
    assert np.all(np.diff(q, axis=1) > 0)  # quantiles ascend
    assert (table["sigma"] > 0).all()


def test_a_csv_row_equals_the_library_forecast_at_a_refit(run) -> None:  # type: ignore[no-untyped-def]
    _, table, prices = run
    bars = load_bars(prices, "AAPL")
    first = forecast_risk(bars, symbol="AAPL", as_of=date(2015, 3, 2))  # the first origin is a refit
    row = table[
        (table["symbol"] == "AAPL") & (table["as_of"] == "2015-03-02") & (table["horizon"] == 20)
    ].iloc[0]
    h = first.horizon(20)
    assert row["sigma"] == pytest.approx(h.sigma, rel=1e-6)
    assert row["q05"] == pytest.approx(h.quantiles.q05, rel=1e-6)
    assert row["q975"] == pytest.approx(h.quantiles.q975, rel=1e-6)


def test_exception_rate_recomputed_from_the_csv_and_prices(run) -> None:  # type: ignore[no-untyped-def]
    summary, table, prices = run
    # score the 1-day VaR(95 %) from the CSV and the raw price files only
    hits = []
    for symbol in SYMBOLS.split(","):
        adj = pd.read_csv(prices / f"{symbol}.csv", index_col="Date")["Adj Close"]
        nxt = adj.shift(-1) / adj - 1
        f = table[(table["symbol"] == symbol) & (table["horizon"] == 1)].set_index("as_of")
        f = f[f.index < "2015-08-31"]  # the last origin's next session lies after --to
        hits.extend((nxt.reindex(f.index) < f["q05"]).tolist())
    assert summary["horizons"]["1"]["var"]["95"]["pooled"] == pytest.approx(np.mean(hits))
    assert summary["horizons"]["1"]["rows"] == len(hits)


def test_summary_tables_and_targets(run) -> None:  # type: ignore[no-untyped-def]
    summary, _, _ = run
    assert summary["earnings_calendar"]["not_covered"] == ["BHP"]
    assert summary["reserved"] is False
    h20 = summary["horizons"]["20"]
    assert h20["last"] <= "2015-08-03"  # windows end by --to: 20 sessions before 2015-08-31
    for level in ("50", "80", "95"):
        c = h20["ranges"][level]
        assert 0.0 <= c["pooled"] <= 1.0 and c["n_rows"] == h20["rows"]
    assert (
        sum(b["count"] for b in summary["horizons"]["1"]["pit"]["bins"]) == summary["horizons"]["1"]["rows"]
    )
    assert {t["name"] for t in summary["targets"]} >= {
        "1-day VaR(95%) exception rate",
        "20-session 80% range coverage",
    }
    assert set(summary["horizons"]["5"]["levels"]) == {"stop", "m90", "m95", "m105", "m110"}


def test_bad_input_is_refused(tmp_path: Path, stocknet_dir: Path) -> None:
    runner = CliRunner(mix_stderr=False)
    base = ["eval", "risk", "--prices", str(stocknet_dir)]
    missing = runner.invoke(main, ["eval", "risk", "--from", "2015-01-02", "--to", "2015-02-02", "--prices",
                                   str(tmp_path / "nope")])  # fmt: skip
    assert missing.exit_code == 2 and "not a folder" in missing.stderr
    unknown = runner.invoke(
        main, [*base, "--from", "2015-01-02", "--to", "2015-02-02", "--symbols", "AAPL,ZZZZ"]
    )
    assert unknown.exit_code == 2 and "ZZZZ" in unknown.stderr
    backwards = runner.invoke(main, [*base, "--from", "2015-03-02", "--to", "2015-02-02"])
    assert backwards.exit_code == 2 and "before --from" in backwards.stderr
    future = runner.invoke(main, [*base, "--from", "2015-03-02", "--to", "2999-01-01"])
    assert future.exit_code == 2 and "future" in future.stderr
    bad_date = runner.invoke(main, [*base, "--from", "2015-13-02", "--to", "2015-02-02"])
    assert bad_date.exit_code == 2
    record = runner.invoke(main, [*base, "--from", "2016-01-04", "--to", "2016-02-01", "--write-record"])
    assert record.exit_code == 2 and "fitting period" not in record.stdout and "2015-12-31" in record.stderr


def test_a_period_in_the_hold_out_is_announced(tmp_path: Path, stocknet_dir: Path) -> None:
    result = CliRunner(mix_stderr=False).invoke(
        main,
        ["eval", "risk", "--from", "2016-02-01", "--to", "2016-02-05", "--symbols", "KO", "--prices",
         str(stocknet_dir), "--processes", "1"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "RESERVED HOLD-OUT" in result.stderr
    assert "overlaps the reserved hold-out" in result.stdout
