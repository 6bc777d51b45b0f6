"""What a stage or a plan's step writes into the state besides its result: a finished tool
call (``tool_history``, ``source_refs``), an LLM analyst's records, a chat-style note.

Shared by ``pipeline.stages`` and the plan packages (``pipeline/plans/``); it imports nothing of
the pipeline, so a plan's step does not depend on the stages that run it.
"""

from __future__ import annotations

from agents.analysts.outcome import AnalystOutcome
from agents.tools.envelope import ToolEnvelope
from agents.tools.registry import ToolContext
from core.state import FinancialAgentState, StageError, ToolHistoryEntry


def record_call(*, state: FinancialAgentState, ctx: ToolContext, name: str, envelope: ToolEnvelope) -> None:
    """Append a finished tool call to ``state.tool_history`` (attempts counted from ``ctx.rows``)
    and, when it succeeded, cite it in ``state.source_refs``."""
    attempts = sum(1 for row in ctx.rows if row["tool_call_id"] == envelope.tool_call_id)
    state.tool_history.append(
        ToolHistoryEntry(
            tool_call_id=envelope.tool_call_id,
            tool=name,
            stage=ctx.stage,
            iteration=state.iteration,
            status="success" if envelope.ok else "error",
            attempts=max(attempts, 1),
            error_code=envelope.error.code.value if envelope.error else None,
        )
    )
    if envelope.ok:
        state.cite(envelope.tool_call_id)


def apply_outcome[T](state: FinancialAgentState, *, ctx: ToolContext, outcome: AnalystOutcome[T]) -> T:
    """Apply an LLM analyst's records to ``state`` and return its value.

    Each tool call the model made goes to ``state.tool_history`` (and, on success, to
    ``state.source_refs``) through :func:`record_call`, in call order; each failure becomes a
    ``StageError`` of ``ctx.stage`` and this iteration in ``state.errors``, in order. The lists
    are independent, so recording all calls before all errors keeps each one in the order the
    analyst produced it (the report and its regression snapshots rely on it). Raises nothing.
    """
    for call in outcome.tool_calls:
        record_call(state=state, ctx=ctx, name=call.name, envelope=call.envelope)
    for error in outcome.errors:
        state.errors.append(
            StageError(
                stage=ctx.stage,
                iteration=state.iteration,
                code=error.code,
                message=error.message,
                critical=error.critical,
            )
        )
    return outcome.value


def note(state: FinancialAgentState, *, stage: str, content: str) -> None:
    """Append a chat-style message ``{role, name, content}`` to ``state.messages``."""
    state.messages.append({"role": "assistant", "name": stage, "content": content})


__all__ = ["apply_outcome", "note", "record_call"]
