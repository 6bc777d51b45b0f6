"""Maintenance commands: ``finagent recover`` (re-drive stalled analyses), ``purge`` and
``archive`` (retention), ``db upgrade`` (migrations)."""

from __future__ import annotations

import json
from contextlib import nullcontext
from datetime import UTC, datetime, timedelta

import click
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.exc import OperationalError

from apps.cli.common import (
    EXIT_INFRA,
    EXIT_INVALID,
    embedded_scope,
    err,
    fail,
    load_settings,
    out_json,
    to_date,
)
from db import archive
from db.engine import get_engine
from db.migrate import upgrade
from db.retention import purge
from pipeline import service
from pipeline.database import SchemaMissingError, prepare_database
from pipeline.steps.recovery import Action, sweep


@click.command()
@click.option("--dry-run", is_flag=True, help="Print what would be done; change nothing.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per analysis on stdout.")
def recover(dry_run: bool, as_json: bool) -> None:
    """Re-drive analyses that made no progress within their lease (FINAGENT_DURABILITY_LEASE_SECONDS) from
    their last completed stage, or fail them STALLED after FINAGENT_DURABILITY_MAX_RECOVERIES re-drives.

    In service mode `finagent sweeper` runs the same sweep every FINAGENT_DURABILITY_SWEEP_SECONDS; in
    embedded mode this command is the way (it runs the re-driven analyses in-process and waits
    for them). Exit 0, or 3 when the database is unreachable.
    """
    settings = load_settings()
    embedded = settings.service.mode == "embedded"
    try:
        prepare_database(settings=settings)
        with embedded_scope(settings) if not dry_run else nullcontext():
            found = sweep(
                dry_run=dry_run, queue_depths=(lambda _: {}) if embedded else None, settings=settings
            )
            for rec in found:
                if as_json:
                    click.echo(json.dumps(rec.as_dict()))
                else:
                    line = f"{rec.analysis_id}  {rec.symbol:<6} {rec.status:<12} {rec.action.value:<7}"
                    click.echo(f"{line} {rec.detail}")
            redriven = [r for r in found if r.action is Action.REDRIVE]
            if embedded and redriven and not dry_run:
                err(f"running {len(redriven)} re-driven analyses in-process ...")
                for rec in redriven:
                    row = service.wait_for(analysis_id=rec.analysis_id, settings=settings)
                    err(f"{rec.analysis_id}: {row['status']}")
    except OperationalError as exc:
        fail(f"database unreachable ({type(exc).__name__}); nothing recovered", EXIT_INFRA)
    verb = "would be" if dry_run else "were"
    counts = {a: sum(1 for r in found if r.action is a) for a in Action}
    err(
        f"{len(found)} stalled analyses: {counts[Action.REDRIVE]} {verb} re-driven, "
        f"{counts[Action.FAIL]} {verb} failed STALLED, {counts[Action.WAIT]} waiting behind a backlog"
    )


@click.command("purge")
@click.option(
    "--before",
    "before",
    required=True,
    metavar="YYYY-MM-DD",
    help="Delete what was created before this day (00:00 UTC).",
)
@click.option("--dry-run", is_flag=True, help="Count what would be deleted; delete nothing.")
@click.option("--json", "as_json", is_flag=True, help="The counts as one JSON object on stdout.")
def purge_command(before: str, dry_run: bool, as_json: bool) -> None:
    """Delete finished analyses created before --before, with their tool calls, LLM calls and
    pass rows, then the stored tool-result pieces no kept analysis uses (docs/operations.md,
    "Retention"). Unfinished analyses are never deleted; kept analyses still replay.

    Exit 0, 2 for a bad date, 3 when the database is unreachable (nothing deleted)."""
    day = to_date(before)
    settings = load_settings()
    try:
        prepare_database(settings=settings)
        report = purge(
            engine=get_engine(settings.service.effective_database_url), before=day, dry_run=dry_run
        )
    except (SchemaMissingError, OperationalError) as exc:
        fail(f"database unreachable or not migrated ({type(exc).__name__}); nothing deleted", EXIT_INFRA)
    if as_json:
        out_json(report.as_dict())
    verb = "would delete" if dry_run else "deleted"
    click.echo(
        f"{verb}: {report.analyses} analyses created before {report.before.date()} "
        f"({report.tool_calls} tool calls, {report.llm_calls} LLM calls, {report.iterations} pass rows), "
        f"{report.blobs} unused tool-result pieces ({report.blob_bytes / 1e6:.1f} MB of JSON)",
        err=as_json,
    )


