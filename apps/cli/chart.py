"""``finagent chart``: draw a stored analysis's chart (matplotlib, every tool) and print the
PNG's path."""

from __future__ import annotations

import sys

import click

from apps.analysis_chart import render_analysis_chart
from apps.cli.common import EXIT_FAILED, EXIT_INVALID, fail, load_settings, out_json
from core.logs import configure_logging


@click.command("chart")
@click.argument("analysis_id")
def chart_command(analysis_id: str) -> None:
    """Render the chart of analysis ANALYSIS_ID (PNG with support/resistance, Fibonacci levels
    and trendlines from its cited bars) and print the file path."""
    settings = load_settings()
    configure_logging(level=settings.service.log_level)
    try:
        envelope = render_analysis_chart(analysis_id=analysis_id, settings=settings)
    except KeyError as exc:
        fail(str(exc.args[0]), EXIT_INVALID)
    if envelope.error is not None or not envelope.data:
        out_json(envelope.to_public())
        sys.exit(EXIT_FAILED)
    click.echo(envelope.data["path"])
