"""The forward scorecard: how stored recommendations did once their horizons passed.

Scoring (:func:`score_pending`, also the beat task ``finagent.scorecard.score``): for every
``done`` analysis with a signal and each horizon h of :data:`HORIZONS` (5, 20, 60 trading days),
once the symbol's data holds h bars after ``as_of``:

* forward return on adjusted prices (dividends and splits included) from the entry to the close
  h bars after ``as_of`` (:func:`forward_return`). Entry rule (:data:`ENTRIES`): ``open`` (the
  default) buys at the open of the session after ``as_of``, the first price a signal computed
  from the ``as_of`` close can trade at; ``close`` fills at that close itself (optimistic: the
  signal's own price). The adjusted open is ``open × adj_close / close``;
* benchmark return over the same dates and by the same entry rule: ``FINAGENT_ANALYSIS_BENCHMARK_SYMBOL``
  (SPY) through the data provider, or the folder ``FINAGENT_ANALYSIS_BENCHMARK_DATA_DIR`` (Yahoo-format
  CSVs, or a Lean daily folder with ``factor_files/``: ``agents.data.market.lean_folder``, e.g.
  ``shared/data/ohlcv/lean`` whose SPY covers 1998–2021), where its data covers both dates;
  otherwise the equal-weighted universe of the run (the mean of the same-window returns of the
  backtest's symbols, or, outside a backtest, of every symbol analysed as of that date), and the
  row's ``benchmark`` column says which;
* excess return ``r − r_benchmark``. One row per ``(analysis_id, horizon)``, inserted ON CONFLICT
  DO NOTHING, so scoring is idempotent and runs as horizons mature. Each row records its
  ``entry`` and ``benchmark_spec`` (:func:`benchmark_spec`); a row of another basis is stale:
  left out of the scorecard and counted, and recomputed by ``build_scorecard(rescore=True)``
  (``finagent scorecard --rescore``).

Metrics (:func:`metrics`), per strategy and horizon, over the rows' excess returns ``x``; the
statistics are pure functions of ``agents.quant.evaluation_stats`` (formulas and sources there):

* **directional hit**: BUY and SELL calls only (BUY right when ``x > 0``, SELL when ``x < 0``),
  with the Wilson 95 % interval, and the same share tested per date (Newey–West) because calls of
  one date are not independent; beside it the share of all rows with ``x > 0`` (what always-BUY
  scores);
* **HOLD against its base rate**: the share of HOLD windows with ``|x| < 0.01·√h`` against the
  same share over all windows (always-HOLD); a HOLD is never counted as a hit;
* **mean signed excess** ``mean(pos·x)`` with ``pos`` = +1 BUY, 0 HOLD, −1 SELL (following the
  signals long/short/flat against the benchmark), and its test: the per-date means, then a
  Newey–West t with ``ceil(h/step) − 1`` lags over the date series (clustered by date, robust to
  the overlap of windows longer than the grid step);
* **information coefficient**: Spearman of the score with ``x`` across the tickers of each date,
  averaged over dates, with a Newey–West t over the per-date series (the pipeline's score is the
  scorer's [-1, 1] score, a baseline's +1/0/−1);
* **Brier score**, **ECE** (10 equal-width bins weighted by count) and the **reliability table**
  of a probability of outperforming (``y = 1`` when ``x > 0``): a ``p_outperform`` column where
  every row has one, else the confidence read as ``p = 0.5 + c/2`` for BUY, ``0.5 − c/2`` for
  SELL, ``0.5`` for HOLD (:func:`probabilities`); printed beside the 0.25 of always saying 0.5,
  with a per-date Newey–West interval of the difference. A baseline states no probability: it is
  scored at its own ``p = 0.5`` (:data:`NO_STATED_P`), never at the pipeline's p, so its Brier is
  0.25 by construction and its ECE is only the distance of the base rate from 0.5; the tables
  say so beside both.

Comparisons (:func:`paired_difference`): the pipeline's per-date mean signed excess minus each
baseline's, with its Newey–West interval. The verdict (:func:`verdict`) states only what the
intervals support: a difference or a ranking is claimed only when the 95 % interval excludes
the null value, "does not differ" otherwise.

Baselines (``agents.quant.baselines``) are scored on the same (symbol, date) grid as the pipeline's
rows, so their forward and benchmark returns are the pipeline's, only the signal differs.
Breakdowns by analyst (deterministic scorer or LLM synthesis), model and prompt version (where
the report records one) use the pipeline's rows; the breakdown by analyst also scores the
social-sentiment analyst (:func:`social_rows`) on the rows whose report has a social reading,
and the learned analyst (:func:`learned_rows`) on the rows whose report has its view, though
neither has weight in the signal by default. A backtest's universe is a fixed list, so the
scorecard carries a survivorship note. Plots (matplotlib, Agg): a calibration curve and the
cumulative signed excess return of the pipeline and the baselines at the shortest horizon (mean
``pos·x`` of each grid date, compounded with empyrical's ``cum_returns``; with weekly dates and
h = 5 the periods do not overlap).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any, Final

import numpy as np
import pandas as pd

from agents.analysts.table import analyst
from agents.data.market.base import MarketDataProvider, ProviderError
from agents.data.market.csv_folder import CsvFolderProvider
from agents.data.market.lean_folder import LeanFolderProvider, is_lean_folder
from agents.data.routing import get_provider
from agents.quant import evaluation_stats as stats
from agents.quant.baselines import BASELINES, baseline_frame, signal_at
from core.settings import Settings
from db import backtest_repo
from db.engine import get_engine
from pipeline import service

HORIZONS: Final = (5, 20, 60)
SIGNALS: Final = ("BUY", "HOLD", "SELL")
POSITION: Final[dict[str, float]] = {"BUY": 1.0, "HOLD": 0.0, "SELL": -1.0}
#: Brier score of always saying 0.5 (no view): the baseline every Brier is printed beside.
NO_VIEW_BRIER: Final = 0.25
#: The calibrated probability column scored in place of the mapped confidence when every row has
#: one (:func:`probabilities`).
P_COLUMN: Final = "p_outperform"
#: ``p_source`` of a strategy that states no probability (the baselines): every row is scored at
#: p = 0.5, what "no view" says, so its Brier is 0.25 by construction (module docstring).
NO_STATED_P: Final = "none stated (p = 0.5)"
#: Daily excess-return volatility unit of the HOLD hit band (module docstring): about the daily
#: tracking error of a US large cap against the index.
HOLD_BAND_DAILY: Final = 0.01
#: A benchmark or universe bar more than this many days before a window's date does not cover it
#: (a long weekend is fine, a missing month is not).
MAX_BAR_GAP_DAYS: Final = 4
#: Rows per insert transaction of the scoring task.
INSERT_BATCH: Final = 1000
PIPELINE: Final = "pipeline"
#: Entry rules (:func:`forward_return`): the next session's open (default) or the as-of close.
ENTRIES: Final = ("open", "close")
DEFAULT_ENTRY: Final = "open"
ENTRY_TEXT: Final[dict[str, str]] = {
    "open": "entry at the next session's open after as_of, exit at the close h sessions after as_of",
    "close": "entry at the as_of close (the price the signal was computed from), exit at the close "
    "h sessions later",
}


# --------------------------------------------------------------------------------------------
# Returns
# --------------------------------------------------------------------------------------------


def forward_return(
    closes: pd.Series,
    *,
    as_of: date,
    horizon: int,
    entry: str = "close",
    opens: pd.Series | None = None,
) -> tuple[date, float] | None:
    """Return of holding from the entry to the close ``horizon`` bars after ``as_of`` (the last
    bar on or before it), as ``(end_date, fraction)``; ``None`` while the data holds fewer bars
    after it (the horizon has not passed) or none on or before ``as_of``.

    ``closes``: adjusted closes (USD) on an ascending ``DatetimeIndex``; ``opens``: adjusted
    opens on the same index (``agents.data.market.base.adjusted_ohlc``), needed for
    ``entry="open"``. Entry (:data:`ENTRIES`): ``"open"`` buys at the open of the session after
    ``as_of`` (the first price a signal computed from the ``as_of`` close can trade at),
    ``"close"`` at the ``as_of`` close itself (the earlier rule: it assumes a fill at the price
    the signal was computed from). Raises ``ValueError`` for another entry or ``"open"`` without
    ``opens``."""
    if entry not in ENTRIES:
        raise ValueError(f"entry {entry!r}: one of {', '.join(ENTRIES)}")
    if entry == "open" and opens is None:
        raise ValueError("entry 'open' needs the opens")
    position = int(closes.index.searchsorted(pd.Timestamp(as_of), side="right")) - 1
    if position < 0 or position + horizon >= len(closes):
        return None
    start_price = float(opens.iloc[position + 1]) if entry == "open" and opens is not None else None
    if start_price is None:
        start_price = float(closes.iloc[position])
    end: date = closes.index[position + horizon].date()
    return end, float(closes.iloc[position + horizon]) / start_price - 1.0


def entry_date(closes: pd.Series, *, as_of: date, entry: str) -> date | None:
    """The session the position is entered on: ``as_of``'s bar for ``"close"``, the next bar
    for ``"open"``; ``None`` when the data does not hold it."""
    position = int(closes.index.searchsorted(pd.Timestamp(as_of), side="right")) - 1 + (entry == "open")
    if position < 0 or position >= len(closes):
        return None
    found: date = closes.index[position].date()
    return found


def period_return(
    closes: pd.Series, *, start: date, end: date, opens: pd.Series | None = None
) -> float | None:
    """Return from the last bar on or before ``start`` to the last bar on or before ``end``
    (fraction): from that bar's close, or from its open when ``opens`` is given (the position
    entered at ``start``'s open); ``None`` when the series does not cover the window (no bar by
    ``start``, or the bar found for either date is more than ``MAX_BAR_GAP_DAYS`` days before
    it)."""
    index = closes.index
    first = int(index.searchsorted(pd.Timestamp(start), side="right")) - 1
    last = int(index.searchsorted(pd.Timestamp(end), side="right")) - 1
    if first < 0 or last < first:
        return None
    gap = timedelta(days=MAX_BAR_GAP_DAYS)
    if start - index[first].date() > gap or end - index[last].date() > gap:
        return None
    base = float(opens.iloc[first]) if opens is not None else float(closes.iloc[first])
    if opens is not None and index[first].date() != start:
        return None  # the open of another session is not this window's entry
    return float(closes.iloc[last]) / base - 1.0


def benchmark_spec(settings: Settings) -> str:
    """The configured benchmark as recorded on each score row: ``SYMBOL via <source>`` with the
    source the benchmark data folder or the data provider. A row whose spec differs from the
    current one is stale (``build_scorecard``)."""
    folder = settings.analysis.benchmark_data_dir
    source = f"folder {folder}" if folder else f"provider {settings.data.provider}"
    return f"{settings.analysis.benchmark_symbol} via {source}"


@dataclass
class PriceBook:
    """Adjusted opens and closes per symbol (whole history, read once per process call) from
    the data provider, and the benchmark's from its own source; ``spec`` is
    :func:`benchmark_spec` of the settings it was built from."""

    provider: MarketDataProvider
    benchmark_symbol: str
    benchmark_provider: MarketDataProvider
    spec: str = ""
    _bars: dict[str, pd.DataFrame | None] = field(default_factory=dict)
    _benchmark: dict[tuple[date, date, tuple[str, ...], bool], tuple[float, str] | None] = field(
        default_factory=dict
    )

    @classmethod
    def from_settings(cls, settings: Settings) -> PriceBook:
        """The book of the configured provider and benchmark (module docstring)."""
        provider = get_provider(settings=settings)
        folder = settings.analysis.benchmark_data_dir
        bench: MarketDataProvider = provider
        if folder and is_lean_folder(folder):  # Lean daily files + factor files (e.g. SPY 1998–2021)
            bench = LeanFolderProvider(data_dir=folder)
        elif folder:
            bench = CsvFolderProvider(data_dir=folder)
        return cls(
            provider=provider,
            benchmark_symbol=settings.analysis.benchmark_symbol,
            benchmark_provider=bench,
            spec=benchmark_spec(settings),
        )

    @staticmethod
    def _load(provider: MarketDataProvider, symbol: str) -> pd.DataFrame | None:
        try:
            frame = provider.bars(symbol=symbol, start=None, end=provider.latest_date(symbol=symbol))
        except ProviderError:
            return None
        adj_close = frame["adj_close"].astype(float)
        # the open on adj_close's basis (open × adj_close/close, the back-adjustment of
        # agents.data.market.base.adjusted_ohlc without its rescale to the last bar), so an
        # open-to-close ratio is the adjusted return of the position
        adj_open = frame["open"].astype(float) * adj_close / frame["close"].astype(float)
        return pd.DataFrame({"open": adj_open, "close": adj_close})

    def _frame(self, key: str, provider: MarketDataProvider, symbol: str) -> pd.DataFrame | None:
        if key not in self._bars:
            self._bars[key] = self._load(provider, symbol)
        return self._bars[key]

    def closes(self, symbol: str) -> pd.Series | None:
        """Adjusted closes of ``symbol`` (``None`` when the provider does not have it)."""
        frame = self._frame(symbol, self.provider, symbol)
        return None if frame is None else frame["close"]

    def opens(self, symbol: str) -> pd.Series | None:
        """Adjusted opens of ``symbol`` (on the adjusted closes' basis; ``None`` when unknown)."""
        frame = self._frame(symbol, self.provider, symbol)
        return None if frame is None else frame["open"]

    def benchmark_return(
        self, *, start: date, end: date, universe: Sequence[str], at_open: bool = False
    ) -> tuple[float, str] | None:
        """``(return, name)`` of the benchmark over ``start..end`` (module docstring), entered
        at ``start``'s close, or at its open when ``at_open``: the benchmark symbol where its data
        covers the window, else the equal-weighted ``universe`` (named ``equal-weighted universe
        (N symbols)``); ``None`` when neither covers it."""
        key = (start, end, tuple(universe), at_open)
        if key in self._benchmark:
            return self._benchmark[key]
        bench = self._frame(
            f"benchmark:{self.benchmark_symbol}", self.benchmark_provider, self.benchmark_symbol
        )
        found: tuple[float, str] | None = None
        ret = (
            period_return(bench["close"], start=start, end=end, opens=bench["open"] if at_open else None)
            if bench is not None
            else None
        )
        if ret is not None:
            found = (ret, self.benchmark_symbol)
        else:
            rets = [
                r
                for s in universe
                if (c := self.closes(s)) is not None
                and (r := period_return(c, start=start, end=end, opens=self.opens(s) if at_open else None))
                is not None
            ]
            if rets:
                found = (float(np.mean(rets)), universe_name(len(rets)))
        self._benchmark[key] = found
        return found


def universe_name(symbols: int) -> str:
    """The benchmark's name when it is the equal-weighted universe of ``symbols`` symbols
    (``equal-weighted universe (1 symbol)``, ``… (3 symbols)``)."""
    return f"equal-weighted universe ({symbols} symbol{'' if symbols == 1 else 's'})"


_UNIVERSE_RE: Final = re.compile(r"^equal-weighted universe \((\d+) symbols?\)$")


def benchmark_names(names: Sequence[str]) -> str:
    """The benchmarks of a scorecard in one phrase: the names joined, with every
    equal-weighted universe (one per window size, as stored) folded into one ``equal-weighted
    universe of the analysed symbols (1–3 symbols per window)``."""
    sizes = sorted({int(m.group(1)) for n in names if (m := _UNIVERSE_RE.match(n))})
    others = [n for n in names if not _UNIVERSE_RE.match(n)]
    if sizes:
        span = f"{sizes[0]}" if len(sizes) == 1 else f"{sizes[0]}–{sizes[-1]}"
        plural = "" if sizes[-1] == 1 else "s"
        others.append(f"equal-weighted universe of the analysed symbols ({span} symbol{plural} per window)")
    return ", ".join(others)


# --------------------------------------------------------------------------------------------
# Scoring (idempotent; the beat task)
# --------------------------------------------------------------------------------------------


def _analyst(kind: str | None) -> str:
    # the scorecard labels of the analyst table (agents.analysts.table): stored in score rows
    return analyst("synthesis").scorecard if kind == "llm" else analyst("technical").scorecard


@dataclass(frozen=True)
class ScoreRun:
    """What :func:`score_pending` did: recommendations looked at, rows written, and horizons
    still open (not enough bars after ``as_of`` yet)."""

    recommendations: int
    written: int
    pending: int


def _stated_p(probability: Any, horizon: int) -> float | None:
    """The calibrated p a report stated at ``horizon`` (``Recommendation.probability``), or
    ``None`` (a report written before calibration, or a horizon it has no p for)."""
    if not isinstance(probability, dict):
        return None
    value = (probability.get("horizons") or {}).get(str(horizon), {}).get("p")
    return float(value) if value is not None else None


def score_pending(
    *,
    settings: Settings,
    backtest_name: str | None = None,
    since: date | None = None,
    horizons: Sequence[int] = HORIZONS,
    book: PriceBook | None = None,
    now: datetime | None = None,
    limit: int | None = None,
    entry: str = DEFAULT_ENTRY,
    tenant: str | None = None,
) -> ScoreRun:
    """Score every finished recommendation (of ``backtest_name`` / ``as_of >= since`` when
    given) at each horizon that has matured and is not scored yet; idempotent (rows keyed by
    ``(analysis_id, horizon)``, module docstring). ``book`` defaults to the configured provider;
    ``limit`` caps the recommendations looked at (oldest ``as_of`` first); ``entry`` is the entry
    rule (:func:`forward_return`), recorded on each row with the book's benchmark spec;
    ``tenant``: only that tenant's recommendations (``None``: every tenant's). Rows
    already stored on another basis are left alone (``build_scorecard(rescore=True)`` replaces
    them).

    Raises ``service.SchemaMissingError`` when the service database is not migrated."""
    service.prepare_database(settings=settings)
    engine = get_engine(settings.service.effective_database_url)
    book = book or PriceBook.from_settings(settings)
    recs = backtest_repo.recommendations(
        engine=engine,
        backtest_name=backtest_name,
        since=since,
        only_unscored_at=horizons,
        limit=limit,
        tenant=tenant,
    )
    done = {
        (r["analysis_id"], r["horizon"])
        for r in backtest_repo.scores(engine=engine, analysis_ids=[r["analysis_id"] for r in recs])
    }
    universes: dict[tuple[date, str | None], list[str]] = {}
    stamp = now or datetime.now(UTC)
    rows: list[dict[str, Any]] = []
    pending = written = 0
    for rec in recs:
        closes = book.closes(rec["symbol"])
        opens = book.opens(rec["symbol"])
        if closes is None:
            continue
        start = entry_date(closes, as_of=rec["as_of"], entry=entry)
        ukey = (rec["as_of"], rec["backtest_name"])
        if ukey not in universes:
            universes[ukey] = backtest_repo.universe_on(
                engine=engine, as_of=rec["as_of"], backtest_name=rec["backtest_name"]
            )
        for horizon in horizons:
            if (rec["analysis_id"], horizon) in done:
                continue
            fwd = forward_return(closes, as_of=rec["as_of"], horizon=horizon, entry=entry, opens=opens)
            if fwd is None or start is None:
                pending += 1
                continue
            end, ret = fwd
            if not math.isfinite(ret):
                continue  # a missing open: no entry price, no score
            bench = book.benchmark_return(
                start=start, end=end, universe=universes[ukey], at_open=entry == "open"
            )
            if bench is None:
                pending += 1
                continue
            rows.append(
                {
                    "analysis_id": rec["analysis_id"],
                    "horizon": horizon,
                    "symbol": rec["symbol"],
                    "as_of": rec["as_of"],
                    "end_date": end,
                    "signal": rec["signal"],
                    "confidence": float(rec["confidence"] or 0.0),
                    "score": rec["score"],
                    "forward_return": ret,
                    "benchmark_return": bench[0],
                    "excess_return": ret - bench[0],
                    "p_outperform": _stated_p(rec.get("probability"), horizon),
                    "benchmark": bench[1],
                    "analyst": _analyst(rec["author_kind"]),
                    "model": rec["author_model"] or "rules (no model)",
                    "prompt_version": rec["prompt_version"],
                    "scored_at": stamp,
                    "entry": entry,
                    "benchmark_spec": book.spec,
                }
            )
            if len(rows) >= INSERT_BATCH:
                written += backtest_repo.insert_scores(engine=engine, rows=rows)
                rows.clear()
    written += backtest_repo.insert_scores(engine=engine, rows=rows)
    return ScoreRun(recommendations=len(recs), written=written, pending=pending)


# --------------------------------------------------------------------------------------------
# Metrics
# --------------------------------------------------------------------------------------------


def probability_of_outperformance(signal: str, confidence: float) -> float:
    """``p`` of the module docstring: BUY ``0.5 + c/2``, SELL ``0.5 − c/2``, HOLD ``0.5``.
    Raises ``ValueError`` for another signal or a confidence outside [0, 1]."""
    if not 0.0 <= confidence <= 1.0:
        raise ValueError(f"confidence {confidence} outside [0, 1]")
    if signal not in POSITION:
        raise ValueError(f"unknown signal {signal!r}")
    return 0.5 + POSITION[signal] * confidence / 2.0


def probabilities(frame: pd.DataFrame) -> tuple[np.ndarray, str] | None:
    """The probability of outperforming the benchmark to score with Brier and ECE, and its
    source: a calibrated ``p_outperform`` column where every row has one, else the confidence
    mapped by :func:`probability_of_outperformance`; for rows that state no probability (a
    ``p_source`` column equal to :data:`NO_STATED_P` on every row, the baselines) 0.5 everywhere;
    ``None`` when none of these is there."""
    if "p_source" in frame and len(frame) and (frame["p_source"] == NO_STATED_P).all():
        return np.full(len(frame), 0.5), NO_STATED_P
    if P_COLUMN in frame and len(frame) and frame[P_COLUMN].notna().all():
        return frame[P_COLUMN].astype(float).to_numpy(), P_COLUMN
    if "confidence" in frame and len(frame) and frame["confidence"].notna().all():
        p = [
            probability_of_outperformance(s, float(c))
            for s, c in zip(frame["signal"], frame["confidence"], strict=True)
        ]
        return np.asarray(p, dtype=float), "confidence"
    return None


def hold_band(horizon: int) -> float:
    """Half-width of the band a HOLD window is judged against: ``0.01·√h`` (fraction)."""
    return HOLD_BAND_DAILY * math.sqrt(horizon)


def directional_hit(signal: str, excess: float) -> bool | None:
    """Whether a directional call was right: BUY ``x > 0``, SELL ``x < 0``; ``None`` for a
    HOLD (it makes no directional claim and is judged against its base rate instead)."""
    if signal == "BUY":
        return excess > 0
    if signal == "SELL":
        return excess < 0
    return None


def _num(value: float | None, digits: int = 6) -> float | None:
    if value is None or not math.isfinite(value):
        return None
    return round(float(value), digits)


def _rounded(d: dict[str, Any] | None) -> dict[str, Any] | None:
    if d is None:
        return None
    return {k: (_num(v) if isinstance(v, float) else v) for k, v in d.items()}


def _proportion(successes: int, n: int) -> dict[str, Any] | None:
    return _rounded(stats.wilson_interval(successes, n).as_dict()) if n else None


def _test(result: stats.MeanTest | None) -> dict[str, Any] | None:
    return _rounded(result.as_dict()) if result is not None else None


def metrics(frame: pd.DataFrame, *, horizon: int, step: float | None = None) -> dict[str, Any]:
    """The scorecard metrics (module docstring) of ``frame``'s rows at one horizon.

    ``frame``: columns ``as_of`` (date), ``signal`` (BUY/HOLD/SELL), ``score`` (float or NaN),
    ``excess_return`` (fraction) and optionally ``confidence`` / ``p_outperform`` (NaN or absent
    for baselines). ``step``: the grid spacing in sessions for the Newey–West lags (default:
    measured on ``frame``'s dates). Returns ``{horizon, n, dates, lags, directional,
    directional_by_date, hit_rate,
    up_share, hold_band, hold_base, signals: {BUY|SELL: {n, hit, hit_rate, mean_excess,
    median_excess}, HOLD: {n, in_band, mean_excess, median_excess}}, mean_signed_excess,
    signed_excess_by_date, ic, ic_by_date, p_source, brier, brier_by_date, ece, calibration}``:
    proportions as ``{successes, n, rate, low, high}`` (Wilson 95 %), tests as ``{mean, se, t,
    low, high, n, lags}`` (dates, Newey–West); a value that cannot be computed is ``None``.
    Raises ``KeyError`` for a missing column.
    """
    n = len(frame)
    out: dict[str, Any] = {"horizon": horizon, "n": n, "signals": {}, "hold_band": hold_band(horizon)}
    empty = dict.fromkeys(
        (
            "dates",
            "lags",
            "directional",
            "directional_by_date",
            "hit_rate",
            "up_share",
            "hold_base",
            "mean_signed_excess",
            "signed_excess_by_date",
            "ic",
            "ic_by_date",
            "p_source",
            "brier",
            "brier_by_date",
            "ece",
        )
    )
    if n == 0:
        return {**out, **empty, "calibration": []}
    dates = frame["as_of"].to_list()
    step = step if step is not None else stats.grid_step_sessions(dates)
    lags = stats.overlap_lags(horizon, step)
    out["dates"] = len(set(dates))
    out["lags"] = lags
    excess = frame["excess_return"].astype(float).to_numpy()
    signals = frame["signal"].to_numpy()
    calls = [directional_hit(str(s), float(x)) for s, x in zip(signals, excess, strict=True)]
    made = [c for c in calls if c is not None]
    out["directional"] = _proportion(sum(made), len(made))
    # the Wilson interval treats calls as independent; calls of one date share the market's move
    # and long windows overlap, so the same share is also tested per date (Newey–West)
    called = [i for i, c in enumerate(calls) if c is not None]
    out["directional_by_date"] = _test(
        stats.date_clustered_mean(
            [dates[i] for i in called], [float(bool(calls[i])) for i in called], maxlags=lags
        )
    )
    out["hit_rate"] = out["directional"]["rate"] if out["directional"] else None
    out["up_share"] = _proportion(int((excess > 0).sum()), n)  # what always-BUY scores
    band = np.abs(excess) < hold_band(horizon)
    out["hold_base"] = _proportion(int(band.sum()), n)  # what always-HOLD scores
    for sig in SIGNALS:
        mask = signals == sig
        sub = excess[mask]
        entry: dict[str, Any] = {
            "n": int(mask.sum()),
            "mean_excess": _num(float(sub.mean())) if mask.any() else None,
            "median_excess": _num(float(np.median(sub))) if mask.any() else None,
        }
        if sig == "HOLD":
            entry["in_band"] = _proportion(int(band[mask].sum()), int(mask.sum()))
        else:
            entry["hit"] = _proportion(
                int(np.sum([bool(c) for c, m in zip(calls, mask, strict=True) if m])), int(mask.sum())
            )
            entry["hit_rate"] = entry["hit"]["rate"] if entry["hit"] else None
        out["signals"][sig] = entry
    signed = pd.Series(signals).map(POSITION).astype(float).to_numpy() * excess
    out["mean_signed_excess"] = _num(float(signed.mean()))
    out["signed_excess_by_date"] = _test(stats.date_clustered_mean(dates, signed, maxlags=lags))
    ic = stats.per_date_ic(dates, frame["score"].astype(float), excess)
    out["ic"] = _num(float(ic.mean())) if len(ic) else None
    out["ic_by_date"] = _test(stats.hac_mean(ic.to_numpy(), maxlags=lags))
    found = probabilities(frame)
    if found is not None:
        p, source = found
        y = (excess > 0).astype(float)
        out["p_source"] = source
        out["brier"] = _num(stats.brier_score(p, y))
        # per-date Brier minus the no-view 0.25, tested as the mean signed excess is
        out["brier_by_date"] = _test(
            stats.date_clustered_mean(dates, (p - y) ** 2 - NO_VIEW_BRIER, maxlags=lags)
        )
        out["ece"] = _num(stats.expected_calibration_error(p, y))
        out["calibration"] = [_rounded(b) for b in stats.reliability_table(p, y)]
    else:
        out["p_source"] = out["brier"] = out["brier_by_date"] = out["ece"] = None
        out["calibration"] = []
    return out


def paired_difference(
    mine: pd.DataFrame, other: pd.DataFrame, *, horizon: int, step: float
) -> dict[str, Any] | None:
    """The pipeline's per-date mean signed excess minus another strategy's on the dates both
    have, with its Newey–West test (lags :func:`~agents.quant.evaluation_stats.overlap_lags`):
    the paired comparison behind every "beats"/"loses to" of the verdict. ``None`` with fewer
    than 3 common dates."""

    def per_date(frame: pd.DataFrame) -> pd.Series:
        signed = frame["signal"].map(POSITION).astype(float) * frame["excess_return"].astype(float)
        return stats.per_date_means(frame["as_of"], signed)

    a, b = per_date(mine), per_date(other)
    both = a.index.intersection(b.index)
    return _test(stats.hac_mean((a[both] - b[both]).to_numpy(), maxlags=stats.overlap_lags(horizon, step)))


# --------------------------------------------------------------------------------------------
# The scorecard
# --------------------------------------------------------------------------------------------


def baseline_rows(pipeline_rows: pd.DataFrame, *, book: PriceBook) -> pd.DataFrame:
    """The baselines' rows on the pipeline rows' grid: each pipeline row repeated per baseline
    with that baseline's signal and score at ``(symbol, as_of)`` (same forward and benchmark
    returns), ``strategy`` = the baseline name, no confidence, and its own probability: none
    stated, so ``p_outperform`` 0.5 and ``p_source`` :data:`NO_STATED_P` (the pipeline row's p
    must not be scored as the baseline's). Points where a baseline is undefined (too few bars)
    are left out."""
    out: list[dict[str, Any]] = []
    for symbol, group in pipeline_rows.groupby("symbol"):
        closes = book.closes(str(symbol))
        if closes is None:
            continue
        frame = baseline_frame(closes)
        for record in group.to_dict("records"):
            row = {str(k): v for k, v in record.items()}
            position = int(closes.index.searchsorted(pd.Timestamp(row["as_of"]), side="right")) - 1
            if position < 0:
                continue
            for name in BASELINES:
                sig = signal_at(frame, name=name, position=position)
                if sig is not None:
                    out.append(
                        {
                            **row,
                            "strategy": name,
                            "signal": sig.signal,
                            "score": sig.score,
                            "confidence": np.nan,
                            P_COLUMN: 0.5,
                            "p_source": NO_STATED_P,
                        }
                    )
    return pd.DataFrame(out)


def _survivorship_note(settings: Settings, backtest_name: str | None) -> str | None:
    if backtest_name is None:
        return None
    note = (
        "Survivorship: the universe is a fixed list of symbols chosen after the fact; stocks that "
        "were delisted, merged or fell out of favour during the period are not in it, which "
        "flatters buy-and-hold and any long bias."
    )
    if settings.data.dir is not None and "stocknet" in str(settings.data.dir).lower():
        note += (
            " The stocknet list is the large caps of 2017 (the data set's own selection), so "
            "every symbol is known to have survived and grown to the end of the data."
        )
    return note


def build_scorecard(
    *,
    settings: Settings,
    backtest_name: str | None = None,
    since: date | None = None,
    horizons: Sequence[int] = HORIZONS,
    plots_dir: Path | None = None,
    score_first: bool = True,
    tenant: str | None = None,
    entry: str = DEFAULT_ENTRY,
    rescore: bool = False,
) -> dict[str, Any]:
    """Score what matured (:func:`score_pending` with ``entry``, unless ``score_first`` is
    false), then the scorecard of the selected recommendations (only ``tenant``'s analyses when
    given; ``None``: every tenant's, the operator's view) as JSON: ``{selection, entry,
    entry_rule, benchmark, benchmark_spec, recommendations, stale, rescored, notes, horizons,
    strategies: {name: {horizon: metrics}}, comparisons: {horizon: {baseline: test}},
    breakdown: {analyst|model|prompt_version: {key: {horizon: brief metrics}}}, risk: {horizon:
    risk table} (``apps.scorecard_risk.risk_tables``: the stored reports' risk forecasts whose
    windows ended), verdict: [...], plots: {calibration, cumulative_excess}}`` (plots written to
    ``plots_dir`` when given).
    Metrics per :func:`metrics`; comparisons per :func:`paired_difference`.

    Stored rows computed on another basis (entry rule or benchmark spec, :func:`benchmark_spec`)
    are stale: left out of the metrics and counted in ``stale``; with ``rescore`` (and
    ``score_first``) they are deleted and scored again on the current basis first.

    Raises ``ValueError`` for an unknown ``entry``; an unknown backtest gives an empty
    scorecard."""
    if entry not in ENTRIES:
        raise ValueError(f"entry {entry!r}: one of {', '.join(ENTRIES)}")
    book = PriceBook.from_settings(settings)
    engine = get_engine(settings.service.effective_database_url)
    rescored = 0
    if rescore and score_first:
        service.prepare_database(settings=settings)
        stored = backtest_repo.scores(engine=engine, backtest_name=backtest_name, since=since, tenant=tenant)
        keys = [
            (r["analysis_id"], r["horizon"])
            for r in stored
            if r["entry"] != entry or r["benchmark_spec"] != book.spec
        ]
        rescored = backtest_repo.delete_scores(engine=engine, keys=keys)
    if score_first:
        score_pending(
            settings=settings,
            backtest_name=backtest_name,
            since=since,
            horizons=horizons,
            book=book,
            entry=entry,
        )
    rows = pd.DataFrame(
        backtest_repo.scores(engine=engine, backtest_name=backtest_name, since=since, tenant=tenant)
    )
    notes = [n for n in [_survivorship_note(settings, backtest_name)] if n]
    card: dict[str, Any] = {
        "selection": {
            "backtest": backtest_name,
            "since": since.isoformat() if since else None,
            "tenant": tenant,
        },
        "entry": entry,
        "entry_rule": ENTRY_TEXT[entry],
        "benchmark_spec": book.spec,
        "horizons": list(horizons),
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "stale": 0,
        "rescored": rescored,
        "notes": notes,
        "strategies": {},
        "comparisons": {},
        "breakdown": {},
        "verdict": [],
        "plots": {},
    }
    if not rows.empty:
        current = (rows["entry"] == entry) & (rows["benchmark_spec"] == book.spec)
        card["stale"] = int((~current).sum())
        rows = rows[current]
    if card["stale"]:
        notes.append(
            f"{card['stale']} stored scores were computed with another entry rule or benchmark and are "
            "left out; `finagent scorecard --rescore` recomputes them."
        )
    if rows.empty:
        card["benchmark"] = None
        card["recommendations"] = 0
        return card
    rows = rows[rows["horizon"].isin(list(horizons))].copy()
    rows["strategy"] = PIPELINE
    card["recommendations"] = int(rows["analysis_id"].nunique())
    card["benchmark"] = sorted(rows["benchmark"].unique().tolist())
    step = stats.grid_step_sessions(rows["as_of"])
    card["grid_step_sessions"] = step
    both = pd.concat([rows, baseline_rows(rows, book=book)], ignore_index=True)
    for strategy in [PIPELINE, *BASELINES]:
        sub = both[both["strategy"] == strategy]
        card["strategies"][strategy] = {
            str(h): metrics(sub[sub["horizon"] == h], horizon=h, step=step) for h in horizons
        }
    for h in horizons:
        mine = rows[rows["horizon"] == h]
        card["comparisons"][str(h)] = {
            name: paired_difference(
                mine, both[(both["strategy"] == name) & (both["horizon"] == h)], horizon=h, step=step
            )
            for name in BASELINES
        }
    for key in ("analyst", "model", "prompt_version"):
        values = rows[key].fillna("not recorded")
        card["breakdown"][key] = {
            str(value): {
                str(h): _brief(metrics(group[group["horizon"] == h], horizon=h, step=step)) for h in horizons
            }
            for value, group in rows.assign(**{key: values}).groupby(key)
        }
    social = backtest_repo.social_views(engine=engine, analysis_ids=sorted(set(rows["analysis_id"])))
    if social:
        mine = social_rows(rows, social)
        card["breakdown"]["analyst"][SOCIAL_ANALYST] = {
            str(h): _brief(metrics(mine[mine["horizon"] == h], horizon=h, step=step)) for h in horizons
        }
    learned = backtest_repo.report_views(
        engine=engine, analysis_ids=sorted(set(rows["analysis_id"])), view="learned"
    )
    if learned:
        mine = learned_rows(rows, learned)
        card["breakdown"]["analyst"][LEARNED_ANALYST] = {
            str(h): _brief(metrics(mine[mine["horizon"] == h], horizon=h, step=step)) for h in horizons
        }
    card["risk"] = _risk_tables(engine=engine, book=book, analysis_ids=sorted(set(rows["analysis_id"])))
    card["verdict"] = verdict(card)
    if plots_dir is not None:
        card["plots"] = write_plots(both, card=card, out_dir=plots_dir)
    return card


def _risk_tables(*, engine: Any, book: PriceBook, analysis_ids: Sequence[str]) -> dict[str, Any]:
    """The risk tables of the selection's stored reports (:mod:`apps.scorecard_risk`): ``{}``
    when no report has a risk forecast whose window has ended."""
    from apps.scorecard_risk import risk_rows, risk_tables

    entries = backtest_repo.report_risks(engine=engine, analysis_ids=analysis_ids)
    return risk_tables(risk_rows(entries, book.closes)) if entries else {}


#: The social-sentiment analyst's key in the breakdown by analyst (it has weight 0 in the signal).
SOCIAL_ANALYST: Final = analyst("social").scorecard
#: The social analyst's label read as a signal.
SOCIAL_SIGNAL: Final[dict[str, str]] = {"BULLISH": "BUY", "BEARISH": "SELL", "NEUTRAL": "HOLD"}


def social_rows(rows: pd.DataFrame, social: dict[str, tuple[str, float | None]]) -> pd.DataFrame:
    """The pipeline's scored ``rows`` re-read as the social analyst's calls: the same symbols,
    dates and excess returns, ``signal`` from its label (BULLISH → BUY, BEARISH → SELL, NEUTRAL →
    HOLD), ``score`` its reach-weighted sentiment, no confidence or probability. Rows whose
    analysis has no social reading (no view, or NO_DATA) are left out."""
    keep = rows[rows["analysis_id"].map(lambda a: social.get(str(a), ("NO_DATA", None))[0] in SOCIAL_SIGNAL)]
    out = keep.copy()
    out["signal"] = [SOCIAL_SIGNAL[social[str(a)][0]] for a in keep["analysis_id"]]
    out["score"] = [float(social[str(a)][1] or 0.0) for a in keep["analysis_id"]]
    out["confidence"] = np.nan
    out["p_outperform"] = np.nan
    out["analyst"] = SOCIAL_ANALYST
    return out


#: The learned analyst's key in the breakdown by analyst (weight 0 in the signal by default).
LEARNED_ANALYST: Final = analyst("learned").scorecard
#: The learned analyst's label read as a signal (it never says HOLD).
LEARNED_SIGNAL: Final[dict[str, str]] = {"UP": "BUY", "DOWN": "SELL"}


def learned_rows(rows: pd.DataFrame, views: dict[str, tuple[str, float | None]]) -> pd.DataFrame:
    """The pipeline's scored ``rows`` re-read as the learned analyst's calls (UP → BUY, DOWN →
    SELL; ``score`` its ``2 p(up) - 1``, no confidence or probability), as :func:`social_rows`
    does; rows whose analysis has no learned view are left out."""
    keep = rows[rows["analysis_id"].map(lambda a: views.get(str(a), ("", None))[0] in LEARNED_SIGNAL)]
    out = keep.copy()
    out["signal"] = [LEARNED_SIGNAL[views[str(a)][0]] for a in keep["analysis_id"]]
    out["score"] = [float(views[str(a)][1] or 0.0) for a in keep["analysis_id"]]
    out["confidence"] = np.nan
    out["p_outperform"] = np.nan
    out["analyst"] = LEARNED_ANALYST
    return out


def _brief(m: dict[str, Any]) -> dict[str, Any]:
    return {
        k: m.get(k)
        for k in (
            "n",
            "hit_rate",
            "directional",
            "mean_signed_excess",
            "signed_excess_by_date",
            "ic",
            "brier",
            "ece",
        )
    }


def _interval(low: float | None, high: float | None, fmt: Any) -> str:
    return "" if low is None or high is None else f"[{fmt(low)}, {fmt(high)}]"


def _prop_text(p: dict[str, Any] | None) -> str:
    if not p:
        return ""
    return f"{_rate(p['rate'])} {_interval(p['low'], p['high'], _rate)}"


def _test_text(t: dict[str, Any] | None, fmt: Any) -> str:
    if not t:
        return ""
    return f"{fmt(t['mean'])} {_interval(t['low'], t['high'], fmt)}"


def _versus(low: float, high: float, value: float, above: str, below: str, same: str) -> str:
    if low > value:
        return above
    if high < value:
        return below
    return same


def verdict(card: dict[str, Any]) -> list[str]:
    """Sentences per horizon stating only what the 95 % intervals support (module docstring):
    the directional hit against 50 %, HOLD against always-HOLD, the mean signed excess, the IC
    and the Brier score against their null values, and the baselines the pipeline differs from
    (paired per-date test); an interval containing the null value is said to "not differ"."""
    lines = []
    for h in card["horizons"]:
        m = card["strategies"][PIPELINE][str(h)]
        if not m["n"]:
            continue
        d, dd = m["directional"], m["directional_by_date"]
        if d:
            # a claim needs both intervals to exclude 50 %: Wilson's (independent calls) and the
            # per-date one (calls clustered by date, overlapping windows)
            low, high = (
                (min(d["low"], dd["low"]), max(d["high"], dd["high"])) if dd else (d["low"], d["high"])
            )
            per_date = f", per date {_test_text(dd, _rate)}" if dd else ""
            lines.append(
                f"{h}d: directional hit (BUY and SELL) {_prop_text(d)} of {d['n']} calls{per_date} "
                + _versus(low, high, 0.5, "is above 50%", "is below 50%", "does not differ from 50%")
                + f"; always-BUY would score {_prop_text(m['up_share'])}."
            )
        hold, base = m["signals"]["HOLD"].get("in_band"), m["hold_base"]
        if hold and base:
            relation = (
                "better than always-HOLD"
                if hold["low"] > base["high"]
                else "worse than always-HOLD"
                if hold["high"] < base["low"]
                else "no different from always-HOLD (the intervals overlap)"
            )
            lines.append(
                f"{h}d: {_prop_text(hold)} of HOLD windows stayed within ±{_pct(m['hold_band'])[1:]} of the "
                f"benchmark, against {_prop_text(base)} of all windows: {relation}."
            )
        s = m["signed_excess_by_date"]
        if s:
            lines.append(
                f"{h}d: mean signed excess per date {_test_text(s, _pct)} (Newey–West t = {s['t']:.2f}, "
                f"{s['n']} dates, {s['lags']} lags) "
                + _versus(
                    s["low"], s["high"], 0.0, "is above zero", "is below zero", "does not differ from zero"
                )
                + "."
            )
        ic = m["ic_by_date"]
        if ic:
            lines.append(
                f"{h}d: per-date IC {_test_text(ic, _dec)} (t = {ic['t']:.2f}) "
                + _versus(
                    ic["low"], ic["high"], 0.0, "is above zero", "is below zero", "does not differ from zero"
                )
                + "."
            )
        beats: list[str] = []
        loses: list[str] = []
        same: list[str] = []
        for name, test in card["comparisons"].get(str(h), {}).items():
            if not test:
                continue
            text = f"{name} ({_test_text(test, _pct)})"
            (beats if test["low"] > 0 else loses if test["high"] < 0 else same).append(text)
        parts = []
        if beats:
            parts.append(f"beats {', '.join(beats)}")
        if loses:
            parts.append(f"loses to {', '.join(loses)}")
        if same:
            parts.append(f"does not differ from {', '.join(name.split(' ')[0] for name in same)}")
        if parts:
            lines.append(
                f"{h}d: per date, the pipeline's signed excess minus each baseline's: "
                + "; ".join(parts)
                + "."
            )
        b = m["brier_by_date"]
        if m["brier"] is not None and b:
            lo, hi = b["low"] + NO_VIEW_BRIER, b["high"] + NO_VIEW_BRIER
            lines.append(
                f"{h}d: Brier {m['brier']:.3f} (per date [{lo:.3f}, {hi:.3f}]) "
                + _versus(
                    lo,
                    hi,
                    NO_VIEW_BRIER,
                    "is worse than the 0.25 of always saying 0.5 (no view)",
                    "is better than the 0.25 of always saying 0.5 (no view)",
                    "does not differ from the 0.25 of always saying 0.5 (no view)",
                )
                + f"; ECE {m['ece']:.3f} (p from {m['p_source']})."
            )
    return lines


def _pct0(value: float) -> str:
    """A share as a whole percentage (``0.523`` → ``52%``), for sentences."""
    return f"{value:.0%}"


def summary(card: dict[str, Any]) -> list[dict[str, Any]]:
    """One card per horizon that has scored recommendations, for a reader with ten seconds:
    the pipeline's directional hit (BUY and SELL calls) with its 95 % interval against the
    base rates (50 %, a coin flip; the share of windows that beat the benchmark, what always-BUY
    scores), in words. Each ``{horizon, recommendations, calls, hit (``{successes, n, rate,
    low, high}`` or ``None``), interval ``(low, high)`` the widest of the Wilson and the
    per-date interval, up_share, verdict, headline, text}``: ``verdict`` ``better``, ``worse``
    or ``no different`` (than a coin flip), or ``no calls`` when every recommendation was HOLD
    (then ``text`` reads the HOLD windows against always-HOLD); ``headline`` the short line of
    the card. The same rule as :func:`verdict`: a claim needs both intervals to exclude 50 %."""
    cards = []
    for h in card["horizons"]:
        m = (card["strategies"].get(PIPELINE) or {}).get(str(h))
        if not m or not m["n"]:
            continue
        d, dd, up = m["directional"], m["directional_by_date"], m["up_share"]
        base = f"always-BUY scores {_pct0(up['rate'])}" if up else "always-BUY is not known"
        out: dict[str, Any] = {
            "horizon": h,
            "recommendations": m["n"],
            "calls": d["n"] if d else 0,
            "hit": d,
            "interval": None,
            "up_share": up,
        }
        if d and d["n"]:
            low, high = (
                (min(d["low"], dd["low"]), max(d["high"], dd["high"])) if dd else (d["low"], d["high"])
            )
            out["interval"] = (low, high)
            relation = _versus(low, high, 0.5, "better", "worse", "no different")
            out["verdict"] = relation
            out["headline"] = f"{_pct0(d['rate'])} of calls right"
            meaning = {
                "better": "better than a coin flip",
                "worse": "worse than a coin flip",
                "no different": "no different from a coin flip: no evidence of skill at this horizon",
            }[relation]
            out["text"] = (
                f"{d['successes']} of {d['n']} BUY and SELL calls were right after {h} trading days: "
                f"{_pct0(d['rate'])}, 95 % interval {_pct0(low)}–{_pct0(high)}. A coin flip is right "
                f"half the time and {base} here, so this is {meaning}."
            )
        else:
            hold, hold_base = m["signals"]["HOLD"].get("in_band"), m["hold_base"]
            out["verdict"] = "no calls"
            out["headline"] = "no BUY or SELL call"
            text = f"All {m['n']} recommendations were HOLD: no directional call to score."
            if hold and hold_base:
                relation = (
                    "better than"
                    if hold["low"] > hold_base["high"]
                    else "worse than"
                    if hold["high"] < hold_base["low"]
                    else "no different from"
                )
                text += (
                    f" {_pct0(hold['rate'])} of their windows stayed within ±{_pct(m['hold_band'])[1:]} of "
                    f"the benchmark, against {_pct0(hold_base['rate'])} of all windows: {relation} "
                    "always-HOLD."
                )
            out["text"] = text
        cards.append(out)
    return cards


def write_plots(both: pd.DataFrame, *, card: dict[str, Any], out_dir: Path) -> dict[str, str]:
    """Write ``calibration.png`` (the pipeline's calibration curve per horizon, with the
    diagonal and the bin counts) and ``cumulative_excess.png`` (cumulative signed excess of every
    strategy at the shortest horizon, module docstring) to ``out_dir``; returns their paths."""
    import empyrical  # type: ignore[import-untyped]  # lazy: scipy behind it
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # lazy: matplotlib is a second to import

    out_dir.mkdir(parents=True, exist_ok=True)
    selection = card["selection"]["backtest"] or "all recommendations"
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(7, 7.5), height_ratios=(3, 1), sharex=True)
    top.plot([0, 1], [0, 1], color="grey", linestyle="--", linewidth=1, label="perfectly calibrated")
    flat: list[str] = []
    for h in card["horizons"]:
        m = card["strategies"][PIPELINE][str(h)]
        bins = m.get("calibration") or []
        if not bins:
            continue
        if len(bins) == 1 and abs(bins[0]["mean_p"] - 0.5) < 1e-9:
            # every p is 0.5: one dot would read as a calibrated forecast; say what it is
            flat.append(f"{h}d: all {bins[0]['n']} recommendations at p = 0.5 (abstained or HOLD)")
            continue
        xs, ys = [b["mean_p"] for b in bins], [b["observed"] for b in bins]
        top.plot(xs, ys, marker="o", label=f"{h}d (Brier {m['brier']:.3f}, ECE {m['ece']:.3f})")
        bottom.bar(
            [b["lower"] + (card["horizons"].index(h) + 0.5) / (len(card["horizons"]) * 10) for b in bins],
            [b["n"] for b in bins],
            width=0.1 / len(card["horizons"]),
            label=f"{h}d",
        )
    if flat:
        top.text(
            0.5,
            0.12,
            "No calibration curve:\n" + "\n".join(flat),
            ha="center",
            va="bottom",
            fontsize=9,
            bbox={"boxstyle": "round", "facecolor": "white", "edgecolor": "grey"},
        )
    top.set_ylabel("observed share outperforming the benchmark")
    top.set_title(f"Calibration of the pipeline's p(outperform): {selection}")
    top.set_xlim(0, 1)
    top.set_ylim(0, 1)
    top.legend(loc="upper left", fontsize=8)
    sources = {card["strategies"][PIPELINE][str(h)].get("p_source") for h in card["horizons"]}
    bottom.set_xlabel(
        "p(outperform) = 0.5 ± confidence/2 (BUY +, SELL −, HOLD 0.5): reports without a calibrated p"
        if sources == {"confidence"}
        else "calibrated p(outperform) stated in the reports (0.5 where the calibration abstained)"
        if sources == {P_COLUMN}
        else "p(outperform): calibrated where every report states one, else 0.5 ± confidence/2"
    )
    bottom.set_ylabel("recommendations")
    if bottom.get_legend_handles_labels()[0]:  # no bars when every horizon is flat
        bottom.legend(fontsize=8)
    fig.tight_layout()
    calibration = out_dir / "calibration.png"
    fig.savefig(calibration, dpi=110)
    plt.close(fig)

    h = min(card["horizons"])
    fig, ax = plt.subplots(figsize=(9, 5))
    sub = both[both["horizon"] == h].assign(signed=lambda f: f["signal"].map(POSITION) * f["excess_return"])
    for strategy in [PIPELINE, *BASELINES]:
        grouped = sub[sub["strategy"] == strategy].groupby("as_of")
        per_date = grouped["signed"].mean().sort_index()
        if per_date.empty:
            continue
        # each period's return is plotted where it is realised (its end date), from 0 at the start
        ends = grouped["end_date"].max().sort_index()
        curve = np.concatenate([[0.0], empyrical.cum_returns(per_date.to_numpy())])
        ax.plot(
            pd.to_datetime([per_date.index[0], *ends.to_list()]),
            curve,
            label=strategy,
            linewidth=2.2 if strategy == PIPELINE else 1.2,
        )
    ax.axhline(0, color="grey", linewidth=0.8)
    ax.set_ylabel(f"cumulative signed excess return ({h}d holding, compounded)")
    bench = benchmark_names(card["benchmark"] or [])
    ax.set_title(f"Following the signals vs {bench} ({card['entry']} entry): {selection}", fontsize=10)
    ax.yaxis.set_major_formatter(matplotlib.ticker.PercentFormatter(1.0))
    ax.legend(fontsize=8)
    fig.autofmt_xdate()
    fig.tight_layout()
    cumulative = out_dir / "cumulative_excess.png"
    fig.savefig(cumulative, dpi=110)
    plt.close(fig)
    return {"calibration": str(calibration), "cumulative_excess": str(cumulative)}


