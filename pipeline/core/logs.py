"""Structured JSON logging (seed 001 "structured log" format).

Every tool call attempt and every LLM call produces one JSON line with the same fields as its
database row; the CLI sends them to stderr so that ``--json`` keeps stdout for the result.
"""

from __future__ import annotations

import json
import logging
import sys
from typing import Any, TextIO

TOOL_LOGGER = "finagent.tool_calls"

# Fields of a tool_calls row that go into the log line (the full ``result`` stays in the row).
_TOOL_LOG_FIELDS = (
    "timestamp",
    "level",
    "tool",
    "symbol",
    "status",
    "attempt",
    "latency_ms",
    "result_summary",
    "error",
    "error_code",
    "retry_hint",
    "tool_call_id",
    "analysis_id",
    "stage",
    "iteration",
    "celery_task_id",
)


class JsonFormatter(logging.Formatter):
    """Formats a record as one JSON object per line.

    A record carrying ``extra={"payload": {...}}`` is written as that payload (plus ``logger``);
    other records as ``{timestamp, level, logger, message}``.
    """

    def format(self, record: logging.LogRecord) -> str:
        """Return the JSON line for ``record`` (UTC ISO 8601 timestamps)."""
        payload = getattr(record, "payload", None)
        if isinstance(payload, dict):
            out: dict[str, Any] = dict(payload)
            out.setdefault("level", record.levelname)
            out["logger"] = record.name
        else:
            out = {
                "timestamp": self.formatTime(record, "%Y-%m-%dT%H:%M:%S%z"),
                "level": record.levelname,
                "logger": record.name,
                "message": record.getMessage(),
            }
            if record.exc_info:
                out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str, separators=(",", ":"))


def configure_logging(*, level: str = "INFO", stream: TextIO | None = None) -> None:
    """Send ``finagent.*`` loggers to ``stream`` (default stderr) as JSON lines.

    Idempotent: a second call replaces the handler instead of adding another.
    """
    logger = logging.getLogger("finagent")
    for handler in list(logger.handlers):
        if getattr(handler, "_finagent", False):
            logger.removeHandler(handler)
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter())
    handler._finagent = True  # type: ignore[attr-defined]
    logger.addHandler(handler)
    logger.setLevel(level.upper())
    logger.propagate = False


def log_tool_call(row: dict[str, Any]) -> None:
    """Emit the JSON log line of one tool-call attempt ``row`` (a ``tool_calls`` row dict)."""
    payload = {key: row.get(key) for key in _TOOL_LOG_FIELDS}
    level = (
        logging.ERROR
        if row.get("level") == "ERROR"
        else (logging.WARNING if row.get("level") == "WARNING" else logging.INFO)
    )
    logging.getLogger(TOOL_LOGGER).log(level, "tool_call", extra={"payload": payload})
