"""``finagent analyze``: create an analysis, run it (in-process in embedded mode) and print its
report. The one command that loads the analysis machinery: the providers (pandas), the query
parser, the service and, in embedded mode, the in-process worker with the stages."""

from __future__ import annotations

import json
from typing import Any

import click

from agents.data.routing import get_provider
from apps.cli.common import (
    EXIT_INFRA,
    EXIT_INVALID,
    embedded_scope,
    err,
    fail,
    infrastructure_errors,
    load_settings,
    parse_date,
    print_result,
)
from core.logs import configure_logging
from core.plans import DEFAULT_ANALYSIS_TYPE, PLANS, AnalysisType, cli_choices
from core.tickers import JunkInputError, refuse_junk
from pipeline import service
from pipeline.query import UnresolvedQueryError, parse_query


@click.command()
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
    help="covered_call: cost basis of 100 shares held, USD/share (default: the paper portfolio's position); "
    "the same as --plan-option cost_basis=USD.",
)
@click.option(
    "--plan-option",
    "plan_option",
    metavar="KEY=VALUE",
    multiple=True,
    help="An option of the --type's plan, validated by the plan (repeatable), e.g. account_value=250000, "
    "delta_max=0.3, shares=700 (covered_call), width=10 (put_spread); docs/options.md lists them.",
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
    plan_option: tuple[str, ...],
) -> None:
    """Analyze SYMBOL (e.g. AAPL) and print the report.

    SYMBOL may also be a question in free text ("should I buy Apple after its split?"): it is
    resolved to a ticker by parse_query (the LLM when one is configured, else known tickers and
    company names); an unresolvable question exits 2 and enqueues nothing.

    A ticker with junk exits 2 before anything starts, naming the characters: one word with
    anything but letters, digits and . - ^ = ("AAPL;DROP", "$AAPL"), or words with any of
    ; \\ < > | ` { } ("AAPL;DROP TABLE")."""
    try:  # the shared rule (core.tickers.junk_characters), before a worker starts
        refuse_junk(symbol)
    except JunkInputError as exc:
        fail(str(exc), EXIT_INVALID)
    settings = load_settings()
    configure_logging(level=log_level or settings.service.log_level)
    as_of_date = parse_date(as_of)
    options = plan_options(plan_option, cost_basis)
    if no_wait and settings.service.mode == "embedded":
        raise click.UsageError(
            "--no-wait needs a broker (FINAGENT_SERVICE_BROKER_URL); embedded mode runs in-process"
        )
    try:
        with embedded_scope(settings, graceful=False):
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
                err(f"query resolved to {parsed.ticker} ({parsed.analysis_type}, by {parsed.method}){notes}")
            request = service.AnalysisRequest(
                symbol=parsed.ticker,
                as_of=as_of_date,
                user_query=None if parsed.method == "ticker" else symbol,
                max_iterations=max_iterations,
                llm_model=llm_model,
                llm_rows=parsed.llm_rows,
                analysis_type=analysis_type or (None if parsed.method == "ticker" else parsed.analysis_type),
                plan_options=options,
                query_note="; ".join(parsed.notes) or None,
            )
            submitted = service.start_analysis(request=request, settings=settings)
            if no_wait:
                click.echo(submitted.analysis_id)
                return
            if not as_json:
                err(
                    f"analysis {submitted.analysis_id}: {submitted.symbol} as of {submitted.as_of} "
                    f"({settings.service.mode} mode)"
                )

            def progress(status: str, iteration: int) -> None:
                err(f"  pass {iteration + 1}: {status}")

            row = service.wait_for(
                analysis_id=submitted.analysis_id,
                timeout=timeout,
                on_progress=None if as_json else progress,
                settings=settings,
            )
    except service.InvalidRequestError as exc:
        fail(str(exc), EXIT_INVALID)
    except service.WaitTimeoutError as exc:
        fail(f"{exc}; `finagent show ID` prints it when it finishes", EXIT_INFRA)
    except infrastructure_errors() as exc:
        fail(f"{type(exc).__name__}: {exc}", EXIT_INFRA)
    print_result(row, as_json=as_json)


def plan_options(pairs: tuple[str, ...], cost_basis: float | None) -> dict[str, Any] | None:
    """``--plan-option KEY=VALUE`` pairs (and ``--cost-basis``) as the plan options of the
    request: a VALUE that reads as JSON (a number, true/false, a quoted string) is that value,
    else the text. Raises ``click.BadParameter`` for a pair without ``=`` or a key given twice."""
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        key = key.strip()
        if not sep or not key:
            raise click.BadParameter(f"{pair!r}: expected KEY=VALUE", param_hint="--plan-option")
        if key in out:
            raise click.BadParameter(f"{key} given twice", param_hint="--plan-option")
        try:
            out[key] = json.loads(value)
        except ValueError:
            out[key] = value
    if cost_basis is not None:
        if "cost_basis" in out:
            raise click.BadParameter("cost_basis given twice (--cost-basis and --plan-option)")
        out["cost_basis"] = cost_basis
    return out or None
