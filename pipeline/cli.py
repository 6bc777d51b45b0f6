"""``finagent``: the command-line producer and operator tool.

Exit codes: 0 the analysis is done; 1 it failed (report printed); 2 invalid input (nothing
enqueued); 3 infrastructure trouble (broker or database unreachable, wait timed out).
Stdout carries the result only (the report, or one JSON object with ``--json``); progress and
the JSON log lines go to stderr.

Imports: ``finagent --help`` and click's usage errors (a missing argument, an unknown option)
load click and the standard library only. A command imports the project modules it needs inside
its body, so it pays for its own stack alone: the settings (pydantic-settings),
``pipeline.service`` (pandas, SQLAlchemy), Celery (``pipeline.celery_app``, which also builds
the app from the settings when imported), the tool registry, uvicorn and FastAPI. The cold start
of ``finagent analyze`` is measured in docs/benchmarks.md (``bench/cold_start.py``).
"""

from __future__ import annotations

import json
import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from datetime import date, datetime
from typing import TYPE_CHECKING, Any

import click

from core.dates import DateRuleError, parse_iso_date
from core.logs import configure_logging
from core.plans import DEFAULT_ANALYSIS_TYPE, PLANS, AnalysisType, backtest_types, cli_choices
from core.stages import ANALYSIS_STATUSES, LANE_QUEUES, TERMINAL_STATUSES

if TYPE_CHECKING:
    from celery import Celery

    from core.settings import Settings

EXIT_OK, EXIT_FAILED, EXIT_INVALID, EXIT_INFRA = 0, 1, 2, 3
#: Pause before `finagent beat` starts celery beat again after it exited with an error.
BEAT_RESTART_DELAY_S = 5.0


def _parse_date(value: str | None) -> date | None:
    """``value`` as a date (:func:`_date`), ``None`` for ``None``."""
    return None if value is None else _date(value)


def _date(value: str) -> date:
    """``value`` (YYYY-MM-DD) as a date. Raises ``click.BadParameter`` (exit 2) otherwise."""
    try:  # the gateway's date rule (core.dates): YYYY-MM-DD from 1900-01-01 on
        return parse_iso_date(value, field="date")
    except DateRuleError as exc:
        raise click.BadParameter(f"{value!r} is not a date (use YYYY-MM-DD): {exc}") from None


def _masked[T](value: T) -> T:
    """``value`` (a text, or a JSON-like object: masked in its strings) with the configured
    secrets masked (``core.masking``): what the CLI prints comes from rows (some
    written before masking existed) and exception texts. Settings that do not validate leave it
    as it is (the command then refuses to start and says why)."""
    from pydantic import ValidationError  # lazy: pydantic-settings (module docstring)

    from core.masking import mask

    try:
        return mask(value)
    except ValidationError:
        return value


def _err(message: str) -> None:
    click.echo(_masked(message), err=True)


def _out(text: str, *, nl: bool = True) -> None:
    """Print ``text`` (a report, a digest) on stdout, secrets masked."""
    click.echo(_masked(text), nl=nl)


def _out_json(value: Any) -> None:
    """Print ``value`` as one JSON line on stdout, secrets masked in its strings (the JSON stays
    valid whatever a secret looks like)."""
    click.echo(json.dumps(_masked(value), default=str))


def _settings() -> Settings:
    """The process settings (:func:`core.settings.get_settings`).

    Raises:
        click.ClickException: the settings do not validate (e.g. the LLM time arithmetic or the
            durability arithmetic does not nest): one line per problem, exit 1, nothing started.
    """
    from pydantic import ValidationError  # lazy: pydantic-settings (module docstring)

    from core.settings import get_settings

    try:
        return get_settings()
    except ValidationError as exc:
        problems = "; ".join(str(e.get("msg", "")).removeprefix("Value error, ") for e in exc.errors())
        raise click.ClickException(f"refusing to start, invalid settings: {problems}") from None


def _infrastructure_errors() -> tuple[type[Exception], ...]:
    """What a command reports as infrastructure (exit 3): migrations not applied
    (``SchemaMissingError``), the database or broker unreachable (``OSError``,
    ``ConnectionError``), and kombu's errors of a publish the broker refused or lost (a
    connection that failed after Celery's retries; a bulk enqueue's Redis pipeline that
    failed, ``BatchPublishError``). Imported when an ``except`` clause is matched: kombu and
    the service module cost start-up time."""
    from kombu.exceptions import BatchPublishError, OperationalError

    from pipeline import service

    return (service.SchemaMissingError, OSError, ConnectionError, BatchPublishError, OperationalError)


def _celery_app() -> Celery:
    """The process's Celery app (:data:`pipeline.celery_app.app`)."""
    # lazy: Celery and kombu; importing the module builds the app from the settings (module docstring)
    from pipeline.celery_app import app

    return app


def _embedded_scope(settings: Settings, *, graceful: bool = True) -> AbstractContextManager[Any]:
    """In embedded mode, the in-process worker (:func:`pipeline.embedded.embedded_worker`) that
    consumes what the command enqueues; in service mode nothing (``finagent worker`` consumes)."""
    if settings.service.mode != "embedded":
        return nullcontext()
    from pipeline.embedded import embedded_worker  # lazy: Celery's worker (module docstring)

    return embedded_worker(_celery_app(), graceful=graceful)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def main() -> None:
    """finagent: multi-agent stock analysis on a Celery pipeline."""


@main.command()
@click.argument("symbol")
@click.option("--as-of", "as_of", metavar="YYYY-MM-DD", help="Analysis date (default: latest in the data).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object on stdout.")
@click.option("--no-wait", is_flag=True, help="Enqueue and print the analysis id (service mode).")
@click.option("--max-iterations", type=click.IntRange(1, 10), help="Most passes (default 3).")
@click.option("--timeout", type=float, help="Seconds to wait for the report.")
@click.option("--log-level", default=None, help="Level of the JSON log lines on stderr (default INFO).")
@click.option(
    "--llm", "llm_model", metavar="MODEL", help="LiteLLM model string for every agent (default: none)."
)
@click.option(
    "--type",
    "analysis_type",
    type=click.Choice(cli_choices()),
    default=None,
    help="Analysis plan ("
    + "; ".join(f"{spec.name}: {spec.help}" for spec in PLANS if spec.name != DEFAULT_ANALYSIS_TYPE)
    + "). Default: from the query.",
)
@click.option(
    "--cost-basis",
    "cost_basis",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="covered_call: cost basis of 100 shares held, USD/share (default: the paper portfolio's position).",
)
def analyze(
    symbol: str,
    as_of: str | None,
    as_json: bool,
    no_wait: bool,
    max_iterations: int | None,
    timeout: float | None,
    log_level: str | None,
    llm_model: str | None,
    analysis_type: AnalysisType | None,
    cost_basis: float | None,
) -> None:
    """Analyze SYMBOL (e.g. AAPL) and print the report.

    SYMBOL may also be a question in free text ("should I buy Apple after its split?"): it is
    resolved to a ticker by parse_query (the LLM when one is configured, else known tickers and
    company names); an unresolvable question exits 2 and enqueues nothing.

    A ticker with junk exits 2 before anything starts, naming the characters: one word with
    anything but letters, digits and . - ^ = ("AAPL;DROP", "$AAPL"), or words with any of
    ; \\ < > | ` { } ("AAPL;DROP TABLE")."""
    from core.tickers import JunkInputError, refuse_junk

    try:  # the shared rule (core.tickers.junk_characters), before a worker starts
        refuse_junk(symbol)
    except JunkInputError as exc:
        _err(f"error: {exc}")
        sys.exit(EXIT_INVALID)
    # lazy: pandas, SQLAlchemy and the providers (module docstring)
    from agents.data.routing import get_provider
    from pipeline import service
    from pipeline.query import UnresolvedQueryError, parse_query  # lazy: also the LLM session code

    settings = _settings()
    configure_logging(level=log_level or settings.service.log_level)
    as_of_date = _parse_date(as_of)
    if no_wait and settings.service.mode == "embedded":
        raise click.UsageError(
            "--no-wait needs a broker (FINAGENT_BROKER_URL); embedded mode runs in-process"
        )
    try:
        with _embedded_scope(settings, graceful=False):
            try:
                parsed = parse_query(
                    text=symbol,
                    provider=get_provider(settings=settings),
                    settings=settings,
                    llm_model=llm_model,
                )
            except UnresolvedQueryError as exc:
                raise service.InvalidRequestError(str(exc)) from exc
            if parsed.method != "ticker" and not as_json:
                notes = f": {'; '.join(parsed.notes)}" if parsed.notes else ""
                _err(f"query resolved to {parsed.ticker} ({parsed.analysis_type}, by {parsed.method}){notes}")
            submitted = service.start_analysis(
                symbol=parsed.ticker,
                as_of=as_of_date,
                user_query=None if parsed.method == "ticker" else symbol,
                max_iterations=max_iterations,
                settings=settings,
                llm_model=llm_model,
                llm_rows=parsed.llm_rows,
                analysis_type=analysis_type or (None if parsed.method == "ticker" else parsed.analysis_type),
                cost_basis=cost_basis,
                query_note="; ".join(parsed.notes) or None,
            )
            if no_wait:
                click.echo(submitted.analysis_id)
                return
            if not as_json:
                _err(
                    f"analysis {submitted.analysis_id}: {submitted.symbol} as of {submitted.as_of} "
                    f"({settings.service.mode} mode)"
                )

            def progress(status: str, iteration: int) -> None:
                _err(f"  pass {iteration + 1}: {status}")

            row = service.wait_for(
                analysis_id=submitted.analysis_id,
                timeout=timeout,
                on_progress=None if as_json else progress,
                settings=settings,
            )
    except service.InvalidRequestError as exc:
        _err(f"error: {exc}")
        sys.exit(EXIT_INVALID)
    except service.WaitTimeoutError as exc:
        _err(f"error: {exc}; `finagent show ID` prints it when it finishes")
        sys.exit(EXIT_INFRA)
    except _infrastructure_errors() as exc:
        _err(f"error: {type(exc).__name__}: {exc}")
        sys.exit(EXIT_INFRA)
    _print_result(row, as_json=as_json)


