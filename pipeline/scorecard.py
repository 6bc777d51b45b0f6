"""The forward scorecard: how stored recommendations did once their horizons passed.

Scoring (:func:`score_pending`, also the beat task ``finagent.scorecard.score``): for every
``done`` analysis with a signal and each horizon h of :data:`HORIZONS` (5, 20, 60 trading days),
once the symbol's data holds h bars after ``as_of``:

* forward return ``r = P[t+h] / P[t] − 1`` on the adjusted close (dividends and splits
  included), ``t`` the bar of ``as_of``; computed by compounding the daily returns with
  empyrical's ``cum_returns_final``;
* benchmark return over the same dates: ``FINAGENT_BENCHMARK_SYMBOL`` (SPY) through the data
  provider, or the folder ``FINAGENT_BENCHMARK_DATA_DIR`` (Yahoo-format CSVs, or a Lean daily
  folder with ``factor_files/``: ``agents.data.market.lean_folder``, e.g.
  ``shared/data/ohlcv/lean`` whose SPY covers 1998–2021), where its data covers both dates;
  otherwise the equal-weighted universe of the run (the mean of the same-window returns of the
  backtest's symbols, or, outside a backtest, of every symbol analysed as of that date), and the
  row's ``benchmark`` column says which;
* excess return ``r − r_benchmark``. One row per ``(analysis_id, horizon)``, inserted ON CONFLICT
  DO NOTHING, so scoring is idempotent and runs as horizons mature.

Metrics (:func:`metrics`), per strategy and horizon, over the rows' excess returns ``x``:

* **hit rate** per signal: BUY hits when ``x > 0``, SELL when ``x < 0``, HOLD when
  ``|x| < 0.01·√h`` (within one daily 1 % excess-volatility unit scaled to the horizon: a HOLD
  claims "no edge", so it is right when the stock tracked the benchmark);
* **mean and median excess** per signal, and the **mean signed excess** ``mean(pos·x)`` with
  ``pos`` = +1 BUY, 0 HOLD, −1 SELL (the return of following the signals, long/short/flat,
  against the benchmark: the number that ranks the pipeline against the baselines);
* **information coefficient**: Spearman rank correlation of the score with ``x`` (scipy; the
  pipeline's score is the scorer's [-1, 1] score, a baseline's +1/0/−1);
* **Brier score** and **expected calibration error** of the confidence. A recommendation is
  read as a probability that the stock outperforms the benchmark over the horizon:
  ``p = 0.5 + c/2`` for BUY with confidence ``c``, ``p = 0.5 − c/2`` for SELL, ``p = 0.5`` for
  HOLD (no view). The outcome is ``y = 1`` when ``x > 0``. Brier = ``mean((p − y)²)`` (Brier
  1950; 0.25 for always saying 0.5); ECE = ``Σ_b (n_b/N)·|mean(y)_b − mean(p)_b|`` over 10
  equal-width bins of ``p`` (Naeini et al. 2015; Guo et al. 2017). Baselines have no confidence,
  so no Brier or ECE.

Baselines (``agents.quant.baselines``) are scored on the same (symbol, date) grid as the pipeline's
rows, so their forward and benchmark returns are the pipeline's, only the signal differs.
Breakdowns by analyst (deterministic scorer or LLM synthesis), model and prompt version (where
the report records one) use the pipeline's rows. Plots (matplotlib, Agg): a calibration curve
and the cumulative signed excess return of the pipeline and the baselines at the shortest
horizon (mean ``pos·x`` of each grid date, compounded with empyrical's ``cum_returns``; with
weekly dates and h = 5 the periods do not overlap).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any, Final

import numpy as np
import pandas as pd

from agents.data.market.base import MarketDataProvider, ProviderError
from agents.data.market.csv_folder import CsvFolderProvider
from agents.data.market.lean_folder import LeanFolderProvider, is_lean_folder
from agents.data.routing import get_provider
from agents.quant.baselines import BASELINES, baseline_frame, signal_at
from core.settings import Settings, get_settings
from db import backtest_repo
from db.engine import get_engine
from pipeline import service

HORIZONS: Final = (5, 20, 60)
SIGNALS: Final = ("BUY", "HOLD", "SELL")
POSITION: Final[dict[str, float]] = {"BUY": 1.0, "HOLD": 0.0, "SELL": -1.0}
CALIBRATION_BINS: Final = 10
#: Daily excess-return volatility unit of the HOLD hit band (module docstring): about the daily
#: tracking error of a US large cap against the index.
HOLD_BAND_DAILY: Final = 0.01
#: A benchmark or universe bar more than this many days before a window's date does not cover it
#: (a long weekend is fine, a missing month is not).
MAX_BAR_GAP_DAYS: Final = 4
#: Rows per insert transaction of the scoring task.
INSERT_BATCH: Final = 1000
PIPELINE: Final = "pipeline"


# --------------------------------------------------------------------------------------------
# Returns
# --------------------------------------------------------------------------------------------


def forward_return(closes: pd.Series, *, as_of: date, horizon: int) -> tuple[date, float] | None:
    """Return from the close of ``as_of`` (the last bar on or before it) to the close ``horizon``
    bars later, as ``(end_date, fraction)``; ``None`` while the data holds fewer bars after it
    (the horizon has not passed) or none on or before ``as_of``.

    ``closes``: adjusted closes (USD) on an ascending ``DatetimeIndex``. The daily returns of the
    window are compounded with empyrical's ``cum_returns_final``."""
    import empyrical  # type: ignore[import-untyped]  # lazy: pulls in scipy (~1.5 s); scoring only

    position = int(closes.index.searchsorted(pd.Timestamp(as_of), side="right")) - 1
    if position < 0 or position + horizon >= len(closes):
        return None
    window = closes.iloc[position : position + horizon + 1]
    daily = window.pct_change().iloc[1:]
    end: date = closes.index[position + horizon].date()
    return end, float(empyrical.cum_returns_final(daily))


