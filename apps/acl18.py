"""The ACL18 stock-movement benchmark (Xu & Cohen, "Stock Movement Prediction from Tweets and
Historical Prices", ACL 2018) built from the stocknet files, and the social-sentiment analyst
measured on it.

Samples: for every stock and every trading day ``d`` of a split, the movement of the adjusted
close against the trading day before, ``r = adj(d) / adj(d-1) - 1``; up when ``r > 0.55 %``,
down when ``r <= -0.5 %``, otherwise dropped (the paper's thresholds). Inputs: the tweets of the
5-trading-day lag window before ``d``, i.e. created in ``[close(d-6), close(d-1))`` (16:00 New
York, :func:`agents.data.market_calendar.close_at_or_before`), so nothing after the close before
``d`` is read. Every labelled day is a sample (these counts equal the paper's); a window without
a tweet gets the analyst's default call. Split by target date: train 2014-01-01 .. 2015-08-01,
dev 2015-08-01 .. 2015-10-01, test 2015-10-01 .. 2016-01-01 (the paper counts 20,339 / 2,555 /
3,720).

Prediction of the social analyst (fixed before any measurement): the reach-weighted sentiment of
the window's collapsed posts (:func:`agents.analysts.social.social_score`); up when it is ≥ 0
(a window without an English post or with a zero score is called up), down when < 0.

Other rows, each a binary call per sample (up when the number is ≥ 0, or p ≥ 0.5):

- the composite scorer as is (:func:`agents.quant.scorer.score_technical` of
  :func:`agents.quant.indicators.compute_indicators` over the bars up to ``d-1``);
- the learned analyst (:mod:`agents.analysts.learned`, the shipped artefact): p(up) ≥ 0.5;
- the pipeline's blend: the composite score blended with the social score at ``w_social`` and
  then with the learned score (``2p - 1``) at ``w_learned`` (``agents.analysts.social.blend``),
  the weights those the artefact records as chosen on dev (so on dev that row is in sample).

Training (:func:`train`, ``finagent eval acl18 --train``): the learned analyst's candidates
(feature sets × regularisation) are fitted on train and compared on dev by MCC; the best one is
written to ``agents/analysts/learned_model.json`` (deterministic bytes), with the blend weights
chosen on dev over a grid.

Metrics: accuracy and the Matthews correlation coefficient, each with a 95 % interval from a
**bootstrap of whole trading days** (2,000 resamples, seeded, percentile method): the samples of
one target day are the same market's move seen through ~60 co-moving stocks, so the test split's
3,720 samples are 64 independent-ish draws, not 3,720. Resampling samples (the first version of
this module) treated them as independent and gave intervals about four times too narrow (the
learned analyst's test accuracy [49.8, 53.1] instead of about [45, 58]). The cluster bootstrap
(resample the clusters, keep each whole; Cameron, Gelbach and Miller, "Bootstrap-based
improvements for inference with clustered errors", REStat 2008, and Cameron and Miller 2015,
section VI.C) is a few lines of numpy here: ``scipy.stats.bootstrap`` and ``arch.bootstrap``
resample observations or blocks of a series, not labelled clusters. Published test results
beside them: random guess about 50.9 %; StockNet 58.23 %, MCC 0.081.
"""

from __future__ import annotations

import bisect
import csv
import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date, datetime
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from agents.analysts import learned
from agents.analysts.social import blend, social_score
from agents.data.market_calendar import close_at_or_before
from agents.data.social.posts import RawPost, StocknetTweetsSource, collapse
from core.settings import Settings

