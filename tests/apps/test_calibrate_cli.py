"""``finagent calibrate``: refusals before any work, and the evaluation of an artifact."""

from __future__ import annotations

import json
from datetime import date, timedelta
from pathlib import Path
from typing import Any

from click.testing import CliRunner, Result

from agents.quant import calibration as cal
from apps.calibration import targets_line, write_artifact
from apps.cli import main


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


def _artifact(tmp_path: Path, *, x: float, wins_of_10: int) -> Path:
    """40 weekly dates × 10 rows per horizon, all with raw value ``x``, ``wins_of_10`` of each
    date's ten outperforming."""
    rows = []
    for week in range(40):
        as_of = date(2014, 1, 3) + timedelta(weeks=week)
        for h in cal.HORIZONS:
            end = as_of + timedelta(days=h * 7 // 5)
            for i in range(10):
                known = end + timedelta(days=h * 7 // 5)
                rows.append(cal.CalibrationRow("rules-x", h, as_of, end, known, x, i < wins_of_10))
    path = tmp_path / "model.json"
    write_artifact(cal.CalibrationModel(rows, benchmark="SPY"), path)
    assert json.loads(path.read_text())["version"].startswith("calibration-")
    return path


def _evaluate(path: Path, *extra: str) -> Result:
    window = ["--from", "2014-01-01", "--to", "2015-12-31"]
    return CliRunner().invoke(main, ["calibrate", "--evaluate", "--artifact", str(path), *window, *extra])


def test_an_evaluation_where_every_prediction_abstained_judges_no_target(tmp_path: Path) -> None:
    # a coin flip in the middle bin: the evidence gate never lets it speak, so every prediction
    # is p = 0.5 and its Brier 0.25 "meets" the target by construction: that is no verdict
    path = _artifact(tmp_path, x=0.0, wins_of_10=5)
    result = _evaluate(path)
    assert result.exit_code == 0, result.output
    for h in cal.HORIZONS:
        assert f"| {h}d | 400 | 400 |" in result.output  # n, abstained
    assert "all met" not in result.output
    assert "every prediction abstained: no target can be judged" in result.output

    as_json = _evaluate(path, "--json")
    verdict = json.loads(as_json.output.splitlines()[-1])["targets"]
    assert verdict["unjudged"] == list(cal.HORIZONS)
    assert verdict["missed"] == []
    assert "all met" not in verdict["verdict"]


def test_an_evaluation_that_speaks_is_judged(tmp_path: Path) -> None:
    # 9 of 10 outperform in a strong-BUY bin: after the first 200 usable rows the bin separates
    # from 0.5, its p (the m-estimate, ~0.7) under-states the realised 0.9: ECE misses
    path = _artifact(tmp_path, x=0.6, wins_of_10=9)
    result = _evaluate(path)
    assert result.exit_code == 0, result.output
    assert "Targets: missed:" in result.output
    assert "ECE" in result.output.split("Targets:")[1]
    assert "no target can be judged" not in result.output
    # the raw calls' record: every row a BUY (x 0.6), 9 of each date's 10 beat the benchmark; the
    # dates all agree (clustered variance 0), so the binomial floor 0.9 * 0.1 / 400 holds: at 5
    # days (weekly dates, no overlap) 0.9 -/+ t(0.975, 39) * 0.015 = 0.9 -/+ 0.0303
    row = "| rules-x | 5d | 400 | 360 | 90.0 % [87.0 %, 93.0 %] | 2014-01-03 .. 2014-10-03 |"
    assert row in result.output


def test_the_verdict_names_the_horizons_that_could_not_be_judged() -> None:
    def horizon(n: int, abstained: int) -> dict[str, Any]:
        return {"n": n, "abstained": abstained, "brier": 0.2499, "ece": 0.01, "reliability": []}

    spoke = {"horizons": {5: horizon(100, 40), 20: horizon(100, 99), 60: horizon(100, 0)}}
    assert targets_line(spoke) == "Targets: all met."
    partly = {"horizons": {5: horizon(100, 40), 20: horizon(100, 100), 60: horizon(100, 0)}}
    assert targets_line(partly) == (
        "Targets: met where judged (5d: 60 of 100 predictions spoke, 60d: 100 of 100 predictions spoke); "
        "not judged at 20d: every prediction there abstained."
    )
    silent = {"horizons": {h: horizon(100, 100) for h in (5, 20, 60)}}
    assert "all met" not in targets_line(silent)
    assert targets_line(silent).endswith("no target can be judged.")