def period_return(closes: pd.Series, *, start: date, end: date) -> float | None:
    """Return from the last bar on or before ``start`` to the last bar on or before ``end``
    (fraction); ``None`` when the series does not cover the window (no bar by ``start``, or the
    bar found for either date is more than ``MAX_BAR_GAP_DAYS`` days before it)."""
    index = closes.index
    first = int(index.searchsorted(pd.Timestamp(start), side="right")) - 1
    last = int(index.searchsorted(pd.Timestamp(end), side="right")) - 1
    if first < 0 or last < first:
        return None
    gap = timedelta(days=MAX_BAR_GAP_DAYS)
    if start - index[first].date() > gap or end - index[last].date() > gap:
        return None
    return float(closes.iloc[last] / closes.iloc[first] - 1.0)


@dataclass
class PriceBook:
    """Adjusted closes per symbol (whole history, read once per process call) from the data
    provider, and the benchmark's from its own source."""

    provider: MarketDataProvider
    benchmark_symbol: str
    benchmark_provider: MarketDataProvider
    _closes: dict[str, pd.Series | None] = field(default_factory=dict)
    _benchmark: dict[tuple[date, date, tuple[str, ...]], tuple[float, str] | None] = field(
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
            provider=provider, benchmark_symbol=settings.analysis.benchmark_symbol, benchmark_provider=bench
        )

    @staticmethod
    def _load(provider: MarketDataProvider, symbol: str) -> pd.Series | None:
        try:
            frame = provider.bars(symbol=symbol, start=None, end=provider.latest_date(symbol=symbol))
        except ProviderError:
            return None
        return frame["adj_close"].astype(float)

    def closes(self, symbol: str) -> pd.Series | None:
        """Adjusted closes of ``symbol`` (``None`` when the provider does not have it)."""
        if symbol not in self._closes:
            self._closes[symbol] = self._load(self.provider, symbol)
        return self._closes[symbol]

    def benchmark_return(
        self, *, start: date, end: date, universe: Sequence[str]
    ) -> tuple[float, str] | None:
        """``(return, name)`` of the benchmark over ``start..end`` (module docstring): the
        benchmark symbol where its data covers the window, else the equal-weighted ``universe``
        (named ``equal-weighted universe (N symbols)``); ``None`` when neither covers it."""
        key = (start, end, tuple(universe))
        if key in self._benchmark:
            return self._benchmark[key]
        bench_key = f"benchmark:{self.benchmark_symbol}"
        if bench_key not in self._closes:
            self._closes[bench_key] = self._load(self.benchmark_provider, self.benchmark_symbol)
        bench = self._closes[bench_key]
        found: tuple[float, str] | None = None
        ret = period_return(bench, start=start, end=end) if bench is not None else None
        if ret is not None:
            found = (ret, self.benchmark_symbol)
        else:
            rets = [
                r
                for s in universe
                if (c := self.closes(s)) is not None
                and (r := period_return(c, start=start, end=end)) is not None
            ]
            if rets:
                found = (float(np.mean(rets)), f"equal-weighted universe ({len(rets)} symbols)")
        self._benchmark[key] = found
        return found