UP_THRESHOLD = 0.0055
DOWN_THRESHOLD = -0.005
LAG_DAYS = 5
SPLITS: dict[str, tuple[date, date]] = {
    "train": (date(2014, 1, 1), date(2015, 8, 1)),
    "dev": (date(2015, 8, 1), date(2015, 10, 1)),
    "test": (date(2015, 10, 1), date(2016, 1, 1)),
}
PAPER_COUNTS = {"train": 20339, "dev": 2555, "test": 3720}
#: Published test results (accuracy %, MCC), for the printout only.
PUBLISHED: tuple[tuple[str, float, float | None], ...] = (
    ("random guess (paper)", 50.89, None),
    ("StockNet, Xu & Cohen 2018 (best)", 58.23, 0.081),
    ("MAN-SF, Sawhney et al. 2020", 60.80, 0.195),
)
BOOTSTRAP = 2000
SEED = 20180715
#: Candidates of the learned analyst (compared on dev): feature sets and inverse L2 strengths.
FEATURE_SETS: dict[str, tuple[str, ...]] = {
    "price": learned.PRICE_FEATURES,
    "social": learned.SOCIAL_FEATURES,
    "price+social": learned.ALL_FEATURES,
}
C_GRID: tuple[float, ...] = (0.001, 0.01, 0.1, 1.0)
#: Blend weights tried on dev for the pipeline row (social, then learned).
WEIGHT_GRID: tuple[float, ...] = (0.0, 0.25, 0.5, 0.75, 1.0)
#: Significant digits of every number in the artefact (same bytes on every run).
DIGITS = 10

Progress = Callable[[str, int, int], None]


@dataclass(frozen=True)
class Sample:
    """One benchmark sample: ``symbol``, target day ``day``, ``up`` (the label), ``tweets`` in its
    window, the social analyst's ``score`` (None without an English post), the learned
    analyst's ``features`` (None when not computed), the composite scorer's score
    (``composite``, None when not computed) and ``as_of``, the session before ``day`` (the date
    an analysis predicting ``day`` runs as of)."""

    symbol: str
    day: date
    up: bool
    tweets: int
    score: float | None
    features: dict[str, float] | None = field(default=None, compare=False)
    composite: float | None = None
    as_of: date | None = None


@dataclass(frozen=True)
class Bar:
    """One row of a stocknet price CSV (prices USD; ``close`` split-adjusted, ``adj`` also
    dividend-adjusted; volume in shares)."""

    day: date
    open: float
    high: float
    low: float
    close: float
    adj: float
    volume: float


def price_bars(path: Path) -> list[Bar]:
    """The bars of one stocknet price CSV, oldest first (rows without a price are skipped)."""
    out: list[Bar] = []
    with open(path, newline="", encoding="utf-8") as handle:
        for row in csv.DictReader(handle):
            try:
                out.append(
                    Bar(
                        day=date.fromisoformat(row["Date"]),
                        open=float(row["Open"]),
                        high=float(row["High"]),
                        low=float(row["Low"]),
                        close=float(row["Close"]),
                        adj=float(row["Adj Close"]),
                        volume=float(row["Volume"]),
                    )
                )
            except (KeyError, TypeError, ValueError):
                continue
    out.sort(key=lambda b: b.day)
    return out


def adjusted_closes(path: Path) -> list[tuple[date, float]]:
    """``(date, Adj Close)`` rows of one stocknet price CSV, oldest first (rows without a price
    are skipped)."""
    return [(b.day, b.adj) for b in price_bars(path)]


@lru_cache(maxsize=4096)
def _close(day: date) -> datetime:
    return close_at_or_before(day)


def _composite_scores(bars: list[Bar], indices: list[int]) -> dict[int, float]:
    """The composite scorer's score for target index ``i`` from the bars before it (``[:i]``)."""
    import pandas as pd

    from agents.quant.indicators import TAIL_BARS, compute_indicators
    from agents.quant.scorer import score_technical

    frame = pd.DataFrame(
        {
            "open": [b.open for b in bars],
            "high": [b.high for b in bars],
            "low": [b.low for b in bars],
            "close": [b.close for b in bars],
            "adj_close": [b.adj for b in bars],
            "volume": [b.volume for b in bars],
        },
        index=pd.DatetimeIndex([pd.Timestamp(b.day) for b in bars], name="date"),
    )
    out: dict[int, float] = {}
    for i in indices:
        window = frame.iloc[max(0, i - TAIL_BARS) : i]
        result = score_technical(indicators=compute_indicators(bars=window), refs={"indicators": "acl18"})
        out[i] = result.score
    return out


