"""The archive beat task (entry ``finagent-archive`` every hour, when
``FINAGENT_DURABILITY_ARCHIVE_AFTER_SECONDS`` is not 0): a thin adapter over ``db.archive.archive``, which
moves the record of each analysis finished longer ago than that into one compressed row.
Idempotent (an archived analysis is never taken again; ``FOR UPDATE SKIP LOCKED`` keeps two
runs apart), so ``acks_late``, a redelivery or two beats at once archive nothing twice."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from typing import Any

from core.settings import get_settings
from db.archive import archive
from db.engine import get_engine
from tasks.app import ARCHIVE_TASK
from tasks.base import declare

logger = logging.getLogger("finagent.tasks.archive")

#: Analyses archived per run (about 1 ms of this process's CPU each, docs/benchmarks.md); the
#: next tick takes the rest.
LIMIT = 20_000


@declare(name=ARCHIVE_TASK, max_retries=0)
def archive_task() -> dict[str, Any]:
    """Archive up to ``LIMIT`` analyses finished more than ``archive_after_seconds`` ago.
    Returns ``db.archive.ArchiveReport.as_dict()`` (``{"analyses": 0, ...}`` when disabled)."""
    settings = get_settings()
    after = settings.durability.archive_after_seconds
    if not after:
        return {"analyses": 0, "disabled": True}
    report = archive(
        engine=get_engine(settings.service.effective_database_url),
        before=datetime.now(UTC) - timedelta(seconds=after),
        limit=LIMIT,
    )
    if report.analyses:
        logger.info(
            "archive: %d analyses (%d tool calls), %.1f MB of JSON stored in %.1f MB",
            report.analyses,
            report.tool_calls,
            report.raw_bytes / 1e6,
            report.stored_bytes / 1e6,
        )
    return report.as_dict()
