"""Evaluation commands: ``finagent backtest`` (a grid of analyses), ``scorecard``,
``calibrate``, ``replay``, ``eval acl18`` and ``eval risk`` (the risk forecasts' walk-forward
backtest)."""

from __future__ import annotations

import hashlib
import json
import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from sqlalchemy.exc import OperationalError, ProgrammingError

from agents.analysts.learned import MODEL_PATH, LearnedModelError
from agents.data.market.bars import today_utc
from agents.quant import calibration as cal
from agents.quant.risk.engine import RiskSpec
from apps import acl18, backtest, calibration, risk_eval, risk_eval_report, scorecard
from apps.cli.common import (
    EXIT_FAILED,
    EXIT_INFRA,
    EXIT_INVALID,
    EXIT_OK,
    embedded_scope,
    err,
    fail,
    infrastructure_errors,
    load_settings,
    out,
    out_json,
    parse_date,
    to_date,
)
from apps.replay import ReplayError, replay_analysis
from core.logs import configure_logging
from core.plans import DEFAULT_ANALYSIS_TYPE, backtest_types
from pipeline.database import SchemaMissingError, prepare_database

if TYPE_CHECKING:
    from apps.backtest import BacktestStart
    from core.settings import Settings


def _default_backtest_name(symbols: str, start: str, end: str, every: str, analysis_type: str) -> str:
    """``bt-<10 hex>`` from the grid, so the same command resumes the same backtest."""
    key = "|".join((symbols.upper().replace(" ", ""), start, end, every.lower(), analysis_type))
    return f"bt-{hashlib.sha256(key.encode()).hexdigest()[:10]}"


@click.command("backtest")
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
    settings = load_settings()
    configure_logging(level=log_level)
    if no_wait and settings.service.mode == "embedded":
        raise click.UsageError(
            "--no-wait needs a broker (FINAGENT_SERVICE_BROKER_URL); embedded runs in-process"
        )
    start_date, end_date = to_date(start), to_date(end)
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
            embedded_scope(settings, graceful=False),
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
                _print_start(bar.console, name=name, started=started)
                if no_wait:
                    click.echo(name)
                    return
                _wait_for_grid(
                    bar, name=name, total=started.total, settings=settings, interrupted=interrupted
                )
            except KeyboardInterrupt:
                cancelled = True
                _cancel_grid(bar.console, name=name, settings=settings)
    except backtest.BacktestError as exc:
        fail(str(exc), EXIT_INVALID)
    except infrastructure_errors() as exc:
        fail(f"{type(exc).__name__}: {exc}", EXIT_INFRA)
    p = backtest.progress(name=name, settings=settings)
    err(
        f"backtest {name}: {p.done} done, {p.failed} failed, {p.cancelled} cancelled, {p.refused} refused; "
        f"`finagent scorecard --backtest {name}` scores it"
    )
    sys.exit(EXIT_FAILED if cancelled else EXIT_OK)


def _print_start(console: Console, *, name: str, started: BacktestStart) -> None:
    """What :func:`apps.backtest.start_backtest` did (``started``: its ``BacktestStart``): the
    counts, the grid dates moved to a trading day (three examples) and the first ten refusals."""
    console.print(
        f"backtest {name}: {started.total} analyses on the grid; enqueued {started.enqueued}, "
        f"done before {started.done_before}, running {started.in_flight}, failed before "
        f"{started.failed_before}, refused {len(started.refused)}"
    )
    if started.moved:
        examples = ", ".join(f"{s} {r} → {a}" for s, r, a in started.moved[:3])
        console.print(
            f"{len(started.moved)} grid dates were not trading days of the data and map to "
            f"the previous trading day (e.g. {examples})"
        )
    for key, reason in list(started.refused.items())[:10]:
        console.print(f"  refused {key}: {reason}")


def _wait_for_grid(
    bar: Progress, *, name: str, total: int, settings: Settings, interrupted: threading.Event
) -> None:
    """Show the backtest's progress until its ``total`` analyses finished (done, failed or
    cancelled), polling every ``service.wait_poll_interval`` (at least 1 s).

    Raises:
        KeyboardInterrupt: Ctrl-C (``interrupted`` set) while waiting.
    """
    running = bar.add_task("analyses", total=total)
    while True:
        p = backtest.progress(name=name, settings=settings)
        bar.update(
            running,
            completed=p.done + p.failed + p.cancelled,
            description=f"done {p.done} · failed {p.failed} · running {p.running}",
        )
        if p.done + p.failed + p.cancelled >= total:
            break
        if interrupted.wait(timeout=max(settings.service.wait_poll_interval, 1.0)):
            raise KeyboardInterrupt


