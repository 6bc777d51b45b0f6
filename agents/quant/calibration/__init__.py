"""Calibrated probability that a recommendation's stock beats the benchmark over ``h`` sessions.

A recommendation's raw output (the scorer's ``score`` in [-1, 1], or an LLM synthesis's signal
and stated confidence) is not a probability: measured on 20 stocknet tickers, 2013-07..2015-05,
BUYs stated at "p ≈ 0.85" beat SPY about half the time (docs/design.md, "Calibrated
probability"). This module turns the raw output into ``p(outperform the benchmark over h
trading days)`` for ``h`` in :data:`HORIZONS`, fitted on the project's own scored
recommendations (rows of ``recommendation_scores`` of a backtest), and decides the signal from it.

Method: **histogram binning** (Zadrozny and Elkan, "Obtaining calibrated probability estimates
from decision trees and naive Bayesian classifiers", ICML 2001) of the raw value ``x`` into the
fixed bins :data:`BIN_EDGES`, each bin's frequency of "excess return > 0" shrunk toward 0.5 by an
**m-estimate** (Cestnik, "Estimating probabilities: a crucial task in machine learning", ECAI
1990; the posterior mean under a Beta(m/2, m/2) prior):

    p = (wins + m · 0.5) / (n + m),   m = :data:`PRIOR_ROWS`

so a bin with few rows says little more than 0.5, and one with thousands says its frequency.
``m`` is large on purpose: rows overlap (a 60-day outcome spans twelve weekly dates) and the
stocks of one date move together, so n rows carry far fewer than n independent outcomes.

Walk-forward, with an embargo (López de Prado, *Advances in Financial Machine Learning*, 2018,
ch. 7, "purging and embargo"): a prediction at ``as_of`` T uses a row only when its outcome was
known before T with ``h`` sessions to spare: ``row.known_after < T`` where ``known_after`` is
the row's ``end_date`` (its as_of + h sessions) plus ``h`` further XNYS sessions
(:func:`embargo_end`). Rows are keyed by what authored them (a rule-set label or an LLM prompt
version, ``agents.analysts.versions``): a key with fewer than :data:`MIN_ROWS` usable rows at a
horizon **abstains** there (p = 0.5, the reason stated).

Evidence gate: a bin whose past frequency does not clear the hurdle abstains too (p = 0.5, the
reason stated). Its frequency ``wins / n`` is tested against 0.5 with a standard error
clustered by ``as_of`` date (the stocks of one date move together; Liang and Zeger, Biometrika
1986: ``Var = G/(G-1) · Σ_c (S_c − p̂·n_c)² / n²`` over the G dates c with n_c rows and S_c wins)
and inflated by the overlap of the outcome windows, ``L = max(1, h / s)`` where ``s`` is the
median spacing of the key's dates in sessions (h-session outcomes sampled every s sessions
share up to h/s − 1 neighbours' returns; Hansen and Hodrick, JPE 1980, and Britten-Jones,
Neuberger and Nolte, RFS 2011, on overlapping observations). The hurdle is **|t| ≥ 3**
(:data:`GATE_T`; Harvey, Liu and Zhu, "… and the Cross-Section of Expected Returns", Review of
Financial Studies 29(1), 2016: after hundreds of signals tried on the same data, a new one needs
t > 3.0, not 1.96). Every rule and signal tried for the direction on this project's data is
counted in :data:`TRIALS` (39, recorded in the artifact's method constants): a Bonferroni bound
over them would ask 3.22, HLZ's 3.0 allows for correlated trials, and no bin on the shipped rows
comes near either (docs/benchmarks.md, "Calibrated probability"). With few clusters the normal
reading of t is too generous: t is compared with the Student's t quantile with ``G/L − 1``
degrees of freedom at the two-sided tail of a normal |z| = 3 (p = 0.0027; 3.08 with 100 date
blocks, 3.30 with 28; Cameron and Miller, Journal of Human Resources 50(2), 2015, section VI on
few clusters; ``G/L`` is the number of non-overlapping date blocks), and fewer than two such
blocks abstain. The bin speaks only when ``|p̂ − 0.5| ≥ c · sqrt(L · Var)`` for that critical
value ``c``; its p is then the m-estimate. Measured on the shipped rows, the ungated bins'
walk-forward Brier was 0.2503–0.2509, worse than the 0.25 of no view: their frequencies were
noise around a drifting base rate, which the gate refuses to read as evidence.

Track record (:meth:`CalibrationModel.call_record`): the measured hit rate of an author's raw
directional calls (the scorer's BUY at score ≥ 0.25 and SELL at ≤ −0.25; an LLM's BUY or SELL),
computed from the artifact's own rows (outcomes up to :data:`FIT_UNTIL` only): right when a BUY
beat the benchmark or a SELL did not, with a 95 % interval clustered by date and inflated by the
overlap of the outcome windows, read on Student's t with ``G/L − 1`` degrees of freedom (the
variance of the evidence gate, at 95 %). It is what the report prints beside the raw score and in
its plain sentence when the calibration abstains; it decides nothing.

Signal (docs/design.md, "Calibrated probability"): from ``p`` at :data:`SIGNAL_HORIZON` days,
BUY when ``p ≥ 0.5 + MARGIN``, SELL when ``p ≤ 0.5 − MARGIN``, else HOLD; HOLD when abstaining.

The fitted rows ship as a versioned artifact (:data:`ARTIFACT`, JSON; built by ``finagent
calibrate``); its ``version`` is ``calibration-<10 hex>``, sha256 over the method constants and
the rows, like the rule-set and prompt labels. Only rows whose outcome ends on or before
:data:`FIT_UNTIL` are in it: the later stocknet prices are held out.
"""

