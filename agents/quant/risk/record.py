"""The risk model's backtest record: the figures a report cites beside each risk number.

``backtest_record.json`` (beside this module) holds the compact result of ``finagent eval risk``
over the fitting period (walk-forward 2013-07-01 .. 2015-12-31 on the stocknet universe), written
by ``finagent eval risk ... --write-record`` (:func:`apps.risk_eval.record`) and stamped
with the model version it measured (:func:`agents.quant.risk.forecast.spec_version`). Per horizon:
the VaR(95 %) and VaR(99 %) exception rates, the 50/80/95 % range coverage (also when a report
fell in the window), and the calibration of P(below) and P(touch) of the report's stop, each
as ``{rate, low, high}`` (fractions; ``low``/``high`` the 95 % interval clustered by date).

:func:`coverage_line` and :func:`var_line` print the sentence a report shows, e.g. "80 % ranges at
20 sessions held 80.9 % [78.0, 83.9] of the time, walk-forward 2013-07..2015-12".
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any, Final

from core.display import rate_interval

RECORD_FILE: Final = Path(__file__).with_name("backtest_record.json")
_LOCK = threading.Lock()
_CACHE: dict[str, Any] = {}


class RecordUnavailableError(RuntimeError):
    """The record is missing, unreadable, or measured another model version than asked for."""


def load_record(*, version: str | None = None, path: Path = RECORD_FILE) -> dict[str, Any]:
    """The record (module docstring). ``version``: refuse a record of another model version (a
    changed model must be measured again before its numbers are cited).

    Raises:
        RecordUnavailableError: no readable record, or another version.
    """
    with _LOCK:
        key = str(path)
        if key not in _CACHE:
            try:
                _CACHE[key] = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                raise RecordUnavailableError(f"no readable risk backtest record at {path}: {exc}") from exc
        record: dict[str, Any] = _CACHE[key]
    if version is not None and record.get("model_version") != version:
        raise RecordUnavailableError(
            f"the risk backtest record measured {record.get('model_version')}, not {version}: "
            "rerun `finagent eval risk --from 2013-07-01 --to 2015-12-31 ... --write-record`"
        )
    return record


def _period(record: dict[str, Any]) -> str:
    p = record["period"]
    return f"walk-forward {p['from'][:7]}..{p['to'][:7]}"


def coverage_line(horizon: int, probability: float, *, record: dict[str, Any] | None = None) -> str:
    """``"80 % ranges at 20 sessions held 80.9 % [78.0, 83.9] of the time, walk-forward
    2013-07..2015-12"``. Raises :class:`RecordUnavailableError` or ``KeyError`` for a horizon or
    probability the record lacks."""
    rec = record if record is not None else load_record()
    block = rec["horizons"][str(horizon)]["ranges"][str(round(probability * 100))]
    unit = "session" if horizon == 1 else "sessions"
    return (
        f"{round(probability * 100)} % ranges at {horizon} {unit} held {rate_interval(block)} of the time, "
        f"{_period(rec)}"
    )


def var_line(horizon: int, level: int, *, record: dict[str, Any] | None = None) -> str:
    """``"VaR(95 %) at 1 session was exceeded 4.9 % [3.9, 5.8] of the time (5 % expected),
    walk-forward 2013-07..2015-12"``; ``level`` 95 or 99."""
    rec = record if record is not None else load_record()
    block = rec["horizons"][str(horizon)]["var"][str(level)]
    unit = "session" if horizon == 1 else "sessions"
    return (
        f"VaR({level} %) at {horizon} {unit} was exceeded {rate_interval(block)} of the time "
        f"({100 - level} % expected), {_period(rec)}"
    )
