"""The scorecard's returns, price book and metrics (the computations behind
:mod:`apps.scorecard`; its module docstring states the rules)."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date, timedelta
from typing import Any, Final

import numpy as np
import pandas as pd

from agents.data.market.base import MarketDataProvider, ProviderError
from agents.data.market.csv_folder import CsvFolderProvider
from agents.data.market.lean_folder import LeanFolderProvider, is_lean_folder
from agents.data.routing import get_provider
from agents.quant import evaluation_stats as stats
from core.settings import Settings

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