from __future__ import annotations

import bisect
import hashlib
import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import date
from functools import cache
from pathlib import Path
from typing import Any, Final, Literal

Signal = Literal["BUY", "HOLD", "SELL"]

HORIZONS: Final[tuple[int, ...]] = (5, 20, 60)
#: The horizon whose p decides the signal (a month of sessions: the middle of the three).
SIGNAL_HORIZON: Final[int] = 20
#: Bin edges of the raw value x in [-1, 1]: the scorer's BUY/SELL thresholds (±0.25) and a
#: "strong" cut at ±0.5; a value on an edge goes to the bin above it (the last bin is closed).
BIN_EDGES: Final[tuple[float, ...]] = (-1.0, -0.5, -0.25, 0.25, 0.5, 1.0)
#: m of the m-estimate: pseudo-rows at 0.5 in every bin (module docstring).
PRIOR_ROWS: Final[float] = 200.0
#: Fewer usable rows than this for a key and horizon: abstain (ten weekly dates of 20 stocks).
MIN_ROWS: Final[int] = 200
#: Distance of p from 0.5 that a BUY or SELL needs.
MARGIN: Final[float] = 0.03
#: The evidence gate's hurdle on the bin's t statistic (module docstring, "Evidence gate"):
#: Harvey, Liu and Zhu (RFS 2016), for a signal found among many tried on one data set.
GATE_T: Final[float] = 3.0
#: Every rule and signal whose direction forecasts were measured against outcomes on the data up
#: to 2015-12-31 (the stocknet prices and the ACL18 train and dev splits), counted once each:
#: the multiple testing the gate's hurdle has to cover. A new rule set or LLM prompt version that
#: gets backtested adds one (and starts abstaining until it is calibrated).
TRIALS: Final[tuple[tuple[str, int], ...]] = (
    ("scorer rule sets backtested on the stocknet grid (rules-3677c5fe86, rules-4dd7af96cf)", 2),
    ("baselines scored beside them (buy-and-hold, SMA 50/200, MACD 12/26/9, RSI 14 30/70)", 4),
    (
        "published signals recomputed on the stocknet universe (12-1 momentum, 1-month reversal, "
        "60-day low volatility, 52-week-high proximity, post-earnings drift)",
        5,
    ),
    ("the social-sentiment analyst (ACL18 dev and the scorecard's breakdown)", 1),
    ("learned-analyst candidates compared on ACL18 dev (3 feature sets x 4 L2 strengths)", 12),
    ("blend weights (social, learned) of the pipeline row compared on ACL18 dev", 15),
    ("LLM prompt versions whose signals were scored against outcomes", 0),
)
#: The scorer's BUY and SELL thresholds on its score (``agents.quant.scorer``): a row of a rule
#: set is a directional call when ``|x|`` reaches this (the bins' inner edges, :data:`BIN_EDGES`).
CALL_EDGE: Final[float] = 0.25
#: Two-sided level of the track record's interval (:meth:`CalibrationModel.call_record`).
RECORD_LEVEL: Final[float] = 0.95
#: Latest outcome date a fitted row may have; later prices are held out.
FIT_UNTIL: Final[date] = date(2015, 12, 31)
METHOD: Final[str] = "histogram-binning+m-estimate+evidence-gate"
ARTIFACT: Final[Path] = Path(__file__).with_name("calibration.json")


