"""The pooled earnings-move table: what a stock with too few past reports of its own borrows.

``pooled_earnings_moves.json`` (beside this module) lists past earnings reactions of the stocknet
names the earnings calendar covers, each as ``[date, symbol, m]``: ``date`` the last session of
the reaction (ISO), ``m`` the reaction's log return divided by the model's σ forecast for that
session made the session before (a move in units of the stock's own daily σ). Only reports up to
2015-12-31 are in it (the fitting period), so it holds no hold-out data.

A forecast at ``as_of`` uses the moves dated on or before ``as_of`` only
(:func:`pooled_abs_moves`), so the table is walk-forward like everything else. It is rebuilt by
``bench/risk_model_choice.py --write-pooled`` (:func:`apps.risk_eval.build_pooled_moves`)
whenever the variance model changes.
"""

from __future__ import annotations

import json
import threading
from datetime import date
from pathlib import Path
from typing import Any, Final

import numpy as np

POOLED_FILE: Final = Path(__file__).with_name("pooled_earnings_moves.json")
#: Fewest pooled moves a forecast accepts; with fewer known at as_of, no jump can be added.
MIN_POOLED: Final = 30

_LOCK = threading.Lock()
_CACHE: dict[str, Any] = {}


def _load() -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
    with _LOCK:
        if "dates" not in _CACHE:
            try:
                raw = json.loads(POOLED_FILE.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                raw = {"moves": []}
            moves = raw.get("moves", [])
            _CACHE["dates"] = np.array([m[0] for m in moves], dtype="datetime64[D]")
            _CACHE["abs"] = np.abs(np.array([float(m[2]) for m in moves], dtype=np.float64))
            _CACHE["meta"] = {k: v for k, v in raw.items() if k != "moves"}
        return _CACHE["dates"], _CACHE["abs"], _CACHE["meta"]


def pooled_abs_moves(as_of: date) -> np.ndarray:
    """``|m|`` of every pooled move dated on or before ``as_of`` (an empty array when the table is
    missing)."""
    dates, values, _ = _load()
    return values[dates <= np.datetime64(as_of, "D")]


def pooled_description(as_of: date) -> str:
    """``pooled: N moves of K stocknet names, dated ≤ as_of`` for the forecast's provenance."""
    dates, _, meta = _load()
    n = int(np.sum(dates <= np.datetime64(as_of, "D")))
    return f"pooled: {n} earnings moves of {meta.get('names', '?')} stocknet names known at as_of"


def write_table(
    moves: list[tuple[str, str, float]], *, meta: dict[str, Any], path: Path = POOLED_FILE
) -> str:
    """Write the table (sorted by date, then symbol; ``m`` to 4 decimals) with ``meta``; returns the
    text written. Clears the cache."""
    rows = sorted((d, s, round(float(m), 4)) for d, s, m in moves)
    payload = {**meta, "moves": [list(r) for r in rows]}
    text = json.dumps(payload, indent=None, separators=(",", ":")) + "\n"
    path.write_text(text, encoding="utf-8")
    with _LOCK:
        _CACHE.clear()
    return text
