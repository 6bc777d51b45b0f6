"""``finagent eval risk``: a walk-forward backtest of the risk forecasts over a period.

For each symbol and each session ``as_of`` of ``[start, end]`` the model forecasts from the bars
up to ``as_of`` only (:func:`agents.quant.risk.engine.run_path`: refits every 21 sessions on the
data to that session, daily filtering in between), and each forecast is scored against what
happened in the ``h`` sessions after it, as long as the window ends on or before ``end`` (so a
period that ends on 2015-12-31 reads no price after it). The statistics are
:mod:`agents.quant.risk.backtest`'s; this module reads the price files, runs the symbols (two
processes), writes the forecasts CSV and puts the tables together.

Conventions: returns are simple total returns of the adjusted close (fractions); VaR and ES are
losses as positive fractions; a VaR exception is a realised return below ``−VaR``; a range
"covers" when the realised close lies inside it (ends included).
"""

from __future__ import annotations

import json
import math
import multiprocessing
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import date
from pathlib import Path
from typing import Any, Final

import numpy as np
import pandas as pd

from agents.data.fundamentals.earnings import EarningsEvent
from agents.quant import ta_kernels
from agents.quant.risk import backtest as bt
from agents.quant.risk import batch
from agents.quant.risk import constants as C
from agents.quant.risk import distribution as dist
from agents.quant.risk.earnings import company_events, earnings_mask, past_moves
from agents.quant.risk.engine import PathForecasts, RiskSpec, run_path
from agents.quant.risk.inputs import PreparedBars, prepare_bars
from agents.quant.risk.touch import BGK_BETA, touch_from_cdf

#: The hold-out: nothing is fitted, chosen or tuned on it; a run inside it is announced.
RESERVED_START: Final = date(2016, 1, 1)
RESERVED_END: Final = date(2017, 9, 1)
#: The levels whose P(below) and P(touch) are scored, as multiples of the as_of close, beside the
#: report's stop (close − 2 × ATR(14)).
MONEYNESS: Final = (0.90, 0.95, 1.05, 1.10)
CSV_COLUMNS: Final = ("symbol", "as_of", "horizon", "sigma", *dist.QUANTILE_KEYS)


class RiskEvalError(ValueError):
    """A bad folder, symbol or period; the message says which."""


@dataclass(frozen=True)
class SymbolResult:
    """One symbol's scored rows (a DataFrame, one row per origin and horizon) or why it has none."""

    symbol: str
    rows: pd.DataFrame | None
    note: str | None = None
    coverage: str = "none"
    sources: dict[str, int] = field(default_factory=dict)


def load_bars(prices_dir: Path, symbol: str) -> pd.DataFrame:
    """The symbol's bars from a folder of Yahoo-format CSVs (the csv provider's parsing: rows with
    a missing price dropped and counted). Raises :class:`RiskEvalError` for an unknown symbol."""
    from agents.data.market.base import SymbolNotFoundError
    from agents.data.market.csv_folder import CsvFolderProvider

    try:
        return CsvFolderProvider(data_dir=prices_dir).parsed(symbol=symbol).frame
    except SymbolNotFoundError as exc:
        raise RiskEvalError(str(exc)) from exc


def atr_stop_ratio(high: np.ndarray, low: np.ndarray, close: np.ndarray) -> np.ndarray:
    """The report's stop (close − 2 × ATR(14)) over the close at every bar, from adjusted prices:
    ATR(14) with Wilder's smoothing seeded by the first 14 true ranges, as the indicators compute
    it (pandas-ta's formula, :mod:`agents.quant.ta_kernels`). The report seeds on its last 400 bars;
    Wilder's weights decay as (13/14)^n, so past 400 bars the two differ by less than 1e-12."""
    atr = ta_kernels._atr_series(high, low, close, 14, prenan=False)
    return np.asarray(1.0 - 2.0 * atr / close, dtype=np.float64)


