"""``finagent watchlist``: tickers analysed on a schedule by beat, and runs by hand."""

from __future__ import annotations

import json
import time
from typing import Any

import click

from apps import watchlists
from apps.cli.common import (
    EXIT_INFRA,
    EXIT_INVALID,
    embedded_scope,
    err,
    fail,
    infrastructure_errors,
    load_settings,
    out,
    out_json,
    parse_date,
)
from pipeline.database import prepare_database


@click.group()
def watchlist() -> None:
    """Watchlists: tickers analysed on a schedule by beat (default weekdays 21:30 New York)."""


@watchlist.command("add", short_help="Create a watchlist of tickers")
@click.argument("name")
@click.argument("tickers", nargs=-1, required=True)
@click.option("--schedule", default=None, help="5-field cron (default '30 21 * * 1-5').")
@click.option("--timezone", default=None, help="IANA zone (default America/New_York).")
@click.option("--max-iterations", type=click.IntRange(1, 10), default=None)
@click.option("--latest", is_flag=True, help="Analyse at the data's last date instead of the run date.")
def watchlist_add(
    name: str,
    tickers: tuple[str, ...],
    schedule: str | None,
    timezone: str | None,
    max_iterations: int | None,
    latest: bool,
) -> None:
    """Create watchlist NAME with TICKERS."""
    options: dict[str, Any] = {}
    if max_iterations:
        options["max_iterations"] = max_iterations
    if latest:
        options["as_of"] = "latest"
    try:
        row = watchlists.create_watchlist(
            name=name,
            tickers=list(tickers),
            schedule=schedule,
            timezone=timezone,
            options=options,
            settings=load_settings(),
        )
    except ValueError as exc:  # WatchlistError, DuplicateNameError
        fail(str(exc), EXIT_INVALID)
    err(f"watchlist {row['name']}: {' '.join(row['tickers'])} at '{row['schedule']}' {row['timezone']}")


@watchlist.command("list", short_help="List watchlists")
@click.option("--json", "as_json", is_flag=True, help="One JSON array on stdout.")
def watchlist_list(as_json: bool) -> None:
    """List watchlists."""
    rows = watchlists.list_watchlists(settings=load_settings())
    if as_json:
        keys = ("name", "tickers", "schedule", "timezone", "options", "enabled")
        click.echo(json.dumps([{k: r[k] for k in keys} for r in rows]))
        return
    for r in rows:
        state = "" if r["enabled"] else "\t(disabled)"
        click.echo(f"{r['name']}\t{' '.join(r['tickers'])}\t{r['schedule']}\t{r['timezone']}{state}")


@watchlist.command("remove", short_help="Delete a watchlist and its runs")
@click.argument("name")
def watchlist_remove(name: str) -> None:
    """Delete watchlist NAME and its runs."""
    settings = load_settings()
    prepare_database(settings=settings)
    try:
        watchlists.delete_watchlist(name=name, settings=settings)
    except watchlists.WatchlistNotFoundError as exc:
        fail(str(exc), EXIT_INVALID)
    err(f"watchlist {name} removed")


@watchlist.command("run", short_help="Run a watchlist now; print its digest")
@click.argument("name")
@click.option(
    "--date",
    "run_date",
    metavar="YYYY-MM-DD",
    help="Run date (default: the market clock: the data's last day, or the last session online).",
)
@click.option("--no-wait", is_flag=True, help="Start and print the run id (service mode).")
@click.option("--timeout", type=float, default=None, help="Seconds to wait for the digest.")
@click.option(
    "--format", "fmt", type=click.Choice(["markdown", "html", "json"]), default="markdown", show_default=True
)
def watchlist_run(name: str, run_date: str | None, no_wait: bool, timeout: float | None, fmt: str) -> None:
    """Run watchlist NAME now for a date (idempotent: a repeat of the same date starts nothing)
    and print its digest."""
    settings = load_settings()
    if no_wait and settings.service.mode == "embedded":
        raise click.UsageError(
            "--no-wait needs a broker (FINAGENT_SERVICE_BROKER_URL); embedded runs in-process"
        )
    try:
        with embedded_scope(settings):
            prepare_database(settings=settings)
            day = parse_date(run_date) or watchlists.default_run_date(name=name, settings=settings)
            started = watchlists.start_run(
                name=name,
                run_date=day,
                trigger="manual",
                schedule_finalize=settings.service.mode == "service",
                settings=settings,
            )
            run_id = started.run["id"]
            err(
                f"run {run_id}: {'started' if started.created else 'exists already'}, "
                f"{len(started.enqueued)} analyses enqueued, {len(started.refused)} refused"
            )
            if no_wait:
                click.echo(run_id)
                return
            deadline = time.monotonic() + (timeout or settings.service.wait_timeout)
            while not watchlists.finalize_run(run_id=run_id, settings=settings):
                if time.monotonic() > deadline:
                    fail(f"run {run_id} still running after the wait timeout", EXIT_INFRA)
                time.sleep(max(settings.service.wait_poll_interval, 0.5))
            run = watchlists.get_run(name=name, run_date=day, settings=settings)
    except watchlists.WatchlistError as exc:
        fail(str(exc), EXIT_INVALID)
    except infrastructure_errors() as exc:
        fail(f"{type(exc).__name__}: {exc}", EXIT_INFRA)
    if fmt == "json":
        out_json(run["digest_json"])
    else:
        out(run["digest_html"] if fmt == "html" else run["digest_markdown"])
