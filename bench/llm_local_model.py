"""Whole analyses against a real OpenAI-compatible model server: what a local model's answers
become, per role.

    uv run python bench/llm_local_model.py URL [--model openai/NAME] [--analyses N] [--json] [--keep DIR]
    # e.g. the small local model of ../shared/tools/local_llm.sh, with the local-cpu profile:
    FINAGENT_LLM_PROFILE=local-cpu uv run python bench/llm_local_model.py http://127.0.0.1:18777/v1 \
        --model openai/qwen-0.5b

Runs a fixed set of six analyses (three on the embedded dataset, three on the stocknet CSVs of
``../shared/data`` with its fundamentals and Benzinga headlines, so the fundamental and
sentiment analysts have data) with ``finagent analyze SYMBOL --as-of DATE --json``, one process
each, in embedded mode on a fresh SQLite state, against the server at ``URL``. The stocknet
analyses are skipped, with the reason, when ``../shared/data`` is absent.

For each analysis and role (technical, fundamental, sentiment, synthesis) the answer is
counted from the report's ``analysts`` and the ``llm_calls`` rows:

- ``accepted``: the analyst's answer was the model's (``source`` "llm"), or the synthesis's
  valid answer whose signal the scorer's rules did not support (``rejected``: structurally
  accepted, its signal not used; counted apart as ``signal_rejected``);
- ``repaired``: accepted, and a ``ROLE.repair`` call answered (the first answer was invalid);
- ``dropped``: the deterministic result was used instead (invalid after the repair, an LLM
  error, nothing verifiable left, a spent budget); the error code is counted;
- ``skipped``: no model call was made (no data tool for it, or a budget already spent);

plus the grounding drops (statements removed for unverified numbers), the tokens and the wall
time of each analysis.

Readings (``answers`` per analysis and role, the model's answers whether they stood or were
refused): the judgement (technical ``recommendation``, fundamental ``outlook``, sentiment
``label``, synthesis ``signal``), the prose (notes, or the synthesis's rationale) and the
refusal code (``LLM_NO_READING``: empty, a few words, a key's description or an earlier
analyst's notes written back; ``LLM_COPIED_EXAMPLE``), printed in full so that the prose can be
read: an accepted answer is grounded, not necessarily a sound reading. ``copies`` per role
counts them: ``refused`` by code, ``agrees_with_deterministic`` (the judgement equals the
deterministic analyst's on the same analysis: the scorer's signal of the no-model run, read as
bullish/neutral/bearish for the technical analyst; the research views' fundamental outlook and
headline sentiment label) and, for prompts that showed an example answer (``example`` in the
report: earlier versions, whose judgement was drawn at random per analysis), ``with_example``,
``signal_as_example``, ``prose_identical`` / ``prose_near`` (:func:`prose_match` with the
example's prose) and, where the example and the deterministic reading differ
(``example_differs``), the answers following each.

The baseline, measured in the same run: each analysis first runs without a model
(deterministic analysts; its judgements are the deterministic readings above); ``ratio`` =
median wall time with the model ÷ median without. Accepted % = accepted / (accepted +
dropped) per role. Every ``FINAGENT_*`` variable of the
environment is passed on (``FINAGENT_LLM_PROFILE`` among them) except the state, data and model
ones this script sets.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# the copy rule the analysts enforce, so the bench counts what the product refuses
from agents.analysts.claims import LABEL_KEYS
from agents.analysts.prompts import answer_prose, prose_match

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "data"
ROLES = ("technical", "fundamental", "sentiment", "synthesis")
#: The judgement field of each role's answer (the synthesis's signal is reported apart).
JUDGEMENT = {"technical": "recommendation", "fundamental": "outlook", "sentiment": "label"}


@dataclass(frozen=True)
class Case:
    """One analysis of the fixed set: ``symbol`` on ``as_of`` (ISO date) from ``dataset``
    ("embedded" or "stocknet")."""

    symbol: str
    as_of: str
    dataset: str


#: The fixed set: three embedded analyses, three stocknet ones, alternating, so that a run cut
#: short still has both kinds. Every date is on or before 2015-12-31: prompts are tuned on these
#: runs, and later stocknet prices are held out (docs/evaluation.md). Only ABBV 2015-06-01 has
#: Benzinga headlines naming the company in its news window (five, 2015-05-26 .. 2015-05-31);
#: the data has none for AAPL before 2020 and none for JPM, so their sentiment analyst is not
#: asked.
CASES: tuple[Case, ...] = (
    Case("AAPL", "2012-06-29", "embedded"),
    Case("AAPL", "2015-06-30", "stocknet"),
    Case("MSFT", "2010-06-30", "embedded"),
    Case("ABBV", "2015-06-01", "stocknet"),
    Case("IBM", "2011-12-30", "embedded"),
    Case("JPM", "2014-09-30", "stocknet"),
)
#: Settings this script chooses; the caller's values of these are not passed on.
_OWN = (
    "FINAGENT_SERVICE_STATE_DIR",
    "FINAGENT_DATA_PROVIDER",
    "FINAGENT_DATA_DIR",
    "FINAGENT_DATA_FUNDAMENTALS_DIR",
    "FINAGENT_DATA_NEWS_DIR",
    "FINAGENT_LLM_MODEL",
    "FINAGENT_LLM_API_BASE",
    "FINAGENT_LLM_API_KEY",
)


@dataclass
class Result:
    """What one analysis gave: ``roles`` {role: accepted|repaired|dropped|skipped|...},
    ``codes`` (error codes of dropped roles), grounding drops per role, tokens, wall seconds,
    and ``error`` when the analysis itself failed (non-zero exit)."""

    case: Case
    roles: dict[str, str] = field(default_factory=dict)
    codes: dict[str, str] = field(default_factory=dict)
    grounding_drops: dict[str, int] = field(default_factory=dict)
    tokens: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    llm_calls: int = 0
    wall_s: float = 0.0
    baseline_wall_s: float | None = None
    signal: str | None = None
    error: str | None = None
    #: {role: {label, example_label, prose}} of the model's accepted answers (:func:`readings`)
    answers: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: {role: label} of the deterministic analysts (:func:`deterministic_readings`)
    deterministic: dict[str, str] = field(default_factory=dict)
    #: what grounding dropped, as the report lists it: ``{part, text, numbers}`` each (a
    #: contradicted label's entry names the data's label that replaced it)
    dropped: list[dict[str, Any]] = field(default_factory=list)


def _env(case: Case, *, state: Path, url: str, model: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _OWN}
    env.update(
        PYTHONPATH=str(REPO), LITELLM_LOCAL_MODEL_COST_MAP="True", FINAGENT_SERVICE_STATE_DIR=str(state)
    )
    if model is not None:  # None: the deterministic baseline (no model configured)
        env.update(FINAGENT_LLM_MODEL=model, FINAGENT_LLM_API_BASE=url, FINAGENT_LLM_API_KEY="sk-local-bench")
    if case.dataset == "stocknet":
        env.update(
            FINAGENT_DATA_PROVIDER="csv",
            FINAGENT_DATA_DIR=str(SHARED / "ohlcv" / "stocknet"),
            FINAGENT_DATA_FUNDAMENTALS_DIR=str(SHARED / "fundamentals"),
            FINAGENT_DATA_NEWS_DIR=str(SHARED / "news" / "benzinga"),
        )
    return env


def _calls(state: Path, analysis_id: str) -> list[dict[str, Any]]:
    db = state / "finagent.sqlite3"
    with sqlite3.connect(db) as conn:
        conn.row_factory = sqlite3.Row
        rows = conn.execute(
            "SELECT agent, status FROM llm_calls WHERE analysis_id = ?", (analysis_id,)
        ).fetchall()
    return [dict(r) for r in rows]


def readings(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Per role whose answer the model gave (``source`` llm or rejected, or refused with the
    model's answer kept as ``refused_answer``): ``{label, text, refused, example_label, prose}``
    — its judgement, its prose (:func:`~agents.analysts.prompts.answer_prose`: notes, or the
    synthesis's rationale when its answer stood), the refusal code (``LLM_NO_READING``,
    ``LLM_COPIED_EXAMPLE``; None when it stood), and, where the prompt showed an example answer
    (``example``, options-plan analysts and earlier versions), the example's judgement and the
    :func:`prose_match` of the prose with the example's (else None). Raises nothing."""
    out: dict[str, dict[str, Any]] = {}
    for role in ROLES:
        record = (report.get("analysts") or {}).get(role) or {}
        example = record.get("example") if isinstance(record.get("example"), dict) else None
        key = "signal" if role == "synthesis" else JUDGEMENT[role]
        refused = record.get("refused_answer") or record.get("copied_answer")
        if isinstance(refused, dict):
            answer: dict[str, Any] | None = refused
            label = refused.get(key)
            code: str | None = str(record.get("error") or "").split(":", 1)[0] or None
        elif record.get("source") in ("llm", "rejected"):
            code = None
            if role == "synthesis":
                label = record.get("signal")
                answer = (
                    {"rationale": report.get("rationale") or []} if record.get("source") == "llm" else None
                )
            else:
                answer = record.get("result") or {}
                label = answer.get(key)
        else:
            continue
        text = None if answer is None else answer_prose(answer)
        out[role] = {
            "label": label,
            "text": text,
            "refused": code,
            "example_label": None if example is None else example.get(key),
            "prose": None if text is None or example is None else prose_match(text, answer_prose(example)),
        }
    return out