class CalibrationError(ValueError):
    """An artifact or row set that cannot be used (bad shape, outcome after ``FIT_UNTIL``)."""


@dataclass(frozen=True)
class CalibrationRow:
    """One scored recommendation at one horizon, as the calibration uses it.

    ``key``: rule-set label or prompt version; ``horizon`` in sessions; ``as_of`` / ``end_date``:
    the recommendation's date and the close ``horizon`` sessions later; ``known_after``: the end
    of the embargo (:func:`embargo_end`), the row is usable at T > known_after; ``x``: the raw
    value (:func:`raw_value`); ``outperformed``: excess return over the benchmark > 0.
    """

    key: str
    horizon: int
    as_of: date
    end_date: date
    known_after: date
    x: float
    outperformed: bool


@dataclass(frozen=True)
class Calibrated:
    """p(outperform) of one recommendation at one horizon.

    ``p`` in [0, 1] (0.5 when ``abstained``); ``rows``: usable rows of the key at this horizon
    (the evidence); ``bin_rows`` / ``bin_wins``: of them, those in x's bin and how many
    outperformed; ``first`` / ``last``: as_of span of the usable rows (``None`` without rows);
    ``reason``: why it abstained.
    """

    horizon: int
    p: float
    abstained: bool
    rows: int
    bin_rows: int = 0
    bin_wins: int = 0
    first: date | None = None
    last: date | None = None
    reason: str | None = None


@dataclass
class _Index:
    """Rows of one (key, horizon), sorted by ``known_after``, with running counts per bin."""

    known_after: list[date] = field(default_factory=list)
    as_of_sorted: list[date] = field(default_factory=list)
    # counts[b][i]: rows among the first i (by known_after) in bin b; wins likewise
    counts: list[list[int]] = field(default_factory=list)
    wins: list[list[int]] = field(default_factory=list)
    first_as_of: list[date] = field(default_factory=list)  # running min of as_of
    last_as_of: list[date] = field(default_factory=list)  # running max of as_of
    # per bin, running sums over its date clusters c (n_c rows, S_c wins) for the clustered
    # variance: G (dates), Σ n_c², Σ S_c·n_c, Σ S_c²; a cut by known_after never splits a
    # date (all rows of one as_of share their known_after), so the sums at a cut are exact
    dates: list[list[int]] = field(default_factory=list)
    n2: list[list[int]] = field(default_factory=list)
    sn: list[list[int]] = field(default_factory=list)
    s2: list[list[int]] = field(default_factory=list)
    spacing: float = 1.0  # median sessions between the key's consecutive as_of dates


