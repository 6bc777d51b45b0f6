"""Helpers shared by the stages: tool calls that update the state and the error policy; applying
an LLM analyst's records to the state (analysts never see the state: the stages own it) and the
notes are :mod:`pipeline.records`', re-exported here."""

from __future__ import annotations

from typing import Any

from agents.tools.catalog import run_tool
from agents.tools.envelope import PERMANENT_CODES, TRANSIENT_CODES, ErrorCode, ToolEnvelope
from agents.tools.registry import ToolContext
from core.state import FinancialAgentState, StageError
from pipeline.records import apply_outcome, note, record_call
from pipeline.steps.backoff import TransientStageError


def call_tool(
    *,
    state: FinancialAgentState,
    ctx: ToolContext,
    name: str,
    arguments: dict[str, Any],
    critical: bool = True,
) -> ToolEnvelope:
    """Run a tool, append it to ``state.tool_history`` and, on success, to ``state.source_refs``.

    On an error envelope: transient codes raise ``TransientStageError`` (task-level retry);
    other codes are recorded in ``state.errors`` (``permanent`` for ``PERMANENT_CODES``) and the
    envelope is returned for the stage to degrade.
    """
    envelope = run_tool(name=name, arguments=arguments, ctx=ctx)
    record_call(state=state, ctx=ctx, name=name, envelope=envelope)
    if envelope.ok:
        return envelope
    assert envelope.error is not None
    code = envelope.error.code
    if code in TRANSIENT_CODES:
        raise TransientStageError(f"{name}: {envelope.error.message}", code=code.value)
    state.errors.append(
        StageError(
            stage=ctx.stage,
            iteration=state.iteration,
            code=code.value,
            message=f"{name}: {envelope.error.message}",
            critical=critical,
            permanent=code in PERMANENT_CODES,
            tool_call_id=envelope.tool_call_id,
        )
    )
    return envelope


__all__ = ["ErrorCode", "apply_outcome", "call_tool", "note", "record_call"]
