"""``finagent``: the command-line producer and operator tool.

Exit codes: 0 done; 1 the analysis (or tool call) failed, its report says why; 2 invalid input
(nothing enqueued); 3 infrastructure trouble (broker or database unreachable, wait timed out).
Stdout carries the result only (the report, or one JSON object with ``--json``); progress and
the JSON log lines go to stderr.

One module per family of commands (``apps/cli/*.py``), each importing at its top what its
commands need; :data:`COMMANDS` names them, and :class:`~apps.cli.lazy.LazyGroup` imports a
module only when one of its commands runs. So ``finagent --help`` loads click and this package,
``finagent list`` the settings and SQLAlchemy, and only ``analyze`` pandas, the indicators and
the in-process worker (docs/benchmarks.md, "CLI latency"; a test keeps the heavy libraries out of
``list``, ``show`` and ``doctor``).
"""

from __future__ import annotations

import click

from apps.cli.lazy import LazyCommand, LazyGroup

#: Every top-level command: where it lives and the one line ``finagent --help`` prints.
COMMANDS: dict[str, LazyCommand] = {
    "analyze": LazyCommand("apps.cli.analyze:analyze", "Analyse a ticker or a question; print the report"),
    "show": LazyCommand("apps.cli.analyses:show", "Print an analysis's report, or its progress"),
    "list": LazyCommand("apps.cli.analyses:list_command", "List stored analyses, newest first"),
    "chart": LazyCommand(
        "apps.cli.chart:chart_command", "Draw an analysis's price chart (PNG); print its path"
    ),
    "tool": LazyCommand(
        "apps.cli.tool:tool_command", "Run one tool and print its envelope; --list names them"
    ),
    "doctor": LazyCommand(
        "apps.cli.doctor:doctor_command", "Say what data, LLM, broker and database are set and reachable"
    ),
    "recover": LazyCommand("apps.cli.maintenance:recover", "Re-drive (or fail) analyses whose lease ran out"),
    "purge": LazyCommand(
        "apps.cli.maintenance:purge_command", "Delete finished analyses created before a date"
    ),
    "archive": LazyCommand(
        "apps.cli.maintenance:archive_command", "Compress the record of finished analyses"
    ),
    "db": LazyCommand("apps.cli.maintenance:db", "Database migrations (finagent db upgrade)"),
    "worker": LazyCommand("apps.cli.processes:worker", "Run a Celery worker (service mode)"),
    "serve": LazyCommand("apps.cli.processes:serve", "Serve the HTTP API and the web console"),
    "beat": LazyCommand("apps.cli.processes:beat", "Run celery beat: the watchlists' schedules"),
    "sweeper": LazyCommand("apps.cli.processes:sweeper", "Run the recovery sweeper (service mode)"),
    "flower": LazyCommand("apps.cli.processes:flower", "Run Flower, Celery's monitor, on the broker"),
    "apikey": LazyCommand("apps.cli.keys:apikey", "Create, list, rotate and revoke HTTP API keys"),
    "audit": LazyCommand("apps.cli.keys:audit", "Print the HTTP API's audit log, newest first"),
    "watchlist": LazyCommand("apps.cli.watchlist:watchlist", "Watchlists: tickers analysed on a schedule"),
    "backtest": LazyCommand(
        "apps.cli.evaluation:backtest_command", "Run one analysis per (ticker, date) of a grid"
    ),
    "scorecard": LazyCommand(
        "apps.cli.evaluation:scorecard_command", "Score matured calls against SPY and the baselines"
    ),
    "calibrate": LazyCommand(
        "apps.cli.evaluation:calibrate_command", "Rebuild or evaluate the calibration of p(beat SPY)"
    ),
    "replay": LazyCommand(
        "apps.cli.evaluation:replay_command", "Re-run a finished analysis from its records"
    ),
    "eval": LazyCommand(
        "apps.cli.evaluation:eval_group", "Benchmarks on the offline data: ACL18, the risk backtest"
    ),
}


@click.group(cls=LazyGroup, lazy=COMMANDS, context_settings={"help_option_names": ["-h", "--help"]})
def main() -> None:
    """finagent: multi-agent stock analysis on a Celery pipeline.

    \b
    Offline, on the data that ships with it:   finagent analyze AAPL
    Online, today's data (yfinance):           FINAGENT_DATA_PROVIDER=yfinance finagent analyze NVDA
    What is configured and reachable:          finagent doctor"""
