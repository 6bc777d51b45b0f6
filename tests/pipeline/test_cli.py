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

from pipeline.cli import EXIT_INVALID, main

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
    env |= {"FINAGENT_STATE_DIR": str(tmp_path / "state"), "PYTHONPATH": str(REPO_ROOT)}
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            "from pipeline.cli import main; main()",
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