def deterministic_readings(report: dict[str, Any]) -> dict[str, str]:
    """The deterministic analysts' judgements in a no-model report: ``synthesis`` its signal,
    ``technical`` that signal as bullish/neutral/bearish, ``fundamental`` / ``sentiment`` the
    research views' outlook and label (lower case; absent without the view). Raises nothing."""
    signal = report.get("raw_signal") or report.get("signal")
    out: dict[str, str] = {}
    if signal:
        out["synthesis"] = str(signal)
        out["technical"] = {"BUY": "bullish", "SELL": "bearish"}.get(str(signal), "neutral")
    views = report.get("views") or {}
    if (views.get("fundamental") or {}).get("outlook"):
        out["fundamental"] = str(views["fundamental"]["outlook"]).lower()
    if (views.get("sentiment") or {}).get("label"):
        out["sentiment"] = str(views["sentiment"]["label"]).lower()
    return out


def copies(results: list[Result], role: str) -> dict[str, Any]:
    """The copying counts of ``role`` over ``results`` (module docstring, "Copying"); the
    percentages are of ``answers`` (None without any). Raises nothing."""
    rows = [
        (r.answers[role], r.deterministic.get(role)) for r in results if not r.error and role in r.answers
    ]
    n = len(rows)
    as_example = sum(1 for a, _ in rows if a["label"] is not None and a["label"] == a["example_label"])
    agrees = sum(1 for a, d in rows if d is not None and a["label"] == d)
    differs = [(a, d) for a, d in rows if d is not None and a["example_label"] not in (None, d)]

    def pct(k: int) -> float | None:
        return round(100 * k / n, 1) if n else None

    return {
        "answers": n,
        "refused": dict(Counter(a["refused"] for a, _ in rows if a["refused"])),
        "with_example": sum(1 for a, _ in rows if a["example_label"] is not None),
        "signal_as_example": as_example,
        "signal_as_example_pct": pct(as_example),
        "prose_identical": sum(1 for a, _ in rows if a["prose"] == "identical"),
        "prose_near": sum(1 for a, _ in rows if a["prose"] == "near"),
        "agrees_with_deterministic": agrees,
        "agrees_with_deterministic_pct": pct(agrees),
        "compared_with_deterministic": sum(1 for _, d in rows if d is not None),
        "example_differs": len(differs),
        "example_differs_as_example": sum(1 for a, _ in differs if a["label"] == a["example_label"]),
        "example_differs_as_deterministic": sum(1 for a, d in differs if a["label"] == d),
    }


