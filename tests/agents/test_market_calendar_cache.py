"""The NYSE session days a risk forecast reads (``agents.data.market_calendar.session_days``):
the calendar's own sessions, kept for the day in the state folder so that a later process reads
them without importing exchange_calendars."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import date
from pathlib import Path

import numpy as np

REPO_ROOT = Path(__file__).resolve().parents[2]

CODE = """
import sys
import numpy as np
from agents.data.market_calendar import session_days
days = session_days()
np.save(sys.argv[1], days, allow_pickle=False)
print("exchange_calendars" in sys.modules)
"""


def _run(state: Path, out: Path) -> tuple[np.ndarray, bool]:
    """``session_days()`` in a fresh interpreter with ``state`` as its state folder: the days
    and whether it imported exchange_calendars."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FINAGENT_")}
    env["FINAGENT_STATE_DIR"] = env["FINAGENT_SERVICE_STATE_DIR"] = str(state)  # either spelling
    proc = subprocess.run(
        [sys.executable, "-c", CODE, str(out)],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    return np.load(out), proc.stdout.strip().splitlines()[-1] == "True"


def test_the_days_are_the_calendars_sessions_and_a_second_process_reads_them(tmp_path: Path) -> None:
    from agents.data.market_calendar import nyse

    day = date.today()
    first, built = _run(tmp_path / "state", tmp_path / "first.npy")
    assert built  # nothing kept yet: the calendar was built
    assert list((tmp_path / "state" / "cache").glob("xnys-sessions-*.npy"))
    second, built_again = _run(tmp_path / "state", tmp_path / "second.npy")
    if date.today() != day:  # the days are kept per day: past midnight the first run rebuilds them
        second, built_again = _run(tmp_path / "state", tmp_path / "second.npy")
    assert not built_again  # read from the state folder
    assert np.array_equal(first, second)
    sessions = nyse().sessions
    assert first.dtype == np.dtype("datetime64[D]")
    assert len(first) == len(sessions)
    assert str(first[0]) == sessions[0].date().isoformat() == "1990-01-02"
    # known days: the 2012-10-29/30 closures (Hurricane Sandy) are not sessions, 2012-10-31 is
    assert np.datetime64("2012-10-29") not in first and np.datetime64("2012-10-31") in first


def test_an_unreadable_cache_file_means_the_calendar_is_built(tmp_path: Path) -> None:
    first, _ = _run(tmp_path / "state", tmp_path / "first.npy")
    for cached in (tmp_path / "state" / "cache").glob("xnys-sessions-*.npy"):
        cached.write_bytes(b"not an array")
    again, built = _run(tmp_path / "state", tmp_path / "again.npy")
    assert built and np.array_equal(first, again)