def _print_result(row: dict[str, Any], *, as_json: bool) -> None:
    if as_json:
        payload = row.get("report_json") or {
            "analysis_id": row["id"],
            "symbol": row["symbol"],
            "status": row["status"],
            "error": row.get("error"),
        }
        _out_json(payload)
    else:
        _out(row.get("report") or f"analysis {row['id']}: {row['status']} {row.get('error') or ''}")
    sys.exit(EXIT_OK if row["status"] == "done" else EXIT_FAILED if row["status"] == "failed" else EXIT_INFRA)


@main.command("chart")
@click.argument("analysis_id")
def chart_command(analysis_id: str) -> None:
    """Render the chart of analysis ANALYSIS_ID (PNG with support/resistance, Fibonacci levels
    and trendlines from its cited bars) and print the file path."""
    from pipeline import direct_tools  # lazy: the tool registry, pandas, SQLAlchemy (module docstring)

    settings = _settings()
    configure_logging(level=settings.service.log_level)
    try:
        envelope = direct_tools.render_analysis_chart(analysis_id=analysis_id, settings=settings)
    except KeyError as exc:
        _err(f"error: {exc.args[0]}")
        sys.exit(EXIT_INVALID)
    if envelope.error is not None or not envelope.data:
        _out_json(envelope.to_public())
        sys.exit(EXIT_FAILED)
    click.echo(envelope.data["path"])


@main.command("tool")
@click.argument("name", required=False)
@click.argument("arguments", required=False, default="{}")
@click.option(
    "--as-of",
    "as_of",
    metavar="YYYY-MM-DD",
    help="Point in time (default: the market clock: the data's last day, or the last session online).",
)
@click.option("--list", "list_tools", is_flag=True, help="List the tools with their input schemas (JSON).")
def tool_command(name: str | None, arguments: str, as_of: str | None, list_tools: bool) -> None:
    """Run one tool: finagent tool NAME 'JSON-ARGS' [--as-of DATE]; prints its envelope.

    Exit codes: 0 success, 1 the tool answered with an error envelope, 2 bad usage (unknown
    tool, arguments that are not a JSON object)."""
    from pipeline import direct_tools  # lazy: the tool registry, pandas, SQLAlchemy (module docstring)

    if list_tools:
        click.echo(json.dumps(direct_tools.list_tools(), indent=2))
        return
    if not name:
        raise click.UsageError("give a tool NAME (see `finagent tool --list`)")
    try:
        parsed = json.loads(arguments)
    except json.JSONDecodeError as exc:
        _err(f"error: ARGS is not valid JSON: {exc}")
        sys.exit(EXIT_INVALID)
    if not isinstance(parsed, dict):
        _err('error: ARGS must be a JSON object, e.g. \'{"symbol": "AAPL"}\'')
        sys.exit(EXIT_INVALID)
    settings = _settings()
    configure_logging(level=settings.service.log_level)
    when = _parse_date(as_of)
    if when is None:  # the market clock: a date the configured data can serve, said on stderr
        clock = direct_tools.default_clock(arguments=parsed, settings=settings, name=name)
        when = clock.day
        _err(f"as of {when.isoformat()}: {clock.describe()}")
    try:
        envelope = direct_tools.run_direct(name=name, arguments=parsed, as_of=when, settings=settings)
    except KeyError as exc:
        _err(f"error: {exc.args[0]}")
        sys.exit(EXIT_INVALID)
    _out_json(envelope.to_public())
    sys.exit(EXIT_OK if envelope.ok else EXIT_FAILED)


@main.command()
@click.argument("analysis_id")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object on stdout.")
def show(analysis_id: str, as_json: bool) -> None:
    """Print the report of ANALYSIS_ID (or its status while it runs)."""
    from pipeline import service  # lazy: pandas, SQLAlchemy (module docstring)

    row = service.get_analysis(analysis_id=analysis_id)
    if row is None:
        _err(f"error: no analysis {analysis_id}")
        sys.exit(EXIT_INVALID)
    if row["status"] not in TERMINAL_STATUSES:
        from pipeline.steps.recovery import progress_of  # lazy: the stage modules (module docstring)

        progress = progress_of(row, settings=_settings())
        _err(f"analysis {analysis_id}: {row['status']} (pass {row['iteration'] + 1}): {progress.note}")
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
    _print_result(row, as_json=as_json)


@main.command("list")
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
    """Stored analyses, newest first: id, creation time (UTC), ticker, as-of date, plan, status,
    signal and raw confidence (the calibrated probability is in `finagent show ID`). Exit 2 for
    an invalid ticker."""
    from core.tickers import strict_ticker
    from db import repo
    from db.engine import get_engine
    from pipeline import service  # lazy: pandas, SQLAlchemy (module docstring)

    try:
        symbol = strict_ticker(symbol) if symbol is not None else None
    except ValueError as exc:  # InvalidTickerError, JunkInputError: the message names the input
        _err(f"error: {exc}")
        sys.exit(EXIT_INVALID)
    settings = _settings()
    service.prepare_database(settings=settings)
    rows = repo.list_analyses(
        engine=get_engine(settings.service.effective_database_url),
        symbol=symbol,
        status=status,
        analysis_type=analysis_type,
        tenant=tenant,
        limit=limit,
    )
    for row in rows:
        plan = row["analysis_type"] or DEFAULT_ANALYSIS_TYPE
        if as_json:
            fields = ("id", "symbol", "as_of", "status", "signal", "confidence", "error", "created_at")
            out = {name: row[name] for name in fields} | {"analysis_type": plan}
            click.echo(json.dumps(out, default=str, sort_keys=True))
            continue
        confidence = f"{row['confidence']:.2f}" if row["confidence"] is not None else "-"
        click.echo(
            f"{row['id']}  {row['created_at']:%Y-%m-%d %H:%M}  {row['symbol']:<6} {row['as_of']}  "
            f"{plan:<12} {row['status']:<14} {row['signal'] or '-':<5} {confidence}"
        )
    if not rows:
        _err("no analyses match")