def walk_symbol(
    bars: pd.DataFrame,
    *,
    symbol: str,
    events: Sequence[EarningsEvent] | None,
    start: date,
    end: date,
    horizons: tuple[int, ...] = C.HORIZONS,
    spec: RiskSpec | None = None,
    levels: bool = True,
) -> SymbolResult:
    """Forecast from every session of ``[start, end]`` and score each forecast whose window ends by
    ``end`` (module docstring). Returns the rows (columns: ``symbol, as_of, horizon, sigma,
    q01..q99`` as in the forecasts CSV, then ``realized`` (simple total return, NaN when the window
    passes ``end``), ``pit``, ``proxy`` (sum of the window's squared daily simple returns),
    ``hv20``/``ewma`` (baseline variances × h), ``spans_known`` (the forecast counted a report),
    ``spans_actual`` (a report's reaction fell in the window; NaN without calendar coverage) and, with
    ``levels``, ``p_below_*``, ``p_touch_*``, ``below_*``, ``touch_*`` for the stop and each
    moneyness)."""
    spec = spec or RiskSpec()
    try:
        prepared = prepare_bars(bars, as_of=end, min_bars=C.MIN_BARS)
    except ValueError as exc:
        return SymbolResult(symbol=symbol, rows=None, note=str(exc))
    dates = prepared.dates
    first_origin = max(int(np.searchsorted(dates, np.datetime64(start, "D"), side="left")), C.MIN_BARS - 1)
    origins = np.arange(first_origin, len(dates))
    if len(origins) == 0:
        return SymbolResult(symbol=symbol, rows=None, note=f"fewer than {C.MIN_BARS} sessions before {end}")
    path = run_path(prepared, events=events, origins=origins, horizons=horizons, spec=spec)
    n, n_h = len(origins), len(horizons)
    q_log = batch.log_quantiles(path)
    q_simple = np.expm1(q_log)
    sigma = batch.simple_sigma(path)
    ac = prepared.adj_close
    last = len(dates) - 1
    h_arr = np.asarray(horizons)
    ends = origins[:, None] + h_arr[None, :]
    valid = ends <= last
    ends_c = np.minimum(ends, last)
    realized_log = np.where(valid, np.log(ac[ends_c] / ac[origins][:, None]), np.nan)
    pit = batch.cdf_at(path, realized_log)
    sr2 = np.concatenate([[0.0], np.nan_to_num(prepared.simple_ret[1:]) ** 2])
    csum = np.cumsum(sr2)
    proxy = np.where(valid, csum[ends_c] - csum[origins][:, None], np.nan)
    # baselines on every session's simple return (earnings included): HV20 and RiskMetrics EWMA
    from agents.quant.risk.volatility import ewma_variance, hv_variance

    all_r2 = sr2[1:]
    hv = hv_variance(all_r2, window=20)[origins]
    ew = ewma_variance(all_r2, lam=C.EWMA_LAMBDA)[origins]
    spans_known = np.array([[len(w) > 0 for w in row] for row in path.windows])
    if events:
        mask = earnings_mask(list(events), dates).astype(np.int64)
        mcs = np.cumsum(mask)
        spans_actual = np.where(valid, (mcs[ends_c] - mcs[origins][:, None]) > 0, np.nan).astype(float)
    else:
        spans_actual = np.full((n, n_h), np.nan)
    frame: dict[str, Any] = {
        "symbol": np.repeat(symbol, n * n_h),
        "as_of": np.repeat(pd.DatetimeIndex(dates[origins]).strftime("%Y-%m-%d").to_numpy(), n_h),
        "horizon": np.tile(h_arr, n),
        "sigma": sigma.ravel(),
    }
    for j, key in enumerate(dist.QUANTILE_KEYS):
        frame[key] = q_simple[:, :, j].ravel()
    frame["realized"] = np.expm1(realized_log).ravel()
    frame["pit"] = pit.ravel()
    frame["proxy"] = proxy.ravel()
    frame["hv20"] = (hv[:, None] * h_arr[None, :]).ravel()
    frame["ewma"] = (ew[:, None] * h_arr[None, :]).ravel()
    frame["spans_known"] = spans_known.ravel()
    frame["spans_actual"] = spans_actual.ravel()
    if levels:
        _level_columns(
            frame,
            prepared=prepared,
            path=path,
            origins=origins,
            horizons=horizons,
            valid=valid,
            realized_log=realized_log,
        )
    sources: dict[str, int] = {}
    for fit in path.fits:
        key = fit.jump_source.split(" (")[0]
        sources[key] = sources.get(key, 0) + 1
    return SymbolResult(symbol=symbol, rows=pd.DataFrame(frame), coverage=path.coverage, sources=sources)