def bin_of(x: float) -> int:
    """Index of ``x``'s bin in :data:`BIN_EDGES` (0..4). Raises ``ValueError`` outside [-1, 1]
    or for NaN."""
    if not (-1.0 <= x <= 1.0):
        raise ValueError(f"raw value {x!r} outside [-1, 1]")
    return min(bisect.bisect_right(BIN_EDGES, x) - 1, len(BIN_EDGES) - 2)


def raw_value(*, signal: str, confidence: float, score: float | None, author_kind: str | None) -> float:
    """The raw value a row is binned by: the scorer's ``score`` for a deterministic
    recommendation; for an LLM-authored one its stated confidence signed by its signal (+ BUY,
    − SELL, 0 HOLD), the only graded output the model gives. Raises ``ValueError`` when a
    deterministic row has no score or a value falls outside [-1, 1]."""
    if author_kind == "llm":
        sign = {"BUY": 1.0, "SELL": -1.0}.get(signal, 0.0)
        value = sign * float(confidence)
    else:
        if score is None:
            raise ValueError("a deterministic recommendation without a score")
        value = float(score)
    bin_of(value)
    return value


def call_side(key: str, x: float) -> Literal["BUY", "SELL"] | None:
    """The directional call a raw value ``x`` of author ``key`` is: for an LLM prompt version
    (``prompts-…``) the sign of its signed confidence, for a rule set the scorer's thresholds
    (BUY at ``x ≥`` :data:`CALL_EDGE`, SELL at ``x ≤ −CALL_EDGE``); ``None`` for a HOLD."""
    if key.startswith("prompts-"):
        return "BUY" if x > 0 else "SELL" if x < 0 else None
    return "BUY" if x >= CALL_EDGE else "SELL" if x <= -CALL_EDGE else None


def m_estimate(wins: int, n: int, *, m: float = PRIOR_ROWS) -> float:
    """``(wins + m/2) / (n + m)``: the frequency ``wins / n`` shrunk toward 0.5 (Cestnik 1990).
    Raises ``ValueError`` for negative counts or ``wins > n``."""
    if n < 0 or wins < 0 or wins > n or m <= 0:
        raise ValueError(f"bad counts wins={wins} n={n} m={m}")
    return (wins + 0.5 * m) / (n + m)


def signal_from(p: float, *, abstained: bool = False) -> Signal:
    """BUY when ``p ≥ 0.5 + MARGIN``, SELL when ``p ≤ 0.5 − MARGIN``, else (or abstaining) HOLD."""
    if abstained:
        return "HOLD"
    # rounding guards against 0.53 - 0.5 != 0.03 in binary
    if round(p - 0.5, 12) >= MARGIN:
        return "BUY"
    if round(0.5 - p, 12) >= MARGIN:
        return "SELL"
    return "HOLD"


def embargo_end(end_date: date, horizon: int) -> date:
    """``end_date`` plus ``horizon`` XNYS sessions (``exchange_calendars``): the last day of the
    embargo after an outcome is known. Raises ``ValueError`` for a non-positive horizon."""
    if horizon <= 0:
        raise ValueError(f"horizon {horizon} must be positive")
    import pandas as pd  # lazy: the report path only reads the artifact

    from agents.data.market_calendar import nyse

    cal = nyse()
    start = cal.date_to_session(pd.Timestamp(end_date), direction="previous")
    return cal.session_offset(start, horizon).date()


