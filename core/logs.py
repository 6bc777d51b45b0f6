"""Structured JSON logging (docs/design.md, "Structured logs").

Every tool call attempt and every LLM call produces one JSON line with the same fields as its
database row; the CLI sends them to stderr so that ``--json`` keeps stdout for the result.

Secrets never reach a log line (docs/security.md, "Secrets"): :func:`install_log_masking`
makes every record of the process, whichever library logs it and whichever handler writes it
(Celery's worker and task loggers, LiteLLM's, uvicorn's, Flower's), carry its message and
traceback with the configured secret values masked (``core.masking``), and
:class:`SecretFilter` on the JSON handler masks what is attached after a record is made (the
``payload``). The masking module is imported lazily: ``import core.logs`` stays
standard library only (``finagent --help`` loads click and the standard library).
"""

from __future__ import annotations

import json
import logging
import sys
import threading
from collections.abc import Callable
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


def mask_record(record: logging.LogRecord) -> logging.LogRecord:
    """Mask the configured secrets in ``record`` in place and return it.

    The message (``msg % args``) is formatted and, when it holds a secret, stored masked with
    no ``args``; a traceback (``exc_info``) that holds one is stored formatted and masked in
    ``exc_text`` and ``exc_info`` dropped (``logging.Formatter`` prints ``exc_text``; a formatter reading
    ``exc_info`` itself then prints nothing rather than the secret); ``stack_info`` and a
    ``payload`` dict are masked. A record without secrets is left as it is. Never raises: a
    message whose arguments do not format is left to the handler, which reports it, and
    settings that do not validate (no secret could be read from them) leave the record as it is.
    """
    from core.masking import current_masker  # lazy (module docstring)

    try:
        masker = current_masker()
    except Exception:  # invalid settings: the process refuses to start and says why
        return record
    if not masker:
        return record
    try:
        message = record.getMessage()
    except Exception:  # the handler reports the broken format string as logging always does
        message = None
    if message is not None and masker.found_in(message):
        record.msg, record.args = masker.mask_text(message), None
    traceback = record.exc_text
    if not traceback and record.exc_info and record.exc_info[0] is not None:
        traceback = logging.Formatter().formatException(record.exc_info)
    if traceback and masker.found_in(traceback):
        record.exc_text, record.exc_info = masker.mask_text(traceback), None
    if record.stack_info and masker.found_in(record.stack_info):
        record.stack_info = masker.mask_text(record.stack_info)
    payload = getattr(record, "payload", None)
    if isinstance(payload, dict):
        record.payload = masker.mask(payload)
    return record


class SecretFilter(logging.Filter):
    """A handler filter that masks the configured secrets in each record it passes
    (:func:`mask_record`); it never drops a record."""

    def filter(self, record: logging.LogRecord) -> bool | logging.LogRecord:
        """Mask ``record`` in place and let it through."""
        mask_record(record)
        return True


_factory_lock = threading.Lock()


def install_log_masking() -> None:
    """Make every ``LogRecord`` of this process masked at creation (:func:`mask_record`
    wrapped around the current record factory; idempotent), and build the process's secret
    masker now, so a too-short secret is warned about at start. Prefork children inherit it.
    Called by ``configure_logging``, the Celery app and the HTTP app."""
    from core.masking import current_masker  # lazy (module docstring)

    with _factory_lock:
        previous = logging.getLogRecordFactory()
        if not getattr(previous, "_finagent_masking", False):

            def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
                return mask_record(previous(*args, **kwargs))

            marked: Callable[..., logging.LogRecord] = factory
            marked._finagent_masking = True  # type: ignore[attr-defined]
            logging.setLogRecordFactory(marked)
    current_masker()


class JsonFormatter(logging.Formatter):
    """Formats a record as one JSON object per line.

    A record carrying ``extra={"payload": {...}}`` is written as that payload (plus ``logger``);
    other records as ``{timestamp, level, logger, message}``.
    """

    def format(self, record: logging.LogRecord) -> str:
        """Return the JSON line for ``record`` (UTC ISO 8601 timestamps); a traceback is
        ``exc`` (``exc_text`` when a masked one was stored)."""
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
            if record.exc_text or record.exc_info:
                out["exc"] = record.exc_text or self.formatException(record.exc_info)  # type: ignore[arg-type]
        return json.dumps(out, default=str, separators=(",", ":"))


def configure_logging(*, level: str = "INFO", stream: TextIO | None = None) -> None:
    """Send ``finagent.*`` loggers to ``stream`` (default stderr) as JSON lines, secrets masked
    (:func:`install_log_masking`, and :class:`SecretFilter` on the handler).

    Idempotent: a second call replaces the handler instead of adding another.
    """
    logger = logging.getLogger("finagent")
    for handler in list(logger.handlers):
        if getattr(handler, "_finagent", False):
            logger.removeHandler(handler)
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter())
    handler.addFilter(SecretFilter())
    handler._finagent = True  # type: ignore[attr-defined]
    logger.addHandler(handler)
    logger.setLevel(level.upper())
    logger.propagate = False
    install_log_masking()  # after the handler: a too-short secret's warning is a JSON line too


def log_tool_call(row: dict[str, Any]) -> None:
    """Emit the JSON log line of one tool-call attempt ``row`` (a ``tool_calls`` row dict)."""
    payload = {key: row.get(key) for key in _TOOL_LOG_FIELDS}
    level = (
        logging.ERROR
        if row.get("level") == "ERROR"
        else (logging.WARNING if row.get("level") == "WARNING" else logging.INFO)
    )
    logging.getLogger(TOOL_LOGGER).log(level, "tool_call", extra={"payload": payload})
