"""``finagent doctor``: what data, option chains, LLM deployments, broker and database this
installation uses, what each can reach, and the span of its data (``apps.doctor``)."""

from __future__ import annotations

import sys

import click

from apps.cli.common import EXIT_INFRA, EXIT_OK, load_settings, out, out_json
from apps.doctor import DEFAULT_TIMEOUT_S, Check, Diagnosis, diagnose

#: How each status reads in the table.
_MARK = {
    "ok": "ok",
    "unreachable": "FAIL",
    "misconfigured": "FAIL",
    "not configured": "-",
    "not checked": "?",
}
_AREAS = (("data", "Data"), ("llm", "LLM"), ("services", "Services"))


def render(diagnosis: Diagnosis) -> str:
    """The diagnosis as text: one line per check under its area, the data span, the notes and a
    verdict line."""
    lines = [f"finagent doctor: {diagnosis.mode} mode"]
    for area, title in _AREAS:
        checks = [c for c in diagnosis.checks if c.area == area]
        if not checks:
            continue
        lines += ["", title]
        width = max(len(c.name) for c in checks)
        for check in checks:
            lines.append(_line(check, width))
    span = diagnosis.data
    if span is not None:
        lines += ["", f"Data: {span.source}: {span.note}"]
        if span.tickers:
            more = (
                f" and {span.ticker_count - len(span.tickers)} more"
                if span.ticker_count > len(span.tickers)
                else ""
            )
            lines.append(f"  tickers: {' '.join(span.tickers)}{more}")
    for note in diagnosis.notes:
        lines += ["", note]
    failing = diagnosis.failing
    lines += [
        "",
        "everything configured is reachable"
        if not failing
        else f"{len(failing)} configured and failing: {', '.join(c.name for c in failing)}",
    ]
    return "\n".join(lines)


def _line(check: Check, width: int) -> str:
    where = f" [{check.target}]" if check.target else ""
    took = f" ({check.seconds * 1000:.0f} ms)" if check.seconds is not None else ""
    return f"  {_MARK[check.status]:<4} {check.name:<{width}}  {check.source:<10} {check.detail}{where}{took}"


@click.command("doctor")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object on stdout.")
@click.option(
    "--timeout",
    type=click.FloatRange(0.1, 60),
    default=DEFAULT_TIMEOUT_S,
    show_default=True,
    help="Seconds each reachability check may take.",
)
def doctor_command(as_json: bool, timeout: float) -> None:
    """Say which data sources (bars, fundamentals, news, option chains), LLM deployments, broker
    and database are configured, what each can reach (a database connection, a Redis ping, an
    HTTP request with a short timeout; never a secret printed), and the tickers and date span of
    the configured data.

    Exit codes: 0 everything configured is reachable (optional things not set are fine), 3
    something configured is unreachable or unusable as given."""
    diagnosis = diagnose(settings=load_settings(), timeout=timeout)
    if as_json:
        out_json(diagnosis.as_dict())
    else:
        out(render(diagnosis))
    sys.exit(EXIT_OK if diagnosis.ok else EXIT_INFRA)