def samples(
    *,
    prices_dir: Path,
    tweets_dir: Path,
    split: str,
    score: bool = True,
    composite: bool = False,
    progress: Progress | None = None,
) -> tuple[list[Sample], dict[str, int]]:
    """The split's samples (every labelled day), and counts ``{labelled, with_tweets, up,
    down}`` (``with_tweets``: samples with at least one tweet in the window). Raises
    ``ValueError`` for an unknown split. ``score=False`` counts only (no sentiment or feature is
    computed, so counting the test split reads none of its tweets' text); ``composite=True``
    also runs the composite scorer (slow: indicators per sample). ``progress(split, done,
    total)`` is called after each symbol."""
    if split not in SPLITS:
        raise ValueError(f"split {split!r}: one of {', '.join(SPLITS)}")
    start, end = SPLITS[split]
    source = StocknetTweetsSource(tweets_dir)
    out: list[Sample] = []
    labelled = 0
    paths = sorted(tweets_dir.glob("*.jsonl"))
    for done, path in enumerate(paths, start=1):
        symbol = path.stem
        price_file = prices_dir / f"{symbol}.csv"
        if not price_file.is_file():
            continue
        bars = price_bars(price_file)
        raw: list[RawPost] = source.raw(symbol)
        stamps = [r.created_at for r in raw]
        targets: list[tuple[int, bool]] = []
        for i in range(LAG_DAYS + 1, len(bars)):
            if not start <= bars[i].day < end:
                continue
            change = bars[i].adj / bars[i - 1].adj - 1.0
            if change > UP_THRESHOLD:
                targets.append((i, True))
            elif change <= DOWN_THRESHOLD:
                targets.append((i, False))
        labelled += len(targets)
        comp = _composite_scores(bars, [i for i, _ in targets]) if composite and score else {}
        for i, up in targets:
            bounds = [_close(bars[i - 1 - LAG_DAYS + j].day) for j in range(LAG_DAYS + 1)]
            lo, hi = bisect.bisect_left(stamps, bounds[0]), bisect.bisect_left(stamps, bounds[-1])
            value: float | None = None
            features: dict[str, float] | None = None
            if score:
                rows = [
                    {"text": p.text, "reach": p.reach, "lang": p.lang, "created_at": p.created_at}
                    for p in collapse(symbol, raw[lo:hi])
                ]
                if rows:
                    value, _, _ = social_score(rows)
                if i >= learned.MIN_BARS:
                    features = {
                        **learned.price_features(
                            [b.adj for b in bars[i - learned.MIN_BARS : i]],
                            [b.volume for b in bars[i - learned.MIN_BARS : i]],
                        ),
                        **learned.social_features(rows, bounds=bounds, tweets=hi - lo),
                    }
            out.append(
                Sample(
                    symbol=symbol,
                    day=bars[i].day,
                    up=up,
                    tweets=hi - lo,
                    score=value,
                    features=features,
                    composite=comp.get(i),
                    as_of=bars[i - 1].day,
                )
            )
        if progress is not None:
            progress(split, done, len(paths))
    counts = {
        "labelled": labelled,
        "with_tweets": sum(1 for s in out if s.tweets),
        "up": sum(s.up for s in out),
        "down": sum(not s.up for s in out),
    }
    return out, counts


def predict(score: float | None) -> bool:
    """The social analyst's call: up when the score is ≥ 0 or missing (module docstring)."""
    return score is None or score >= 0.0


def mcc(truth: np.ndarray, pred: np.ndarray) -> float:
    """Matthews correlation of two boolean arrays; 0 when a margin is empty (undefined)."""
    tp = float(np.sum(truth & pred))
    tn = float(np.sum(~truth & ~pred))
    fp = float(np.sum(~truth & pred))
    fn = float(np.sum(truth & ~pred))
    denom = math.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn))
    return (tp * tn - fp * fn) / denom if denom else 0.0


def _mcc_of_counts(tp: np.ndarray, tn: np.ndarray, fp: np.ndarray, fn: np.ndarray) -> np.ndarray:
    """:func:`mcc` of confusion counts (arrays of one length); 0 where a margin is empty."""
    denom = np.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn))
    safe = np.where(denom > 0, denom, 1.0)
    return np.where(denom > 0, (tp * tn - fp * fn) / safe, 0.0)