class CalibrationModel:
    """Rows of past scored recommendations and the walk-forward predictor over them.

    Build from rows (:meth:`__init__`) or from the artifact (:func:`load`). ``version`` is
    ``calibration-<10 hex>`` over the method constants and the rows (:func:`version_of`);
    ``benchmark`` names what "outperform" is measured against (e.g. ``SPY``); ``source`` says
    where the rows came from (free text, e.g. the backtest name).
    """

    def __init__(self, rows: Iterable[CalibrationRow], *, benchmark: str, source: str = "") -> None:
        self.rows: list[CalibrationRow] = sorted(
            rows, key=lambda r: (r.key, r.horizon, r.known_after, r.as_of, r.x, r.outperformed)
        )
        self.benchmark = benchmark
        self.source = source
        self.version = version_of(self.rows, benchmark=benchmark)
        self._index: dict[tuple[str, int], _Index] = {}
        self._records: dict[tuple[str, int, str | None], dict[str, Any] | None] = {}
        self._build()  # raises ValueError for a row whose x is outside [-1, 1] (bin_of)

    def _build(self) -> None:
        nbins = len(BIN_EDGES) - 1
        # the current date cluster of each (key, horizon): its as_of and per bin (n_c, S_c)
        current: dict[tuple[str, int], tuple[date, list[list[int]]]] = {}
        dates_of: dict[tuple[str, int], set[date]] = {}
        for row in self.rows:  # sorted by (key, horizon, known_after, as_of)
            kh = (row.key, row.horizon)
            idx = self._index.setdefault(kh, _Index())
            if not idx.counts:
                idx.counts, idx.wins = [[0] for _ in range(nbins)], [[0] for _ in range(nbins)]
                idx.dates, idx.n2 = [[0] for _ in range(nbins)], [[0] for _ in range(nbins)]
                idx.sn, idx.s2 = [[0] for _ in range(nbins)], [[0] for _ in range(nbins)]
            if kh not in current or current[kh][0] != row.as_of:
                current[kh] = (row.as_of, [[0, 0] for _ in range(nbins)])
                dates_of.setdefault(kh, set()).add(row.as_of)
            cluster = current[kh][1]
            b, y = bin_of(row.x), int(row.outperformed)
            idx.known_after.append(row.known_after)
            for k in range(nbins):
                n_c, s_c = cluster[k]
                hit = k == b
                idx.counts[k].append(idx.counts[k][-1] + hit)
                idx.wins[k].append(idx.wins[k][-1] + (hit and y))
                idx.dates[k].append(idx.dates[k][-1] + (hit and n_c == 0))
                # the sums' change when (n_c, S_c) becomes (n_c + 1, S_c + y)
                idx.n2[k].append(idx.n2[k][-1] + (2 * n_c + 1 if hit else 0))
                idx.sn[k].append(idx.sn[k][-1] + (s_c + y * (n_c + 1) if hit else 0))
                idx.s2[k].append(idx.s2[k][-1] + (2 * s_c * y + y if hit else 0))
            cluster[b] = [cluster[b][0] + 1, cluster[b][1] + y]
            prev_first = idx.first_as_of[-1] if idx.first_as_of else row.as_of
            prev_last = idx.last_as_of[-1] if idx.last_as_of else row.as_of
            idx.first_as_of.append(min(prev_first, row.as_of))
            idx.last_as_of.append(max(prev_last, row.as_of))
        for kh, idx in self._index.items():
            idx.spacing = _median_spacing(dates_of[kh])

    def separates(self, *, key: str, horizon: int, bin_index: int, usable: int) -> tuple[bool, float]:
        """Whether the frequency of bin ``bin_index`` over the first ``usable`` rows of
        (``key``, ``horizon``) separates from 0.5 (module docstring, "Evidence gate"), and its
        half-width ``t · sqrt(L · Var)`` (a fraction; ``inf`` with fewer than two date blocks)."""
        idx = self._index[(key, horizon)]
        n = idx.counts[bin_index][usable]
        g = idx.dates[bin_index][usable]
        overlap = max(1.0, horizon / idx.spacing)
        blocks = g / overlap  # non-overlapping date blocks
        if n == 0 or g < 2 or blocks < 2:
            return False, math.inf
        p_hat = idx.wins[bin_index][usable] / n
        resid = (
            idx.s2[bin_index][usable]
            - 2 * p_hat * idx.sn[bin_index][usable]
            + p_hat * p_hat * idx.n2[bin_index][usable]
        )
        # floor: the binomial variance at the shrunk p, so a bin whose dates all agree (zero
        # clustered variance) is judged by its size, never by a zero-width interval
        shrunk = m_estimate(idx.wins[bin_index][usable], n)
        var = max(max(resid, 0.0) / (n * n) * g / (g - 1), shrunk * (1 - shrunk) / n)
        half = critical_value(blocks) * math.sqrt(overlap * var)
        return abs(p_hat - 0.5) >= half, half

    def call_record(self, *, key: str, horizon: int, side: str | None = None) -> dict[str, Any] | None:
        """The measured hit rate of ``key``'s raw directional calls at ``horizon`` over all of
        the model's rows (module docstring, "Track record"); ``side`` ``"BUY"`` or ``"SELL"``
        keeps one side, ``None`` both. Returns ``{key, horizon, side, calls, right, rate, low,
        high, first, last, last_outcome, dates, interval}`` (fractions; ISO dates of the calls'
        as_of span and of their latest outcome; ``low``/``high`` ``None`` with fewer than two
        non-overlapping date blocks), or ``None`` when ``key`` made no such call at ``horizon``.
        Raises ``ValueError`` for another ``side``."""
        if side not in (None, "BUY", "SELL"):
            raise ValueError(f"side {side!r}: BUY, SELL or None")
        cache_key = (key, horizon, side)
        if cache_key not in self._records:
            self._records[cache_key] = self._call_record(key=key, horizon=horizon, side=side)
        return self._records[cache_key]

    def _call_record(self, *, key: str, horizon: int, side: str | None) -> dict[str, Any] | None:
        per_date: dict[date, list[int]] = {}  # as_of -> [calls, right]
        first = last = last_outcome = None
        for row in self.rows:
            if row.key != key or row.horizon != horizon:
                continue
            call = call_side(key, row.x)
            if call is None or (side is not None and call != side):
                continue
            cell = per_date.setdefault(row.as_of, [0, 0])
            cell[0] += 1
            cell[1] += int(row.outperformed == (call == "BUY"))
            first = row.as_of if first is None else min(first, row.as_of)
            last = row.as_of if last is None else max(last, row.as_of)
            last_outcome = row.end_date if last_outcome is None else max(last_outcome, row.end_date)
        if not per_date or first is None or last is None or last_outcome is None:
            return None
        n = sum(c for c, _ in per_date.values())
        right = sum(r for _, r in per_date.values())
        rate = right / n
        g = len(per_date)
        idx = self._index.get((key, horizon))
        overlap = max(1.0, horizon / (idx.spacing if idx else 1.0))
        blocks = g / overlap
        low = high = None
        if g >= 2 and blocks >= 2:
            # the gate's clustered variance (Liang and Zeger 1986), floored at the binomial one
            # (dates that all agree are no zero-width interval), times the overlap factor
            resid = sum((r - rate * c) ** 2 for c, r in per_date.values())
            var = overlap * max(resid / (n * n) * g / (g - 1), rate * (1 - rate) / n)
            # Student's t quantile from scipy.special (what scipy.stats' t.ppf calls: the same
            # bits), lazily: scipy.stats costs a CLI analysis ~0.4-0.7 s to import, special a third
            from scipy.special import stdtrit  # type: ignore[import-untyped]

            half = float(stdtrit(blocks - 1, 0.5 + RECORD_LEVEL / 2)) * math.sqrt(var)
            low, high = max(0.0, rate - half), min(1.0, rate + half)
        return {
            "key": key,
            "horizon": horizon,
            "side": side or "BUY and SELL",
            "calls": n,
            "right": right,
            "rate": round(rate, 4),
            "low": None if low is None else round(low, 4),
            "high": None if high is None else round(high, 4),
            "first": first.isoformat(),
            "last": last.isoformat(),
            "last_outcome": last_outcome.isoformat(),
            "dates": g,
            "interval": f"{RECORD_LEVEL * 100:.0f} %, clustered by date, overlap-adjusted",
        }

    def labels(self) -> list[str]:
        """The keys (rule sets, prompt versions) with rows."""
        return sorted({k for k, _ in self._index})

    def predict(self, *, key: str, x: float, as_of: date, horizon: int) -> Calibrated:
        """p(outperform over ``horizon`` sessions) of a recommendation by ``key`` with raw value
        ``x`` made at ``as_of``, from the rows usable then (module docstring). Abstains (p = 0.5)
        with fewer than :data:`MIN_ROWS` usable rows, and when x's bin does not separate from
        0.5 (:meth:`separates`). Raises ``ValueError`` for ``x`` outside
        [-1, 1]."""
        b = bin_of(x)
        idx = self._index.get((key, horizon))
        usable = bisect.bisect_left(idx.known_after, as_of) if idx else 0
        if idx is None or usable < MIN_ROWS:
            return Calibrated(
                horizon=horizon,
                p=0.5,
                abstained=True,
                rows=usable,
                first=idx.first_as_of[usable - 1] if idx and usable else None,
                last=idx.last_as_of[usable - 1] if idx and usable else None,
                reason=(
                    f"no out-of-sample evidence: {usable} past {horizon}-day outcomes of {key} "
                    f"were known before {as_of.isoformat()} (at least {MIN_ROWS} needed)"
                ),
            )
        n, wins = idx.counts[b][usable], idx.wins[b][usable]
        first, last = idx.first_as_of[usable - 1], idx.last_as_of[usable - 1]
        speaks, half = self.separates(key=key, horizon=horizon, bin_index=b, usable=usable)
        if not speaks:
            freq = f"{wins / n:.3f}" if n else "no rows"
            return Calibrated(
                horizon=horizon,
                p=0.5,
                abstained=True,
                rows=usable,
                bin_rows=n,
                bin_wins=wins,
                first=first,
                last=last,
                reason=(
                    f"no evidence that separates from a coin flip: in this score bin {n} past "
                    f"{horizon}-day outcomes of {key} beat {self.benchmark} at {freq}, within "
                    f"0.5 ± {half:.3f} (|t| ≥ {GATE_T:g} needed after {trials()} signals tried; "
                    "clustered by date, overlap-adjusted)"
                ),
            )
        return Calibrated(
            horizon=horizon,
            p=m_estimate(wins, n),
            abstained=False,
            rows=usable,
            bin_rows=n,
            bin_wins=wins,
            first=first,
            last=last,
        )

    def to_json(self) -> dict[str, Any]:
        """The artifact's JSON object: method constants, version, benchmark, source, rows as
        ``[key, horizon, as_of, end_date, known_after, x, outperformed(0/1)]``."""
        return {
            "version": self.version,
            "method": method_constants(),
            "benchmark": self.benchmark,
            "source": self.source,
            "rows": [_row_list(r) for r in self.rows],
        }