@main.command()
@click.option("--dry-run", is_flag=True, help="Print what would be done; change nothing.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per analysis on stdout.")
def recover(dry_run: bool, as_json: bool) -> None:
    """Re-drive analyses that made no progress within their lease (FINAGENT_LEASE_SECONDS) from
    their last completed stage, or fail them STALLED after FINAGENT_MAX_RECOVERIES re-drives.

    In service mode `finagent sweeper` runs the same sweep every FINAGENT_SWEEP_SECONDS; in
    embedded mode this command is the way (it runs the re-driven analyses in-process and waits
    for them). Exit 0, or 3 when the database is unreachable.
    """
    from sqlalchemy.exc import OperationalError

    from pipeline import service  # lazy: pandas, SQLAlchemy (module docstring)
    from pipeline.steps.recovery import Action, sweep

    settings = _settings()
    embedded = settings.service.mode == "embedded"
    try:
        service.prepare_database(settings=settings)
        with _embedded_scope(settings) if not dry_run else nullcontext():
            found = sweep(dry_run=dry_run, queue_depths=(lambda _: {}) if embedded else None)
            for rec in found:
                if as_json:
                    click.echo(json.dumps(rec.as_dict()))
                else:
                    line = f"{rec.analysis_id}  {rec.symbol:<6} {rec.status:<12} {rec.action.value:<7}"
                    click.echo(f"{line} {rec.detail}")
            redriven = [r for r in found if r.action is Action.REDRIVE]
            if embedded and redriven and not dry_run:
                _err(f"running {len(redriven)} re-driven analyses in-process ...")
                for rec in redriven:
                    row = service.wait_for(analysis_id=rec.analysis_id, settings=settings)
                    _err(f"{rec.analysis_id}: {row['status']}")
    except OperationalError as exc:
        _err(f"error: database unreachable ({type(exc).__name__}); nothing recovered")
        sys.exit(EXIT_INFRA)
    verb = "would be" if dry_run else "were"
    counts = {a: sum(1 for r in found if r.action is a) for a in Action}
    _err(
        f"{len(found)} stalled analyses: {counts[Action.REDRIVE]} {verb} re-driven, "
        f"{counts[Action.FAIL]} {verb} failed STALLED, {counts[Action.WAIT]} waiting behind a backlog"
    )


@main.command("purge")
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
    from sqlalchemy.exc import OperationalError

    from db.engine import get_engine
    from db.retention import purge
    from pipeline import service  # lazy: pandas, SQLAlchemy (module docstring)

    day = _date(before)
    settings = _settings()
    try:
        service.prepare_database(settings=settings)
        report = purge(
            engine=get_engine(settings.service.effective_database_url), before=day, dry_run=dry_run
        )
    except (service.SchemaMissingError, OperationalError) as exc:
        _err(f"error: database unreachable or not migrated ({type(exc).__name__}); nothing deleted")
        sys.exit(EXIT_INFRA)
    if as_json:
        _out_json(report.as_dict())
    verb = "would delete" if dry_run else "deleted"
    click.echo(
        f"{verb}: {report.analyses} analyses created before {report.before.date()} "
        f"({report.tool_calls} tool calls, {report.llm_calls} LLM calls, {report.iterations} pass rows), "
        f"{report.blobs} unused tool-result pieces ({report.blob_bytes / 1e6:.1f} MB of JSON)",
        err=as_json,
    )


@main.command("archive")
@click.option(
    "--older-than",
    "older_than",
    default=None,
    metavar="DURATION",
    help="Archive analyses finished longer ago than this (e.g. 30m, 12h, 7d; 0s: every finished "
    "one). Default: FINAGENT_ARCHIVE_AFTER_SECONDS.",
)
@click.option("--limit", type=click.IntRange(min=1), default=None, help="At most this many analyses.")
@click.option("--dry-run", is_flag=True, help="Compress and count what would be archived; write nothing.")
@click.option(
    "--train", "train_only", is_flag=True, help="Only train a new compression dictionary on archived records."
)
@click.option("--json", "as_json", is_flag=True, help="The counts as one JSON object on stdout.")
def archive_command(
    older_than: str | None, limit: int | None, dry_run: bool, train_only: bool, as_json: bool
) -> None:
    """Move the record of finished analyses (state, reports, tool-call rows) into one compressed
    row each; the API, `finagent show`, replay and the console read them as before
    (docs/operations.md, "Archive"). Beat runs it every hour.

    Exit 0, 2 for a bad duration (or --train with too few archived records), 3 when the
    database is unreachable (batches archived before stay archived)."""
    from datetime import UTC, datetime, timedelta

    from sqlalchemy.exc import OperationalError

    from db import archive
    from db.engine import get_engine
    from pipeline import service  # lazy: pandas, SQLAlchemy (module docstring)

    settings = _settings()
    seconds = (
        settings.durability.archive_after_seconds if older_than is None else _duration_seconds(older_than)
    )
    try:
        service.prepare_database(settings=settings)
        engine = get_engine(settings.service.effective_database_url)
        if train_only:
            try:
                dictionary = archive.train(engine=engine)
            except ValueError as exc:
                _err(f"error: {exc}")
                sys.exit(EXIT_INVALID)
            click.echo(f"trained compression dictionary {dictionary}; archives from now on use it")
            return
        report = archive.archive(
            engine=engine,
            before=datetime.now(UTC) - timedelta(seconds=seconds),
            limit=limit,
            dry_run=dry_run,
            on_batch=lambda done: _err(f"  {done} analyses {'read' if dry_run else 'archived'} so far"),
        )
    except (service.SchemaMissingError, OperationalError) as exc:
        _err(f"error: database unreachable or not migrated ({type(exc).__name__}); stopped")
        sys.exit(EXIT_INFRA)
    if as_json:
        _out_json(report.as_dict())
    verb = "would archive" if dry_run else "archived"
    per = report.stored_bytes / report.analyses / 1024 if report.analyses else 0.0
    click.echo(
        f"{verb}: {report.analyses} analyses finished before {report.before.isoformat(timespec='seconds')} "
        f"({report.tool_calls} tool calls): {report.raw_bytes / 1e6:.1f} MB of JSON in "
        f"{report.stored_bytes / 1e6:.2f} MB ({per:.1f} KB per analysis; dictionary "
        f"{report.dictionary or 'none yet'}{', trained now' if report.trained else ''})",
        err=as_json,
    )


def _duration_seconds(text: str) -> int:
    """``30m``/``12h``/``7d``/``90s`` (or bare seconds) → seconds; exit 2 otherwise."""
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    value, unit = (text[:-1], text[-1]) if text and text[-1] in units else (text, "s")
    if not value.isdigit():
        _err(f"error: duration {text!r}: a whole number with s, m, h or d (e.g. 12h)")
        sys.exit(EXIT_INVALID)
    return int(value) * units[unit]


