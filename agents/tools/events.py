"""``log_event`` (docs/design.md, "Event log"): one row in the ``events`` table.

Inside an analysis the event id is ``uuid5(analysis, iteration, stage, id_seed, type, data)``, so
a redelivered Celery task writes the same event once (``ON CONFLICT DO NOTHING``); outside one
it is a random uuid4. ``data`` is redacted (``db.repo.redact``) before it is stored.
"""

from __future__ import annotations

import json
import uuid
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from agents.tools.paper_account import migrated_engine
from agents.tools.registry import ToolContext, ToolOutput, register
from db.trading_repo import insert_event

_NAMESPACE = uuid.UUID("4d1f0c8a-5b7e-4f5e-8c1a-9e2b6d3f7a10")


class LogEventInput(BaseModel):
    """``{event_type, data, severity?}``; severity defaults to ``low``."""

    model_config = ConfigDict(extra="forbid")

    event_type: Literal["signal", "suggestion", "trade", "error", "alert"]
    data: dict[str, Any] = Field(description="Free JSON object describing the event")
    severity: Literal["low", "medium", "high", "critical"] = "low"


def _event_id(params: LogEventInput, ctx: ToolContext) -> str:
    if ctx.analysis_id is None:
        return str(uuid.uuid4())
    canonical = json.dumps(params.data, sort_keys=True, default=str)
    key = f"{ctx.analysis_id}|{ctx.iteration}|{ctx.stage}|{ctx.id_seed}|{params.event_type}|{canonical}"
    return str(uuid.uuid5(_NAMESPACE, key))


@register(
    name="log_event",
    description="Record a signal, suggestion, trade, error or alert event with a severity.",
    input_model=LogEventInput,
)
def log_event(params: LogEventInput, ctx: ToolContext) -> ToolOutput:
    """``log_event``: returns data ``{logged, event_id, duplicate}`` (``duplicate``:
    the deterministic id existed already, nothing new was written)."""
    event_id = _event_id(params, ctx)
    inserted = insert_event(
        engine=migrated_engine(ctx),
        event_id=event_id,
        event_type=params.event_type,
        severity=params.severity,
        data=params.data,
        analysis_id=ctx.analysis_id,
    )
    return ToolOutput(
        data={"logged": True, "event_id": event_id, "duplicate": not inserted},
        summary=f"event {params.event_type}/{params.severity} {event_id}",
    )