def _level_columns(
    frame: dict[str, Any],
    *,
    prepared: PreparedBars,
    path: PathForecasts,
    origins: np.ndarray,
    horizons: tuple[int, ...],
    valid: np.ndarray,
    realized_log: np.ndarray,
) -> None:
    """Add to ``frame`` (the columns of :func:`walk_symbol`, one row per origin and horizon) the
    level columns of the ATR stop and each moneyness: ``level_*`` (the level as a ratio of the
    as_of close), ``p_below_*`` / ``p_touch_*`` (the forecast's probabilities), and the outcomes
    ``below_*`` (close at the window's end at or below), ``touch_*`` (any close in the window
    reached it) and ``touch_intraday_*`` (the adjusted lows or highs did); NaN past the data."""
    n, n_h = len(origins), len(horizons)
    h_arr = np.asarray(horizons)
    ac = prepared.adj_close
    ratios = {f"m{round(m * 100)}": np.full(n, m) for m in MONEYNESS}
    ratios = {"stop": atr_stop_ratio(prepared.adj_high, prepared.adj_low, ac)[origins]} | ratios
    # the window's lowest and highest adjusted close relative to the as_of close
    path_min = np.full((n, n_h), np.nan)
    path_max = np.full((n, n_h), np.nan)
    for k, h in enumerate(horizons):
        win = np.lib.stride_tricks.sliding_window_view(np.concatenate([ac, np.full(h, np.nan)]), h)
        fut = win[origins + 1]
        with np.errstate(invalid="ignore"):
            path_min[:, k] = np.where(
                valid[:, k], np.nanmin(np.where(np.isnan(fut), np.inf, fut), axis=1), np.nan
            )
            path_max[:, k] = np.where(
                valid[:, k], np.nanmax(np.where(np.isnan(fut), -np.inf, fut), axis=1), np.nan
            )
    path_min /= ac[origins][:, None]
    path_max /= ac[origins][:, None]
    # the same with the adjusted lows and highs (what a stop order or an intraday touch sees)
    low_min = np.full((n, n_h), np.nan)
    high_max = np.full((n, n_h), np.nan)
    for k, h in enumerate(horizons):
        lows = np.lib.stride_tricks.sliding_window_view(
            np.concatenate([prepared.adj_low, np.full(h, np.inf)]), h
        )
        highs = np.lib.stride_tricks.sliding_window_view(
            np.concatenate([prepared.adj_high, np.full(h, -np.inf)]), h
        )
        low_min[:, k] = np.where(valid[:, k], lows[origins + 1].min(axis=1), np.nan)
        high_max[:, k] = np.where(valid[:, k], highs[origins + 1].max(axis=1), np.nan)
    low_min /= ac[origins][:, None]
    high_max /= ac[origins][:, None]
    realized_ratio = np.exp(realized_log)
    log_levels = np.stack([np.log(r) for r in ratios.values()], axis=1)  # (n, m)
    x_below = np.broadcast_to(log_levels[:, None, :], (n, n_h, log_levels.shape[1]))
    f_below = batch.cdf_at(path, x_below)
    shift = BGK_BETA * path.sigma_daily[:, None, None]
    down = log_levels[:, None, :] < 0
    f_shift = batch.cdf_at(path, np.where(down, x_below - shift, x_below + shift))
    for j, name in enumerate(ratios):
        ratio = ratios[name]
        is_down = bool(np.all(ratio < 1.0))
        p_below = f_below[:, :, j]
        p_touch = touch_from_cdf(
            f_end=p_below if is_down else 1.0 - p_below,
            f_shifted=f_shift[:, :, j] if is_down else 1.0 - f_shift[:, :, j],
            horizons=h_arr,
        )
        frame[f"level_{name}"] = np.repeat(ratio, n_h)
        frame[f"p_below_{name}"] = p_below.ravel()
        frame[f"p_touch_{name}"] = p_touch.ravel()
        below = np.where(valid, realized_ratio <= ratio[:, None], np.nan)
        if is_down:
            touched = np.where(valid, path_min <= ratio[:, None], np.nan)
            intraday = np.where(valid, low_min <= ratio[:, None], np.nan)
        else:
            touched = np.where(valid, path_max >= ratio[:, None], np.nan)
            intraday = np.where(valid, high_max >= ratio[:, None], np.nan)
        frame[f"below_{name}"] = below.ravel()
        frame[f"touch_{name}"] = touched.ravel()
        frame[f"touch_intraday_{name}"] = intraday.ravel()


