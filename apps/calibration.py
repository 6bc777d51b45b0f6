"""Building and evaluating the calibration artifact (``agents.quant.calibration``) from a backtest.

* :func:`build_from_backtest`: scores the backtest's matured horizons (``apps.scorecard.
  score_pending``, idempotent), reads its ``recommendation_scores`` rows, keeps those against the
  named benchmark whose outcome ends on or before ``until`` (never after
  ``agents.quant.calibration.FIT_UNTIL``: later prices are held out), and turns each into a
  :class:`~agents.quant.calibration.CalibrationRow` (raw value, outcome, embargo end).
* :func:`evaluate`: the walk-forward, out-of-sample evaluation: every row is predicted by the
  model built from the rows themselves, which for a prediction at ``as_of`` T uses only rows
  whose outcome (plus the embargo) was known before T (``CalibrationModel.predict``); Brier, ECE
  (10 bins) and the reliability table per horizon, with and without the abstentions.

``finagent calibrate`` (``apps.cli``) is the command over both.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

from agents.quant import calibration as cal
from agents.quant import evaluation_stats as stats
from core.display import percent
from core.settings import Settings
from db import backtest_repo
from db.engine import get_engine


class CalibrateError(ValueError):
    """A build or evaluation request that cannot be honoured; the message says why."""


@dataclass(frozen=True)
class BuildResult:
    """What :func:`build_from_backtest` kept and dropped, and the model."""

    model: cal.CalibrationModel
    scored_rows: int
    kept: int
    after_until: int
    other_benchmark: int


def rows_from_scores(
    scores: Sequence[dict[str, Any]],
    *,
    raw_signals: dict[str, str],
    until: date,
    benchmark: str,
    on_progress: Callable[[int, int], None] | None = None,
) -> tuple[list[cal.CalibrationRow], int, int]:
    """``recommendation_scores`` rows → calibration rows, keeping those with ``benchmark`` and
    ``end_date ≤ until``. ``raw_signals``: analysis id → the author's own signal (the report's
    ``raw_signal``; absent in reports written before calibration, whose ``signal`` was raw).
    Returns ``(rows, dropped after until, dropped for another benchmark)``. Raises
    ``CalibrateError`` when ``until`` is after ``FIT_UNTIL`` or a row has no key."""
    if until > cal.FIT_UNTIL:
        raise CalibrateError(
            f"--until {until} is after {cal.FIT_UNTIL}: later prices are held out, fit nothing on them"
        )
    out: list[cal.CalibrationRow] = []
    late = other = 0
    embargo: dict[tuple[date, int], date] = {}  # many rows share an end date
    for i, row in enumerate(scores):
        if on_progress and i % 500 == 0:
            on_progress(i, len(scores))
        if row["end_date"] > until:
            late += 1
            continue
        if row["benchmark"] != benchmark:
            other += 1
            continue
        key = row["prompt_version"]
        if not key:
            raise CalibrateError(
                f"analysis {row['analysis_id']} has no prompt_version: it cannot be keyed to a rule set"
            )
        kind = "llm" if row["analyst"] == "llm synthesis" else "deterministic"
        signal = raw_signals.get(row["analysis_id"]) or row["signal"]
        h = int(row["horizon"])
        ek = (row["end_date"], h)
        if ek not in embargo:
            embargo[ek] = cal.embargo_end(row["end_date"], h)
        out.append(
            cal.CalibrationRow(
                key=str(key),
                horizon=h,
                as_of=row["as_of"],
                end_date=row["end_date"],
                known_after=embargo[ek],
                x=cal.raw_value(
                    signal=signal, confidence=float(row["confidence"]), score=row["score"], author_kind=kind
                ),
                outperformed=float(row["excess_return"]) > 0.0,
            )
        )
    if on_progress:
        on_progress(len(scores), len(scores))
    return out, late, other


def build_from_backtest(
    *,
    name: str,
    until: date,
    benchmark: str = "SPY",
    settings: Settings,
    on_progress: Callable[[str], None] | None = None,
) -> BuildResult:
    """The model from backtest ``name``'s scored rows (module docstring). ``on_progress`` gets
    one line per step. Raises ``CalibrateError`` (unknown backtest, nothing to fit, ``until``
    in the held-out period), ``service.SchemaMissingError`` (database not migrated)."""
    from apps import scorecard  # lazy: pandas, scipy

    if until > cal.FIT_UNTIL:
        raise CalibrateError(
            f"--until {until} is after {cal.FIT_UNTIL}: later prices are held out, fit nothing on them"
        )
    engine = get_engine(settings.service.effective_database_url)
    say = on_progress or (lambda _line: None)
    if backtest_repo.get_backtest(engine=engine, name=name) is None:
        raise CalibrateError(f"no backtest named {name!r} (see `finagent backtest`)")
    say(f"scoring matured horizons of backtest {name} ...")
    run = scorecard.score_pending(settings=settings, backtest_name=name)
    say(f"  {run.recommendations} recommendations looked at, {run.written} new score rows")
    scores = backtest_repo.scores(engine=engine, backtest_name=name)
    raw = {
        str(r["analysis_id"]): str(r["raw_signal"])
        for r in backtest_repo.recommendations(engine=engine, backtest_name=name)
        if r.get("raw_signal")
    }
    say(f"  {len(scores)} score rows; computing embargo ends (XNYS sessions) ...")
    rows, late, other = rows_from_scores(
        scores,
        raw_signals=raw,
        until=until,
        benchmark=benchmark,
        on_progress=lambda i, n: say(f"  rows {i}/{n}"),
    )
    if not rows:
        raise CalibrateError(
            f"backtest {name!r} has no scored row against {benchmark} ending on or before {until} "
            f"({late} end later, {other} against another benchmark)"
        )
    model = cal.CalibrationModel(rows, benchmark=benchmark, source=f"backtest {name}, outcomes ≤ {until}")
    return BuildResult(
        model=model, scored_rows=len(scores), kept=len(rows), after_until=late, other_benchmark=other
    )


def write_artifact(model: cal.CalibrationModel, path: Path = cal.ARTIFACT) -> None:
    """Write ``model`` as the artifact JSON (one row a line, so a diff shows rows)."""
    data = model.to_json()
    rows = data.pop("rows")
    head = json.dumps(data, sort_keys=True, ensure_ascii=False)
    body = ",\n".join(json.dumps(r, ensure_ascii=False) for r in rows)
    path.write_text(head[:-1] + ', "rows": [\n' + body + "\n]}\n", encoding="utf-8")


def evaluate(model: cal.CalibrationModel, *, start: date, end: date) -> dict[str, Any]:
    """Walk-forward, out-of-sample scores of ``model``'s own rows with ``start ≤ as_of ≤ end``
    and outcome end ≤ ``FIT_UNTIL``: each is predicted from the rows usable at its ``as_of``
    (embargoed, module docstring). Per horizon: ``n``, ``abstained``, ``brier``, ``ece`` and
    ``reliability`` over all rows (an abstention counts as p = 0.5) and ``brier_called`` /
    ``ece_called`` over the rows that did not abstain (``None`` when all did), the base rate,
    and the fraction of BUY/SELL signals the margin gives; ``targets``: the missed targets, the
    horizons where every prediction abstained (``unjudged``) and the verdict line; ``records``:
    per key and horizon the measured hit rate of its raw directional calls over all of the
    model's rows (``CalibrationModel.call_record``, what reports print beside the raw score). Raises
    ``CalibrateError`` when no row falls in the window."""
    out: dict[str, Any] = {"version": model.version, "benchmark": model.benchmark, "horizons": {}}
    for h in cal.HORIZONS:
        ps: list[float] = []
        ys: list[bool] = []
        called_p: list[float] = []
        called_y: list[bool] = []
        signals = {"BUY": 0, "HOLD": 0, "SELL": 0}
        for row in model.rows:
            if row.horizon != h or not start <= row.as_of <= end or row.end_date > cal.FIT_UNTIL:
                continue
            pred = model.predict(key=row.key, x=row.x, as_of=row.as_of, horizon=h)
            ps.append(pred.p)
            ys.append(row.outperformed)
            signals[cal.signal_from(pred.p, abstained=pred.abstained)] += 1
            if not pred.abstained:
                called_p.append(pred.p)
                called_y.append(row.outperformed)
        if not ps:
            raise CalibrateError(f"no {h}-day row with as_of in {start}..{end}")
        out["horizons"][h] = {
            "n": len(ps),
            "abstained": len(ps) - len(called_p),
            "base_rate": sum(ys) / len(ys),
            "brier": stats.brier_score(ps, ys),
            "ece": stats.expected_calibration_error(ps, ys),
            "reliability": stats.reliability_table(ps, ys),
            "brier_called": stats.brier_score(called_p, called_y) if called_p else None,
            "ece_called": stats.expected_calibration_error(called_p, called_y) if called_p else None,
            "signals": signals,
        }
    out["targets"] = {"missed": targets(out), "unjudged": unjudged(out), "verdict": targets_line(out)}
    # the raw calls' track record over all rows (what the reports print in place of a confidence)
    out["records"] = {
        key: {h: model.call_record(key=key, horizon=h) for h in cal.HORIZONS} for key in model.labels()
    }
    return out


def unjudged(result: dict[str, Any]) -> list[int]:
    """The horizons of an :func:`evaluate` result at which every prediction abstained: their
    Brier (0.25) and ECE (0) are those of saying 0.5 by construction, so no target can be judged
    there (a model that never speaks would otherwise "meet" every target)."""
    return [int(h) for h, m in result["horizons"].items() if m["n"] - m["abstained"] == 0]


def targets(result: dict[str, Any]) -> list[str]:
    """The targets missed by an :func:`evaluate` result at the horizons where some prediction did
    not abstain (empty when all of those are met; see :func:`unjudged` for the others): Brier ≤
    0.25 and ECE ≤ 0.03 at each horizon, and no bin of p ≥ 0.6 whose realised frequency is below
    0.55."""
    misses: list[str] = []
    skip = set(unjudged(result))
    for h, m in result["horizons"].items():
        if int(h) in skip:
            continue
        if m["brier"] > 0.25:
            misses.append(f"{h}d: Brier {m['brier']:.4f} > 0.25")
        if m["ece"] > 0.03:
            misses.append(f"{h}d: ECE {m['ece']:.4f} > 0.03")
        for b in m["reliability"]:
            if b["lower"] >= 0.6 - 1e-9 and b["observed"] < 0.55:
                misses.append(
                    f"{h}d: bin {b['lower']:.1f}-{b['upper']:.1f} realised {b['observed']:.3f} < 0.55"
                )
    return misses


def targets_line(result: dict[str, Any]) -> str:
    """The verdict on the targets in one line. "all met." only when every horizon had a
    prediction that did not abstain and none missed; a horizon where every prediction abstained
    is named as not judged, and when all did the line says so instead of any verdict."""
    misses, silent = targets(result), unjudged(result)
    if len(silent) == len(result["horizons"]):
        return "Targets: not judged: every prediction abstained: no target can be judged."
    parts = ["missed: " + "; ".join(misses)] if misses else []
    if silent:
        spoke = ", ".join(
            f"{h}d: {m['n'] - m['abstained']:,} of {m['n']:,} predictions spoke"
            for h, m in result["horizons"].items()
            if int(h) not in silent
        )
        days = ", ".join(f"{h}d" for h in silent)
        parts.append(f"not judged at {days}: every prediction there abstained")
        if not misses:
            parts.insert(0, f"met where judged ({spoke})")
    return "Targets: " + ("; ".join(parts) if parts else "all met") + "."


def markdown(result: dict[str, Any]) -> str:
    """The evaluation as Markdown: a summary table and one reliability table per horizon."""
    lines = [
        f"Calibration `{result['version']}` against {result['benchmark']}, walk-forward out of sample.",
        "",
        "| horizon | n | abstained | base rate | Brier | ECE | Brier (called) | ECE (called) "
        "| BUY | HOLD | SELL |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]

    def f(v: float | None) -> str:
        return "" if v is None else f"{v:.4f}"

    for h, m in result["horizons"].items():
        s = m["signals"]
        lines.append(
            f"| {h}d | {m['n']} | {m['abstained']} | {m['base_rate']:.3f} | {f(m['brier'])} | {f(m['ece'])} "
            f"| {f(m['brier_called'])} | {f(m['ece_called'])} | {s['BUY']} | {s['HOLD']} | {s['SELL']} |"
        )
    for h, m in result["horizons"].items():
        lines += ["", f"Reliability, {h} days:", "", "| p bin | n | mean p | realised |", "|---|---|---|---|"]
        for b in m["reliability"]:  # the non-empty bins
            lines.append(
                f"| {b['lower']:.1f}-{b['upper']:.1f} | {b['n']} | {b['mean_p']:.4f} | {b['observed']:.4f} |"
            )
    lines += ["", targets_line(result)]
    records = result.get("records") or {}
    if records:
        lines += [
            "",
            "Raw directional calls (BUY at score >= 0.25, SELL at <= -0.25; right when a BUY beat the "
            "benchmark or a SELL did not), all rows; 95 % intervals clustered by date, overlap-adjusted:",
            "",
            "| key | horizon | calls | right | hit rate [95 %] | as_of span |",
            "|---|---|---|---|---|---|",
        ]
        for key, per in records.items():
            for h, r in per.items():
                if not r:
                    lines.append(f"| {key} | {h}d | 0 | | | |")
                    continue
                interval = ""
                if r["low"] is not None:
                    interval = f" [{percent(r['low'], digits=1)}, {percent(r['high'], digits=1)}]"
                rate = percent(r["rate"], digits=1)
                lines.append(
                    f"| {key} | {h}d | {r['calls']:,} | {r['right']:,} | {rate}{interval} "
                    f"| {r['first']} .. {r['last']} |"
                )
    return "\n".join(lines) + "\n"