# --------------------------------------------------------------------------------------------
# Rendering
# --------------------------------------------------------------------------------------------


def _pct(value: float | None) -> str:
    if value is None:
        return ""
    return f"{round(value, 4) + 0.0:+.2%}"  # + 0.0: no "-0.00%" for a rounding residue


def _rate(value: float | None) -> str:
    return "" if value is None else f"{value:.1%}"


def _dec(value: float | None) -> str:
    return "" if value is None else f"{value:.3f}"


def markdown(card: dict[str, Any]) -> str:
    """The scorecard as Markdown: the entry rule and benchmark, one table per horizon (pipeline
    and baselines: directional hit with its Wilson 95 % interval, BUY and SELL hits, HOLD against
    always-HOLD, mean signed excess per date with its Newey–West interval, per-date IC, Brier,
    ECE; the entry rule in every heading), the base rates, the paired comparisons with the
    baselines, the pipeline's reliability table beside the 0.25 no-view baseline, the verdict,
    the notes (survivorship, stale rows) and the breakdowns."""
    sel = card["selection"]
    title = f"backtest {sel['backtest']}" if sel["backtest"] else "all recommendations"
    if sel["since"]:
        title += f" since {sel['since']}"
    rule = card["entry_rule"]
    lines = [f"# Scorecard: {title}", "", f"Entry rule: {rule}.", ""]
    if not card["strategies"]:
        empty = (
            "No score on this basis: every stored one is stale (see the note)."
            if card["stale"]
            else "No recommendation has a matured horizon yet."
        )
        return "\n".join([*lines, empty, "", *[f"> {n}" for n in card["notes"]], ""])
    lines += [
        f"{card['recommendations']} recommendations; benchmark: {benchmark_names(card['benchmark'])} "
        f"(configured: {card['benchmark_spec']}). Excess = forward return − benchmark return over the "
        "same dates, both entered by the same rule (adjusted prices). Brackets: 95 % intervals (Wilson "
        "for shares; Newey–West over the per-date series for means, module docstring).",
        "",
    ]
    head = [
        "strategy",
        "n",
        "BUY+SELL n",
        "directional hit [95%]",
        "BUY n",
        "BUY hit",
        "SELL n",
        "SELL hit",
        "HOLD n",
        "HOLD in band [95%]",
        "mean signed excess",
        "per date [95%]",
        "NW t",
        "IC per date",
        "IC t",
        "Brier",
        "ECE",
    ]
    for h in card["horizons"]:
        lines += [
            f"## {h} trading days ({card['entry']} entry: {rule})",
            "",
            "| " + " | ".join(head) + " |",
            "|" + "---|" * len(head),
        ]
        for name, per in card["strategies"].items():
            m = per[str(h)]
            buy, sell, hold = (m["signals"].get(sig) or {} for sig in ("BUY", "SELL", "HOLD"))
            s, ic = m["signed_excess_by_date"], m["ic_by_date"]
            cells = [
                name,
                str(m["n"]),
                str(m["directional"]["n"] if m["directional"] else 0),
                _prop_text(m["directional"]),
                str(buy.get("n", 0)),
                _rate(buy.get("hit_rate")),
                str(sell.get("n", 0)),
                _rate(sell.get("hit_rate")),
                str(hold.get("n", 0)),
                _prop_text(hold.get("in_band")),
                _pct(m["mean_signed_excess"]),
                _test_text(s, _pct),
                f"{s['t']:.2f}" if s else "",
                _dec(m["ic"]),
                f"{ic['t']:.2f}" if ic else "",
                _dec(m["brier"]) + (" (no p stated)" if m["p_source"] == NO_STATED_P else ""),
                _dec(m["ece"]) + (" (no p stated)" if m["p_source"] == NO_STATED_P else ""),
            ]
            lines.append("| " + " | ".join(cells) + " |")
        if any(per[str(h)]["p_source"] == NO_STATED_P for per in card["strategies"].values()):
            lines += [
                "",
                "The baselines state no probability: they are scored at p = 0.5 (no view), so their "
                "Brier is 0.25 by construction and their ECE is only the distance of the base rate "
                "from 0.5; neither says anything about the baseline.",
            ]
        m = card["strategies"][PIPELINE][str(h)]
        lines += [
            "",
            f"Base rates at {h}d ({m['dates']} dates, Newey–West lags {m['lags']}): "
            f"{_prop_text(m['up_share'])} of all windows beat the benchmark (the directional hit of "
            f"always-BUY); {_prop_text(m['hold_base'])} stayed within ±{_pct(m['hold_band'])[1:]} of it "
            "(the HOLD in-band share of always-HOLD).",
            "",
        ]
        comparisons = card["comparisons"].get(str(h), {})
        if comparisons:
            lines += [
                f"Pipeline minus baseline, signed excess per date ({card['entry']} entry):",
                "",
                "| baseline | difference [95%] | NW t | dates | separates from 0 |",
                "|---|---|---|---|---|",
            ]
            for name, t in comparisons.items():
                if t:
                    separates = "yes" if t["low"] > 0 or t["high"] < 0 else "no"
                    lines.append(
                        f"| {name} | {_test_text(t, _pct)} | {t['t']:.2f} | {t['n']} | {separates} |"
                    )
            lines.append("")
        if m["calibration"]:
            lines += [
                f"Reliability of the pipeline's p (from {m['p_source']}) at {h}d: Brier {_dec(m['brier'])} "
                f"against {NO_VIEW_BRIER} for always saying 0.5 (no view); ECE {_dec(m['ece'])} "
                "(10 equal-width bins, weighted by count).",
                "",
                "| bin | n | mean p | realised frequency |",
                "|---|---|---|---|",
                *[
                    f"| {b['lower']:.1f}–{b['upper']:.1f} | {b['n']} "
                    f"| {b['mean_p']:.3f} | {b['observed']:.3f} |"
                    for b in m["calibration"]
                ],
                "",
            ]
    lines += ["## Verdict", "", *[f"- {v}" for v in card["verdict"]], ""]
    if any(b.startswith("equal-weighted") for b in card["benchmark"]):
        lines += [
            "No benchmark symbol covers these dates, so the benchmark is the equal-weighted universe of "
            "the run: buy-and-hold of the same symbols is then the benchmark itself (excess 0 by "
            "construction), as for any strategy that says BUY on every grid point.",
            "",
        ]
    lines += [*[f"> {n}" for n in card["notes"]], ""] if card["notes"] else []
    for key, groups in card["breakdown"].items():
        lines += [
            f"## By {key.replace('_', ' ')} ({card['entry']} entry)",
            "",
            "| value | horizon | n | directional hit [95%] | mean signed excess per date [95%] "
            "| IC | Brier | ECE |",
        ]
        lines.append("|---|---|---|---|---|---|---|---|")
        for value, per in groups.items():
            for h, b in per.items():
                lines.append(
                    f"| {value} | {h}d | {b['n']} | {_prop_text(b['directional'])} "
                    f"| {_test_text(b['signed_excess_by_date'], _pct)} "
                    f"| {_dec(b['ic'])} | {_dec(b['brier'])} | {_dec(b['ece'])} |"
                )
        lines.append("")
    lines += [
        "Directional hit: BUY right when excess > 0, SELL when < 0 (HOLD makes no directional call). "
        "HOLD in band: share of HOLD windows with |excess| < 1 % × √h, judged against the same share "
        "over all windows (always-HOLD). Mean signed excess: (+1 BUY, 0 HOLD, −1 SELL) × excess; its "
        "test averages each date first, then a Newey–West t with lags ceil(h/step) − 1 for the "
        "overlapping windows. IC: Spearman of score vs excess across the tickers of each date, "
        "averaged over dates, Newey–West t. Brier/ECE: p(outperform) against excess > 0.",
        "",
    ]
    from apps.scorecard_risk import risk_markdown

    lines += risk_markdown(card.get("risk"))
    if card["plots"]:
        lines += [f"Plots: {card['plots']['calibration']}, {card['plots']['cumulative_excess']}", ""]
    return "\n".join(lines)