def _run_one(args: tuple[Path, str, date, date, tuple[int, ...], RiskSpec, bool]) -> SymbolResult:
    prices_dir, symbol, start, end, horizons, spec, levels = args
    try:
        bars = load_bars(prices_dir, symbol)
    except RiskEvalError as exc:
        return SymbolResult(symbol=symbol, rows=None, note=str(exc))
    events = company_events(symbol)
    return walk_symbol(
        bars, symbol=symbol, events=events, start=start, end=end, horizons=horizons, spec=spec, levels=levels
    )


def run_symbols(
    prices_dir: Path,
    symbols: Sequence[str],
    *,
    start: date,
    end: date,
    horizons: tuple[int, ...] = C.HORIZONS,
    spec: RiskSpec | None = None,
    processes: int = 2,
    levels: bool = True,
    progress: Callable[[SymbolResult, int, int], None] | None = None,
) -> list[SymbolResult]:
    """:func:`walk_symbol` for every symbol (``processes`` worker processes; 1 runs in this one),
    in the order given; ``progress(result, done, total)`` after each."""
    spec = spec or RiskSpec()
    jobs = [(prices_dir, s, start, end, horizons, spec, levels) for s in symbols]
    results: list[SymbolResult] = []
    if processes <= 1 or len(jobs) == 1:
        for job in jobs:
            results.append(_run_one(job))
            if progress:
                progress(results[-1], len(results), len(jobs))
        return results
    ctx = multiprocessing.get_context("forkserver" if os.name != "nt" else "spawn")
    with ctx.Pool(processes) as pool:
        for result in pool.imap(_run_one, jobs):
            results.append(result)
            if progress:
                progress(result, len(results), len(jobs))
    return results


def _pooled_one(args: tuple[Path, str, date, RiskSpec]) -> list[tuple[str, str, float]]:
    prices_dir, symbol, until, spec = args
    events = company_events(symbol)
    if not events:
        return []
    try:
        prepared = prepare_bars(load_bars(prices_dir, symbol), as_of=until, min_bars=C.MIN_BARS)
    except (RiskEvalError, ValueError):
        return []
    origins = np.arange(C.MIN_BARS - 1, len(prepared))
    path = run_path(
        prepared, events=events, origins=origins, horizons=(1,), spec=replace(spec, add_earnings=False)
    )
    out: list[tuple[str, str, float]] = []
    for move in past_moves(events, prepared.dates, prepared.log_ret):
        at = move.first - 1 - (C.MIN_BARS - 1)  # the origin the session before the reaction
        if at < 0:
            continue
        day = pd.Timestamp(prepared.dates[move.last]).date().isoformat()
        out.append((day, symbol, move.log_move / float(path.sigma_daily[at])))
    return out