def method_constants() -> dict[str, Any]:
    """The constants that define the fit (part of the version hash)."""
    return {
        "name": METHOD,
        "bin_edges": list(BIN_EDGES),
        "prior_rows": PRIOR_ROWS,
        "min_rows": MIN_ROWS,
        "gate": f"clustered by as_of, overlap max(1, h/s), |t| >= {GATE_T} read on t(G/L-1)",
        "trials": sum(n for _, n in TRIALS),
        "embargo": "horizon sessions after end_date (XNYS)",
        "fit_until": FIT_UNTIL.isoformat(),
    }


def critical_value(blocks: float) -> float:
    """The evidence gate's critical value for ``blocks`` non-overlapping date blocks: the
    quantile of Student's t with ``blocks − 1`` degrees of freedom at the two-sided tail a normal
    ``|z| =`` :data:`GATE_T` leaves (p = 0.0027), so it is 3 with many blocks and more with few
    (Cameron and Miller 2015, few clusters). Raises ``ValueError`` for ``blocks ≤ 1``."""
    if blocks <= 1:
        raise ValueError(f"{blocks} date blocks: a t quantile needs more than one")
    # scipy.special, lazily, as in record(): t.isf(q, df) is -stdtrit(df, q) and norm.sf(z) is
    # ndtr(-z) inside scipy.stats, so the value is the same to the bit
    from scipy.special import ndtr, stdtrit

    return float(-stdtrit(blocks - 1, ndtr(-GATE_T)))


