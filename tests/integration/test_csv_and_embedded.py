"""Many real tickers through the csv provider, and the embedded default with no servers."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from sqlalchemy import create_engine, text

from tests.integration.conftest import Service, _base_env

# 22 large caps from the stocknet folder: enough to cover sectors and both trend directions.
STOCKNET_SAMPLE = [
    "AAPL",
    "AMZN",
    "BA",
    "BAC",
    "C",
    "CSCO",
    "CVX",
    "GE",
    "GOOG",
    "INTC",
    "JNJ",
    "JPM",
    "KO",
    "MSFT",
    "ORCL",
    "PFE",
    "T",
    "WMT",
    "XOM",
    "MRK",
    "HD",
    "DIS",
]


def test_twenty_plus_stocknet_tickers_through_the_csv_provider(
    service: Service, start_worker, stocknet_dir: Path
) -> None:
    extra = {"FINAGENT_DATA_PROVIDER": "csv", "FINAGENT_DATA_DIR": str(stocknet_dir)}
    start_worker(**extra)
    proc = subprocess.run(
        [sys.executable, "-m", "tests.support.produce", "batch", *STOCKNET_SAMPLE],
        env={**service.env, **extra},
        cwd=service.tmp,
        capture_output=True,
        text=True,
        timeout=400,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = json.loads(proc.stdout.strip().splitlines()[-1])
    assert [r["symbol"] for r in rows] == STOCKNET_SAMPLE
    for row in rows:
        assert row["status"] == "done", row
        report = row["report_json"]
        assert report["as_of"] == "2017-09-01"  # the folder's last date
        assert report["indicators"]["sma_200"] is not None
        assert report["grounding"]["unverified"] == []
        assert "stocknet" in report["quote"]["source"] or row["symbol"] in report["quote"]["source"]
    # the scorer is not a constant (the calibrated signal may well be: as of 2017-09-01 the
    # calibration's evidence says large caps lag SPY, whatever the score)
    assert len({r["report_json"]["details"]["score"] for r in rows}) >= 2


def test_embedded_default_runs_the_chain_in_process_with_sqlite(tmp_path: Path) -> None:
    embedded = Service(env=_base_env(tmp_path), tmp=tmp_path)  # no broker, no database
    proc = embedded.cli("analyze", "aapl", "--json", timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout)
    assert out["status"] == "done" and out["symbol"] == "AAPL"
    # stderr carries one JSON log line per tool call; stdout only the result
    log_lines = [json.loads(line) for line in proc.stderr.splitlines() if line.startswith("{")]
    assert {line["tool_call_id"] for line in log_lines if line.get("logger") == "finagent.tool_calls"} == set(
        out["source_refs"]
    )

    db_file = tmp_path / "state" / "finagent.sqlite3"
    assert db_file.is_file()
    engine = create_engine(f"sqlite:///{db_file}")
    with engine.connect() as conn:
        assert conn.execute(text("SELECT status FROM analyses")).scalars().all() == ["done"]
        assert conn.execute(text("SELECT count(*) FROM tool_calls")).scalar_one() >= 3
    engine.dispose()

    shown = embedded.cli("show", out["analysis_id"], timeout=120)
    assert shown.returncode == 0 and shown.stdout.startswith("# AAPL")

    no_wait = embedded.cli("analyze", "AAPL", "--no-wait", timeout=120)
    assert no_wait.returncode == 2 and "FINAGENT_SERVICE_BROKER_URL" in no_wait.stderr


def test_readme_first_command_prints_a_markdown_report(tmp_path: Path) -> None:
    embedded = Service(env=_base_env(tmp_path), tmp=tmp_path)
    proc = embedded.cli("analyze", "AAPL", timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.startswith("# AAPL: analysis as of 2013-03-01")
    for section in ("## Quote", "## Indicators", "## Rationale", "## Sources"):
        assert section in proc.stdout
    assert "pass 1: done" in proc.stderr


def test_earnings_soon_fires_from_the_shipped_calendar_end_to_end(tmp_path: Path) -> None:
    # HistoricalEarningsData: AAPL,"Jul 24, 2012, 12 AMEDT",0.37,... — seven days after as_of
    embedded = Service(env=_base_env(tmp_path), tmp=tmp_path)
    proc = embedded.cli("analyze", "AAPL", "--as-of", "2012-07-17", "--json", timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout)
    (flag,) = [f for f in out["risk_flags"] if f["flag"] == "EARNINGS_SOON"]
    assert "2012-07-24" in flag["text"]
    assert flag["source_refs"] == out["earnings"]["source_refs"]
    assert (
        flag["source_refs"][0].startswith("get_earnings_dates_")
        and flag["source_refs"][0] in out["source_refs"]
    )
    assert out["earnings"]["next"]["days_until"] == 7 and out["grounding"]["unverified"] == []
    shown = embedded.cli("show", out["analysis_id"], timeout=120)
    assert "## Earnings" in shown.stdout and "Next report: 2012-07-24" in shown.stdout
    assert "| 2012-04-24 | time not recorded | 0.36 | 0.44 | +22.56 % |" in shown.stdout
