"""The report's direction call: the calibrated probability in words, the measured hit rate of
an author's calls, the direction view that heads the report (:func:`direction`), and the
"Details of the direction call" (the author's raw signal, score and confidence: details, not
evidence). Part of the report (``pipeline.report``), which re-exports the public names."""

from __future__ import annotations

from typing import Any

from core.state import FinancialAgentState


def author_version(rec: Any) -> str | None:
    """The version of what authored the recommendation (``agents.analysts.versions``): the LLM prompts
    for an LLM synthesis, the scorer's rules otherwise; ``None`` without a recommendation."""
    if rec is None:
        return None
    from agents.analysts.versions import prompt_version, rules_version  # lazy: the LLM modules

    author = rec.author.kind if rec.author else "deterministic"
    return prompt_version() if author == "llm" else rules_version()


def headline_p(rec: Any) -> float | None:
    """The calibrated p at the signal horizon, ``None`` without a calibrated recommendation."""
    if rec is None or not rec.probability:
        return None
    return float(rec.probability["horizons"][str(rec.probability["signal_horizon"])]["p"])


def probability_sentence(prob: dict[str, Any]) -> str:
    """The sentence that names the calibrated probability and its model, e.g. ``p(outperform SPY,
    20d) = 0.53, calibrated on 2,100 past signals of rules-…, 2013-07 .. 2015-05 (calibration-…);
    5d 0.51, 60d 0.55``; or the abstention and its reason. ``prob``:
    ``Recommendation.probability``. Raises ``KeyError`` for a malformed record."""
    h = prob["signal_horizon"]
    head = prob["horizons"][str(h)]
    bench, version = prob["benchmark"], prob["version"]
    if head["abstained"]:
        text = f"p(outperform {bench}, {h}d) = 0.50: abstained, {head['reason']} ({version})"
    else:
        text = (
            f"p(outperform {bench}, {h}d) = {head['p']:.2f}, calibrated on {head['rows']:,} past signals "
            f"of {prob['key']}, {head['first'][:7]} .. {head['last'][:7]} ({version})"
        )
    others = [
        f"{k}d " + ("abstained" if v["abstained"] else f"{v['p']:.2f}")
        for k, v in prob["horizons"].items()
        if k != str(h)
    ]
    return text + ("; " + ", ".join(others) if others else "")


def _share(value: float) -> str:
    """A fraction as a whole percentage without a sign: 0.487 → ``49``."""
    return f"{value * 100:.0f}"


def record_clause(record: dict[str, Any], *, calls: str = "calls") -> str:
    """The measured hit rate of a track record (``agents.quant.calibration``
    ``CalibrationModel.call_record``) in words, e.g. ``right 49 % [43, 55] of the time at 20
    sessions (1,193 calls, 2013-07..2015-11; 95 %, clustered by date, overlap-adjusted)``;
    ``calls`` names them. Raises ``KeyError`` for a malformed record."""
    interval = (
        f" [{_share(record['low'])}, {_share(record['high'])}]"
        if record.get("low") is not None and record.get("high") is not None
        else ""
    )
    how = record["interval"] if interval else "too few dates for an interval"
    return (
        f"right {_share(record['rate'])} %{interval} of the time at {record['horizon']} sessions "
        f"({record['calls']:,} {calls}, {record['first'][:7]}..{record['last'][:7]}; {how})"
    )


def direction(state: FinancialAgentState) -> dict[str, Any] | None:
    """The direction view in plain words, what the headline says about the stock: ``{signal,
    evidence, text, record}``. ``evidence`` is whether the calibrated p at the signal horizon
    cleared the evidence gate (``agents.quant.calibration``); without it ``text`` is "No
    evidence that any signal here predicts <symbol> against <benchmark>; …" with the author's
    measured hit rate (``record``: its directional calls at the signal horizon, outcomes up to
    2015-12-31, from the calibration artifact), never the raw confidence. ``None`` without a
    signal. Raises nothing."""
    rec = state.recommendation
    if rec is None:
        return None
    prob = rec.probability
    if not prob:
        # written before calibration: the author's signal is all there is, and it is no evidence
        return {
            "signal": rec.signal,
            "evidence": False,
            "text": "written before calibration: the author's raw signal, not evidence.",
            "record": None,
        }
    record = prob.get("record")
    if not prob["abstained"]:
        text = probability_sentence(prob) + "."
        return {"signal": rec.signal, "evidence": True, "text": text, "record": record}
    head = f"No evidence that any signal here predicts {state.stock_symbol} against {prob['benchmark']}"
    if record:
        tail = f"our directional calls were {record_clause(record)}."
    else:
        whose = "this prompt version's" if str(prob.get("key", "")).startswith("prompts-") else "these rules'"
        tail = f"{whose} calls have not been scored against outcomes yet."
    return {"signal": rec.signal, "evidence": False, "text": f"{head}; {tail}", "record": record}


