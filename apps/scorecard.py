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
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any, Final

import numpy as np
import pandas as pd

from agents.analysts.table import analyst
from agents.quant import evaluation_stats as stats
from agents.quant.baselines import BASELINES, baseline_frame, signal_at

# the computations and the rendering live in sibling modules; their public names are re-exported
# here ("X as X") so callers keep importing them from apps.scorecard
from apps.scorecard_metrics import DEFAULT_ENTRY as DEFAULT_ENTRY
from apps.scorecard_metrics import ENTRIES as ENTRIES
from apps.scorecard_metrics import ENTRY_TEXT as ENTRY_TEXT
from apps.scorecard_metrics import HOLD_BAND_DAILY as HOLD_BAND_DAILY
from apps.scorecard_metrics import HORIZONS as HORIZONS
from apps.scorecard_metrics import INSERT_BATCH as INSERT_BATCH
from apps.scorecard_metrics import MAX_BAR_GAP_DAYS as MAX_BAR_GAP_DAYS
from apps.scorecard_metrics import NO_STATED_P as NO_STATED_P
from apps.scorecard_metrics import NO_VIEW_BRIER as NO_VIEW_BRIER
from apps.scorecard_metrics import P_COLUMN as P_COLUMN
from apps.scorecard_metrics import PIPELINE as PIPELINE
from apps.scorecard_metrics import POSITION as POSITION
from apps.scorecard_metrics import SIGNALS as SIGNALS
from apps.scorecard_metrics import PriceBook as PriceBook
from apps.scorecard_metrics import benchmark_names as benchmark_names
from apps.scorecard_metrics import benchmark_spec as benchmark_spec
from apps.scorecard_metrics import directional_hit as directional_hit
from apps.scorecard_metrics import entry_date as entry_date
from apps.scorecard_metrics import forward_return as forward_return
from apps.scorecard_metrics import hold_band as hold_band
from apps.scorecard_metrics import metrics as metrics
from apps.scorecard_metrics import paired_difference as paired_difference
from apps.scorecard_metrics import period_return as period_return
from apps.scorecard_metrics import probabilities as probabilities
from apps.scorecard_metrics import probability_of_outperformance as probability_of_outperformance
from apps.scorecard_metrics import universe_name as universe_name
from apps.scorecard_render import _brief, _pct, _prop_text
from apps.scorecard_render import markdown as markdown
from apps.scorecard_render import summary as summary
from apps.scorecard_render import verdict as verdict
from apps.scorecard_render import write_plots as write_plots
from core.settings import Settings
from db import backtest_repo
from db.engine import get_engine
from pipeline import service

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
    plots: Collection[str] | None = None,
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
    ``plots_dir`` when given: all of them, or those ``plots`` names, :func:`write_plots`).
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
        rescored = _delete_stale(
            engine=engine, book=book, entry=entry, backtest_name=backtest_name, since=since, tenant=tenant
        )
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
    _strategies(card, rows=rows, both=both, horizons=horizons, step=step)
    _breakdown(card, rows=rows, engine=engine, horizons=horizons, step=step)
    card["risk"] = _risk_tables(engine=engine, book=book, analysis_ids=sorted(set(rows["analysis_id"])))
    card["verdict"] = verdict(card)
    if plots_dir is not None:
        card["plots"] = write_plots(both, card=card, out_dir=plots_dir, only=plots)
    return card


def _delete_stale(
    *,
    engine: Any,
    book: PriceBook,
    entry: str,
    backtest_name: str | None,
    since: date | None,
    tenant: str | None,
) -> int:
    """Delete the selection's stored scores computed with another entry rule or benchmark spec
    than ``entry`` and ``book.spec`` (they are scored again on the current basis); how many."""
    stored = backtest_repo.scores(engine=engine, backtest_name=backtest_name, since=since, tenant=tenant)
    keys = [
        (r["analysis_id"], r["horizon"])
        for r in stored
        if r["entry"] != entry or r["benchmark_spec"] != book.spec
    ]
    return backtest_repo.delete_scores(engine=engine, keys=keys)


def _strategies(
    card: dict[str, Any], *, rows: pd.DataFrame, both: pd.DataFrame, horizons: Sequence[int], step: float
) -> None:
    """Fill ``card["strategies"]`` (the pipeline's and each baseline's metrics per horizon) and
    ``card["comparisons"]`` (the pipeline against each baseline, paired by date, per horizon)."""
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


def _breakdown(
    card: dict[str, Any], *, rows: pd.DataFrame, engine: Any, horizons: Sequence[int], step: float
) -> None:
    """Fill ``card["breakdown"]``: brief metrics per analyst, model and prompt version, plus the
    social and learned analysts' rows when the stored reports have those views."""
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
