"""The shipped backtest record: it measured the shipped model, and its sentences carry its numbers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agents.quant.risk import RiskSpec, coverage_line, load_record, spec_version, var_line
from agents.quant.risk.record import RECORD_FILE, RecordUnavailableError


def test_the_shipped_record_measured_the_shipped_model_on_the_fitting_period() -> None:
    record = load_record(version=spec_version(RiskSpec()))  # refuses a stale record
    assert record["period"] == {"from": "2013-07-01", "to": "2015-12-31"}
    assert record["names"] == 87
    r80 = record["horizons"]["20"]["ranges"]["80"]
    assert r80["low"] < r80["rate"] < r80["high"]


def test_sentences_carry_the_record_numbers() -> None:
    record = json.loads(RECORD_FILE.read_text(encoding="utf-8"))
    r80 = record["horizons"]["20"]["ranges"]["80"]
    line = coverage_line(20, 0.8, record=record)
    assert line == (
        f"80 % ranges at 20 sessions held {100 * r80['rate']:.1f} % [{100 * r80['low']:.1f}, "
        f"{100 * r80['high']:.1f}] of the time, walk-forward 2013-07..2015-12"
    )
    v = record["horizons"]["1"]["var"]["99"]
    assert var_line(1, 99, record=record).startswith(
        f"VaR(99 %) at 1 session was exceeded {100 * v['rate']:.1f} % ["
    )
    assert "(1 % expected)" in var_line(1, 99, record=record)


def test_a_record_of_another_version_or_none_is_refused(tmp_path: Path) -> None:
    with pytest.raises(RecordUnavailableError, match="not risk-0000000000"):
        load_record(version="risk-0000000000")
    with pytest.raises(RecordUnavailableError, match="no readable"):
        load_record(path=tmp_path / "missing.json")


def test_write_record_refuses_the_hold_out(tmp_path: Path) -> None:
    from apps.risk_eval import RiskEvalError, write_record

    summary = {"period": {"from": "2016-01-04", "to": "2017-06-30"}, "horizons": {}}
    with pytest.raises(RiskEvalError, match="fitting period only"):
        write_record(summary, tmp_path / "r.json")