def day_bootstrap(
    truth: np.ndarray, pred: np.ndarray, days: np.ndarray, *, bootstrap: int = BOOTSTRAP, seed: int = SEED
) -> tuple[np.ndarray, np.ndarray]:
    """Accuracy and MCC of ``bootstrap`` resamples of whole trading days (module docstring): each
    resample draws ``G`` of the ``G`` distinct ``days`` with replacement and keeps every sample
    of a drawn day (a day drawn twice counts twice). Returns the two arrays of ``bootstrap``
    values. Raises ``ValueError`` when the three arrays differ in length or are empty."""
    if not len(truth) == len(pred) == len(days) or len(truth) == 0:
        raise ValueError("truth, pred and days must be non-empty and of one length")
    _, day_index = np.unique(days, return_inverse=True)
    g = int(day_index.max()) + 1
    # per day: true positives, true negatives, false positives, false negatives
    cells = np.stack([truth & pred, ~truth & ~pred, ~truth & pred, truth & ~pred], axis=1).astype(float)
    per_day = np.zeros((g, 4))
    np.add.at(per_day, day_index, cells)
    rng = np.random.default_rng(seed)
    drawn = rng.integers(0, g, (bootstrap, g))
    counts = per_day[drawn].sum(axis=1)  # (bootstrap, 4)
    tp, tn, fp, fn = counts.T
    return (tp + tn) / counts.sum(axis=1), _mcc_of_counts(tp, tn, fp, fn)


def metrics(
    truth: np.ndarray, pred: np.ndarray, days: np.ndarray, *, bootstrap: int = BOOTSTRAP, seed: int = SEED
) -> dict[str, Any]:
    """Accuracy (fraction) and MCC of the boolean calls ``pred`` against ``truth`` with
    percentile 95 % intervals from :func:`day_bootstrap` (``days``: each sample's target day,
    the cluster), the number of days, the up share (what always-up scores) and how many calls
    were up. ``{"n": 0}`` when empty."""
    n = len(truth)
    if n == 0:
        return {"n": 0}
    accs, mccs = day_bootstrap(truth, pred, days, bootstrap=bootstrap, seed=seed)
    return {
        "n": n,
        "days": len(np.unique(days)),
        "accuracy": float(np.mean(truth == pred)),
        "accuracy_ci": [float(np.percentile(accs, 2.5)), float(np.percentile(accs, 97.5))],
        "mcc": mcc(truth, pred),
        "mcc_ci": [float(np.percentile(mccs, 2.5)), float(np.percentile(mccs, 97.5))],
        "interval": f"95 % percentile bootstrap of whole trading days, {bootstrap:,} resamples",
        "up_share": float(np.mean(truth)),
        "called_up": int(pred.sum()),
    }


def days_of(rows: list[Sample]) -> np.ndarray:
    """The target day of every sample (the bootstrap's cluster), as ``datetime64[D]``."""
    return np.array([s.day for s in rows], dtype="datetime64[D]")


def evaluate(rows: list[Sample], *, bootstrap: int = BOOTSTRAP, seed: int = SEED) -> dict[str, Any]:
    """:func:`metrics` of the social analyst on ``rows``, plus how many calls defaulted to up."""
    truth = np.array([s.up for s in rows], dtype=bool)
    pred = np.array([predict(s.score) for s in rows], dtype=bool)
    out = metrics(truth, pred, days_of(rows), bootstrap=bootstrap, seed=seed)
    if out["n"]:
        out["defaulted"] = sum(1 for s in rows if s.score is None or s.score == 0.0)
    return out


def learned_p(rows: list[Sample], model: learned.LearnedModel) -> np.ndarray:
    """p(up) of the learned ``model`` for every sample (0.5 without features: a default up)."""
    return np.array([model.p_up(s.features) if s.features is not None else 0.5 for s in rows])


def blended(rows: list[Sample], p_up: np.ndarray, *, w_social: float, w_learned: float) -> np.ndarray:
    """The pipeline's score per sample: the composite score (0 when missing) blended with the
    social score at ``w_social`` (skipped without a reading, as the pipeline does) and then
    with ``2p - 1`` at ``w_learned``."""
    out = np.empty(len(rows))
    for k, s in enumerate(rows):
        value = s.composite if s.composite is not None else 0.0
        if w_social > 0 and s.score is not None:
            value = blend(score=value, social=s.score, weight=w_social)
        if w_learned > 0:
            value = blend(score=value, social=round(2 * float(p_up[k]) - 1, 4), weight=w_learned)
        out[k] = value
    return out


