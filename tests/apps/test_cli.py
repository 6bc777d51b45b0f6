"""``finagent analyze``: a ticker with junk exits 2 before anything starts, naming the
characters (README: exit 2 is invalid input); a question in free text still runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from apps.cli import main
from apps.cli.common import EXIT_INVALID

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.usefixtures("clean_settings")
@pytest.mark.parametrize(
    ("argument", "named"),
    [("AAPL;DROP TABLE", "';'"), ("AAPL;DROP", "';'"), ("$AAPL", "'$'"), ("AAPL > /tmp/x", "'>'")],
)
def test_a_ticker_with_junk_exits_2_naming_the_characters(tmp_path: Path, argument: str, named: str) -> None:
    result = CliRunner(mix_stderr=False).invoke(main, ["analyze", argument])
    assert result.exit_code == EXIT_INVALID, result.output + result.stderr
    assert result.stdout == "" and result.stderr.startswith("error: ") and named in result.stderr
    assert not (tmp_path / "state").exists()  # refused before the database or a worker started


@pytest.mark.usefixtures("clean_settings")
def test_the_error_echoes_at_most_200_characters() -> None:
    result = CliRunner(mix_stderr=False).invoke(main, ["analyze", "A" * 10_000 + "|"])
    assert result.exit_code == EXIT_INVALID
    assert "'|'" in result.stderr and len(result.stderr) < 500


def test_a_question_still_runs(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FINAGENT_")}
    env |= {"FINAGENT_SERVICE_STATE_DIR": str(tmp_path / "state"), "PYTHONPATH": str(REPO_ROOT)}
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            "from tasks.main import main; main()",
            *("analyze", "what about microsoft stock?", "--as-of", "2010-06-30", "--json"),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads(proc.stdout)
    assert (report["symbol"], report["status"]) == ("MSFT", "done")


@pytest.mark.usefixtures("clean_settings")
def test_list_shows_stored_analyses_newest_first_with_filters() -> None:
    """``finagent list`` reads the rows a producer wrote: newest first, one line (or JSON
    object) each, filtered by ticker, status and plan; a bad ticker exits 2 and lists nothing."""
    import uuid
    from datetime import date

    from core.settings import get_settings
    from core.state import FinancialAgentState
    from db import ledger
    from db.engine import get_engine
    from pipeline import service

    settings = get_settings()
    service.prepare_database(settings=settings)
    engine = get_engine(settings.service.effective_database_url)
    made: list[tuple[str, str, str | None]] = []
    for symbol, analysis_type in (("AAPL", None), ("MSFT", "csp"), ("AAPL", "covered_call")):
        state = FinancialAgentState(
            analysis_id=str(uuid.uuid4()),
            stock_symbol=symbol,
            user_query=f"Analyze {symbol}",
            as_of=date(2014, 6, 6),
            analysis_type=analysis_type,
        )
        assert ledger.create(
            engine=engine,
            analysis_id=state.analysis_id,
            symbol=symbol,
            as_of=state.as_of,
            user_query=state.user_query,
            max_iterations=state.max_iterations,
            state=state.to_message(),
        )
        made.append((state.analysis_id, symbol, analysis_type))
    runner = CliRunner(mix_stderr=False)

    listed = runner.invoke(main, ["list", "--json"])
    assert listed.exit_code == 0, listed.stderr
    rows = [json.loads(line) for line in listed.stdout.splitlines()]
    assert [r["id"] for r in rows] == [m[0] for m in reversed(made)]  # newest first
    assert [r["analysis_type"] for r in rows] == ["covered_call", "csp", "composite"]
    assert {r["status"] for r in rows} == {"queued"}

    aapl = runner.invoke(main, ["list", "--symbol", "aapl"])
    assert aapl.exit_code == 0 and len(aapl.stdout.splitlines()) == 2
    assert all(" AAPL " in line and "queued" in line for line in aapl.stdout.splitlines())
    csp = runner.invoke(main, ["list", "--type", "csp", "--json"])
    assert [json.loads(line)["id"] for line in csp.stdout.splitlines()] == [made[1][0]]
    none = runner.invoke(main, ["list", "--status", "done"])
    assert none.exit_code == 0 and none.stdout == "" and "no analyses match" in none.stderr

    bad = runner.invoke(main, ["list", "--symbol", "AAPL;DROP"])
    assert bad.exit_code == EXIT_INVALID and bad.stdout == "" and "';'" in bad.stderr


@pytest.mark.usefixtures("clean_settings")
def test_a_suppressed_sell_lists_without_any_confidence() -> None:
    """An analysis whose scorer said SELL at confidence 0.79 and whose calibration abstained
    (2013-03-01 precedes every scored call) lists as "HOLD: no evidence": no confidence number in
    the line; the JSON keeps the raw confidence under details only."""
    import uuid
    from datetime import date

    from core.parts import Recommendation
    from core.settings import get_settings
    from core.state import FinancialAgentState, Status
    from db import ledger
    from db.engine import get_engine
    from pipeline import service
    from pipeline.report import final_json, report_markdown
    from pipeline.stages.recommendation import _calibrate
    from tests.support.rows import finish_row

    settings = get_settings()
    service.prepare_database(settings=settings)
    engine = get_engine(settings.service.effective_database_url)
    rec = Recommendation(signal="SELL", confidence=0.79, score=-0.5714)
    _calibrate(rec, as_of=date(2013, 3, 1))
    assert (rec.signal, rec.raw_signal) == ("HOLD", "SELL")
    state = FinancialAgentState(
        analysis_id=str(uuid.uuid4()),
        stock_symbol="AAPL",
        user_query="Analyze AAPL",
        as_of=date(2013, 3, 1),
        recommendation=rec,
        status=Status.DONE,
    )
    assert ledger.create(
        engine=engine,
        analysis_id=state.analysis_id,
        symbol="AAPL",
        as_of=state.as_of,
        user_query=state.user_query,
        max_iterations=state.max_iterations,
        state=state.to_message(),
    )
    finish_row(
        engine,
        state.analysis_id,
        state=state.to_message(),
        report=report_markdown(state),
        report_json=final_json(state),
        signal=rec.signal,
        confidence=rec.confidence,
    )
    runner = CliRunner(mix_stderr=False)
    text = runner.invoke(main, ["list"])
    assert text.exit_code == 0, text.stderr
    (line,) = text.stdout.splitlines()
    assert line.endswith("done           HOLD: no evidence"), line
    assert "0.79" not in line and "SELL" not in line
    as_json = runner.invoke(main, ["list", "--json"])
    (row,) = [json.loads(x) for x in as_json.stdout.splitlines()]
    assert "confidence" not in row and row["details"] == {"confidence": 0.79}
    assert (row["signal"], row["headline"]) == ("HOLD", "HOLD: no evidence")
    shown = runner.invoke(main, ["show", state.analysis_id])
    head = shown.stdout.split("## Details of the direction call")[0]
    assert "0.79" not in head and "confidence" not in head and "No evidence" in head


def test_ctrl_c_in_a_backtest_is_a_flag_first_and_an_interrupt_the_second_time() -> None:
    import os
    import signal

    from apps.cli.evaluation import _ctrl_c

    before = signal.getsignal(signal.SIGINT)
    with _ctrl_c() as interrupted:
        assert not interrupted.is_set()
        os.kill(os.getpid(), signal.SIGINT)  # the first: no exception where the code happens to be
        assert interrupted.wait(timeout=5)
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)  # the second: the user insists
    assert signal.getsignal(signal.SIGINT) is before
