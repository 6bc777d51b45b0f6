"""The records an agent's run leaves: the run's log of tool calls and failures, the one-line
failure of an LLM error, and the record dict of one agent (what it answered, how, from what)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from agents.analysts.models import _Result
from agents.analysts.outcome import AnalystError, AnalystOutcome, ToolCallRecord
from agents.llm.config import Role
from agents.llm.loop import StructuredFailure
from agents.llm.session import BudgetExhaustedError, LLMError, LLMSession, TimeBudgetExhaustedError


@dataclass
class Log:
    """The tool calls and failures of one run, in order, until :meth:`outcome` freezes them."""

    tool_calls: list[ToolCallRecord] = field(default_factory=list)
    errors: list[AnalystError] = field(default_factory=list)

    def outcome[T](self, value: T) -> AnalystOutcome[T]:
        """The run's outcome: ``value`` with the tool calls and failures logged so far."""
        return AnalystOutcome(value=value, tool_calls=tuple(self.tool_calls), errors=tuple(self.errors))


def one_line(text: str, limit: int = 300) -> str:
    """``text`` as one line for a report: the first line of each ``; ``-separated part, white
    space collapsed, repeats removed, cut to ``limit`` characters (LiteLLM errors are multi-line
    and repeat the provider's message; the full text stays in the ``llm_calls`` rows)."""
    parts = []
    for part in str(text).split("; "):
        first = " ".join(part.strip().splitlines()[0].split()) if part.strip() else ""
        if first and first not in parts:
            parts.append(first)
    line = "; ".join(parts)
    return line if len(line) <= limit else line[: limit - 1] + "…"


def failure_of(
    *, agent: str, exc: Exception, consequence: str = "the deterministic result was used"
) -> AnalystError:
    """The non-critical error to record for LLM failure ``exc`` of ``agent``: code
    ``LLM_TIME_BUDGET_EXHAUSTED`` (``TimeBudgetExhaustedError``), ``LLM_BUDGET_EXHAUSTED``
    (``BudgetExhaustedError``), ``LLM_INVALID_OUTPUT`` (``StructuredFailure``) or ``LLM_ERROR``
    (anything else). The message is one line (:func:`one_line`: the details stay in the
    ``llm_calls`` rows) followed by ``consequence``, what was done instead. Raises nothing."""
    if isinstance(exc, TimeBudgetExhaustedError):
        code = "LLM_TIME_BUDGET_EXHAUSTED"
    elif isinstance(exc, BudgetExhaustedError):
        code = "LLM_BUDGET_EXHAUSTED"
    elif isinstance(exc, StructuredFailure):
        code = "LLM_INVALID_OUTPUT"
    else:
        code = "LLM_ERROR"
    detail = str(exc)
    if isinstance(exc, LLMError) and exc.errors and not isinstance(exc, TimeBudgetExhaustedError):
        # one entry per attempt, each possibly a multi-line LiteLLM text: first lines, counted
        firsts = Counter(" ".join(e.strip().splitlines()[0].split()) for e in exc.errors if e.strip())
        detail = "every model failed: " + "; ".join(f"{e} (x{n})" if n > 1 else e for e, n in firsts.items())
    detail = detail.removeprefix(f"{agent}: ")
    return AnalystError(code=code, message=f"{agent}: {one_line(detail)}; {consequence}", critical=False)


def record_of(
    *,
    result: _Result | dict[str, Any] | None,
    source: str,
    model: str | None = None,
    context_refs: list[str] | None = None,
    llm_call_ids: list[str] | None = None,
    error: str | None = None,
    grounding: dict[str, Any] | None = None,
    answered_by: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One agent's record: ``{source, model, result (as JSON), context_refs (the non-empty
    ones), llm_call_ids, error}``, with ``grounding`` when given and the ``answered_by`` keys
    (``response_format``, ``fallback``) of an LLM answer. Raises nothing."""
    dumped = result.model_dump(mode="json") if isinstance(result, _Result) else result
    record: dict[str, Any] = {
        "source": source,
        "model": model,
        "result": dumped,
        "context_refs": [r for r in context_refs or [] if r],
        "llm_call_ids": llm_call_ids or [],
        "error": error,
    }
    if grounding is not None:
        record["grounding"] = grounding
    if answered_by:
        # how the answering deployment was asked (an LLM answer only: deterministic and skipped
        # records keep their shape)
        record.update(answered_by)
    return record


def answered_by(session: LLMSession, call_ids: list[str], *, role: Role) -> dict[str, Any]:
    """How the last answered call of ``call_ids`` was served: ``response_format`` (the
    structured-output form of its successful attempt, ``agents.llm.forms.RESPONSE_FORMS``;
    ``None`` for a call that asked for no JSON) and ``fallback`` (true when the deployment that
    answered is not the role's primary). Read from ``session.rows``; raises nothing."""
    wanted = set(call_ids)
    ok = [r for r in session.rows if r["llm_call_id"] in wanted and r["status"] == "success"]
    if not ok:
        return {}
    last = ok[-1]
    request = last.get("request") or {}
    primary = session.config.model_for(role)
    return {
        "response_format": request.get("response_format") if isinstance(request, dict) else None,
        "fallback": primary is not None and last["model"] != primary,
    }


def call_ids_since(session: LLMSession, before: int) -> list[str]:
    """The distinct ``llm_call_id`` values of ``session.rows[before:]`` in first-seen order (one
    logical call has a row per attempt). ``before``: a row count taken earlier. Raises nothing."""
    return list(dict.fromkeys(r["llm_call_id"] for r in session.rows[before:]))