def build_pooled_moves(
    prices_dir: Path, symbols: Sequence[str], *, until: date, spec: RiskSpec | None = None, processes: int = 2
) -> tuple[list[tuple[str, str, float]], dict[str, Any]]:
    """The pooled earnings-move table (:mod:`agents.quant.risk.pooled`): every past report of the
    ``symbols`` the calendar covers, up to ``until``, as ``(last reaction session, symbol, m)`` with
    ``m`` the reaction's log return over the walk-forward σ forecast made the session before
    (:func:`~agents.quant.risk.engine.run_path` on the bars up to ``until``). Returns the rows and
    the table's metadata."""
    spec = spec or RiskSpec()
    jobs = [(prices_dir, s, until, spec) for s in symbols]
    if processes <= 1:
        parts = [_pooled_one(j) for j in jobs]
    else:
        ctx = multiprocessing.get_context("forkserver")
        with ctx.Pool(processes) as pool:
            parts = pool.map(_pooled_one, jobs)
    rows = [r for part in parts for r in part]
    names = sorted({r[1] for r in rows})
    meta = {
        "what": (
            "earnings reactions: [last reaction session, symbol, "
            "log move / sigma forecast the session before]"
        ),
        "until": until.isoformat(),
        "names": len(names),
        "symbols": names,
        "model": spec.label(),
    }
    return rows, meta


# -- the tables -----------------------------------------------------------------------------------

#: The levels scored for P(below) and P(touch), by column suffix.
LEVEL_LABELS: Final = {
    "stop": "stop = close − 2 × ATR(14)",
    "m90": "0.90 × close",
    "m95": "0.95 × close",
    "m105": "1.05 × close",
    "m110": "1.10 × close",
}


def nw_lags(n_dates: int, horizon: int) -> int:
    """Newey–West lags over a date series: the larger of ``h − 1`` (overlapping ``h``-session
    windows) and Newey and West's (1994) rule ``⌊4 (T/100)^{2/9}⌋``."""
    rule = math.floor(4.0 * (max(n_dates, 1) / 100.0) ** (2.0 / 9.0))
    return max(horizon - 1, rule)


def _rate(dates: np.ndarray, hits: np.ndarray, lags: int) -> dict[str, Any]:
    return bt.clustered_rate(dates, hits, maxlags=lags)


def _var_block(d: pd.DataFrame, p: float, column: str, h: int, lags: int) -> dict[str, Any]:
    """Exception rate of the VaR at ``1 − p`` (a return below the ``p`` quantile) with its
    date-clustered interval, the pooled Kupiec test, and the share of names whose Kupiec and
    Christoffersen tests pass at 5 % (on non-overlapping windows: every ``h``-th origin)."""
    exc = (d["realized"] < d[column]).to_numpy(dtype=float)
    out = _rate(d["as_of"].to_numpy(), exc, lags)
    n = len(exc)
    x = int(exc.sum())
    out["expected"] = p
    out["kupiec_pooled_p"] = bt.kupiec_pof(x, n, p).p_value if n else None
    kupiec_pass = cc_pass = names = 0
    for _, g in d.groupby("symbol", sort=False):
        g = g.sort_values("as_of").iloc[::h]
        if len(g) < 20:
            continue
        e = (g["realized"] < g[column]).to_numpy()
        names += 1
        kupiec_pass += bt.kupiec_pof(int(e.sum()), len(e), p).passes()
        cc_pass += bt.christoffersen(e, p).conditional_coverage.passes()
    out["names"] = names
    out["kupiec_pass_share"] = kupiec_pass / names if names else None
    out["christoffersen_pass_share"] = cc_pass / names if names else None
    return out


