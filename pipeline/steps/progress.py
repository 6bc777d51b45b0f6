"""How far an unfinished analysis is, read from its ``analyses`` row alone: the step it is in or
waits for, whether a worker holds it, and when it counts as stalled (``finagent show``,
``GET /analyses/{id}``, the console).

A module of its own, beside the recovery sweep that acts on the same columns, so a reader of one
row loads neither Celery nor the stages (``pipeline.steps.recovery`` publishes chains).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from core.settings import Settings
from core.stages import TERMINAL_STATUSES, step_after
from db._sql import utc_now


def lease_end_text(row: Mapping[str, Any]) -> str:
    """When the row's lease ran out (ISO 8601, UTC), or that it predates leases."""
    expires = row.get("lease_expires_at")
    return expires.isoformat(timespec="seconds") if expires else "before leases existed"


@dataclass(frozen=True)
class Progress:
    """What a reader should know about an unfinished analysis's liveness (``finagent show``,
    ``GET /analyses/{id}``).

    Attributes:
        step: the step it is in or waits for (``None`` when finished).
        running: a worker holds the step's lease now.
        attempt: claims of the step so far. recoveries: re-drives by the sweep so far.
        lease_expires_at: when it counts as stalled without progress (UTC).
        stale: the lease ran out (no progress for longer than the lease).
        note: one line: what is happening, and for a stale analysis what the sweep will do.
    """

    step: str | None
    running: bool
    attempt: int
    recoveries: int
    lease_expires_at: datetime | None
    stale: bool
    note: str


def progress_of(row: Mapping[str, Any], *, settings: Settings, now: datetime | None = None) -> Progress:
    """The :class:`Progress` of an ``analyses`` row (every column, as ``db.repo.get_analysis``)."""
    now = now or utc_now()
    status = row["status"]
    recoveries = int(row.get("recoveries") or 0)
    attempt = int(row.get("attempt") or 0)
    if status in TERMINAL_STATUSES:
        return Progress(None, False, attempt, recoveries, None, False, f"finished ({status})")
    step = step_after(row.get("checkpoint"))
    running = row.get("lease_owner") is not None
    expires = row.get("lease_expires_at")
    stale = expires is None or expires < now
    where = f"running {step} (attempt {attempt})" if running else f"waiting for a worker to start {step}"
    if expires is not None and not stale:
        note = f"{where}; counts as stalled after {expires.isoformat(timespec='seconds')}"
    elif recoveries >= settings.durability.max_recoveries:
        note = (
            f"STALE: {where}, lease ran out at {lease_end_text(row)}; the recovery sweep will fail it "
            f"(STALLED after {recoveries} recoveries)"
        )
    else:
        note = (
            f"STALE: {where}, lease ran out at {lease_end_text(row)}; the recovery sweep (every "
            f"{settings.durability.sweep_seconds} s) will re-drive it from {step} (recovery {recoveries + 1} "
            f"of {settings.durability.max_recoveries})"
        )
    return Progress(step, running, attempt, recoveries, expires, stale, note)