# --------------------------------------------------------------------------------------------
# Scoring (idempotent; the beat task)
# --------------------------------------------------------------------------------------------


def _analyst(kind: str | None) -> str:
    return "llm synthesis" if kind == "llm" else "deterministic scorer"


@dataclass(frozen=True)
class ScoreRun:
    """What :func:`score_pending` did: recommendations looked at, rows written, and horizons
    still open (not enough bars after ``as_of`` yet)."""

    recommendations: int
    written: int
    pending: int


def score_pending(
    *,
    settings: Settings | None = None,
    backtest_name: str | None = None,
    since: date | None = None,
    horizons: Sequence[int] = HORIZONS,
    book: PriceBook | None = None,
    now: datetime | None = None,
    limit: int | None = None,
) -> ScoreRun:
    """Score every finished recommendation (of ``backtest_name`` / ``as_of >= since`` when
    given) at each horizon that has matured and is not scored yet; idempotent (rows keyed by
    ``(analysis_id, horizon)``, module docstring). ``book`` defaults to the configured provider;
    ``limit`` caps the recommendations looked at (oldest ``as_of`` first).

    Raises ``service.SchemaMissingError`` when the service database is not migrated."""
    settings = settings or get_settings()
    service.prepare_database(settings=settings)
    engine = get_engine(settings.service.effective_database_url)
    book = book or PriceBook.from_settings(settings)
    recs = backtest_repo.recommendations(
        engine=engine, backtest_name=backtest_name, since=since, only_unscored_at=horizons, limit=limit
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
        if closes is None:
            continue
        ukey = (rec["as_of"], rec["backtest_name"])
        if ukey not in universes:
            universes[ukey] = backtest_repo.universe_on(
                engine=engine, as_of=rec["as_of"], backtest_name=rec["backtest_name"]
            )
        for horizon in horizons:
            if (rec["analysis_id"], horizon) in done:
                continue
            fwd = forward_return(closes, as_of=rec["as_of"], horizon=horizon)
            if fwd is None:
                pending += 1
                continue
            end, ret = fwd
            bench = book.benchmark_return(start=rec["as_of"], end=end, universe=universes[ukey])
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
                    "benchmark": bench[1],
                    "analyst": _analyst(rec["author_kind"]),
                    "model": rec["author_model"] or "rules (no model)",
                    "prompt_version": rec["prompt_version"],
                    "scored_at": stamp,
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


def hit(signal: str, excess: float, horizon: int) -> bool:
    """Whether a signal was right (module docstring): BUY ``x > 0``, SELL ``x < 0``, HOLD
    ``|x| < 0.01·√h``."""
    if signal == "BUY":
        return excess > 0
    if signal == "SELL":
        return excess < 0
    return abs(excess) < HOLD_BAND_DAILY * math.sqrt(horizon)


def calibration_bins(
    p: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray
) -> list[dict[str, float | int]]:
    """Equal-width bins of ``p`` on [0, 1] (``CALIBRATION_BINS``; p = 1 falls in the last):
    ``{lower, upper, n, mean_p, observed}`` for the non-empty bins."""
    p_arr, y_arr = np.asarray(p, dtype=float), np.asarray(y, dtype=float)
    which = np.minimum((p_arr * CALIBRATION_BINS).astype(int), CALIBRATION_BINS - 1)
    out: list[dict[str, float | int]] = []
    for b in range(CALIBRATION_BINS):
        mask = which == b
        if mask.any():
            out.append(
                {
                    "lower": b / CALIBRATION_BINS,
                    "upper": (b + 1) / CALIBRATION_BINS,
                    "n": int(mask.sum()),
                    "mean_p": float(p_arr[mask].mean()),
                    "observed": float(y_arr[mask].mean()),
                }
            )
    return out


def _num(value: float | None, digits: int = 6) -> float | None:
    if value is None or not math.isfinite(value):
        return None
    return round(float(value), digits)


def metrics(frame: pd.DataFrame, *, horizon: int) -> dict[str, Any]:
    """The scorecard metrics (module docstring) of ``frame``'s rows at one horizon.

    ``frame``: columns ``signal`` (BUY/HOLD/SELL), ``score`` (float or NaN), ``excess_return``
    (fraction) and optionally ``confidence`` (NaN or absent for baselines). Returns ``{n,
    hit_rate, mean_signed_excess, ic, brier, ece, signals: {BUY: {n, hit_rate, mean_excess,
    median_excess}, …}, calibration: [...]}``; a value that cannot be computed is ``None``.
    """
    from scipy.stats import spearmanr  # type: ignore[import-untyped]  # lazy: scipy is slow to import

    n = len(frame)
    out: dict[str, Any] = {"horizon": horizon, "n": n, "signals": {}}
    if n == 0:
        return {**out, "hit_rate": None, "mean_signed_excess": None, "ic": None, "brier": None, "ece": None}
    excess = frame["excess_return"].astype(float)
    hits = [hit(s, x, horizon) for s, x in zip(frame["signal"], excess, strict=True)]
    out["hit_rate"] = _num(float(np.mean(hits)))
    signed = frame["signal"].map(POSITION).astype(float) * excess
    out["mean_signed_excess"] = _num(float(signed.mean()))
    # t of the mean signed excess (mean / (std / √n)): rows of one date are correlated and long
    # horizons overlap, so this overstates significance; it is a floor on doubt, not a test
    spread = float(signed.std(ddof=1)) if n > 1 else float("nan")
    out["t_signed_excess"] = _num(float(signed.mean()) / (spread / math.sqrt(n)), 3) if spread > 0 else None
    for sig in SIGNALS:
        mask = (frame["signal"] == sig).to_numpy()
        sub = excess[mask]
        out["signals"][sig] = {
            "n": int(mask.sum()),
            "hit_rate": _num(float(np.mean(np.asarray(hits)[mask]))) if mask.any() else None,
            "mean_excess": _num(float(sub.mean())) if mask.any() else None,
            "median_excess": _num(float(sub.median())) if mask.any() else None,
        }
    scores = frame["score"].astype(float)
    valid = scores.notna()
    ic = None
    if valid.sum() >= 3 and scores[valid].nunique() > 1 and excess[valid].nunique() > 1:
        ic = float(spearmanr(scores[valid], excess[valid]).statistic)
    out["ic"] = _num(ic)
    if "confidence" in frame and frame["confidence"].notna().all():
        p = np.array(
            [
                probability_of_outperformance(s, float(c))
                for s, c in zip(frame["signal"], frame["confidence"], strict=True)
            ]
        )
        y = (excess > 0).astype(float).to_numpy()
        bins = calibration_bins(p, y)
        out["brier"] = _num(float(np.mean((p - y) ** 2)))
        out["ece"] = _num(sum(b["n"] / n * abs(b["observed"] - b["mean_p"]) for b in bins))
        out["calibration"] = bins
    else:
        out["brier"] = out["ece"] = None
        out["calibration"] = []
    return out


# --------------------------------------------------------------------------------------------
# The scorecard
# --------------------------------------------------------------------------------------------


def baseline_rows(pipeline_rows: pd.DataFrame, *, book: PriceBook) -> pd.DataFrame:
    """The baselines' rows on the pipeline rows' grid: each pipeline row repeated per baseline
    with that baseline's signal and score at ``(symbol, as_of)`` (same forward and benchmark
    returns), ``strategy`` = the baseline name, no confidence. Points where a baseline is
    undefined (too few bars) are left out."""
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
                        }
                    )
    return pd.DataFrame(out)