def _sig(x: float) -> float:
    return float(f"{float(x):.{DIGITS}g}") + 0.0


def _matrix(rows: list[Sample], names: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray]:
    kept = [s for s in rows if s.features is not None]
    x = np.array([[s.features[f] for f in names] for s in kept if s.features is not None], dtype=float)
    y = np.array([s.up for s in kept], dtype=int)
    return x, y


def fit(train_rows: list[Sample], names: tuple[str, ...], c: float) -> dict[str, Any]:
    """Fit scikit-learn's ``LogisticRegression`` (L2, inverse strength ``c``, lbfgs) on the
    standardised ``names`` features of ``train_rows``; returns the artefact's model fields
    ``{features, mean, scale, coef, intercept, version}`` rounded to :data:`DIGITS` digits."""
    from sklearn.linear_model import LogisticRegression  # type: ignore[import-untyped]

    x, y = _matrix(train_rows, names)
    mean = x.mean(axis=0)
    scale = x.std(axis=0)
    scale[scale == 0] = 1.0
    clf = LogisticRegression(C=c, max_iter=5000, tol=1e-10)
    clf.fit((x - mean) / scale, y)
    params: dict[str, Any] = {
        "features": list(names),
        "mean": [_sig(v) for v in mean],
        "scale": [_sig(v) for v in scale],
        "coef": [_sig(v) for v in clf.coef_[0]],
        "intercept": _sig(clf.intercept_[0]),
    }
    params["version"] = learned.model_version(params)
    return params


def train(*, prices_dir: Path, tweets_dir: Path, progress: Progress | None = None) -> dict[str, Any]:
    """The learned analyst's artefact: every candidate of :data:`FEATURE_SETS` × :data:`C_GRID`
    fitted on train and scored on dev (accuracy, MCC); the one with the highest dev MCC (ties:
    the earlier in that order) is kept; then the blend weights (social, learned) of the
    pipeline row with the highest dev MCC over :data:`WEIGHT_GRID` (ties: the smaller weights).
    Reads no test sample."""
    import sklearn  # type: ignore[import-untyped]

    train_rows, _ = samples(prices_dir=prices_dir, tweets_dir=tweets_dir, split="train", progress=progress)
    dev_rows, _ = samples(
        prices_dir=prices_dir, tweets_dir=tweets_dir, split="dev", composite=True, progress=progress
    )
    truth = np.array([s.up for s in dev_rows], dtype=bool)
    candidates: list[dict[str, Any]] = []
    best: tuple[float, dict[str, Any]] | None = None
    for set_name, names in FEATURE_SETS.items():
        for c in C_GRID:
            params = fit(train_rows, names, c)
            model = learned.parse(params)
            pred = learned_p(dev_rows, model) >= 0.5
            dev_mcc = round(mcc(truth, pred), 4)
            candidates.append(
                {
                    "features": set_name,
                    "C": c,
                    "dev_accuracy": round(float(np.mean(truth == pred)), 4),
                    "dev_mcc": dev_mcc,
                }
            )
            if best is None or dev_mcc > best[0]:
                best = (dev_mcc, {**params, "C": c, "feature_set": set_name})
    assert best is not None
    chosen = best[1]
    model = learned.parse(chosen)
    p_dev = learned_p(dev_rows, model)
    weights: tuple[float, float, float] | None = None
    for ws in WEIGHT_GRID:
        for wl in WEIGHT_GRID:
            if ws + wl > 1.0:
                continue
            score = blended(dev_rows, p_dev, w_social=ws, w_learned=wl)
            value = round(mcc(truth, score >= 0.0), 4)
            if weights is None or value > weights[2]:
                weights = (ws, wl, value)
    assert weights is not None
    n_train = sum(1 for s in train_rows if s.features is not None)
    return {
        "name": "acl18 learned analyst",
        "version": chosen["version"],
        "features": chosen["features"],
        "mean": chosen["mean"],
        "scale": chosen["scale"],
        "coef": chosen["coef"],
        "intercept": chosen["intercept"],
        "model": f"scikit-learn {sklearn.__version__} LogisticRegression(penalty=l2, C={chosen['C']}, lbfgs)",
        "target": "adjusted close of the next session up > +0.55 % (vs down <= -0.5 %), ACL18 labels",
        "trained_on": {
            "split": "train",
            "from": SPLITS["train"][0].isoformat(),
            "until": SPLITS["train"][1].isoformat(),
            "samples": n_train,
        },
        "chosen_on": {
            "split": "dev",
            "from": SPLITS["dev"][0].isoformat(),
            "until": SPLITS["dev"][1].isoformat(),
            "feature_set": chosen["feature_set"],
            "C": chosen["C"],
            "candidates": candidates,
        },
        "blend_on_dev": {"w_social": weights[0], "w_learned": weights[1], "dev_mcc": weights[2]},
    }


