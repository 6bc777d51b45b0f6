"""What every ``finagent`` command shares: exit codes, output with secrets masked, dates, the
settings, the infrastructure errors and the embedded worker's scope.

Kept light (click, pydantic and the settings): every command module imports it, ``list`` and
``show`` included. Celery, kombu and the service module come in only inside the two helpers that
need them (:func:`infrastructure_errors`, :func:`embedded_scope`), as those are what a command
that never reaches them must not pay for.
"""

from __future__ import annotations

import json
import sys
from contextlib import AbstractContextManager, nullcontext
from datetime import date
from typing import Any, NoReturn

import click
from pydantic import ValidationError

from core.dates import DateRuleError, parse_iso_date
from core.masking import mask
from core.settings import Settings, get_settings

EXIT_OK, EXIT_FAILED, EXIT_INVALID, EXIT_INFRA = 0, 1, 2, 3


def parse_date(value: str | None) -> date | None:
    """``value`` as a date (:func:`to_date`), ``None`` for ``None``."""
    return None if value is None else to_date(value)


def to_date(value: str) -> date:
    """``value`` (YYYY-MM-DD) as a date. Raises ``click.BadParameter`` (exit 2) otherwise."""
    try:  # the gateway's date rule (core.dates): YYYY-MM-DD from 1900-01-01 on
        return parse_iso_date(value, field="date")
    except DateRuleError as exc:
        raise click.BadParameter(f"{value!r} is not a date (use YYYY-MM-DD): {exc}") from None


def masked[T](value: T) -> T:
    """``value`` (a text, or a JSON-like object: masked in its strings) with the configured
    secrets masked (``core.masking``): what the CLI prints comes from rows (some written before
    masking existed) and exception texts. Settings that do not validate leave it as it is (the
    command then refuses to start and says why)."""
    try:
        return mask(value)
    except ValidationError:
        return value


def err(message: str) -> None:
    """Print ``message`` on stderr, secrets masked."""
    click.echo(masked(message), err=True)


def fail(message: str, code: int) -> NoReturn:
    """Print ``error: message`` on stderr (secrets masked) and exit with ``code``."""
    err(f"error: {message}")
    sys.exit(code)


def out(text: str, *, nl: bool = True) -> None:
    """Print ``text`` (a report, a digest) on stdout, secrets masked."""
    click.echo(masked(text), nl=nl)


def out_json(value: Any) -> None:
    """Print ``value`` as one JSON line on stdout, secrets masked in its strings (the JSON stays
    valid whatever a secret looks like)."""
    click.echo(json.dumps(masked(value), default=str))


def load_settings() -> Settings:
    """The process settings (:func:`core.settings.get_settings`).

    Raises:
        click.ClickException: the settings do not validate (e.g. the LLM time arithmetic or the
            durability arithmetic does not nest): one line per problem, exit 1, nothing started.
    """
    try:
        return get_settings()
    except ValidationError as exc:
        raise settings_refused(exc) from None


def settings_refused(exc: ValidationError) -> click.ClickException:
    """The one-line refusal (exit 1) for settings that do not validate: each problem's message,
    joined by ``; `` (pydantic's "Value error, " prefix dropped)."""
    problems = "; ".join(str(e.get("msg", "")).removeprefix("Value error, ") for e in exc.errors())
    return click.ClickException(f"refusing to start, invalid settings: {problems}")


def infrastructure_errors() -> tuple[type[Exception], ...]:
    """What a command reports as infrastructure (exit 3): migrations not applied
    (``SchemaMissingError``), the database or broker unreachable (``OSError``,
    ``ConnectionError``), and kombu's errors of a publish the broker refused or lost (a
    connection that failed after Celery's retries; a bulk enqueue's Redis pipeline that failed,
    ``BatchPublishError``). Imported when an ``except`` clause is matched, by commands that
    enqueue (kombu is theirs to load, not ``list``'s; the task queue names them,
    ``pipeline.taskqueue``)."""
    from pipeline import taskqueue
    from pipeline.database import SchemaMissingError

    return (SchemaMissingError, OSError, ConnectionError, *taskqueue.get().publish_errors())


def embedded_scope(settings: Settings, *, graceful: bool = True) -> AbstractContextManager[Any]:
    """In embedded mode, the in-process worker (:func:`tasks.embedded.embedded_worker`) that
    consumes what the command enqueues; in service mode nothing (``finagent worker`` consumes).
    The worker module (Celery's worker, the tasks, the stages) is imported only in embedded mode:
    a service-mode producer never loads it."""
    if settings.service.mode != "embedded":
        return nullcontext()
    from pipeline import taskqueue

    return taskqueue.get().embedded_worker(graceful=graceful)


def print_result(row: dict[str, Any], *, as_json: bool) -> NoReturn:
    """Print a finished (or unfinished) ``analyses`` row's report, or its JSON with ``as_json``,
    and exit: 0 done, 1 failed, 3 anything else (still running after a wait)."""
    if as_json:
        payload = row.get("report_json") or {
            "analysis_id": row["id"],
            "symbol": row["symbol"],
            "status": row["status"],
            "error": row.get("error"),
        }
        out_json(payload)
    else:
        out(row.get("report") or f"analysis {row['id']}: {row['status']} {row.get('error') or ''}")
    sys.exit(EXIT_OK if row["status"] == "done" else EXIT_FAILED if row["status"] == "failed" else EXIT_INFRA)