def _coverage(d: pd.DataFrame, lags: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    dates = d["as_of"].to_numpy()
    for prob, lo, hi in ((0.50, "q25", "q75"), (0.80, "q10", "q90"), (0.95, "q025", "q975")):
        inside = ((d["realized"] >= d[lo]) & (d["realized"] <= d[hi])).to_numpy(dtype=float)
        out[f"{int(prob * 100)}"] = _rate(dates, inside, lags) | {"nominal": prob}
    return out


def _calibration(p: np.ndarray, y: np.ndarray) -> dict[str, Any] | None:
    from agents.quant import evaluation_stats as es

    ok = np.isfinite(p) & np.isfinite(y)
    if not ok.any():
        return None
    pp, yy = np.clip(p[ok], 0.0, 1.0), y[ok]
    return {
        "n": int(ok.sum()),
        "mean_p": float(pp.mean()),
        "observed": float(yy.mean()),
        "brier": es.brier_score(pp, yy),
        "ece": es.expected_calibration_error(pp, yy),
        "reliability": es.reliability_table(pp, yy),
    }


def _variance_block(d: pd.DataFrame, lags: int) -> dict[str, Any]:
    proxy = d["proxy"].to_numpy()
    losses = {
        "model": bt.qlike(proxy, d["sigma"].to_numpy() ** 2),
        "hv20": bt.qlike(proxy, d["hv20"].to_numpy()),
        "ewma": bt.qlike(proxy, d["ewma"].to_numpy()),
    }
    ok = np.all([np.isfinite(v) for v in losses.values()], axis=0)
    mses = {
        "model": bt.mse(proxy, d["sigma"].to_numpy() ** 2),
        "hv20": bt.mse(proxy, d["hv20"].to_numpy()),
        "ewma": bt.mse(proxy, d["ewma"].to_numpy()),
    }
    dates = d["as_of"].to_numpy()[ok]
    out: dict[str, Any] = {"n": int(ok.sum()), "zero_proxy_left_out": int((~ok).sum())}
    for values, table in ((losses, "qlike"), (mses, "mse")):
        block: dict[str, Any] = {k: float(np.mean(v[ok])) for k, v in values.items()}
        for base in ("hv20", "ewma"):
            block[f"vs_{base}"] = block["model"] / block[base] - 1.0 if block[base] else None
            dm = bt.diebold_mariano_by_date(dates, values["model"][ok], values[base][ok], maxlags=lags)
            block[f"dm_t_{base}"] = dm.t if dm is not None else None
        out[table] = block
    return out


def summarise(
    results: Sequence[SymbolResult],
    *,
    start: date,
    end: date,
    spec: RiskSpec,
    horizons: tuple[int, ...] = C.HORIZONS,
) -> dict[str, Any]:
    """The tables of ``finagent eval risk`` as one JSON-ready object (module docstring; the
    targets' checks are in ``targets``)."""
    from agents.quant.risk.forecast import spec_version

    frames = [r.rows for r in results if r.rows is not None]
    rows = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    covered = sorted(r.symbol for r in results if r.rows is not None and r.coverage == "calendar")
    uncovered = sorted(r.symbol for r in results if r.rows is not None and r.coverage != "calendar")
    out: dict[str, Any] = {
        "period": {"from": start.isoformat(), "to": end.isoformat()},
        "reserved": _overlaps_reserved(start, end),
        "model": {"label": spec.label(), "version": spec_version(spec)},
        "symbols": len(results),
        "scored_symbols": len(frames),
        "skipped": {r.symbol: r.note for r in results if r.rows is None},
        "earnings_calendar": {"covered": covered, "not_covered": uncovered},
        "scoring": (
            "each forecast is scored when its window ends on or before --to; returns are simple total "
            "returns of the adjusted close; intervals are 95 %, clustered by date (per-date sums of "
            "a ratio estimator, Newey-West over dates)"
        ),
        "horizons": {},
    }
    if rows.empty:
        out["targets"] = []
        return out
    scored = rows.dropna(subset=["realized"])
    for h in horizons:
        d = scored[scored["horizon"] == h]
        if d.empty:
            continue
        n_dates = int(d["as_of"].nunique())
        lags = nw_lags(n_dates, h)
        block: dict[str, Any] = {
            "rows": len(d),
            "dates": n_dates,
            "names": int(d["symbol"].nunique()),
            "lags": lags,
            "first": str(d["as_of"].min()),
            "last": str(d["as_of"].max()),
            "var": {"95": _var_block(d, 0.05, "q05", h, lags), "99": _var_block(d, 0.01, "q01", h, lags)},
            "ranges": _coverage(d, lags),
            "pit": bt.pit_histogram(d["as_of"].to_numpy(), d["pit"].to_numpy(), maxlags=lags),
            "variance": _variance_block(d, lags),
        }
        spans = d[d["spans_actual"] == 1]
        quiet = d[d["spans_actual"] == 0]
        none = d[d["spans_actual"].isna()]
        block["ranges_by_earnings"] = {
            "spans_a_report": _coverage(spans, lags) if len(spans) else None,
            "no_report": _coverage(quiet, lags) if len(quiet) else None,
            "no_calendar": _coverage(none, lags) if len(none) else None,
            "rows": {
                "spans_a_report": len(spans),
                "no_report": len(quiet),
                "no_calendar": len(none),
            },
        }
        levels: dict[str, Any] = {}
        for name in LEVEL_LABELS:
            if f"p_below_{name}" not in d:
                continue
            levels[name] = {
                "label": LEVEL_LABELS[name],
                "below": _calibration(d[f"p_below_{name}"].to_numpy(), d[f"below_{name}"].to_numpy()),
                "touch": _calibration(d[f"p_touch_{name}"].to_numpy(), d[f"touch_{name}"].to_numpy()),
                "touch_intraday_observed": float(np.nanmean(d[f"touch_intraday_{name}"].to_numpy())),
            }
        block["levels"] = levels
        out["horizons"][str(h)] = block
    d1 = scored[scored["horizon"] == 1]
    zones: dict[str, int] = {"green": 0, "yellow": 0, "red": 0}
    per_name: dict[str, list[str]] = {}
    for symbol, g in d1.groupby("symbol", sort=True):
        e = (g.sort_values("as_of")["realized"] < g.sort_values("as_of")["q01"]).to_numpy()
        blocks = bt.basel_blocks(e)
        per_name[str(symbol)] = list(blocks)
        for z in blocks:
            zones[z] += 1
    total = sum(zones.values())
    out["basel"] = {
        "window": bt.BASEL_WINDOW,
        "blocks": total,
        "zones": zones,
        "shares": {k: v / total for k, v in zones.items()} if total else None,
        "expected_shares": bt.basel_expected_shares(),
        "per_name": per_name,
    }
    out["targets"] = targets(out)
    return out


def _overlaps_reserved(start: date, end: date) -> bool:
    return start <= RESERVED_END and end >= RESERVED_START


def targets(summary: dict[str, Any]) -> list[dict[str, Any]]:
    """The done-when targets checked on ``summary``: each ``{name, target, value, low, high, met}``
    (``value`` pooled over the rows, ``low``/``high`` the date-clustered interval of the per-date
    mean)."""
    hz = summary["horizons"]
    out: list[dict[str, Any]] = []

    def add(
        name: str, target: str, value: float | None, ok: bool | None, low: Any = None, high: Any = None
    ) -> None:
        out.append({"name": name, "target": target, "value": value, "low": low, "high": high, "met": ok})

    one = hz.get("1")
    if one:
        v95, v99 = one["var"]["95"], one["var"]["99"]
        add(
            "1-day VaR(95%) exception rate",
            "4.5-5.5 %",
            v95["pooled"],
            0.045 <= v95["pooled"] <= 0.055,
            v95["low"],
            v95["high"],
        )
        add(
            "1-day VaR(99%) exception rate",
            "0.7-1.3 %",
            v99["pooled"],
            0.007 <= v99["pooled"] <= 0.013,
            v99["low"],
            v99["high"],
        )
        for level, v in (("95", v95), ("99", v99)):
            share = v["christoffersen_pass_share"]
            add(
                f"Christoffersen (VaR {level}%) passes at 5 %",
                ">= 85 % of names",
                share,
                share is not None and share >= 0.85,
            )
        q = one["variance"]["qlike"]
        add(
            "1-day sigma² QLIKE vs HV20",
            "<= -5 % with DM t <= -2",
            q["vs_hv20"],
            q["vs_hv20"] is not None and q["vs_hv20"] <= -0.05 and (q["dm_t_hv20"] or 0) <= -2,
        )
    twenty = hz.get("20")
    if twenty:
        for level in ("80", "95"):
            c = twenty["ranges"][level]
            nominal = int(level) / 100
            add(
                f"20-session {level}% range coverage",
                f"{level} ± 2 points",
                c["pooled"],
                abs(c["pooled"] - nominal) <= 0.02,
                c["low"],
                c["high"],
            )
        spans = twenty["ranges_by_earnings"]["spans_a_report"]
        if spans:
            for level in ("80", "95"):
                c = spans[level]
                nominal = int(level) / 100
                add(
                    f"20-session {level}% range spanning a report",
                    f"{level} ± 4 points",
                    c["pooled"],
                    abs(c["pooled"] - nominal) <= 0.04,
                    c["low"],
                    c["high"],
                )
    return out


def write_forecasts(results: Sequence[SymbolResult], path: Path) -> int:
    """Write the forecasts CSV (:data:`CSV_COLUMNS`, one row per symbol, origin and horizon, sorted
    so) to ``path``; returns the number of rows."""
    frames = [r.rows[list(CSV_COLUMNS)] for r in results if r.rows is not None]
    table = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=list(CSV_COLUMNS))
    table = table.sort_values(["symbol", "as_of", "horizon"], kind="mergesort")
    path.parent.mkdir(parents=True, exist_ok=True)
    table.to_csv(path, index=False, float_format="%.8g")
    return len(table)