def _cancel_grid(console: Console, *, name: str, settings: Settings) -> None:
    """Cancel the backtest's analyses that have not started and say so; in embedded mode wait for
    the running ones (the in-process worker dies with this process) until a second Ctrl-C."""
    ids = backtest.cancel(name=name, settings=settings)
    p = backtest.progress(name=name, settings=settings)
    console.print(
        f"cancelled {len(ids)} analyses not started; {p.running} already running "
        f"{'finish on the workers' if settings.service.mode == 'service' else 'are waited for'}; "
        f"re-run with --name {name} to resume"
    )
    if settings.service.mode == "embedded":  # the in-process worker dies with this process
        try:
            while backtest.progress(name=name, settings=settings).running:
                time.sleep(1.0)
        except KeyboardInterrupt:
            console.print("left running analyses to `finagent recover`")


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


@click.command("scorecard")
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
    settings = load_settings()
    configure_logging(level=settings.service.log_level)
    since_date = parse_date(since)
    folder = (
        Path(plots_dir) if plots_dir else settings.service.state_dir / "scorecards" / (backtest_name or "all")
    )
    try:
        if backtest_name is not None:
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
        fail(str(exc), EXIT_INVALID)
    except infrastructure_errors() as exc:
        fail(f"{type(exc).__name__}: {exc}", EXIT_INFRA)
    click.echo(json.dumps(card, default=str) if as_json else scorecard.markdown(card))


@click.command("calibrate")
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
    if backtest_name is None and not do_evaluate and not restamp:
        err(
            "error: give --backtest NAME to rebuild the artifact (or --restamp to rewrite its rows "
            "under the current method), --evaluate to evaluate it, or both"
        )
        sys.exit(EXIT_INVALID)
    if backtest_name is not None and restamp:
        err("error: --backtest rebuilds the rows, --restamp keeps them: give one of the two")
        sys.exit(EXIT_INVALID)
    path = Path(artifact_path) if artifact_path else cal.ARTIFACT
    until_date = to_date(until)
    if until_date > cal.FIT_UNTIL:
        err(
            f"error: --until {until_date} is after {cal.FIT_UNTIL}: "
            "later prices are held out, fit nothing on them"
        )
        sys.exit(EXIT_INVALID)
    try:
        if backtest_name is not None:
            settings = load_settings()
            configure_logging(level="WARNING")
            prepare_database(settings=settings)
            built = calibration.build_from_backtest(
                name=backtest_name, until=until_date, benchmark=benchmark, settings=settings, on_progress=err
            )
            calibration.write_artifact(built.model, path)
            err(
                f"wrote {path}: {built.model.version}, {built.kept} rows of {built.scored_rows} "
                f"({built.after_until} end after {until_date}, {built.other_benchmark} against another "
                f"benchmark); keys: {', '.join(built.model.labels())}"
            )
        if restamp:
            old = json.loads(path.read_text(encoding="utf-8"))
            restamped = cal.from_json(old, check_version=False)
            calibration.write_artifact(restamped, path)
            err(f"wrote {path}: {old.get('version')} -> {restamped.version}, {len(restamped.rows)} rows kept")
        if do_evaluate:
            model = cal.from_json(json.loads(path.read_text(encoding="utf-8")))
            start, end = to_date(eval_from), to_date(eval_to)
            err(f"evaluating {model.version} walk-forward over {start}..{end} ...")
            result = calibration.evaluate(model, start=start, end=end)
            click.echo(json.dumps(result, default=str) if as_json else calibration.markdown(result))
    except (calibration.CalibrateError, cal.CalibrationError) as exc:
        fail(str(exc), EXIT_INVALID)
    except FileNotFoundError as exc:
        fail(f"no artifact at {exc.filename}: build one with --backtest NAME", EXIT_INVALID)
    except infrastructure_errors() as exc:
        fail(f"{type(exc).__name__}: {exc}", EXIT_INFRA)