def write_artefact(artefact: dict[str, Any], path: Path = learned.MODEL_PATH) -> str:
    """Write ``artefact`` as indented JSON (fixed key order, trailing newline); returns its text."""
    text = json.dumps(artefact, indent=1) + "\n"
    Path(path).write_text(text, encoding="utf-8")
    learned.load.cache_clear()
    return text


def report(
    *,
    prices_dir: Path,
    tweets_dir: Path,
    split: str,
    progress: Progress | None = None,
    llm_n: int = 0,
    settings: Settings | None = None,
) -> dict[str, Any]:
    """Counts of every split (against the paper's) and, on ``split``, the rows of the module
    docstring: composite scorer, social analyst (all samples and those with tweets), learned
    analyst and the pipeline's blend at the artefact's dev-chosen weights; with ``llm_n`` > 0
    also the LLM mode on :func:`llm_sample` of ``llm_n`` rows (:func:`llm_rows`; it needs
    ``settings``, the process's, to enqueue them).

    Raises:
        ValueError: ``llm_n`` > 0 without ``settings`` (the LLM rows would be left out silently).
    """
    if llm_n > 0 and settings is None:
        raise ValueError("the LLM row (llm_n > 0) needs the settings to enqueue its analyses")
    counts = {
        name: samples(prices_dir=prices_dir, tweets_dir=tweets_dir, split=name, score=False)[1]
        for name in SPLITS
    }
    rows, _ = samples(
        prices_dir=prices_dir, tweets_dir=tweets_dir, split=split, composite=True, progress=progress
    )
    truth = np.array([s.up for s in rows], dtype=bool)
    model = learned.load()
    p_up = learned_p(rows, model)
    weights = model.raw.get("blend_on_dev") or {"w_social": 0.0, "w_learned": 0.0}
    ws, wl = float(weights["w_social"]), float(weights["w_learned"])
    composite = np.array([s.composite if s.composite is not None else 0.0 for s in rows])
    days = days_of(rows)
    return {
        "split": split,
        "counts": counts,
        "paper_counts": PAPER_COUNTS,
        "learned_version": model.version,
        "weights": {"w_social": ws, "w_learned": wl},
        "analyst": evaluate(rows),
        "analyst_with_tweets": evaluate([r for r in rows if r.tweets]),
        "composite": metrics(truth, composite >= 0.0, days),
        "learned": metrics(truth, p_up >= 0.5, days),
        "pipeline": metrics(truth, blended(rows, p_up, w_social=ws, w_learned=wl) >= 0.0, days),
        "llm": llm_rows(llm_sample(rows, llm_n), settings=settings, progress=progress)
        if llm_n > 0 and settings is not None
        else None,
    }


#: Samples of the LLM row by default (``--llm-sample``): a structure check, not a measurement.
LLM_SAMPLE = 8