def trials() -> int:
    """How many rules and signals were tried for the direction (:data:`TRIALS`)."""
    return sum(n for _, n in TRIALS)


def _median_spacing(dates: Iterable[date]) -> float:
    """Median number of XNYS-like sessions (weekdays, ``numpy.busday_count``) between
    consecutive distinct dates; 1.0 with fewer than two dates."""
    import numpy as np

    ordered = sorted(set(dates))
    if len(ordered) < 2:
        return 1.0
    gaps = np.busday_count(
        np.array(ordered[:-1], dtype="datetime64[D]"), np.array(ordered[1:], dtype="datetime64[D]")
    )
    return max(1.0, float(np.median(gaps)))


def _row_list(r: CalibrationRow) -> list[Any]:
    return [
        r.key,
        r.horizon,
        r.as_of.isoformat(),
        r.end_date.isoformat(),
        r.known_after.isoformat(),
        r.x,
        int(r.outperformed),
    ]


def version_of(rows: Sequence[CalibrationRow], *, benchmark: str) -> str:
    """``calibration-<10 hex>``: sha256 over the method constants, the benchmark and the rows
    (sorted), so any change of data or method is a new version."""
    text = json.dumps(
        {"method": method_constants(), "benchmark": benchmark, "rows": [_row_list(r) for r in rows]},
        sort_keys=True,
        separators=(",", ":"),
    )
    return "calibration-" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:10]