def classify(report: dict[str, Any], calls: list[dict[str, Any]]) -> Result:
    """Per-role outcome of one finished analysis (module docstring) from its ``--json`` report
    and its ``llm_calls`` rows (``agent``, ``status``). Raises KeyError on a report without
    ``analysts``."""
    result = Result(case=Case(report["symbol"], str(report["as_of"]), ""))
    answered = Counter(c["agent"] for c in calls if c["status"] == "success")
    for role in ROLES:
        record = report["analysts"].get(role) or {}
        source = record.get("source")
        if source in ("llm", "rejected"):
            outcome = "repaired" if answered.get(f"{role}.repair") else "accepted"
            if source == "rejected":
                outcome += "+signal_rejected"
        elif source == "deterministic":
            outcome = "dropped"
            result.codes[role] = str(record.get("error") or "").split(":", 1)[0] or "unknown"
        else:
            outcome = "skipped"
        result.roles[role] = outcome
    for item in (report.get("grounding") or {}).get("dropped") or []:
        role = str(item.get("part", "")).split(".", 1)[0]
        result.grounding_drops[role] = result.grounding_drops.get(role, 0) + 1
        result.dropped.append(
            {"part": item.get("part"), "text": str(item.get("text"))[:160], "numbers": item.get("numbers")}
        )
    tokens = report.get("tokens") or {}
    result.tokens = int(tokens.get("total") or 0)
    result.prompt_tokens = int(tokens.get("prompt") or 0)
    result.completion_tokens = int(tokens.get("completion") or 0)
    result.llm_calls = len(calls)
    result.signal = report.get("raw_signal") or report.get("signal")
    result.answers = readings(report)
    # views only: the scorer's signal of this run may be the model's (the baseline's replaces it)
    result.deterministic = {
        k: v for k, v in deterministic_readings(report).items() if k in ("fundamental", "sentiment")
    }
    return result