#: The record a report cites is measured on the fitting period only.
RECORD_LAST_DAY: Final = date(2015, 12, 31)


def record(summary: dict[str, Any]) -> dict[str, Any]:
    """The compact backtest record (:mod:`agents.quant.risk.record`) of a :func:`summarise` result."""

    def rate(block: dict[str, Any] | None) -> dict[str, Any] | None:
        if not block or block.get("pooled") is None:
            return None
        return {"rate": block["pooled"], "low": block["low"], "high": block["high"], "rows": block["n_rows"]}

    horizons: dict[str, Any] = {}
    for h, b in summary["horizons"].items():
        spans = b["ranges_by_earnings"]["spans_a_report"] or {}
        stop = (b.get("levels") or {}).get("stop") or {}
        horizons[h] = {
            "var": {level: rate(b["var"][level]) for level in ("95", "99")},
            "ranges": {level: rate(b["ranges"][level]) for level in ("50", "80", "95")},
            "ranges_spanning_a_report": {level: rate(spans.get(level)) for level in ("50", "80", "95")},
            "stop": {
                kind: {k: stop[kind][k] for k in ("mean_p", "observed", "ece", "n")}
                if stop.get(kind)
                else None
                for kind in ("below", "touch")
            },
        }
    return {
        "what": "finagent eval risk: walk-forward backtest of the risk forecasts (docs/evaluation.md, Risk)",
        "model_version": summary["model"]["version"],
        "model": summary["model"]["label"],
        "period": summary["period"],
        "names": summary["scored_symbols"],
        "horizons": horizons,
    }


def write_record(summary: dict[str, Any], path: Path | None = None) -> Path:
    """Write :func:`record` of ``summary`` to the package's record file (or ``path``).

    Raises:
        RiskEvalError: the period is not inside the fitting period (it ends after 2015-12-31).
    """
    from agents.quant.risk.record import RECORD_FILE

    if date.fromisoformat(summary["period"]["to"]) > RECORD_LAST_DAY:
        raise RiskEvalError(
            f"the backtest record a report cites is measured on the fitting period only (to "
            f"{RECORD_LAST_DAY} at the latest), not to {summary['period']['to']}"
        )
    target = path or RECORD_FILE
    target.write_text(json.dumps(record(summary), indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return target
