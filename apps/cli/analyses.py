"""``finagent list`` and ``finagent show``: read stored analyses. They load the settings,
SQLAlchemy and the repository only (no pandas, no Celery, no LLM client: a test keeps it so), so
they answer in well under a second (docs/benchmarks.md, "CLI latency")."""

from __future__ import annotations

import json
import sys

import click
from sqlalchemy.exc import OperationalError

from apps.cli.common import EXIT_INFRA, EXIT_INVALID, EXIT_OK, err, fail, load_settings, print_result
from core.plans import DEFAULT_ANALYSIS_TYPE, cli_choices
from core.stages import ANALYSIS_STATUSES, TERMINAL_STATUSES
from core.tickers import strict_ticker
from db import repo
from db.archive import ArchiveUnreadable
from db.engine import get_engine
from pipeline.database import SchemaMissingError, prepare_database
from pipeline.steps.progress import progress_of


@click.command()
@click.argument("analysis_id")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object on stdout.")
def show(analysis_id: str, as_json: bool) -> None:
    """Print the report of ANALYSIS_ID (or its status while it runs).

    Exit codes: 0 done (or still running: its progress on stderr), 1 failed (its report says
    why), 2 no such analysis, 3 the database is unreachable or not migrated, or the analysis's
    archive cannot be read (a missing or corrupt compression dictionary, named)."""
    settings = load_settings()
    try:
        prepare_database(settings=settings)
        row = repo.get_analysis(
            engine=get_engine(settings.service.effective_database_url), analysis_id=analysis_id
        )
    except (SchemaMissingError, OperationalError) as exc:
        fail(f"database unreachable or not migrated ({type(exc).__name__})", EXIT_INFRA)
    except ArchiveUnreadable as exc:  # stored data damaged: not the analysis's failure (exit 1)
        fail(str(exc), EXIT_INFRA)
    if row is None:
        fail(f"no analysis {analysis_id}", EXIT_INVALID)
    if row["status"] not in TERMINAL_STATUSES:
        progress = progress_of(row, settings=settings)
        err(f"analysis {analysis_id}: {row['status']} (pass {row['iteration'] + 1}): {progress.note}")
        if as_json:
            out = {
                "analysis_id": row["id"],
                "status": row["status"],
                "iteration": row["iteration"],
                "step": progress.step,
                "attempt": progress.attempt,
                "recoveries": progress.recoveries,
                "lease_expires_at": progress.lease_expires_at.isoformat()
                if progress.lease_expires_at
                else None,
                "stale": progress.stale,
                "note": progress.note,
            }
            click.echo(json.dumps(out))
        sys.exit(EXIT_OK)
    print_result(row, as_json=as_json)


@click.command("list")
@click.option("--symbol", default=None, help="Only this ticker's analyses (e.g. AAPL).")
@click.option("--status", type=click.Choice(ANALYSIS_STATUSES), default=None, help="Only this status.")
@click.option(
    "--type", "analysis_type", type=click.Choice(cli_choices()), default=None, help="Only this plan."
)
@click.option("--tenant", default=None, help="Only this tenant's analyses (default: every tenant).")
@click.option("--limit", default=20, show_default=True, type=click.IntRange(1, 200))
@click.option("--json", "as_json", is_flag=True, help="One JSON object per analysis on stdout.")
def list_command(
    symbol: str | None,
    status: str | None,
    analysis_type: str | None,
    tenant: str | None,
    limit: int,
    as_json: bool,
) -> None:
    """Stored analyses, newest first: id, creation time (UTC), ticker, as-of date, plan, status
    and the report's one-line answer (the option plan's verdict, or the signal with "no
    evidence" or its calibrated p; the details are in `finagent show ID`). Exit 2 for an invalid
    ticker, 3 when the database is unreachable or not migrated."""
    try:
        symbol = strict_ticker(symbol) if symbol is not None else None
    except ValueError as exc:  # InvalidTickerError, JunkInputError: the message names the input
        fail(str(exc), EXIT_INVALID)
    settings = load_settings()
    try:
        prepare_database(settings=settings)
        rows = repo.list_analyses(
            engine=get_engine(settings.service.effective_database_url),
            symbol=symbol,
            status=status,
            analysis_type=analysis_type,
            tenant=tenant,
            limit=limit,
        )
    except (SchemaMissingError, OperationalError) as exc:
        fail(f"database unreachable or not migrated ({type(exc).__name__})", EXIT_INFRA)
    for row in rows:
        plan = row["analysis_type"] or DEFAULT_ANALYSIS_TYPE
        if as_json:
            fields = ("id", "symbol", "as_of", "status", "signal", "headline", "error", "created_at")
            # the raw confidence is a detail, not evidence: under "details" as in the HTTP API
            details = {"confidence": row["confidence"]} if row["confidence"] is not None else None
            out = {name: row[name] for name in fields} | {"analysis_type": plan, "details": details}
            click.echo(json.dumps(out, default=str, sort_keys=True))
            continue
        answer = row["headline"] or row["signal"] or "-"
        click.echo(
            f"{row['id']}  {row['created_at']:%Y-%m-%d %H:%M}  {row['symbol']:<6} {row['as_of']}  "
            f"{plan:<12} {row['status']:<14} {answer}"
        )
    if not rows:
        err("no analyses match")