def run_case(case: Case, *, url: str, model: str | None, timeout: float, work: Path) -> Result:
    """Run one analysis as ``finagent analyze`` in a fresh state folder under ``work`` and
    classify it (:func:`classify`); a failed run gives a Result with ``error`` set. ``model``
    None: the deterministic baseline (no model configured; the roles are all "skipped")."""
    state = work / f"{case.symbol}-{case.as_of}-{case.dataset}-{'llm' if model else 'baseline'}"
    shutil.rmtree(state, ignore_errors=True)
    finagent = Path(sys.executable).with_name("finagent")
    command = [str(finagent), "analyze", case.symbol, "--as-of", case.as_of, "--json"]
    started = time.monotonic()
    try:
        proc = subprocess.run(
            command,
            env=_env(case, state=state, url=url, model=model),
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return Result(case=case, wall_s=time.monotonic() - started, error=f"timed out after {timeout:.0f} s")
    wall = time.monotonic() - started
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return Result(case=case, wall_s=wall, error=f"exit {proc.returncode}: {tail[:200]}")
    report = json.loads(proc.stdout)
    result = classify(report, _calls(state, report["analysis_id"]))
    if model is None:  # the no-model run: its judgements are the deterministic analysts'
        result.deterministic = deterministic_readings(report)
    result.case, result.wall_s = case, wall
    return result


def summary(results: list[Result]) -> dict[str, Any]:
    """Per-role counts over ``results``: ``{role: {accepted, repaired, dropped, skipped,
    signal_rejected, accepted_pct, codes, grounding_drops, labels_replaced}}`` plus ``wall_s`` (list, per
    analysis), ``tokens`` (list) and ``failed`` (analyses that did not finish).
    ``accepted_pct`` = (accepted + repaired) / (accepted + repaired + dropped) × 100, None
    when the role was never asked."""
    roles: dict[str, dict[str, Any]] = {}
    for role in ROLES:
        counts: Counter[str] = Counter()
        codes: Counter[str] = Counter()
        drops = relabelled = 0
        label_parts = {f"{role}.{k}" for k in LABEL_KEYS}
        for r in results:
            if r.error:
                continue
            outcome = r.roles.get(role, "skipped")
            base, _, extra = outcome.partition("+")
            counts[base] += 1
            if extra:
                counts[extra] += 1
            if role in r.codes:
                codes[r.codes[role]] += 1
            drops += r.grounding_drops.get(role, 0)
            relabelled += sum(1 for d in r.dropped if d["part"] in label_parts)
        asked = counts["accepted"] + counts["repaired"] + counts["dropped"]
        roles[role] = {
            "accepted": counts["accepted"],
            "repaired": counts["repaired"],
            "dropped": counts["dropped"],
            "skipped": counts["skipped"],
            "signal_rejected": counts["signal_rejected"],
            "accepted_pct": round(100 * (counts["accepted"] + counts["repaired"]) / asked, 1)
            if asked
            else None,
            "codes": dict(codes),
            "grounding_drops": drops,
            # judgement labels the indicators contradicted, replaced by the data's
            "labels_replaced": relabelled,
            "copies": copies(results, role),
        }
    done = [r for r in results if not r.error and r.baseline_wall_s]
    ratio = None
    if done:
        llm = sorted(r.wall_s for r in done)[len(done) // 2]
        base_s = sorted(r.baseline_wall_s or 0.0 for r in done)[len(done) // 2]
        ratio = round(llm / base_s, 2) if base_s else None
    return {
        "roles": roles,
        # median wall time with the model ÷ median of the same analyses without one (same run)
        "ratio": ratio,
        "wall_s": [round(r.wall_s, 1) for r in results],
        "baseline_wall_s": [
            None if r.baseline_wall_s is None else round(r.baseline_wall_s, 1) for r in results
        ],
        "tokens": [r.tokens for r in results],
        "failed": [f"{r.case.symbol} {r.case.as_of}: {r.error}" for r in results if r.error],
    }


def _print(results: list[Result], totals: dict[str, Any]) -> None:
    print(
        f"{'analysis':<28} {'wall s':>7} {'tokens':>7} {'calls':>5}  " + "  ".join(f"{r:<12}" for r in ROLES)
    )
    for r in results:
        name = f"{r.case.symbol} {r.case.as_of} {r.case.dataset}"
        if r.error:
            print(f"{name:<28} {r.wall_s:>7.1f}  FAILED: {r.error}")
            continue
        cells = "  ".join(f"{r.roles[role].replace('+signal_rejected', '+sig-rej'):<12}" for role in ROLES)
        print(f"{name:<28} {r.wall_s:>7.1f} {r.tokens:>7} {r.llm_calls:>5}  {cells}")
    print()
    head = f"{'accepted':>8} {'repaired':>8} {'dropped':>7} {'skipped':>7} {'accepted %':>10}"
    print(f"{'role':<12} {head}  drops  codes")
    for role, c in totals["roles"].items():
        pct = "-" if c["accepted_pct"] is None else f"{c['accepted_pct']:.1f}"
        print(
            f"{role:<12} {c['accepted']:>8} {c['repaired']:>8} {c['dropped']:>7} {c['skipped']:>7} {pct:>10}"
            f"  {c['grounding_drops']:>5}  {c['codes'] or ''}"
        )
    print(
        f"\n{'role':<12} {'answers':>7} {'as example':>10} {'prose =':>7} {'prose ~':>7} "
        f"{'agree det':>9}  example≠det: as example / as det"
    )
    for role, c in totals["roles"].items():
        k = c["copies"]
        print(
            f"{role:<12} {k['answers']:>7} {k['signal_as_example']:>10} {k['prose_identical']:>7} "
            f"{k['prose_near']:>7} {k['agrees_with_deterministic']:>4}/{k['compared_with_deterministic']:<4}"
            f"  {k['example_differs_as_example']}/{k['example_differs']} / "
            f"{k['example_differs_as_deterministic']}/{k['example_differs']}"
        )
    # every answer's judgement and prose, to be read (a count of accepted answers says nothing of
    # whether they read the data)
    print("\nanswers (role, analysis, judgement / deterministic, refusal): prose")
    for r in results:
        for role, a in r.answers.items():
            det = r.deterministic.get(role, "-")
            outcome = a["refused"] or "stood"
            print(f"  {role:<11} {r.case.symbol} {r.case.as_of}  {a['label']} / {det}  {outcome}")
            print(f"      {a['text']!r}")
    print("\ndropped by grounding (analysis, part: problems)")
    for r in results:
        for d in r.dropped:
            print(f"  {r.case.symbol} {r.case.as_of}  {d['part']}: {'; '.join(map(str, d['numbers'] or []))}")
    walls = [w for w, r in zip(totals["wall_s"], results, strict=True) if not r.error]
    if walls:
        print(
            f"\nwall time per analysis: median {sorted(walls)[len(walls) // 2]:.1f} s, max {max(walls):.1f} s"
        )


#: Printed by a child process with the analyses' environment (:func:`dry_run`).
_SETTINGS_PROBE = (
    "import json; from core.settings import Settings; s = Settings(); "
    "print(json.dumps({'model': s.llm.model, 'api_base': s.llm.api_base, "
    "'profile': s.llm.profile, 'max_iterations': s.llm.max_iterations, "
    "'timeout': s.llm.timeout}))"
)


def dry_run(*, url: str, model: str, analyses: int) -> dict[str, Any]:
    """What a run would do, without a model call: the cases (stocknet ones listed apart when
    ``../shared/data`` is absent) and the LLM settings of the first case's environment, as a
    child process with that environment resolves them (an invalid profile or setting fails
    here, as it would in every analysis). Raises RuntimeError when the settings do not load."""
    cases = list(CASES[: max(analyses, 0)])
    env = _env(cases[0] if cases else CASES[0], state=Path(tempfile.gettempdir()), url=url, model=model)
    proc = subprocess.run(
        [sys.executable, "-c", _SETTINGS_PROBE],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"settings do not load: {(proc.stderr.strip().splitlines() or ['?'])[-1]}")
    return {
        "cases": [vars(c) for c in cases],
        "skipped": [vars(c) for c in cases if c.dataset == "stocknet" and not SHARED.is_dir()],
        "settings": json.loads(proc.stdout),
    }


def main(argv: list[str] | None = None) -> int:
    """Run the fixed set against ``URL`` and print the table (or ``--json``). Exit 0 when every
    analysis finished, 1 otherwise."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url", help="OpenAI-compatible base URL, e.g. http://127.0.0.1:18777/v1")
    parser.add_argument("--model", default="openai/local", help="LiteLLM model string (default openai/local)")
    parser.add_argument("--analyses", type=int, default=len(CASES), help="run the first N of the fixed set")
    parser.add_argument(
        "--timeout", type=float, default=1800.0, help="seconds per analysis before it is abandoned"
    )
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument(
        "--keep",
        type=Path,
        default=None,
        help="keep each analysis' state folder (SQLite: its llm_calls and tool_calls rows) under DIR",
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="print the cases and the LLM settings the analyses would get (JSON), run nothing",
    )
    args = parser.parse_args(argv)
    if args.dry_run:
        print(json.dumps(dry_run(url=args.url, model=args.model, analyses=args.analyses), indent=2))
        return 0
    cases = list(CASES[: max(args.analyses, 0)])
    skipped = [c for c in cases if c.dataset == "stocknet" and not SHARED.is_dir()]
    if skipped:
        print(f"skipping {len(skipped)} stocknet analyses: {SHARED} is absent", file=sys.stderr)
    results = []
    with tempfile.TemporaryDirectory(prefix="finagent-llm-bench-") as tmp:
        if args.keep is not None:
            args.keep.mkdir(parents=True, exist_ok=True)
        for case in cases:
            if case in skipped:
                continue
            work = Path(tmp) if args.keep is None else args.keep
            baseline = run_case(case, url=args.url, model=None, timeout=args.timeout, work=work)
            result = run_case(case, url=args.url, model=args.model, timeout=args.timeout, work=work)
            result.baseline_wall_s = None if baseline.error else baseline.wall_s
            if not baseline.error:
                result.deterministic = {**result.deterministic, **baseline.deterministic}
            results.append(result)
            # one line per finished analysis: a run cut short keeps what it measured
            line = {k: v for k, v in vars(result).items() if k != "case"}
            print(json.dumps({"case": vars(case), **line}, default=str), file=sys.stderr, flush=True)
    totals = summary(results)
    if args.json:
        rows = [
            {
                "symbol": r.case.symbol,
                "as_of": r.case.as_of,
                "dataset": r.case.dataset,
                "roles": r.roles,
                "codes": r.codes,
                "grounding_drops": r.grounding_drops,
                "tokens": r.tokens,
                "prompt_tokens": r.prompt_tokens,
                "completion_tokens": r.completion_tokens,
                "llm_calls": r.llm_calls,
                "wall_s": round(r.wall_s, 1),
                "baseline_wall_s": None if r.baseline_wall_s is None else round(r.baseline_wall_s, 1),
                "signal": r.signal,
                "answers": r.answers,
                "deterministic": r.deterministic,
                "dropped": r.dropped,
                "error": r.error,
            }
            for r in results
        ]
        print(json.dumps({"analyses": rows, "summary": totals}, indent=2))
    else:
        _print(results, totals)
        print(f"ratio={totals['ratio']}")  # median wall with the model ÷ without (same analyses, same run)
    return 0 if not totals["failed"] else 1


if __name__ == "__main__":
    sys.exit(main())