def build_scorecard(
    *,
    settings: Settings | None = None,
    backtest_name: str | None = None,
    since: date | None = None,
    horizons: Sequence[int] = HORIZONS,
    plots_dir: Path | None = None,
    score_first: bool = True,
    tenant: str | None = None,
) -> dict[str, Any]:
    """Score what matured (:func:`score_pending`, unless ``score_first`` is false), then the
    scorecard of the selected recommendations (only ``tenant``'s analyses when given; ``None``:
    every tenant's, the operator's view) as JSON: ``{selection, benchmark, horizons,
    strategies: {name: {horizon: metrics}}, breakdown: {analyst|model|prompt_version: {key:
    {horizon: metrics}}}, verdict: [...], plots: {calibration, cumulative_excess}}`` (plots
    written to ``plots_dir`` when given). Metrics per :func:`metrics`.

    Raises ``backtest.BacktestError``-free: an unknown backtest gives an empty scorecard."""
    settings = settings or get_settings()
    book = PriceBook.from_settings(settings)
    if score_first:
        score_pending(
            settings=settings, backtest_name=backtest_name, since=since, horizons=horizons, book=book
        )
    engine = get_engine(settings.service.effective_database_url)
    rows = pd.DataFrame(
        backtest_repo.scores(engine=engine, backtest_name=backtest_name, since=since, tenant=tenant)
    )
    card: dict[str, Any] = {
        "selection": {
            "backtest": backtest_name,
            "since": since.isoformat() if since else None,
            "tenant": tenant,
        },
        "horizons": list(horizons),
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "strategies": {},
        "breakdown": {},
        "verdict": [],
        "plots": {},
    }
    if rows.empty:
        card["benchmark"] = None
        card["recommendations"] = 0
        return card
    rows = rows[rows["horizon"].isin(list(horizons))].copy()
    rows["strategy"] = PIPELINE
    card["recommendations"] = int(rows["analysis_id"].nunique())
    card["benchmark"] = sorted(rows["benchmark"].unique().tolist())
    both = pd.concat([rows, baseline_rows(rows, book=book)], ignore_index=True)
    for strategy in [PIPELINE, *BASELINES]:
        sub = both[both["strategy"] == strategy]
        card["strategies"][strategy] = {
            str(h): metrics(sub[sub["horizon"] == h], horizon=h) for h in horizons
        }
    for key in ("analyst", "model", "prompt_version"):
        values = rows[key].fillna("not recorded")
        card["breakdown"][key] = {
            str(value): {str(h): _brief(metrics(group[group["horizon"] == h], horizon=h)) for h in horizons}
            for value, group in rows.assign(**{key: values}).groupby(key)
        }
    card["verdict"] = verdict(card)
    if plots_dir is not None:
        card["plots"] = write_plots(both, card=card, out_dir=plots_dir)
    return card


