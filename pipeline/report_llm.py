"""The report's LLM parts: the LLM keys of the JSON report (calls, tokens, cost, the author, each
analyst's record), the "Analysts" and "LLM usage" sections, the "Grounding" section and the one-line
form of an error. Part of the report (``pipeline.report``)."""

from __future__ import annotations

from typing import Any

from core.state import FinancialAgentState
from pipeline.report_format import refs as _refs


def llm_json(state: FinancialAgentState) -> dict[str, Any]:
    """The LLM keys of the ``--json`` object: ``llm_calls`` (calls answered),
    ``llm_usage {calls, failed_calls, attempts, failed_attempts, tokens, cost_usd, cost}`` (every
    attempt counted; ``cost`` says "unknown" with the reason instead of a guessed ``$0``),
    ``tokens {prompt, completion, total}``, ``cost_usd`` (``None`` when a price is unknown),
    ``author`` of the recommendation (``{"kind": "deterministic"}`` or ``{"kind": "llm", "model"}``),
    ``analysts`` (each analyst's source, model, result, error; an LLM answer also its
    ``response_format``, the structured-output form its deployment answered under, and
    ``fallback``, true when that deployment is not the role's primary; an options-plan analyst's
    ``example``, the filled example answer its prompt showed; ``refused_answer``, the model's
    answer when it was refused for repeating that example (``LLM_COPIED_EXAMPLE``) or for
    prose that is no reading of the data (``LLM_NO_READING``); records of earlier versions may
    hold ``copied_answer`` instead; the synthesis's ``signal`` is the model's, before the signal
    check) and ``risk_notes``."""
    analysis, rec = state.analysis, state.recommendation
    usage = analysis.llm if analysis else None
    prompt = usage.prompt_tokens if usage else 0
    completion = usage.completion_tokens if usage else 0
    # response_format / fallback: how an LLM answer's deployment was asked and whether it was
    # the role's primary (present on LLM answers only; older records lack them)
    answered = ("response_format", "fallback", "example", "refused_answer", "copied_answer")
    analysts = {
        name: {
            **{k: record.get(k) for k in ("source", "model", "result", "error")},
            **{k: record[k] for k in answered if k in record},
        }
        for name, record in ((analysis.agents if analysis else None) or {}).items()
    }
    synthesis = rec.synthesis if rec else None
    if synthesis:
        analysts["synthesis"] = {
            **{k: synthesis.get(k) for k in ("source", "model", "error")},
            # the model's own signal, before the signal check (also when it was rejected)
            **({"signal": synthesis["signal_check"].get("signal")} if synthesis.get("signal_check") else {}),
            **{k: synthesis[k] for k in answered if k in synthesis},
        }
    return {
        "llm_calls": usage.calls if usage else 0,
        "tokens": {"prompt": prompt, "completion": completion, "total": prompt + completion},
        "cost_usd": usage.cost_usd if usage else 0.0,
        "llm_usage": {
            "calls": usage.calls if usage else 0,
            "failed_calls": usage.failed_calls if usage else 0,
            "attempts": usage.attempts if usage else 0,
            "failed_attempts": usage.failed_attempts if usage else 0,
            "tokens": prompt + completion,
            "cost_usd": usage.cost_usd if usage else 0.0,
            "cost": _cost_text(usage.cost_usd if usage else 0.0, usage.attempts if usage else 0),
        },
        "author": rec.author.model_dump(mode="json") if rec and rec.author else {"kind": "deterministic"},
        "analysts": analysts,
        "risk_notes": (rec.risk_notes if rec else None) or [],
    }


def _cost_text(cost: float | None, attempts: int) -> str:
    """``$0.0123``, or why the cost is unknown (never a guessed ``$0``)."""
    if cost is not None:
        return f"${cost:.4f}"
    if attempts:
        return "unknown (a model's price is not in LiteLLM's map or settings, or only failed attempts)"
    return "unknown"


#: Longest error message shown in a report line (the rows keep the full text).
MAX_ERROR_CHARS = 300