@click.command("replay")
@click.argument("analysis_id")
@click.option("--show", "show_json", is_flag=True, help="Also print the replayed report JSON (canonical).")
def replay_command(analysis_id: str, show_json: bool) -> None:
    """Re-run the finished analysis ANALYSIS_ID from its recorded tool outputs and LLM answers
    (no data provider, no model, no broker) and compare the report with the stored one.

    Exit codes: 0 byte-identical (prints the sha256 of the canonical report JSON); 1 it differs
    (a unified diff on stdout); 2 unknown or unfinished analysis, or a call the recording lacks;
    3 the database is unreachable or not migrated."""
    settings = load_settings()
    configure_logging(level="WARNING")
    try:
        prepare_database(settings=settings)
        result = replay_analysis(analysis_id=analysis_id, settings=settings)
    except KeyError as exc:
        fail(f"{exc.args[0]}", EXIT_INVALID)
    except ReplayError as exc:
        fail(str(exc), EXIT_INVALID)
    except (SchemaMissingError, OperationalError, ProgrammingError) as exc:
        fail(f"{type(exc).__name__}: {exc}", EXIT_INFRA)
    for note in result.notes:
        err(f"note: {note}")
    if show_json:
        out(result.replayed_json, nl=False)
    if result.identical:
        err(f"replay of {analysis_id}: byte-identical report JSON and Markdown")
        click.echo(f"identical sha256={result.sha256}")
        sys.exit(EXIT_OK)
    out(result.diff, nl=False)
    err(f"replay of {analysis_id}: the report differs from the recorded one (diff above)")
    sys.exit(EXIT_FAILED)


@click.group("eval")
def eval_group() -> None:
    """Published benchmarks run on the offline data (docs/benchmarks.md)."""