@main.command(context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
@click.option("--concurrency", "-c", type=int, default=None, help="Worker processes (default: cores).")
@click.option("--queues", "-Q", default=None, help="Comma-separated queues (default: the queues of --lane).")
@click.option(
    "--lane",
    type=click.Choice(sorted(LANE_QUEUES)),
    default="both",
    show_default=True,
    help="Which work this pool takes: interactive (API, CLI, Python API), batch (backtests, "
    "watchlist runs) or both, polled in turn; every lane also takes the control queue.",
)
@click.option("--loglevel", "-l", default="INFO")
@click.pass_context
def worker(ctx: click.Context, concurrency: int | None, queues: str | None, lane: str, loglevel: str) -> None:
    """Run a Celery worker (service mode). Extra options go to `celery worker`.

    Pools are sized per lane (docs/operations.md, "Interactive before batch"): e.g. one
    ``--lane both`` worker, or a small ``--lane interactive`` pool that a backtest never
    occupies next to a ``--lane batch`` pool. ``--lane`` and not ``--pool``:
    ``--pool`` is Celery's own option (prefork, solo, threads), passed through."""
    settings = _settings()
    if settings.service.mode == "embedded":
        raise click.UsageError("set FINAGENT_BROKER_URL (e.g. redis://127.0.0.1:6379/0) to run a worker")
    configure_logging(level=loglevel)
    app = _celery_app()
    argv = ["worker", "-E", f"--loglevel={loglevel}", "-Q", queues or ",".join(LANE_QUEUES[lane])]
    if concurrency:
        argv.append(f"--concurrency={concurrency}")
    # app.start, not app.worker_main: worker_main drops the worker's exit code (celery
    # app/base.py), so a worker that died of an unrecoverable error exited 0 and a supervisor
    # restarting only on failure left it dead
    code = app.start(argv=[*argv, *ctx.args])
    sys.exit(code or 0)


@main.group()
def db() -> None:
    """Database commands."""


@db.command("upgrade")
@click.option("--revision", default="head", show_default=True)
def db_upgrade(revision: str) -> None:
    """Apply migrations (same as `alembic upgrade head`)."""
    from db.migrate import upgrade  # lazy: Alembic, SQLAlchemy (module docstring)

    url = _settings().service.effective_database_url
    upgrade(url=url, revision=revision)
    stamp = datetime.now().isoformat(timespec="seconds")
    _err(f"database at {_redact_url(url)} upgraded to {revision} ({stamp})")


def _redact_url(url: str) -> str:
    from sqlalchemy.engine import make_url  # lazy: SQLAlchemy (module docstring)

    return make_url(url).render_as_string(hide_password=True)


# --------------------------------------------------------------------------------------------
# Operations: HTTP gateway, beat, Flower, API keys, watchlists
# --------------------------------------------------------------------------------------------


@main.command()
@click.option("--host", default=None, help="Bind address (default FINAGENT_API_HOST, 127.0.0.1).")
@click.option("--port", type=int, default=None, help="Port (default FINAGENT_API_PORT, 8000).")
@click.option("--log-level", default="info", show_default=True)
def serve(host: str | None, port: int | None, log_level: str) -> None:
    """Serve the HTTP API (FastAPI under uvicorn; OpenAPI docs at /docs)."""
    import uvicorn  # lazy: only `serve` runs a web server (module docstring)

    settings = _settings()
    configure_logging(level=settings.service.log_level)
    uvicorn.run(
        "pipeline.api.app:create_app",
        factory=True,
        host=host or settings.api.api_host,
        port=port or settings.api.api_port,
        log_level=log_level.lower(),
        # the API key travels in a header; uvicorn's access log prints method, path and status only
        access_log=True,
    )


@main.command(context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
@click.option("--loglevel", "-l", default="INFO")
@click.pass_context
def beat(ctx: click.Context, loglevel: str) -> None:
    """Run celery beat with the redbeat scheduler (several may run: one holds the Redis lock and
    sends the watchlist ticks, the others wait). Extra options go to `celery beat`."""
    settings = _settings()
    if settings.service.mode == "embedded" or not str(settings.service.broker_url).startswith("redis"):
        raise click.UsageError("beat needs a Redis broker (FINAGENT_BROKER_URL=redis://...) for its lock")
    argv = ["beat", f"--loglevel={loglevel}", *ctx.args]
    # celery beat exits 1 when its broker connection breaks mid-tick (a Redis restart: redbeat's
    # tick raises redis.ConnectionError, measured here); honcho and compose would then stop the
    # whole stack or leave beat down. Start it again in this process after a pause, so the
    # watchlist ticks resume once Redis is back. A clean stop (SIGTERM, Ctrl-C) exits 0.
    while True:
        try:
            code = _celery_app().start(argv=argv)
        except Exception as exc:  # beat re-raises what killed its scheduler (celery apps/beat.py)
            code, reason = 1, f"{type(exc).__name__}: {exc}"
        else:
            if not code:
                return
            reason = f"exit code {code}"
        _err(f"beat stopped ({reason}); starting it again in {BEAT_RESTART_DELAY_S:.0f} s (Ctrl-C stops)")
        time.sleep(BEAT_RESTART_DELAY_S)


@main.command()
@click.option("--loglevel", "-l", default="INFO")
def sweeper(loglevel: str) -> None:
    """Run the recovery sweeper (service mode), a process of its own beside the workers.

    Every FINAGENT_SWEEP_SECONDS it re-drives the analyses whose lease ran out (and fails them
    STALLED after FINAGENT_MAX_RECOVERIES); when the Redis broker lost its messages (a restart
    without persistence) it re-drives at once every unfinished analysis with no message left.
    After each sweep it writes a heartbeat that GET /health reports. It needs no healthy
    worker. Run one per deployment (a second is harmless). SIGTERM or Ctrl-C stops it (exit 0).
    """

    from pipeline.sweeper import Sweeper  # lazy: SQLAlchemy, the Celery app (module docstring)

    settings = _settings()
    if settings.service.mode == "embedded":
        raise click.UsageError(
            "set FINAGENT_BROKER_URL to run the sweeper (embedded mode: `finagent recover`)"
        )
    configure_logging(level=loglevel)
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    Sweeper(settings=settings).run(stop)


@main.command(context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
@click.option("--port", type=int, default=None, help="Port (default FINAGENT_FLOWER_PORT, 5555).")
@click.option("--address", default="127.0.0.1", show_default=True, help="Bind address.")
@click.pass_context
def flower(ctx: click.Context, port: int | None, address: str) -> None:
    """Run Flower against the configured broker (task events are on in the app's config).
    Extra options go to Flower, e.g. --basic-auth=user:password."""
    from core.masking import register_secrets  # lazy: the settings (module docstring)

    settings = _settings()
    if settings.service.mode == "embedded":
        raise click.UsageError("Flower needs a broker (FINAGENT_BROKER_URL)")
    register_secrets("flower --basic-auth", basic_auth_passwords(ctx.args))
    _celery_app().start(
        argv=["flower", f"--port={port or settings.service.flower_port}", f"--address={address}", *ctx.args]
    )


def basic_auth_passwords(args: list[str]) -> list[str]:
    """The passwords of Flower's ``--basic-auth user:password[,user:password]`` among ``args``
    (``--basic-auth=…``, ``--basic_auth=…`` or the value as the next argument), so the Flower
    process masks them like a configured secret."""
    values: list[str] = []
    for i, arg in enumerate(args):
        name, eq, value = arg.partition("=")
        if name not in ("--basic-auth", "--basic_auth"):
            continue
        if not eq:
            value = args[i + 1] if i + 1 < len(args) else ""
        values += [pair.partition(":")[2] for pair in value.split(",") if ":" in pair]
    return [v for v in values if v]


@main.group()
def apikey() -> None:
    """HTTP API keys (stored hashed; a key is shown once, at creation)."""


@apikey.command("create")
@click.argument("name")
@click.option(
    "--tenant", default="default", show_default=True, help="Tenant whose objects the key sees and owns."
)
@click.option(
    "--scopes",
    default=None,
    help="Comma-separated: read, analyze, watchlists, admin, operator (default read,analyze,watchlists). "
    "operator: the cross-tenant scorecard (GET /scorecard?all_tenants=true); give it to the "
    "deployment's operator only.",
)
def apikey_create(name: str, tenant: str, scopes: str | None) -> None:
    """Create a key NAME and print it (the only time it is shown)."""
    # lazy: SQLAlchemy (module docstring)
    from core.tenancy import parse_scopes
    from db.ops_repo import DuplicateNameError
    from pipeline import service  # lazy: pandas (module docstring)
    from pipeline.api.auth import create_key

    settings = _settings()
    service.prepare_database(settings=settings)
    try:
        granted = parse_scopes(scopes)
        token = create_key(name=name, settings=settings, tenant=tenant, scopes=granted)
    except (DuplicateNameError, ValueError) as exc:
        _err(f"error: {exc}")
        sys.exit(EXIT_INVALID)
    click.echo(token)
    _err(
        f"API key {name!r} of tenant {tenant!r} (scopes {','.join(granted)}) created; store it now, "
        "it cannot be shown again (send it as X-API-Key)"
    )


@apikey.command("list")
def apikey_list() -> None:
    """List keys (name, id, tenant, scopes, created, revoked); never the keys themselves."""
    # lazy: SQLAlchemy (module docstring)
    from db.engine import get_engine
    from db.ops_repo import list_api_keys
    from pipeline import service  # lazy: pandas (module docstring)

    settings = _settings()
    service.prepare_database(settings=settings)
    for row in list_api_keys(engine=get_engine(settings.service.effective_database_url)):
        revoked = f"revoked {row['revoked_at']:%Y-%m-%d %H:%M}" if row["revoked_at"] else "active"
        click.echo(
            f"{row['name']}\tfa_{row['key_id']}_…\t{row['tenant']}\t{row['scopes']}\t"
            f"{row['created_at']:%Y-%m-%d %H:%M}\t{revoked}"
        )


@apikey.command("revoke")
@click.argument("name")
def apikey_revoke(name: str) -> None:
    """Revoke key NAME (requests with it get 403 from then on)."""
    # lazy: SQLAlchemy (module docstring)
    from db.engine import get_engine
    from db.ops_repo import revoke_api_key

    if not revoke_api_key(engine=get_engine(_settings().service.effective_database_url), name=name):
        _err(f"error: no active API key named {name!r}")
        sys.exit(EXIT_INVALID)
    _err(f"API key {name!r} revoked")


@main.command("audit")
@click.option("--tenant", default=None, help="Only this tenant's rows (default: every tenant).")
@click.option("--limit", default=50, show_default=True, type=click.IntRange(1, 1000))
@click.option("--json", "as_json", is_flag=True, help="One JSON object per line.")
def audit(tenant: str | None, limit: int, as_json: bool) -> None:
    """The HTTP API's audit log, newest first: one row per mutating request with a key (who =
    key name and public id, what, object, status, request id, client address); requests without
    a valid key as one row per address, status and window with their count (``×N``); never a
    key or a secret."""
    # lazy: SQLAlchemy (module docstring)
    from db.engine import get_engine
    from db.ops_repo import list_audit
    from pipeline import service  # lazy: pandas (module docstring)

    settings = _settings()
    service.prepare_database(settings=settings)
    rows = list_audit(engine=get_engine(settings.service.effective_database_url), tenant=tenant, limit=limit)
    for row in rows:
        if as_json:
            click.echo(json.dumps(row, default=str, sort_keys=True))
            continue
        who = f"{row['key_name']} (fa_{row['api_key_id']}_…)" if row["api_key_id"] else "(no valid key)"
        if row["requests"] > 1:
            who += f" ×{row['requests']} until {row['last_at']:%H:%M:%S}"
        click.echo(
            f"{row['at']:%Y-%m-%d %H:%M:%S}\t{row['tenant'] or '-'}\t{who}\t{row['what']}\t"
            f"{row['object_id'] or '-'}\t{row['status_code']} {row['outcome']}\t{row['request_id']}\t"
            f"{row['client_address'] or '-'}"
        )


@main.group()
def watchlist() -> None:
    """Watchlists: tickers analysed on a schedule by beat (default weekdays 21:30 New York)."""


@watchlist.command("add")
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
    from pipeline import watchlists  # lazy: pandas, SQLAlchemy, Celery (module docstring)

    options: dict[str, Any] = {}
    if max_iterations:
        options["max_iterations"] = max_iterations
    if latest:
        options["as_of"] = "latest"
    try:
        row = watchlists.create_watchlist(
            name=name, tickers=list(tickers), schedule=schedule, timezone=timezone, options=options
        )
    except ValueError as exc:  # WatchlistError, DuplicateNameError
        _err(f"error: {exc}")
        sys.exit(EXIT_INVALID)
    _err(f"watchlist {row['name']}: {' '.join(row['tickers'])} at '{row['schedule']}' {row['timezone']}")


@watchlist.command("list")
@click.option("--json", "as_json", is_flag=True, help="One JSON array on stdout.")
def watchlist_list(as_json: bool) -> None:
    """List watchlists."""
    from pipeline import watchlists  # lazy: pandas, SQLAlchemy, Celery (module docstring)

    rows = watchlists.list_watchlists()
    if as_json:
        keys = ("name", "tickers", "schedule", "timezone", "options", "enabled")
        click.echo(json.dumps([{k: r[k] for k in keys} for r in rows]))
        return
    for r in rows:
        state = "" if r["enabled"] else "\t(disabled)"
        click.echo(f"{r['name']}\t{' '.join(r['tickers'])}\t{r['schedule']}\t{r['timezone']}{state}")


@watchlist.command("remove")
@click.argument("name")
def watchlist_remove(name: str) -> None:
    """Delete watchlist NAME and its runs."""
    from pipeline import service, watchlists  # lazy: pandas, SQLAlchemy, Celery (module docstring)

    service.prepare_database(settings=_settings())
    try:
        watchlists.delete_watchlist(name=name)
    except watchlists.WatchlistNotFoundError as exc:
        _err(f"error: {exc}")
        sys.exit(EXIT_INVALID)
    _err(f"watchlist {name} removed")


@watchlist.command("run")
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
    from pipeline import service, watchlists  # lazy: pandas, SQLAlchemy, Celery (module docstring)

    settings = _settings()
    if no_wait and settings.service.mode == "embedded":
        raise click.UsageError("--no-wait needs a broker (FINAGENT_BROKER_URL); embedded runs in-process")
    try:
        with _embedded_scope(settings):
            service.prepare_database(settings=settings)
            day = _parse_date(run_date) or watchlists.default_run_date(name=name, settings=settings)
            started = watchlists.start_run(
                name=name,
                run_date=day,
                trigger="manual",
                schedule_finalize=settings.service.mode == "service",
                settings=settings,
            )
            run_id = started.run["id"]
            _err(
                f"run {run_id}: {'started' if started.created else 'exists already'}, "
                f"{len(started.enqueued)} analyses enqueued, {len(started.refused)} refused"
            )
            if no_wait:
                click.echo(run_id)
                return
            deadline = time.monotonic() + (timeout or settings.service.wait_timeout)
            while not watchlists.finalize_run(run_id=run_id, settings=settings):
                if time.monotonic() > deadline:
                    _err(f"error: run {run_id} still running after the wait timeout")
                    sys.exit(EXIT_INFRA)
                time.sleep(max(settings.service.wait_poll_interval, 0.5))
            run = watchlists.get_run(name=name, run_date=day, settings=settings)
    except watchlists.WatchlistError as exc:
        _err(f"error: {exc}")
        sys.exit(EXIT_INVALID)
    except _infrastructure_errors() as exc:
        _err(f"error: {type(exc).__name__}: {exc}")
        sys.exit(EXIT_INFRA)
    if fmt == "json":
        _out_json(run["digest_json"])
    else:
        _out(run["digest_html"] if fmt == "html" else run["digest_markdown"])


# --------------------------------------------------------------------------------------------
# Evaluation: backtests on a (symbol, date) grid and the forward scorecard
# --------------------------------------------------------------------------------------------


def _default_backtest_name(symbols: str, start: str, end: str, every: str, analysis_type: str) -> str:
    """``bt-<10 hex>`` from the grid, so the same command resumes the same backtest."""
    import hashlib

    key = "|".join((symbols.upper().replace(" ", ""), start, end, every.lower(), analysis_type))
    return f"bt-{hashlib.sha256(key.encode()).hexdigest()[:10]}"


@main.command("backtest")
@click.option("--symbols", required=True, help="Comma-separated tickers, e.g. AAPL,MSFT,IBM.")
@click.option("--from", "start", required=True, metavar="YYYY-MM-DD", help="First grid date.")
@click.option("--to", "end", required=True, metavar="YYYY-MM-DD", help="Last grid date (inclusive).")
@click.option("--every", default="5d", show_default=True, help="Grid step: Nd calendar days or Nw weeks.")
@click.option(
    "--type",
    "analysis_type",
    type=click.Choice(backtest_types()),
    default=DEFAULT_ANALYSIS_TYPE,
    show_default=True,
)
@click.option("--name", default=None, help="Backtest name (default: derived from the grid); re-run resumes.")
@click.option("--no-wait", is_flag=True, help="Enqueue and print the name (service mode).")
@click.option("--log-level", default="WARNING", show_default=True, help="Level of the JSON log lines.")
def backtest_command(
    symbols: str,
    start: str,
    end: str,
    every: str,
    analysis_type: str,
    name: str | None,
    no_wait: bool,
    log_level: str,
) -> None:
    """Run one analysis per (symbol, date) of a grid through the pipeline, with a progress bar.

    Dates that are not trading days map to the previous trading day of the data. Re-running the
    same --name skips what is done; Ctrl-C cancels what has not started (a re-run resumes it).
    Exit 0 when every analysis finished (failures are listed), 1 when cancelled, 2 for invalid
    input, 3 for infrastructure trouble."""
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    from pipeline import backtest  # lazy: pandas, SQLAlchemy, Celery (module docstring)

    settings = _settings()
    configure_logging(level=log_level)
    if no_wait and settings.service.mode == "embedded":
        raise click.UsageError("--no-wait needs a broker (FINAGENT_BROKER_URL); embedded runs in-process")
    start_date, end_date = _date(start), _date(end)
    name = name or _default_backtest_name(symbols, start, end, every, analysis_type)
    tickers = [s.strip() for s in symbols.split(",") if s.strip()]
    console = Console(stderr=True, soft_wrap=True)  # messages stay one line each (greppable logs)
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
    )
    cancelled = False

    def enqueued_batch(report: Any) -> None:
        bar.update(sending, completed=report.enqueued)
        if interrupted.is_set():  # Ctrl-C during the enqueue: stop between two batches
            raise KeyboardInterrupt

    try:
        with (
            _embedded_scope(settings, graceful=False),
            Progress(*columns, console=console) as bar,
            _ctrl_c() as interrupted,
        ):
            sending = bar.add_task(f"{name}: enqueuing", total=None)
            try:
                started = backtest.start_backtest(
                    name=name,
                    symbols=tickers,
                    start=start_date,
                    end=end_date,
                    every=every,
                    analysis_type=analysis_type,
                    settings=settings,
                    on_batch=enqueued_batch,
                )
                bar.update(sending, total=started.enqueued, completed=started.enqueued)
                bar.console.print(
                    f"backtest {name}: {started.total} analyses on the grid; enqueued {started.enqueued}, "
                    f"done before {started.done_before}, running {started.in_flight}, failed before "
                    f"{started.failed_before}, refused {len(started.refused)}"
                )
                if started.moved:
                    examples = ", ".join(f"{s} {r} → {a}" for s, r, a in started.moved[:3])
                    bar.console.print(
                        f"{len(started.moved)} grid dates were not trading days of the data and map to "
                        f"the previous trading day (e.g. {examples})"
                    )
                for key, reason in list(started.refused.items())[:10]:
                    bar.console.print(f"  refused {key}: {reason}")
                if no_wait:
                    click.echo(name)
                    return
                running = bar.add_task("analyses", total=started.total)
                while True:
                    p = backtest.progress(name=name, settings=settings)
                    bar.update(
                        running,
                        completed=p.done + p.failed + p.cancelled,
                        description=f"done {p.done} · failed {p.failed} · running {p.running}",
                    )
                    if p.done + p.failed + p.cancelled >= started.total:
                        break
                    if interrupted.wait(timeout=max(settings.service.wait_poll_interval, 1.0)):
                        raise KeyboardInterrupt
            except KeyboardInterrupt:
                cancelled = True
                ids = backtest.cancel(name=name, settings=settings)
                p = backtest.progress(name=name, settings=settings)
                bar.console.print(
                    f"cancelled {len(ids)} analyses not started; {p.running} already running "
                    f"{'finish on the workers' if settings.service.mode == 'service' else 'are waited for'}; "
                    f"re-run with --name {name} to resume"
                )
                if settings.service.mode == "embedded":  # the in-process worker dies with this process
                    try:
                        while backtest.progress(name=name, settings=settings).running:
                            time.sleep(1.0)
                    except KeyboardInterrupt:
                        bar.console.print("left running analyses to `finagent recover`")
    except backtest.BacktestError as exc:
        _err(f"error: {exc}")
        sys.exit(EXIT_INVALID)
    except _infrastructure_errors() as exc:
        _err(f"error: {type(exc).__name__}: {exc}")
        sys.exit(EXIT_INFRA)
    p = backtest.progress(name=name, settings=settings)
    _err(
        f"backtest {name}: {p.done} done, {p.failed} failed, {p.cancelled} cancelled, {p.refused} refused; "
        f"`finagent scorecard --backtest {name}` scores it"
    )
    sys.exit(EXIT_FAILED if cancelled else EXIT_OK)


@contextmanager
def _ctrl_c() -> Iterator[threading.Event]:
    """Ctrl-C (SIGINT) as a flag for the duration of the block: the first one sets the event,
    which the caller checks at safe points (between two enqueued batches, in its wait), so the
    interrupt never lands inside a database query, a broker publish or a lock the progress bar
    holds (where a ``KeyboardInterrupt`` could leave a connection or a lock behind and the
    command hang instead of exiting); a second Ctrl-C raises ``KeyboardInterrupt`` at once, for
    a user who does not want to wait. The previous handler comes back at the end. Off the main
    thread (signals cannot be handled there) the event is never set."""
    interrupted = threading.Event()

    def on_sigint(signum: int, frame: Any) -> None:
        if interrupted.is_set():
            raise KeyboardInterrupt
        interrupted.set()

    if threading.current_thread() is not threading.main_thread():
        yield interrupted
        return
    previous = signal.signal(signal.SIGINT, on_sigint)
    try:
        yield interrupted
    finally:
        signal.signal(signal.SIGINT, previous)


@main.command("scorecard")
@click.option("--backtest", "backtest_name", default=None, help="Only this backtest's recommendations.")
@click.option(
    "--since", default=None, metavar="YYYY-MM-DD", help="Only recommendations as of this date or later."
)
@click.option("--tenant", default=None, help="Only this tenant's recommendations (default: every tenant's).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object on stdout.")
@click.option(
    "--plots",
    "plots_dir",
    default=None,
    metavar="DIR",
    help="Where to write the PNGs (default: STATE_DIR/scorecards/<backtest or all>).",
)
@click.option(
    "--entry",
    type=click.Choice(["open", "close"]),
    default="open",
    show_default=True,
    help="Enter at the next session's open after as_of, or at the as_of close (the price the "
    "signal was computed from).",
)
@click.option(
    "--rescore",
    is_flag=True,
    help="Recompute the stored scores computed with another entry rule or benchmark (else they "
    "are left out and counted as stale).",
)
def scorecard_command(
    backtest_name: str | None,
    since: str | None,
    tenant: str | None,
    as_json: bool,
    plots_dir: str | None,
    entry: str,
    rescore: bool,
) -> None:
    """Score every stored recommendation whose horizon (5, 20, 60 trading days) has passed and
    print the scorecard beside the baselines (buy-and-hold, SMA(50/200), MACD(12,26,9),
    RSI(14) 30/70): directional hit with its 95 % interval, HOLD against always-HOLD, mean
    signed excess and per-date IC with Newey–West intervals, Brier and ECE with a reliability
    table, paired comparisons with the baselines, and two PNGs (docs/evaluation.md)."""
    from pathlib import Path

    from pipeline import scorecard  # lazy: pandas, SQLAlchemy, scipy (module docstring)

    settings = _settings()
    configure_logging(level=settings.service.log_level)
    since_date = _parse_date(since)
    folder = (
        Path(plots_dir) if plots_dir else settings.service.state_dir / "scorecards" / (backtest_name or "all")
    )
    try:
        if backtest_name is not None:
            from pipeline import backtest

            backtest.get_backtest(name=backtest_name, settings=settings)
        card = scorecard.build_scorecard(
            settings=settings,
            backtest_name=backtest_name,
            since=since_date,
            plots_dir=folder,
            tenant=tenant,
            entry=entry,
            rescore=rescore,
        )
    except ValueError as exc:  # BacktestError: an unknown backtest
        _err(f"error: {exc}")
        sys.exit(EXIT_INVALID)
    except _infrastructure_errors() as exc:
        _err(f"error: {type(exc).__name__}: {exc}")
        sys.exit(EXIT_INFRA)
    click.echo(json.dumps(card, default=str) if as_json else scorecard.markdown(card))


@main.command("calibrate")
@click.option(
    "--backtest", "backtest_name", default=None, help="Build the artifact from this backtest's scored rows."
)
@click.option(
    "--until",
    default="2015-12-31",
    show_default=True,
    metavar="YYYY-MM-DD",
    help="Latest outcome date a fitted row may have (never after 2015-12-31: later prices are held out).",
)
@click.option(
    "--benchmark", default="SPY", show_default=True, help="Keep the rows scored against this benchmark."
)
@click.option(
    "--evaluate",
    "do_evaluate",
    is_flag=True,
    help="Print the walk-forward out-of-sample Brier, ECE and reliability tables of the artifact.",
)
@click.option("--from", "eval_from", default="2013-07-01", show_default=True, metavar="YYYY-MM-DD")
@click.option("--to", "eval_to", default="2015-12-31", show_default=True, metavar="YYYY-MM-DD")
@click.option("--json", "as_json", is_flag=True, help="Print the evaluation as one JSON object.")
@click.option(
    "--restamp",
    is_flag=True,
    help="Rewrite the artifact's own rows under the current method (a new version), e.g. after the "
    "evidence gate or the bins changed; no database needed.",
)
@click.option(
    "--artifact",
    "artifact_path",
    default=None,
    metavar="FILE",
    help="Artifact to write or evaluate (default: the one shipped in agents/quant/calibration).",
)
def calibrate_command(
    backtest_name: str | None,
    until: str,
    benchmark: str,
    do_evaluate: bool,
    eval_from: str,
    eval_to: str,
    as_json: bool,
    restamp: bool,
    artifact_path: str | None,
) -> None:
    """Rebuild the calibration artifact from a backtest (``--backtest NAME``) or restamp its rows
    under the current method (``--restamp``), and/or evaluate it walk-forward (``--evaluate``):
    p(outperform the benchmark) at 5, 20 and 60 sessions, fitted by histogram binning with an
    m-estimate toward 0.5 and an evidence gate (``agents.quant.calibration``).

    Exit codes: 0 done; 2 invalid request (unknown backtest, a date after the fit limit, nothing
    to fit); 3 database unreachable or not migrated."""
    from pathlib import Path

    from agents.quant import calibration as cal
    from pipeline import calibration, service  # lazy: pandas, SQLAlchemy (module docstring)

    if backtest_name is None and not do_evaluate and not restamp:
        _err(
            "error: give --backtest NAME to rebuild the artifact (or --restamp to rewrite its rows "
            "under the current method), --evaluate to evaluate it, or both"
        )
        sys.exit(EXIT_INVALID)
    if backtest_name is not None and restamp:
        _err("error: --backtest rebuilds the rows, --restamp keeps them: give one of the two")
        sys.exit(EXIT_INVALID)
    path = Path(artifact_path) if artifact_path else cal.ARTIFACT
    until_date = _date(until)
    if until_date > cal.FIT_UNTIL:
        _err(
            f"error: --until {until_date} is after {cal.FIT_UNTIL}: "
            "later prices are held out, fit nothing on them"
        )
        sys.exit(EXIT_INVALID)
    try:
        if backtest_name is not None:
            settings = _settings()
            configure_logging(level="WARNING")
            service.prepare_database(settings=settings)
            built = calibration.build_from_backtest(
                name=backtest_name, until=until_date, benchmark=benchmark, settings=settings, on_progress=_err
            )
            calibration.write_artifact(built.model, path)
            _err(
                f"wrote {path}: {built.model.version}, {built.kept} rows of {built.scored_rows} "
                f"({built.after_until} end after {until_date}, {built.other_benchmark} against another "
                f"benchmark); keys: {', '.join(built.model.labels())}"
            )
        if restamp:
            old = json.loads(path.read_text(encoding="utf-8"))
            restamped = cal.from_json(old, check_version=False)
            calibration.write_artifact(restamped, path)
            _err(
                f"wrote {path}: {old.get('version')} -> {restamped.version}, {len(restamped.rows)} rows kept"
            )
        if do_evaluate:
            model = cal.from_json(json.loads(path.read_text(encoding="utf-8")))
            start, end = _date(eval_from), _date(eval_to)
            _err(f"evaluating {model.version} walk-forward over {start}..{end} ...")
            result = calibration.evaluate(model, start=start, end=end)
            click.echo(json.dumps(result, default=str) if as_json else calibration.markdown(result))
    except (calibration.CalibrateError, cal.CalibrationError) as exc:
        _err(f"error: {exc}")
        sys.exit(EXIT_INVALID)
    except FileNotFoundError as exc:
        _err(f"error: no artifact at {exc.filename}: build one with --backtest NAME")
        sys.exit(EXIT_INVALID)
    except _infrastructure_errors() as exc:
        _err(f"error: {type(exc).__name__}: {exc}")
        sys.exit(EXIT_INFRA)


@main.command("replay")
@click.argument("analysis_id")
@click.option("--show", "show_json", is_flag=True, help="Also print the replayed report JSON (canonical).")
def replay_command(analysis_id: str, show_json: bool) -> None:
    """Re-run the finished analysis ANALYSIS_ID from its recorded tool outputs and LLM answers
    (no data provider, no model, no broker) and compare the report with the stored one.

    Exit codes: 0 byte-identical (prints the sha256 of the canonical report JSON); 1 it differs
    (a unified diff on stdout); 2 unknown or unfinished analysis, or a call the recording lacks;
    3 the database is unreachable or not migrated."""
    from sqlalchemy.exc import OperationalError, ProgrammingError

    from pipeline import service  # lazy: pandas, SQLAlchemy (module docstring)
    from pipeline.replay import ReplayError, replay_analysis

    settings = _settings()
    configure_logging(level="WARNING")
    try:
        service.prepare_database(settings=settings)
        result = replay_analysis(analysis_id=analysis_id, settings=settings)
    except KeyError as exc:
        _err(f"error: {exc.args[0]}")
        sys.exit(EXIT_INVALID)
    except ReplayError as exc:
        _err(f"error: {exc}")
        sys.exit(EXIT_INVALID)
    except (service.SchemaMissingError, OperationalError, ProgrammingError) as exc:
        _err(f"error: {type(exc).__name__}: {exc}")
        sys.exit(EXIT_INFRA)
    for note in result.notes:
        _err(f"note: {note}")
    if show_json:
        _out(result.replayed_json, nl=False)
    if result.identical:
        _err(f"replay of {analysis_id}: byte-identical report JSON and Markdown")
        click.echo(f"identical sha256={result.sha256}")
        sys.exit(EXIT_OK)
    _out(result.diff, nl=False)
    _err(f"replay of {analysis_id}: the report differs from the recorded one (diff above)")
    sys.exit(EXIT_FAILED)


if __name__ == "__main__":
    main()


@main.group("eval")
def eval_group() -> None:
    """Published benchmarks run on the offline data (docs/benchmarks.md)."""


@eval_group.command("acl18")
@click.option("--split", type=click.Choice(["dev", "test"]), default="dev", show_default=True)
@click.option(
    "--prices",
    "prices_dir",
    default=None,
    metavar="DIR",
    help="The stocknet price CSVs (default: FINAGENT_DATA_DIR).",
)
@click.option(
    "--tweets",
    "tweets_dir",
    default=None,
    metavar="DIR",
    help="The stocknet tweet files (default: FINAGENT_SOCIAL_DIR).",
)
@click.option(
    "--train",
    "do_train",
    is_flag=True,
    help="Rebuild the learned analyst's artefact (agents/analysts/learned_model.json) from train "
    "(fit) and dev (choice) instead of evaluating; reads no test sample.",
)
@click.option(
    "--llm-sample",
    "llm_n",
    type=click.IntRange(0, 500),
    default=0,
    show_default=True,
    help="Also run the full pipeline in LLM mode (FINAGENT_LLM_MODEL; the csv provider on --prices) on "
    "this many fixed samples of the split: a structure check, not a measurement.",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object on stdout.")
def eval_acl18_command(
    split: str, prices_dir: str | None, tweets_dir: str | None, do_train: bool, llm_n: int, as_json: bool
) -> None:
    """The ACL18 stock-movement benchmark (Xu & Cohen 2018) built from the stocknet files: sample
    counts of every split beside the paper's, and accuracy and MCC (95 % bootstrap intervals) on
    ``--split`` of the composite scorer, the social analyst, the learned analyst and their blend,
    beside the published results (``pipeline.acl18``). Run the test split once per change of an
    analyst, never to tune it. ``--train`` rebuilds the learned analyst's artefact (same bytes on
    every run).

    Exit codes: 0 done; 2 a folder is missing or the artefact is broken."""
    from pathlib import Path

    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from agents.analysts.learned import MODEL_PATH, LearnedModelError
    from pipeline import acl18

    settings = _settings()
    prices = Path(prices_dir) if prices_dir else settings.data.data_dir
    tweets = Path(tweets_dir) if tweets_dir else settings.data.social_dir
    for name, folder in (
        ("--prices / FINAGENT_DATA_DIR", prices),
        ("--tweets / FINAGENT_SOCIAL_DIR", tweets),
    ):
        if folder is None or not Path(folder).expanduser().is_dir():
            _err(
                f"{name}: not a folder ({folder}); e.g. ../shared/data/ohlcv/stocknet and "
                "../shared/data/news/stocknet_tweets"
            )
            sys.exit(2)
    assert prices is not None
    assert tweets is not None
    if llm_n and not do_train:
        data_dir = settings.data.data_dir
        if not settings.llm.llm_model:
            _err("--llm-sample: set FINAGENT_LLM_MODEL (and its API base/key) for the LLM mode")
            sys.exit(2)
        if (
            settings.data.data_provider != "csv"
            or data_dir is None
            or (Path(data_dir).expanduser().resolve() != Path(prices).expanduser().resolve())
        ):
            _err(
                "--llm-sample: the pipeline must read the same prices: FINAGENT_DATA_PROVIDER=csv and "
                "FINAGENT_DATA_DIR=<--prices>"
            )
            sys.exit(2)
    console = Console(stderr=True, soft_wrap=True)
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console, disable=as_json) as bar:
        tasks: dict[str, Any] = {}

        def progress(split_name: str, done: int, total: int) -> None:
            if split_name not in tasks:
                tasks[split_name] = bar.add_task(f"acl18 {split_name}: symbols", total=total)
            bar.update(tasks[split_name], completed=done)

        try:
            if do_train:
                artefact = acl18.train(
                    prices_dir=Path(prices).expanduser(),
                    tweets_dir=Path(tweets).expanduser(),
                    progress=progress,
                )
                text = acl18.write_artefact(artefact)
            else:
                result = acl18.report(
                    prices_dir=Path(prices).expanduser(),
                    tweets_dir=Path(tweets).expanduser(),
                    split=split,
                    progress=progress,
                    llm_n=llm_n,
                )
        except LearnedModelError as exc:
            _err(f"learned analyst: {exc}; rebuild it with `finagent eval acl18 --train`")
            sys.exit(2)
    if do_train:
        import hashlib

        if as_json:
            _out(text.rstrip("\n"))
            return
        chosen = artefact["chosen_on"]
        digest = hashlib.sha256(text.encode()).hexdigest()
        _out(f"wrote {MODEL_PATH} ({artefact['version']}, sha256 {digest})")
        _out(f"trained on {artefact['trained_on']['samples']:,} train samples; chosen on dev by MCC:")
        _out("| features | C | dev accuracy | dev MCC |\n|---|---|---|---|")
        for c in chosen["candidates"]:
            mark = " (chosen)" if c["features"] == chosen["feature_set"] and c["C"] == chosen["C"] else ""
            acc = 100 * c["dev_accuracy"]
            _out(f"| {c['features']}{mark} | {c['C']:g} | {acc:.2f} | {c['dev_mcc']:.4f} |")
        b = artefact["blend_on_dev"]
        _out(
            f"blend chosen on dev: social {b['w_social']:g}, learned {b['w_learned']:g} "
            f"(dev MCC {b['dev_mcc']})"
        )
        return
    if as_json:
        _out(json.dumps(result, default=str))
    else:
        _out(acl18.markdown(result))


@eval_group.command("risk")
@click.option("--from", "start", required=True, metavar="YYYY-MM-DD", help="First forecast date (as_of).")
@click.option(
    "--to", "end", required=True, metavar="YYYY-MM-DD", help="Last forecast date; no price after it is read."
)
@click.option(
    "--symbols",
    default=None,
    metavar="SYM,SYM",
    help="Comma-separated tickers (default: every CSV in --prices).",
)
@click.option(
    "--prices",
    "prices_dir",
    default=None,
    metavar="DIR",
    help="A folder of Yahoo-format daily CSVs, e.g. ../shared/data/ohlcv/stocknet "
    "(default: FINAGENT_DATA_DIR).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the tables as one JSON object on stdout.")
@click.option(
    "--forecasts",
    "forecasts_file",
    default=None,
    metavar="FILE",
    help="Also write every forecast as CSV: symbol, as_of, horizon, sigma, q01..q99.",
)
@click.option(
    "--processes",
    type=click.IntRange(1, 64),
    default=2,
    show_default=True,
    help="Worker processes (one symbol at a time each).",
)
def eval_risk_command(
    start: str,
    end: str,
    symbols: str | None,
    prices_dir: str | None,
    as_json: bool,
    forecasts_file: str | None,
    processes: int,
) -> None:
    """Walk-forward backtest of the risk forecasts (``pipeline.risk_eval``): for every symbol and
    every session from --from to --to, forecast with the data up to that session only, then score
    each forecast whose 1, 5, 20 or 60-session window ends by --to. Prints VaR exceptions (Kupiec,
    Christoffersen), range coverage, the PIT histogram, QLIKE/MSE against HV20 and EWMA with
    Diebold-Mariano t, Basel zones, coverage with and without earnings in the window and the
    calibration of P(below)/P(touch), every interval clustered by date (docs/evaluation.md, "Risk").

    Exit codes: 0 done; 2 a bad folder, symbol or period."""
    from pathlib import Path

    from agents.data.market.bars import today_utc
    from agents.quant.risk.engine import RiskSpec
    from pipeline import risk_eval

    first, last = _date(start), _date(end)
    if last < first:
        _err(f"--to {last} is before --from {first}")
        sys.exit(EXIT_INVALID)
    if last > today_utc():
        _err(f"--to {last} is in the future (today is {today_utc()} UTC): nothing can be scored there")
        sys.exit(EXIT_INVALID)
    folder = Path(prices_dir).expanduser() if prices_dir else _settings().data.data_dir
    if folder is None or not Path(folder).is_dir():
        _err(f"--prices: not a folder ({folder}); e.g. ../shared/data/ohlcv/stocknet")
        sys.exit(EXIT_INVALID)
    folder = Path(folder)
    available = {p.stem.upper(): p.stem for p in folder.glob("*.csv")}
    if symbols:
        wanted = [s.strip().upper() for s in symbols.split(",") if s.strip()]
        unknown = [s for s in wanted if s.replace(".", "-") not in available and s not in available]
        if unknown:
            _err(f"--symbols: no price file for {', '.join(unknown)} in {folder} ({len(available)} files)")
            sys.exit(EXIT_INVALID)
        names = [available.get(s, available.get(s.replace(".", "-"), s)) for s in wanted]
    else:
        names = sorted(available.values())
    if not names:
        _err(f"--prices: no CSV files in {folder}")
        sys.exit(EXIT_INVALID)
    if risk_eval._overlaps_reserved(first, last):
        banner = "!" * 78
        _err(
            f"{banner}\nNOTICE: {first}..{last} overlaps the RESERVED HOLD-OUT "
            f"({risk_eval.RESERVED_START}..{risk_eval.RESERVED_END}). Nothing may be fitted, chosen or "
            f"tuned on\nthese numbers: run it once per frozen model and report the result as it comes."
            f"\n{banner}"
        )
    spec = RiskSpec()
    started = time.perf_counter()

    def progress(result: risk_eval.SymbolResult, done: int, total: int) -> None:
        if result.rows is None:
            what = f"skipped: {result.note}"
        else:
            origins = int(result.rows["as_of"].nunique())
            what = f"{origins} sessions, earnings calendar {'yes' if result.coverage == 'calendar' else 'no'}"
        _err(f"[{done}/{total}] {result.symbol}: {what} ({time.perf_counter() - started:.0f} s)")

    results = risk_eval.run_symbols(
        folder, names, start=first, end=last, spec=spec, processes=processes, progress=progress
    )
    if forecasts_file:
        count = risk_eval.write_forecasts(results, Path(forecasts_file))
        _err(f"wrote {count:,} forecasts to {forecasts_file}")
    summary = risk_eval.summarise(results, start=first, end=last, spec=spec)
    summary["wall_seconds"] = round(time.perf_counter() - started, 1)
    _err(f"eval risk: {len(names)} symbols in {summary['wall_seconds']} s on {processes} process(es)")
    if as_json:
        _out_json(summary)
    else:
        _out(risk_eval.markdown(summary), nl=False)