def one_line(text: str, limit: int = MAX_ERROR_CHARS) -> str:
    """``text`` on one line: white space (newlines included) collapsed, cut to ``limit``
    characters with an ellipsis. Multi-line provider errors stay whole in the rows."""
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def grounding_markdown(ground: dict[str, Any]) -> list[str]:
    """The "Grounding" section: LLM statements dropped (with their unverified numbers), the
    correction rounds and the signal check; empty when there is nothing to say."""
    dropped = ground.get("dropped") or []
    corrections = ground.get("corrections") or {}
    check = ground.get("signal_check")
    if not (dropped or corrections or check):
        return []
    lines = ["## Grounding", ""]
    meaning = {
        "fixed": "the corrected answer holds no unverified number",
        "unfixed": "the corrected answer still held unverified numbers; those statements were dropped",
        "failed": "the round failed (see Errors); the statements with unverified numbers were dropped",
        "skipped": "skipped, the LLM budget was spent; the statements with unverified numbers were dropped",
        "refused": (
            "the corrected answer was refused (no reading of the data, or nothing verifiable left); "
            "the first answer stands without its statements with unverified numbers"
        ),
    }
    for name, outcome in corrections.items():
        lines.append(f"- {name}: one correction round: {meaning.get(outcome, outcome)}.")
    for item in dropped:
        problems = [str(n) for n in item.get("numbers") or []]
        # a bare number matches no output; "41.2 (not the RSI)" or "183.88 above ... (it is
        # below)" is a misreading of an output (agents.analysts.claims, grounding.misattributed)
        bare = [n for n in problems if " " not in n]
        misread = [n for n in problems if " " in n]
        said = [f"{', '.join(bare)} match no cited tool output"] if bare else []
        said += [f"{'; '.join(misread)}: the cited tool outputs say otherwise"] if misread else []
        lines.append(
            f"- dropped from {item.get('part')}: {'; '.join(said)} "
            f"(statement: {one_line(str(item.get('text')), 160)!r})"
        )
    if check:
        verdict = "accepted" if check.get("accepted") else "not accepted"
        lines.append(f"- LLM signal {check.get('signal')} {verdict}: {check.get('reason')}.")
    lines.append("")
    return lines


def analysts_markdown(data: dict[str, Any]) -> list[str]:
    """The "Analysts" and "LLM usage" sections (empty without LLM analysts)."""
    if not data["analysts"]:
        return []
    lines = ["## Analysts", ""]
    for name, record in data["analysts"].items():
        source = record.get("source")
        who = f"LLM `{record.get('model')}`" if source == "llm" else source
        if source == "llm" and record.get("fallback"):
            who += ", a fallback"
        if source == "llm" and record.get("response_format"):
            who += f", response format {record['response_format']}"
        result = record.get("result") or {}
        notes = result.get("notes")
        head = f"- **{name}** ({who})"
        verdict = [str(result[k]) for k in ("recommendation", "outlook", "label") if result.get(k)]
        if verdict:
            head += f": {verdict[0]}"
        if notes:
            head += f". {notes}"
        if result.get("source_refs"):
            head += f" {_refs(result['source_refs'])}"
        lines.append(head)
        if source == "rejected":
            lines.append(
                "  - answered, not used: its signal is not supported by its statements (see Grounding)"
            )
        elif record.get("error") and source != "llm":
            lines.append(f"  - not from an LLM: {one_line(record['error'])}")
    if data["risk_notes"]:
        lines += ["", "Risk notes (LLM synthesis):", *[f"- {n}" for n in data["risk_notes"]]]
    acct = data["llm_usage"]
    lines += [
        "",
        f"LLM usage: {acct['calls']} calls answered, {acct['failed_calls']} failed; "
        f"{acct['attempts']} attempts ({acct['failed_attempts']} failed); {data['tokens']['total']} tokens "
        f"({data['tokens']['prompt']} prompt, {data['tokens']['completion']} completion); "
        f"cost {acct['cost']}",
        "",
    ]
    return lines


def unverified_markdown(ground: dict[str, Any]) -> list[str]:
    """The "Unverified numbers" section: the numbers of the LLM text that match no cited tool
    output (``ground``: the JSON report's grounding); empty when there are none."""
    if not ground.get("unverified"):
        return []
    return [
        "## Unverified numbers",
        "",
        "These numbers match no cited tool output and are not facts: " + ", ".join(ground["unverified"]),
        "",
    ]


def errors_markdown(errors: list[dict[str, Any]]) -> list[str]:
    """The "Errors" section: each error of the JSON report on one line (:func:`one_line`), with its
    pass, stage and code; empty without errors."""
    if not errors:
        return []
    lines = ["## Errors", ""]
    lines += [
        f"- pass {e['iteration'] + 1}, {e['stage']}: {e['code']}: {one_line(e['message'])}" for e in errors
    ]
    return [*lines, "", "Full error texts are in the `llm_calls` and `tool_calls` rows of this analysis.", ""]