@eval_group.command("acl18", short_help="The ACL18 stock-movement benchmark (accuracy, MCC)")
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
    help="The stocknet tweet files (default: FINAGENT_DATA_SOCIAL_DIR).",
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
    beside the published results (``apps.acl18``). Run the test split once per change of an
    analyst, never to tune it. ``--train`` rebuilds the learned analyst's artefact (same bytes on
    every run).

    Exit codes: 0 done; 2 a folder is missing or the artefact is broken."""
    settings = load_settings()
    prices = Path(prices_dir) if prices_dir else settings.data.dir
    tweets = Path(tweets_dir) if tweets_dir else settings.data.social_dir
    for name, folder in (
        ("--prices / FINAGENT_DATA_DIR", prices),
        ("--tweets / FINAGENT_DATA_SOCIAL_DIR", tweets),
    ):
        if folder is None or not Path(folder).expanduser().is_dir():
            err(
                f"{name}: not a folder ({folder}); e.g. ../shared/data/ohlcv/stocknet and "
                "../shared/data/news/stocknet_tweets"
            )
            sys.exit(2)
    assert prices is not None
    assert tweets is not None
    if llm_n and not do_train:
        data_dir = settings.data.dir
        if not settings.llm.model:
            err("--llm-sample: set FINAGENT_LLM_MODEL (and its API base/key) for the LLM mode")
            sys.exit(2)
        if (
            settings.data.provider != "csv"
            or data_dir is None
            or (Path(data_dir).expanduser().resolve() != Path(prices).expanduser().resolve())
        ):
            err(
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
                    settings=settings,
                )
        except LearnedModelError as exc:
            err(f"learned analyst: {exc}; rebuild it with `finagent eval acl18 --train`")
            sys.exit(2)
    if do_train:
        if as_json:
            out(text.rstrip("\n"))
            return
        chosen = artefact["chosen_on"]
        digest = hashlib.sha256(text.encode()).hexdigest()
        out(f"wrote {MODEL_PATH} ({artefact['version']}, sha256 {digest})")
        out(f"trained on {artefact['trained_on']['samples']:,} train samples; chosen on dev by MCC:")
        out("| features | C | dev accuracy | dev MCC |\n|---|---|---|---|")
        for c in chosen["candidates"]:
            mark = " (chosen)" if c["features"] == chosen["feature_set"] and c["C"] == chosen["C"] else ""
            acc = 100 * c["dev_accuracy"]
            out(f"| {c['features']}{mark} | {c['C']:g} | {acc:.2f} | {c['dev_mcc']:.4f} |")
        b = artefact["blend_on_dev"]
        out(
            f"blend chosen on dev: social {b['w_social']:g}, learned {b['w_learned']:g} "
            f"(dev MCC {b['dev_mcc']})"
        )
        return
    if as_json:
        out(json.dumps(result, default=str))
    else:
        out(acl18.markdown(result))


@eval_group.command("risk", short_help="Walk the risk forecasts forward: VaR, ranges, QLIKE, P(touch)")
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
@click.option(
    "--write-record",
    is_flag=True,
    help="Also write the compact result the reports cite (agents/quant/risk/backtest_record.json); "
    "only for a period that ends by 2015-12-31.",
)
def eval_risk_command(
    start: str,
    end: str,
    symbols: str | None,
    prices_dir: str | None,
    as_json: bool,
    forecasts_file: str | None,
    processes: int,
    write_record: bool,
) -> None:
    """Walk-forward backtest of the risk forecasts (``apps.risk_eval``): for every symbol and
    every session from --from to --to, forecast with the data up to that session only, then score
    each forecast whose 1, 5, 20 or 60-session window ends by --to. Prints VaR exceptions (Kupiec,
    Christoffersen), range coverage, the PIT histogram, QLIKE/MSE against HV20 and EWMA with
    Diebold-Mariano t, Basel zones, coverage with and without earnings in the window and the
    calibration of P(below)/P(touch), every interval clustered by date (docs/evaluation.md, "Risk").

    Exit codes: 0 done; 2 a bad folder, symbol or period."""
    first, last = to_date(start), to_date(end)
    if last < first:
        err(f"--to {last} is before --from {first}")
        sys.exit(EXIT_INVALID)
    if last > today_utc():
        err(f"--to {last} is in the future (today is {today_utc()} UTC): nothing can be scored there")
        sys.exit(EXIT_INVALID)
    folder = Path(prices_dir).expanduser() if prices_dir else load_settings().data.dir
    if folder is None or not Path(folder).is_dir():
        err(f"--prices: not a folder ({folder}); e.g. ../shared/data/ohlcv/stocknet")
        sys.exit(EXIT_INVALID)
    folder = Path(folder)
    available = {p.stem.upper(): p.stem for p in folder.glob("*.csv")}
    if symbols:
        wanted = [s.strip().upper() for s in symbols.split(",") if s.strip()]
        unknown = [s for s in wanted if s.replace(".", "-") not in available and s not in available]
        if unknown:
            err(f"--symbols: no price file for {', '.join(unknown)} in {folder} ({len(available)} files)")
            sys.exit(EXIT_INVALID)
        names = [available.get(s, available.get(s.replace(".", "-"), s)) for s in wanted]
    else:
        names = sorted(available.values())
    if not names:
        err(f"--prices: no CSV files in {folder}")
        sys.exit(EXIT_INVALID)
    if write_record and last > risk_eval.RECORD_LAST_DAY:
        err(f"--write-record: the record the reports cite is measured up to {risk_eval.RECORD_LAST_DAY} only")
        sys.exit(EXIT_INVALID)
    if risk_eval._overlaps_reserved(first, last):
        banner = "!" * 78
        err(
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
        err(f"[{done}/{total}] {result.symbol}: {what} ({time.perf_counter() - started:.0f} s)")

    results = risk_eval.run_symbols(
        folder, names, start=first, end=last, spec=spec, processes=processes, progress=progress
    )
    if forecasts_file:
        count = risk_eval.write_forecasts(results, Path(forecasts_file))
        err(f"wrote {count:,} forecasts to {forecasts_file}")
    summary = risk_eval.summarise(results, start=first, end=last, spec=spec)
    summary["wall_seconds"] = round(time.perf_counter() - started, 1)
    if write_record:
        err(f"wrote the backtest record to {risk_eval.write_record(summary)}")
    err(f"eval risk: {len(names)} symbols in {summary['wall_seconds']} s on {processes} process(es)")
    if as_json:
        out_json(summary)
    else:
        out(risk_eval_report.markdown(summary), nl=False)