def _brief(m: dict[str, Any]) -> dict[str, Any]:
    return {k: m.get(k) for k in ("n", "hit_rate", "mean_signed_excess", "ic", "brier", "ece")}


def verdict(card: dict[str, Any]) -> list[str]:
    """One sentence per horizon ranking the pipeline by mean signed excess among the
    strategies, naming every baseline that beat it (said plainly when it loses)."""
    lines = []
    for h in card["horizons"]:
        ranked = sorted(
            (
                (name, per[str(h)]["mean_signed_excess"])
                for name, per in card["strategies"].items()
                if per[str(h)]["mean_signed_excess"] is not None
            ),
            key=lambda item: -item[1],
        )
        names = [name for name, _ in ranked]
        if PIPELINE not in names:
            continue
        mine = dict(ranked)[PIPELINE]
        better = [f"{name} ({_pct(value)})" for name, value in ranked if value > mine]
        rank = names.index(PIPELINE) + 1
        head = f"{h}d: the pipeline's mean signed excess is {_pct(mine)}, rank {rank} of {len(names)}"
        t = card["strategies"][PIPELINE][str(h)].get("t_signed_excess")
        noise = (
            f" (t = {t:.2f}{', indistinguishable from zero' if abs(t) < 2 else ''})" if t is not None else ""
        )
        lines.append(
            f"{head}{noise}; beaten by {', '.join(better)}."
            if better
            else f"{head}{noise}; no baseline beat it."
        )
        m = card["strategies"][PIPELINE][str(h)]
        buy, sell = m["signals"]["BUY"]["hit_rate"], m["signals"]["SELL"]["hit_rate"]
        if m["brier"] is not None:
            calibrated = (
                "worse than the 0.25 of always saying 0.5 (no view): the confidence overstates the edge"
                if m["brier"] > 0.25
                else "better than the 0.25 of always saying 0.5"
            )
            lines.append(
                f"{h}d: BUY hit {_rate(buy)}, SELL hit {_rate(sell)} (a coin flip is 50%); "
                f"Brier {m['brier']:.3f}, {calibrated}; ECE {m['ece']:.3f}."
            )
    return lines


