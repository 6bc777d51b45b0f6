"""The recovery sweep as a Celery task (beat entry ``finagent-recovery-sweep`` every
``sweep_seconds``, and once when a service worker starts): a thin adapter over
``pipeline.stages.recovery.sweep``."""

from __future__ import annotations

from typing import Any

from pipeline.celery_app import RECOVERY_SWEEP_TASK
from pipeline.stages.recovery import sweep
from tasks.factory import declare


# send_events=False: a housekeeping task every minute per worker; in Flower it buried the stage
# tasks (pipeline.celery_app.QUIET_TASKS)
@declare(name=RECOVERY_SWEEP_TASK, max_retries=0, send_events=False)
def recovery_sweep() -> dict[str, Any]:
    """Re-drive or fail the analyses whose lease ran out. Returns ``{"found": n, "actions":
    [Recovery.as_dict(), ...]}`` (the task result; Flower shows it)."""
    done = sweep()
    return {"found": len(done), "actions": [r.as_dict() for r in done]}