def llm_sample(rows: list[Sample], n: int) -> list[Sample]:
    """A fixed sample of ``n`` rows: sorted by (day, symbol), every ``len // n``-th from the
    first (the same rows on every run; no randomness). Raises ``ValueError`` for ``n < 1``."""
    if n < 1:
        raise ValueError("the LLM sample needs at least one row")
    ordered = sorted(rows, key=lambda s: (s.day, s.symbol))
    step = max(1, len(ordered) // n)
    return ordered[::step][:n]


def llm_rows(
    picked: list[Sample], *, settings: Settings, timeout: float = 600.0, progress: Progress | None = None
) -> dict[str, Any]:
    """Run the full pipeline (LLM mode: the configured ``FINAGENT_LLM_MODEL``; the configured
    data provider, which must serve the stocknet prices) for every sample of ``picked`` as of its
    ``as_of`` and read its call: BUY → up, SELL → down, HOLD → up (the benchmark's default, as
    for the social analyst). Returns :func:`metrics` with ``authors`` (how many reports the
    LLM synthesis decided vs the deterministic fallback), ``signals`` and ``failed`` (analyses
    that did not end ``done``, counted as up)."""
    from pipeline import enqueue_analysis

    truth = np.array([s.up for s in picked], dtype=bool)
    calls: list[bool] = []
    authors: dict[str, int] = {}
    signals: dict[str, int] = {}
    failed = 0
    for k, s in enumerate(picked, start=1):
        assert s.as_of is not None
        row = enqueue_analysis(s.symbol, as_of=s.as_of, settings=settings).wait(timeout=timeout)
        report = row.get("report_json") or {}
        signal = str(report.get("signal") or row.get("signal") or "HOLD")
        if row.get("status") != "done":
            failed += 1
        kind = str((report.get("author") or {}).get("kind") or "deterministic")
        authors[kind] = authors.get(kind, 0) + 1
        signals[signal] = signals.get(signal, 0) + 1
        calls.append(signal != "SELL")
        if progress is not None:
            progress("llm", k, len(picked))
    out = metrics(truth, np.array(calls, dtype=bool), days_of(picked))
    out.update({"authors": authors, "signals": signals, "failed": failed})
    return out


def _row(label: str, m: dict[str, Any]) -> str:
    lo, hi = m["accuracy_ci"]
    mlo, mhi = m["mcc_ci"]
    return (
        f"| {label} (n = {m['n']:,}) | {100 * m['accuracy']:.2f} [{100 * lo:.2f}, {100 * hi:.2f}] "
        f"| {m['mcc']:.3f} [{mlo:.3f}, {mhi:.3f}] |"
    )


def markdown(result: dict[str, Any]) -> str:
    """The printout of :func:`report`: counts beside the paper's, metrics beside the published."""
    lines = ["| split | samples | paper | with tweets | up share |", "|---|---|---|---|---|"]
    for name, c in result["counts"].items():
        share = c["up"] / c["labelled"] if c["labelled"] else float("nan")
        lines.append(
            f"| {name} | {c['labelled']:,} | {result['paper_counts'][name]:,} | {c['with_tweets']:,} "
            f"| {share:.3f} |"
        )
    a = result["analyst"]
    split = result["split"]
    w = result.get("weights") or {}
    lines += [
        "",
        f"Rows on {split} (n = {a.get('n', 0):,}); learned analyst {result.get('learned_version')}:",
        "",
    ]
    lines += ["| model | accuracy % [95 % CI] | MCC [95 % CI] |", "|---|---|---|"]
    named = (
        ("composite", "composite scorer (score ≥ 0 → up)"),
        ("analyst", "social analyst, all samples"),
        ("analyst_with_tweets", "social analyst, samples with tweets"),
        ("learned", "learned analyst (p ≥ 0.5 → up)"),
        (
            "pipeline",
            f"pipeline: composite + social {w.get('w_social', 0):g} + learned {w.get('w_learned', 0):g}",
        ),
        ("llm", "LLM mode, fixed sample (structure only)"),
    )
    for key, label in named:
        m = result.get(key) or {}
        if m.get("n"):
            lines.append(_row(f"{label}, {split}", m))
    if a.get("n"):
        lines.append(f"| always up, {split} | {100 * a['up_share']:.2f} | 0 |")
    for name, acc, m in PUBLISHED:
        lines.append(f"| {name}, test | {acc:.2f} | {m if m is not None else 'n/a'} |")
    if a.get("n"):
        lines += [
            "",
            f"Social analyst calls up: {a['called_up']:,} of {a['n']:,}; defaulted to up (no English post "
            f"or score 0): {a['defaulted']:,}. Intervals: 95 % percentile bootstrap of whole trading "
            f"days ({a['days']:,} days; the stocks of one day move together), {BOOTSTRAP:,} resamples.",
        ]
    llm = result.get("llm")
    if llm and llm.get("n"):
        lines.append(
            f"LLM mode: {llm['n']} analyses, authors {llm['authors']}, signals {llm['signals']}, "
            f"not done {llm['failed']}; a sample this small measures nothing (the row checks the path)."
        )
    return "\n".join(lines)