def write_plots(both: pd.DataFrame, *, card: dict[str, Any], out_dir: Path) -> dict[str, str]:
    """Write ``calibration.png`` (the pipeline's calibration curve per horizon, with the
    diagonal and the bin counts) and ``cumulative_excess.png`` (cumulative signed excess of every
    strategy at the shortest horizon, module docstring) to ``out_dir``; returns their paths."""
    import empyrical  # lazy: scipy behind it
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # lazy: matplotlib is a second to import

    out_dir.mkdir(parents=True, exist_ok=True)
    selection = card["selection"]["backtest"] or "all recommendations"
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(7, 7.5), height_ratios=(3, 1), sharex=True)
    top.plot([0, 1], [0, 1], color="grey", linestyle="--", linewidth=1, label="perfectly calibrated")
    for h in card["horizons"]:
        m = card["strategies"][PIPELINE][str(h)]
        bins = m.get("calibration") or []
        if not bins:
            continue
        xs, ys = [b["mean_p"] for b in bins], [b["observed"] for b in bins]
        top.plot(xs, ys, marker="o", label=f"{h}d (Brier {m['brier']:.3f}, ECE {m['ece']:.3f})")
        bottom.bar(
            [b["lower"] + (card["horizons"].index(h) + 0.5) / (len(card["horizons"]) * 10) for b in bins],
            [b["n"] for b in bins],
            width=0.1 / len(card["horizons"]),
            label=f"{h}d",
        )
    top.set_ylabel("observed share outperforming the benchmark")
    top.set_title(f"Calibration of the pipeline's confidence: {selection}")
    top.set_xlim(0, 1)
    top.set_ylim(0, 1)
    top.legend(loc="upper left", fontsize=8)
    bottom.set_xlabel("p(outperform) = 0.5 ± confidence/2 (BUY +, SELL −, HOLD 0.5)")
    bottom.set_ylabel("recommendations")
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
    bench = ", ".join(card["benchmark"] or [])
    ax.set_title(f"Following the signals vs {bench}: {selection}", fontsize=10)
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
    """The scorecard as Markdown: the benchmark, one table per horizon (pipeline and
    baselines: n, hit rate, per-signal n / hit / mean / median excess, mean signed excess, IC,
    Brier, ECE), the verdict and the breakdowns."""
    sel = card["selection"]
    title = f"backtest {sel['backtest']}" if sel["backtest"] else "all recommendations"
    if sel["since"]:
        title += f" since {sel['since']}"
    lines = [f"# Scorecard: {title}", ""]
    if not card["strategies"]:
        return "\n".join([*lines, "No recommendation has a matured horizon yet.", ""])
    lines += [
        f"{card['recommendations']} recommendations; benchmark: {', '.join(card['benchmark'])}. "
        "Excess = forward return − benchmark return over the same dates (adjusted closes).",
        "",
    ]
    head = ["strategy", "n", "hit"]
    for sig in SIGNALS:
        head += [f"{sig} n", f"{sig} hit", f"{sig} mean", f"{sig} median"]
    head += ["mean signed excess", "IC", "Brier", "ECE"]
    for h in card["horizons"]:
        lines += [f"## {h} trading days", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for name, per in card["strategies"].items():
            m = per[str(h)]
            cells = [name, str(m["n"]), _rate(m["hit_rate"])]
            for sig in SIGNALS:
                s = m["signals"].get(sig) or {}
                cells += [
                    str(s.get("n", 0)),
                    _rate(s.get("hit_rate")),
                    _pct(s.get("mean_excess")),
                    _pct(s.get("median_excess")),
                ]
            cells += [_pct(m["mean_signed_excess"]), _dec(m["ic"]), _dec(m["brier"]), _dec(m["ece"])]
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
    lines += ["## Verdict", "", *[f"- {v}" for v in card["verdict"]], ""]
    if any(b.startswith("equal-weighted") for b in card["benchmark"]):
        lines += [
            "No benchmark symbol covers these dates, so the benchmark is the equal-weighted universe of "
            "the run: buy-and-hold of the same symbols is then the benchmark itself (excess 0 by "
            "construction), as for any strategy that says BUY on every grid point.",
            "",
        ]
    for key, groups in card["breakdown"].items():
        lines += [
            f"## By {key.replace('_', ' ')}",
            "",
            "| value | horizon | n | hit | mean signed excess | IC | Brier | ECE |",
        ]
        lines.append("|---|---|---|---|---|---|---|---|")
        for value, per in groups.items():
            for h, m in per.items():
                lines.append(
                    f"| {value} | {h}d | {m['n']} | {_rate(m['hit_rate'])} | {_pct(m['mean_signed_excess'])} "
                    f"| {_dec(m['ic'])} | {_dec(m['brier'])} | {_dec(m['ece'])} |"
                )
        lines.append("")
    lines += [
        "Hit: BUY when excess > 0, SELL when < 0, HOLD when |excess| < 1 % × √h. Mean signed excess: "
        "mean of (+1 BUY, 0 HOLD, −1 SELL) × excess. IC: Spearman of score vs excess. Brier/ECE: "
        "p(outperform) = 0.5 ± confidence/2 (HOLD 0.5) against excess > 0. t = mean / (std / √n) of the "
        "signed excess: rows of one date are correlated and horizons longer than the grid step overlap, "
        "so t overstates significance.",
        "",
    ]
    if card["plots"]:
        lines += [f"Plots: {card['plots']['calibration']}, {card['plots']['cumulative_excess']}", ""]
    return "\n".join(lines)


def digest_section(
    *, symbols: Sequence[str], settings: Settings | None = None, tenant: str | None = None
) -> dict[str, Any] | None:
    """The watchlist digest's scorecard lines: for ``symbols``' scored recommendations of
    ``tenant`` (the watchlist's owner: every one of its analyses, not only this watchlist's;
    ``None``: every tenant's), per horizon ``{n, hit_rate, mean_signed_excess}`` of the
    pipeline; ``None`` when none has matured. Reads stored scores only (the beat task writes
    them), so a digest never waits for scoring."""
    settings = settings or get_settings()
    engine = get_engine(settings.service.effective_database_url)
    rows = pd.DataFrame(backtest_repo.scores(engine=engine, tenant=tenant))
    if rows.empty:
        return None
    rows = rows[rows["symbol"].isin(list(symbols))]
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
            f"- {h}d: {m['n']} scored, hit rate {_rate(m['hit_rate'])}, mean signed excess "
            f"{_pct(m['mean_signed_excess'])} vs {', '.join(section['benchmark'])}"
        )
    return lines
