"""``finagent calibrate``: refusals before any work, and the evaluation of an artifact."""

from __future__ import annotations

import json
from datetime import date, timedelta
from pathlib import Path

from click.testing import CliRunner

from agents.quant import calibration as cal
from pipeline.calibration import write_artifact
from pipeline.cli import main


def test_nothing_asked_is_refused() -> None:
    result = CliRunner().invoke(main, ["calibrate"])
    assert result.exit_code == 2
    assert "--backtest NAME" in result.output


def test_fitting_into_the_held_out_period_is_refused_before_any_work() -> None:
    result = CliRunner().invoke(main, ["calibrate", "--backtest", "whatever", "--until", "2016-03-31"])
    assert result.exit_code == 2
    assert "held out" in result.output


def test_a_missing_artifact_is_named(tmp_path: Path) -> None:
    missing = tmp_path / "none.json"
    result = CliRunner().invoke(main, ["calibrate", "--evaluate", "--artifact", str(missing)])
    assert result.exit_code == 2
    assert f"no artifact at {missing}" in result.output


def test_evaluate_prints_every_horizon_and_the_targets(tmp_path: Path) -> None:
    # 40 weekly dates × 10 rows per horizon, half outperforming, all in the middle bin
    rows = []
    for week in range(40):
        as_of = date(2014, 1, 3) + timedelta(weeks=week)
        for h in cal.HORIZONS:
            end = as_of + timedelta(days=h * 7 // 5)
            for i in range(10):
                known = end + timedelta(days=h * 7 // 5)
                rows.append(cal.CalibrationRow("rules-x", h, as_of, end, known, 0.0, i % 2 == 0))
    path = tmp_path / "model.json"
    write_artifact(cal.CalibrationModel(rows, benchmark="SPY"), path)
    assert json.loads(path.read_text())["version"].startswith("calibration-")

    result = CliRunner().invoke(
        main,
        ["calibrate", "--evaluate", "--artifact", str(path), "--from", "2014-01-01", "--to", "2015-12-31"],
    )
    assert result.exit_code == 0, result.output
    for h in cal.HORIZONS:
        assert f"| {h}d | 400 |" in result.output
    # a coin flip predicted at 0.5 (abstained or shrunk to it): Brier 0.25 meets the target
    assert "Targets: all met." in result.output
