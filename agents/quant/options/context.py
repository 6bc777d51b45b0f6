"""What a desk reads before the trade (docs/design.md, "Option context"): the HV cone, IV rank
and percentile, the put skew and the earnings-implied move.

* **HV cone** (Burghardt and Lane, "How to tell if options are cheap", 1990): for each window
  of 10, 20, 60 and 252 sessions, today's close-to-close HV and the minimum, quartiles and maximum
  of that window's rolling HV over the last two years of adjusted closes (up to ``as_of``).
* **IV rank / percentile** over the days whose option IVs are stored (up to ``as_of``): rank =
  (today − min) / (max − min), percentile = share of the earlier days below today. A few days
  say little: the result carries ``sessions`` and ``meaningful`` (at least
  :data:`MIN_IV_HISTORY` sessions).
* **Put skew**: IV of the 25-delta put minus the at-the-money (50-delta) IV of one expiry, both
  read off that expiry's puts by linear interpolation in |delta| (vol points as a fraction).
* **Earnings-implied move** (term-structure method, e.g. Dubinsky, Johannes, Kaeck and Seeger,
  "Option Pricing of Earnings Announcement Risks", RFS 2019): with at-the-money IVs σ₀ of the last
  expiry before the report and σ₁ of the first after it (T in years), the report day's variance is
  σ₁²T₁ − σ₀²T₀; its square root is the 1σ move of that day, and × √(2/π) the expected absolute
  move (a normal move's mean absolute size).
"""

from __future__ import annotations

import itertools
import math
from datetime import date
from typing import Any

import numpy as np

from agents.quant.options.pricing import TRADING_DAYS

#: The HV windows of the cone (sessions).
CONE_WINDOWS = (10, 20, 60, 252)
#: Sessions of closes the cone's ranges are read over (two years).
CONE_LOOKBACK = 504
#: Fewest days of stored IV for an IV rank to mean something (about a month of sessions).
MIN_IV_HISTORY = 20


def _r(value: float | None, digits: int = 4) -> float | None:
    if value is None or not math.isfinite(value):
        return None
    return round(float(value), digits)


def hv_cone(closes: list[float] | np.ndarray, *, windows: tuple[int, ...] = CONE_WINDOWS) -> dict[str, Any]:
    """``{"10": {hv, min, q25, median, q75, max, samples}, ...}`` over the adjusted ``closes``
    (oldest first; the last :data:`CONE_LOOKBACK` + 252 used). HV = sample std of daily log
    returns × √252; a window without enough closes is ``None``."""
    values = np.asarray(closes, dtype="float64")[-(CONE_LOOKBACK + max(windows) + 1) :]
    returns = np.diff(np.log(values))
    out: dict[str, Any] = {}
    for n in windows:
        if len(returns) < n + 1:
            out[str(n)] = None
            continue
        windows_r = np.lib.stride_tricks.sliding_window_view(returns, n)[-CONE_LOOKBACK:]
        hvs = windows_r.std(axis=1, ddof=1) * math.sqrt(TRADING_DAYS)
        q = np.percentile(hvs, [0, 25, 50, 75, 100])
        out[str(n)] = {
            "hv": _r(hvs[-1]),
            "min": _r(q[0]),
            "q25": _r(q[1]),
            "median": _r(q[2]),
            "q75": _r(q[3]),
            "max": _r(q[4]),
            "samples": len(hvs),
        }
    return out


def iv_rank(history: list[tuple[date, float]]) -> dict[str, Any] | None:
    """IV rank and percentile of the last entry of ``history`` (``(day, IV)``, oldest first) among
    all of them (module docstring); ``None`` without two days."""
    if len(history) < 2:
        return None
    ivs = [iv for _, iv in history]
    now, lo, hi = ivs[-1], min(ivs), max(ivs)
    earlier = ivs[:-1]
    return {
        "iv": _r(now),
        "rank": _r((now - lo) / (hi - lo)) if hi > lo else None,
        "percentile": _r(sum(1 for v in earlier if v < now) / len(earlier)),
        "min": _r(lo),
        "max": _r(hi),
        "sessions": len(ivs),
        "first": history[0][0].isoformat(),
        "last": history[-1][0].isoformat(),
        "meaningful": len(ivs) >= MIN_IV_HISTORY,
    }


def iv_at_delta(points: list[tuple[float, float]], target: float) -> float | None:
    """IV at |delta| ``target`` by linear interpolation over ``points`` (``(|delta|, IV)``);
    ``None`` when ``target`` is outside their range."""
    pts = sorted(points)
    for (d0, v0), (d1, v1) in itertools.pairwise(pts):
        if d0 <= target <= d1:
            return v0 if d1 == d0 else v0 + (v1 - v0) * (target - d0) / (d1 - d0)
    return None


def put_skew(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """``{expiry, iv_25d, iv_50d, skew}`` of the puts of one expiry (rows with ``delta`` and
    ``iv``); ``None`` when the 25- or 50-delta IV cannot be read off them."""
    points = [
        (abs(float(r["delta"])), float(r["iv"])) for r in rows if r.get("delta") is not None and r.get("iv")
    ]
    iv25, iv50 = iv_at_delta(points, 0.25), iv_at_delta(points, 0.50)
    if iv25 is None or iv50 is None:
        return None
    return {"expiry": rows[0]["expiry"], "iv_25d": _r(iv25), "iv_50d": _r(iv50), "skew": _r(iv25 - iv50)}


def earnings_implied_move(
    *, term: list[dict[str, Any]], earnings_day: date, spot: float
) -> dict[str, Any] | None:
    """The move the chain prices for the report on ``earnings_day`` (module docstring) from
    ``term`` (``{last_trading_day (ISO), dte, iv}`` of each expiry's at-the-money IV): ``{before,
    after, sigma, expected_abs_move, expected_abs_move_usd}``; ``None`` without an expiry on each
    side or when the variance difference is not positive (the chain prices no event)."""
    before = [e for e in term if date.fromisoformat(e["last_trading_day"]) < earnings_day and e["dte"] > 0]
    after = [e for e in term if date.fromisoformat(e["last_trading_day"]) >= earnings_day]
    if not before or not after:
        return None
    e0, e1 = before[-1], after[0]
    var = e1["iv"] ** 2 * e1["dte"] / 365.0 - e0["iv"] ** 2 * e0["dte"] / 365.0
    if var <= 0:
        return {
            "before": e0,
            "after": e1,
            "sigma": None,
            "expected_abs_move": None,
            "expected_abs_move_usd": None,
        }
    sigma = math.sqrt(var)
    move = sigma * math.sqrt(2.0 / math.pi)
    return {
        "before": e0,
        "after": e1,
        "sigma": _r(sigma),
        "expected_abs_move": _r(move),
        "expected_abs_move_usd": _r(move * spot, 2),
    }