def details_json(state: FinancialAgentState) -> dict[str, Any] | None:
    """The author's raw reading, kept out of the headline and the top level of the JSON:
    ``{raw_signal, score, confidence, key, record}``: the signal before calibration, the
    scorer's score in [-1, 1], the author's confidence in [0, 1] (a judgement, not a
    probability), the rule set or prompt version, and ``record``: the measured hit rate of that
    author's calls on the raw signal's side (``None`` for a HOLD or an unscored author).
    ``None`` without a recommendation."""
    rec = state.recommendation
    if rec is None:
        return None
    prob = rec.probability or {}
    return {
        "raw_signal": rec.raw_signal,
        "score": rec.score,
        "confidence": rec.confidence,
        "key": prob.get("key") or author_version(rec),
        "record": prob.get("side_record"),
    }


def _two(value: Any) -> str:
    return "n/a" if value is None else f"{float(value):.2f}"


def _signed(value: Any) -> str:
    return "n/a" if value is None else f"{float(value):+.2f}"


def details_markdown(data: dict[str, Any], state: FinancialAgentState) -> list[str]:
    """The "Details of the direction call" section: the calibration's sentence (its version,
    evidence and any abstention reason), the author's raw signal, score and confidence, each
    labelled with the measured hit rate of such calls (not evidence: never in the headline), and
    what became of an LLM synthesis. Empty without a recommendation."""
    details = data["details"]
    if not details:
        return []
    lines = ["## Details of the direction call", ""]
    if data["probability_text"]:
        lines.append(f"- Calibration: {data['probability_text']}.")
    raw, score, confidence = details["raw_signal"] or data["signal"], details["score"], details["confidence"]
    record = details.get("record")
    if not data["probability"]:
        label = "written before calibration, so no hit rate was recorded with it."
    elif raw == "HOLD":
        label = "a HOLD makes no directional call, so it has no hit rate."
    elif record:
        label = f"{raw} calls of these rules were {record_clause(record)}."
    else:
        label = f"{raw} calls of these rules have not been scored against outcomes yet."
    llm = data["author"].get("kind") == "llm"
    rec = state.recommendation
    scorer = (rec.deterministic if rec else None) or {}
    synthesis = (rec.synthesis if rec else None) or {}
    if llm:
        whose = (
            f"its {raw} calls were {record_clause(record)}."
            if record and raw != "HOLD"
            else "a HOLD makes no directional call."
            if raw == "HOLD"
            else "its calls have not been scored against outcomes yet."
        )
        lines.append(
            f"- LLM synthesis by `{data['author'].get('model')}` (prompt version `{details['key']}`): raw "
            f"signal {raw}, stated confidence {_two(confidence)} (the model's judgement, not a "
            f"probability); {whose} Not evidence, so not published."
        )
        lines.append(
            f"- Deterministic scorer: {scorer.get('signal')}, score {_signed(score)}, confidence "
            f"{_two(scorer.get('confidence'))} (context)."
        )
    else:
        lines.append(
            f"- Raw rule score {_signed(score)} ({raw}, rule set `{details['key']}`; confidence "
            f"{_two(confidence)}, a vote share, not a probability): {label} Not evidence, so not "
            "published."
        )
    if synthesis.get("source") == "rejected":
        check = synthesis.get("signal_check") or {}
        lines.append(
            f"- The LLM synthesis's {check.get('signal')} was not accepted: its checked statements do "
            "not support it (see Grounding)."
        )
    elif synthesis and not llm:
        lines.append("- The LLM synthesis was not used (see Analysts).")
    lines.append("")
    return lines
