"""``finagent``: the command-line producer and operator tool.

Exit codes: 0 the analysis is done; 1 it failed (report printed); 2 invalid input (nothing
enqueued); 3 infrastructure trouble (broker or database unreachable, wait timed out).
Stdout carries the result only (the report, or one JSON object with ``--json``); progress and
the JSON log lines go to stderr.
"""

from __future__ import annotations

import json
import sys
from contextlib import AbstractContextManager, nullcontext
from datetime import date, datetime
from typing import Any

import click

EXIT_OK, EXIT_FAILED, EXIT_INVALID, EXIT_INFRA = 0, 1, 2, 3


def _parse_date(value: str | None) -> date | None:
    if value is None:
        return None
    try:
        return date.fromisoformat(value)
    except ValueError:
        raise click.BadParameter(f"{value!r} is not a date (use YYYY-MM-DD)") from None


def _err(message: str) -> None:
    click.echo(message, err=True)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def main() -> None:
    """finagent: multi-agent stock analysis on a Celery pipeline."""


@main.command()
@click.argument("symbol")
@click.option("--as-of", "as_of", metavar="YYYY-MM-DD", help="Analysis date (default: latest in the data).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object on stdout.")
@click.option("--no-wait", is_flag=True, help="Enqueue and print the analysis id (service mode).")
@click.option("--max-iterations", type=click.IntRange(1, 10), help="Seed-001 pass cap (default 3).")
@click.option("--timeout", type=float, help="Seconds to wait for the report.")
@click.option("--log-level", default=None, help="Level of the JSON log lines on stderr (default INFO).")
def analyze(
    symbol: str,
    as_of: str | None,
    as_json: bool,
    no_wait: bool,
    max_iterations: int | None,
    timeout: float | None,
    log_level: str | None,
) -> None:
    """Analyze SYMBOL (e.g. AAPL) and print the report."""
    from pipeline.logs import configure_logging
    from pipeline.settings import get_settings

    settings = get_settings()
    configure_logging(level=log_level or settings.log_level)
    as_of_date = _parse_date(as_of)
    from pipeline import service

    if no_wait and settings.mode == "embedded":
        raise click.UsageError(
            "--no-wait needs a broker (FINAGENT_BROKER_URL); embedded mode runs in-process"
        )
    scope: AbstractContextManager[Any] = nullcontext()
    if settings.mode == "embedded":
        from pipeline.celery_app import app
        from pipeline.embedded import embedded_worker

        scope = embedded_worker(app, graceful=False)
    try:
        with scope:
            submitted = service.start_analysis(
                symbol=symbol, as_of=as_of_date, max_iterations=max_iterations, settings=settings
            )
            if no_wait:
                click.echo(submitted.analysis_id)
                return
            if not as_json:
                _err(
                    f"analysis {submitted.analysis_id}: {submitted.symbol} as of {submitted.as_of} "
                    f"({settings.mode} mode)"
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
    except (service.SchemaMissingError, OSError, ConnectionError) as exc:
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
        click.echo(json.dumps(payload, default=str))
    else:
        click.echo(row.get("report") or f"analysis {row['id']}: {row['status']} {row.get('error') or ''}")
    sys.exit(EXIT_OK if row["status"] == "done" else EXIT_FAILED if row["status"] == "failed" else EXIT_INFRA)


@main.command()
@click.argument("analysis_id")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object on stdout.")
def show(analysis_id: str, as_json: bool) -> None:
    """Print the report of ANALYSIS_ID (or its status while it runs)."""
    from pipeline import service

    row = service.get_analysis(analysis_id=analysis_id)
    if row is None:
        _err(f"error: no analysis {analysis_id}")
        sys.exit(EXIT_INVALID)
    if row["status"] not in service.TERMINAL:
        _err(f"analysis {analysis_id}: {row['status']} (pass {row['iteration'] + 1})")
        if as_json:
            click.echo(
                json.dumps({"analysis_id": row["id"], "status": row["status"], "iteration": row["iteration"]})
            )
        sys.exit(EXIT_OK)
    _print_result(row, as_json=as_json)


@main.command(context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
@click.option("--concurrency", "-c", type=int, default=None, help="Worker processes (default: cores).")
@click.option("--queues", "-Q", default=None, help="Comma-separated queues (default: all stage queues).")
@click.option("--loglevel", "-l", default="INFO")
@click.pass_context
def worker(ctx: click.Context, concurrency: int | None, queues: str | None, loglevel: str) -> None:
    """Run a Celery worker (service mode). Extra options go to `celery worker`."""
    from pipeline.celery_app import QueueName, app
    from pipeline.logs import configure_logging
    from pipeline.settings import get_settings

    settings = get_settings()
    if settings.mode == "embedded":
        raise click.UsageError("set FINAGENT_BROKER_URL (e.g. redis://127.0.0.1:6379/0) to run a worker")
    configure_logging(level=loglevel)
    argv = ["worker", "-E", f"--loglevel={loglevel}", "-Q", queues or ",".join(q.value for q in QueueName)]
    if concurrency:
        argv.append(f"--concurrency={concurrency}")
    app.worker_main(argv=[*argv, *ctx.args])


@main.group()
def db() -> None:
    """Database commands."""


@db.command("upgrade")
@click.option("--revision", default="head", show_default=True)
def db_upgrade(revision: str) -> None:
    """Apply migrations (same as `alembic upgrade head`)."""
    from db.migrate import upgrade
    from pipeline.settings import get_settings

    url = get_settings().effective_database_url
    upgrade(url=url, revision=revision)
    stamp = datetime.now().isoformat(timespec="seconds")
    _err(f"database at {_redact_url(url)} upgraded to {revision} ({stamp})")


def _redact_url(url: str) -> str:
    from sqlalchemy.engine import make_url

    return make_url(url).render_as_string(hide_password=True)


if __name__ == "__main__":
    main()