def from_json(data: dict[str, Any], *, check_version: bool = True) -> CalibrationModel:
    """A model from :meth:`CalibrationModel.to_json`'s object. Raises ``CalibrationError`` for a
    malformed object, a row whose outcome ends after :data:`FIT_UNTIL`, or (``check_version``)
    a version that does not match its rows and the current method constants (an edited
    artifact, or one written before a change of method: ``finagent calibrate --restamp``)."""
    try:
        rows = [
            CalibrationRow(
                key=str(k),
                horizon=int(h),
                as_of=date.fromisoformat(a),
                end_date=date.fromisoformat(e),
                known_after=date.fromisoformat(ka),
                x=float(x),
                outperformed=bool(y),
            )
            for k, h, a, e, ka, x, y in data["rows"]
        ]
        model = CalibrationModel(rows, benchmark=str(data["benchmark"]), source=str(data.get("source", "")))
    except (KeyError, TypeError, ValueError) as exc:
        raise CalibrationError(f"malformed calibration artifact: {exc}") from exc
    late = [r for r in rows if r.end_date > FIT_UNTIL]
    if late:
        raise CalibrationError(f"{len(late)} rows have outcomes after {FIT_UNTIL} (held-out period)")
    if check_version and data.get("version") != model.version:
        raise CalibrationError(
            f"artifact version {data.get('version')!r} does not match its rows and the current "
            f"method ({model.version}); after a change of method: finagent calibrate --restamp"
        )
    return model


@cache
def load(path: Path = ARTIFACT) -> CalibrationModel:
    """The shipped model (:data:`ARTIFACT`), read once per process; an empty model (every
    prediction abstains) when the file is absent. Raises ``CalibrationError`` for a malformed
    file."""
    if not path.exists():
        return CalibrationModel([], benchmark="SPY", source="no artifact")
    return from_json(json.loads(path.read_text(encoding="utf-8")))
