"""``finagent tool``: run one registered tool outside an analysis and print its envelope, or list
the tools. A call imports that tool's module alone (``agents.tools.catalog.load_tool``)."""

from __future__ import annotations

import json
import sys

import click

from apps import direct_tools
from apps.cli.common import (
    EXIT_FAILED,
    EXIT_INVALID,
    EXIT_OK,
    err,
    fail,
    load_settings,
    out_json,
    parse_date,
)
from core.logs import configure_logging


def _print_catalog() -> None:
    """Every tool, one line each: its name and what it does (the summary of
    :func:`apps.direct_tools.list_tools`), wrapped to the terminal like ``--help``."""
    formatter = click.HelpFormatter()
    formatter.write_dl([(t["name"], t["summary"]) for t in direct_tools.list_tools()])
    click.echo(formatter.getvalue().rstrip("\n"))
    err("`finagent tool --list --json`: every tool's description and JSON input schema")


@click.command("tool")
@click.argument("name", required=False)
@click.argument("arguments", required=False, default="{}")
@click.option(
    "--as-of",
    "as_of",
    metavar="YYYY-MM-DD",
    help="Point in time (default: the market clock: the data's last day, or the last session online).",
)
@click.option("--list", "list_tools", is_flag=True, help="List the tools: name and what each does.")
@click.option(
    "--json", "as_json", is_flag=True, help="With --list: a JSON array with each tool's input schema."
)
def tool_command(
    name: str | None, arguments: str, as_of: str | None, list_tools: bool, as_json: bool
) -> None:
    """Run one tool: finagent tool NAME 'JSON-ARGS' [--as-of DATE]; prints its envelope (JSON).

    Exit codes: 0 success, 1 the tool answered with an error envelope, 2 bad usage (unknown
    tool, arguments that are not a JSON object)."""
    if list_tools:
        if as_json:
            click.echo(json.dumps(direct_tools.list_tools(), indent=2))
        else:
            _print_catalog()
        return
    if as_json:
        raise click.UsageError("--json goes with --list (a tool's envelope is JSON already)")
    if not name:
        raise click.UsageError("give a tool NAME (see `finagent tool --list`)")
    try:
        parsed = json.loads(arguments)
    except json.JSONDecodeError as exc:
        fail(f"ARGS is not valid JSON: {exc}", EXIT_INVALID)
    if not isinstance(parsed, dict):
        fail('ARGS must be a JSON object, e.g. \'{"symbol": "AAPL"}\'', EXIT_INVALID)
    settings = load_settings()
    configure_logging(level=settings.service.log_level)
    when = parse_date(as_of)
    if when is None:  # the market clock: a date the configured data can serve, said on stderr
        clock = direct_tools.default_clock(arguments=parsed, settings=settings, name=name)
        when = clock.day
        err(f"as of {when.isoformat()}: {clock.describe()}")
    try:
        envelope = direct_tools.run_direct(name=name, arguments=parsed, as_of=when, settings=settings)
    except KeyError as exc:
        fail(str(exc.args[0]), EXIT_INVALID)
    out_json(envelope.to_public())
    sys.exit(EXIT_OK if envelope.ok else EXIT_FAILED)
