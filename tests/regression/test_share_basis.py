"""A report on split-adjusted source prices shows the prices traded at ``as_of``, with the same
signal: AAPL as of 2014-03-07 on stocknet's CSVs, whose prices divide out the 7-for-1 split of
2014-06-09 (75.78 in the file; Apple traded at 530.44 that day)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import date
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from agents.data.market.csv_folder import CsvFolderProvider
from agents.quant.indicators import compute_indicators
from agents.quant.scorer import score_technical
from tests.conftest import SHARED_DATA, STOCKNET_DIR

REPO_ROOT = Path(__file__).resolve().parents[2]
LEAN_AAPL = SHARED_DATA / "ohlcv" / "lean" / "AAPL.csv"
AS_OF = date(2014, 3, 7)
#: Apple's reported diluted EPS of the four quarters to 2013-12-28 (10-Q/10-K: 10.09 + 7.47 +
#: 8.26 + 14.50), per share of the time: an independent check of the P/E's basis.
APPLE_EPS_TTM_2014_03 = 10.09 + 7.47 + 8.26 + 14.50


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    if not (STOCKNET_DIR / "AAPL.csv").is_file():
        pytest.skip(f"stocknet CSVs not found at {STOCKNET_DIR} (only present in the workplace)")
    tmp = tmp_path_factory.mktemp("basis")
    env = {k: v for k, v in os.environ.items() if not k.startswith("FINAGENT_")}
    env |= {
        "XDG_STATE_HOME": str(tmp / "state"),
        "PYTHONPATH": str(REPO_ROOT),
        "FINAGENT_DATA_PROVIDER": "csv",
        "FINAGENT_DATA_DIR": str(STOCKNET_DIR),
    }
    proc = subprocess.run(
        [sys.executable, "-m", "tasks", "analyze", "AAPL", "--as-of", AS_OF.isoformat(), "--json"],
        cwd=tmp,
        env=env,
        capture_output=True,
        text=True,
        timeout=280,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out: dict[str, Any] = json.loads(proc.stdout)
    assert out["status"] == "done"
    return out


def _source_bars() -> pd.DataFrame:
    """The stocknet bars of the technical stage's window, as the file gives them (2017 basis)."""
    return CsvFolderProvider(data_dir=STOCKNET_DIR).bars(symbol="AAPL", start=date(2012, 3, 7), end=AS_OF)


def test_the_quote_is_the_price_traded_that_day(report: dict[str, Any]) -> None:
    source_close = float(_source_bars()["close"].iloc[-1])
    assert source_close == pytest.approx(75.777145)  # the file: the later 7-for-1 divided out
    quote = report["quote"]
    assert quote["date"] == "2014-03-07"
    assert quote["current_price"] == pytest.approx(530.44, abs=0.01)
    assert quote["split_basis"]["factor"] == "7"
    assert [s["ex_date"] for s in quote["split_basis"]["undone"]] == ["2014-06-09"]
    if LEAN_AAPL.is_file():  # QuantConnect's raw (as traded) closes, an independent source
        lean = pd.read_csv(LEAN_AAPL)
        traded = lean.loc[lean["Date"] == "2014-03-07", "Close"].astype(float).tolist()
        assert quote["current_price"] == pytest.approx(traded[0], rel=2e-3)
    # volume in the shares of the day (the file's count is in 2017 shares, 7x as many)
    assert quote["volume"] == pytest.approx(float(_source_bars()["volume"].iloc[-1]) / 7, rel=1e-6)


def test_pe_and_price_share_one_basis(report: dict[str, Any]) -> None:
    pe = report["quote"]["pe_ratio"]
    # the calendar's EPS (rounded to cents on 2025 shares) × 28 is within 1 % of Apple's printed EPS
    assert pe == pytest.approx(report["quote"]["current_price"] / APPLE_EPS_TTM_2014_03, rel=0.01)


def test_levels_are_on_the_traded_basis_and_the_signal_is_unchanged(report: dict[str, Any]) -> None:
    price = report["quote"]["current_price"]
    ind = report["indicators"]
    on_source = compute_indicators(bars=_source_bars())
    # every USD level is the source's level × 7; ratio indicators are the same numbers
    for key in ("sma_50", "sma_200", "bb_upper", "bb_lower", "ema_21", "atr_14"):
        source_value = on_source[key]
        assert isinstance(source_value, float)
        assert ind[key] == pytest.approx(source_value * 7, rel=1e-3), key
    for key in ("rsi_14", "adx_14", "hv_20"):
        assert ind[key] == pytest.approx(on_source[key], abs=0.02), key
    assert 0.9 * price < ind["sma_50"] < 1.1 * price
    stop = report["stop_loss"]
    assert stop["value"] == pytest.approx(price - 2 * ind["atr_14"], abs=0.01)
    assert 0.9 * price < stop["value"] < price
    # the signal and score of the source basis are those of the traded basis
    scored = score_technical(indicators=on_source, refs={"indicators": "source"})
    assert report["details"]["raw_signal"] == scored.signal
    assert report["details"]["score"] == pytest.approx(scored.score, abs=1e-4)