@click.command("archive")
@click.option(
    "--older-than",
    "older_than",
    default=None,
    metavar="DURATION",
    help="Archive analyses finished longer ago than this (e.g. 30m, 12h, 7d; 0s: every finished "
    "one). Default: FINAGENT_DURABILITY_ARCHIVE_AFTER_SECONDS.",
)
@click.option("--limit", type=click.IntRange(min=1), default=None, help="At most this many analyses.")
@click.option("--dry-run", is_flag=True, help="Compress and count what would be archived; write nothing.")
@click.option(
    "--train", "train_only", is_flag=True, help="Only train a new compression dictionary on archived records."
)
@click.option(
    "--verify",
    "verify_only",
    is_flag=True,
    help="Only read back every stored frame (archives with their dictionary, packed tool-result "
    "pieces); exit 3 naming each one that does not read.",
)
@click.option("--json", "as_json", is_flag=True, help="The counts as one JSON object on stdout.")
def archive_command(
    older_than: str | None,
    limit: int | None,
    dry_run: bool,
    train_only: bool,
    verify_only: bool,
    as_json: bool,
) -> None:
    """Move the record of finished analyses (state, reports, tool-call rows) into one compressed
    row each; the API, `finagent show`, replay and the console read them as before
    (docs/operations.md, "Archive"). Beat runs it every hour.

    Exit 0, 2 for a bad duration (or --train with too few archived records), 3 when the
    database is unreachable (batches archived before stay archived) or, with --verify, when a
    stored frame does not read back (each is named, with its dictionary)."""
    settings = load_settings()
    seconds = (
        settings.durability.archive_after_seconds if older_than is None else _duration_seconds(older_than)
    )
    try:
        prepare_database(settings=settings)
        engine = get_engine(settings.service.effective_database_url)
        if verify_only:
            _verify(engine, as_json=as_json)
            return
        if train_only:
            try:
                dictionary = archive.train(engine=engine)
            except ValueError as exc:
                fail(str(exc), EXIT_INVALID)
            click.echo(f"trained compression dictionary {dictionary}; archives from now on use it")
            return
        report = archive.archive(
            engine=engine,
            before=datetime.now(UTC) - timedelta(seconds=seconds),
            limit=limit,
            dry_run=dry_run,
            on_batch=lambda done: err(f"  {done} analyses {'read' if dry_run else 'archived'} so far"),
        )
    except (SchemaMissingError, OperationalError) as exc:
        fail(f"database unreachable or not migrated ({type(exc).__name__}); stopped", EXIT_INFRA)
    if as_json:
        out_json(report.as_dict())
    verb = "would archive" if dry_run else "archived"
    per = report.stored_bytes / report.analyses / 1024 if report.analyses else 0.0
    click.echo(
        f"{verb}: {report.analyses} analyses finished before {report.before.isoformat(timespec='seconds')} "
        f"({report.tool_calls} tool calls): {report.raw_bytes / 1e6:.1f} MB of JSON in "
        f"{report.stored_bytes / 1e6:.2f} MB ({per:.1f} KB per analysis; dictionary "
        f"{report.dictionary or 'none yet'}{', trained now' if report.trained else ''})",
        err=as_json,
    )


def _verify(engine: Engine, *, as_json: bool) -> None:
    """``finagent archive --verify``: every stored frame read back; exit 3 when one fails."""
    found = archive.verify(engine=engine, on_batch=lambda done: err(f"  {done} archives read so far"))
    if as_json:
        out_json(found.as_dict())
    for what, dictionary, cause in found.bad:
        err(f"UNREADABLE {what} (dictionary {dictionary or 'none'}): {cause}")
    summary = (
        f"verified: {found.archives} archives and {found.pieces} packed tool-result pieces read back; "
        f"{len(found.bad)} unreadable"
    )
    if found.bad:
        fail(summary, EXIT_INFRA)
    click.echo(summary, err=as_json)


def _duration_seconds(text: str) -> int:
    """``30m``/``12h``/``7d``/``90s`` (or bare seconds) → seconds; exit 2 otherwise."""
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    value, unit = (text[:-1], text[-1]) if text and text[-1] in units else (text, "s")
    if not value.isdigit():
        fail(f"duration {text!r}: a whole number with s, m, h or d (e.g. 12h)", EXIT_INVALID)
    return int(value) * units[unit]


@click.group()
def db() -> None:
    """Database commands."""


@db.command("upgrade", short_help="Apply the migrations")
@click.option("--revision", default="head", show_default=True)
def db_upgrade(revision: str) -> None:
    """Apply migrations (same as `alembic upgrade head`)."""
    url = load_settings().service.effective_database_url
    upgrade(url=url, revision=revision)
    stamp = datetime.now().isoformat(timespec="seconds")
    err(f"database at {_redact_url(url)} upgraded to {revision} ({stamp})")


def _redact_url(url: str) -> str:

    return make_url(url).render_as_string(hide_password=True)