def digest_section(
    *, symbols: Sequence[str], settings: Settings, tenant: str | None = None
) -> dict[str, Any] | None:
    """The watchlist digest's scorecard lines: for ``symbols``' scored recommendations of
    ``tenant`` (the watchlist's owner: every one of its analyses, not only this watchlist's;
    ``None``: every tenant's), per horizon the brief metrics of the pipeline (``n``,
    ``directional`` with its interval, ``hit_rate``, ``mean_signed_excess``, …), on the rows
    scored with the default entry rule against the configured benchmark (stale rows are left
    out); ``None`` when none has matured. Reads stored scores only (the beat task writes them),
    so a digest never waits for scoring."""
    engine = get_engine(settings.service.effective_database_url)
    rows = pd.DataFrame(backtest_repo.scores(engine=engine, tenant=tenant))
    if rows.empty:
        return None
    rows = rows[
        rows["symbol"].isin(list(symbols))
        & (rows["entry"] == DEFAULT_ENTRY)
        & (rows["benchmark_spec"] == benchmark_spec(settings))
    ]
    if rows.empty:
        return None
    return {
        "benchmark": sorted(rows["benchmark"].unique().tolist()),
        "horizons": {
            str(h): _brief(metrics(rows[rows["horizon"] == h], horizon=h))
            for h in HORIZONS
            if (rows["horizon"] == h).any()
        },
    }


def digest_markdown_lines(section: dict[str, Any] | None) -> list[str]:
    """Markdown lines of :func:`digest_section` (empty for ``None``)."""
    if not section:
        return []
    lines = ["", "## Scorecard (these tickers, matured recommendations)", ""]
    for h, m in section["horizons"].items():
        lines.append(
            f"- {h}d: {m['n']} scored, directional hit {_prop_text(m['directional'])}, mean signed "
            f"excess {_pct(m['mean_signed_excess'])} vs {benchmark_names(section['benchmark'])} "
            f"({DEFAULT_ENTRY} entry)"
        )
    return lines
