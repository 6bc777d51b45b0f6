"""The report of five fixed (symbol, as_of) analyses stays what it was when the snapshots were
read and checked by hand (tests/regression/snapshots/, made by snapshot.py before the layered
refactor). A structural change must not change a report: a deliberate behaviour change
regenerates the snapshots (command in snapshot.py) and the diff is read in review."""

from __future__ import annotations

import difflib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parents[1]


def test_reports_match_the_hand_checked_snapshots(tmp_path: Path) -> None:
    """Embedded mode (in-process worker, SQLite), one process for the five analyses."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FINAGENT_")}
    env["XDG_STATE_HOME"] = str(tmp_path / "state")
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, str(HERE / "snapshot.py"), str(out)],
        cwd=tmp_path,
        env={**env, "PYTHONPATH": str(REPO_ROOT)},
        capture_output=True,
        text=True,
        timeout=280,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    expected_files = sorted(p.name for p in (HERE / "snapshots").glob("*.json"))
    assert len(expected_files) == 5
    assert sorted(p.name for p in out.glob("*.json")) == expected_files
    for name in expected_files:
        want = (HERE / "snapshots" / name).read_text()
        got = (out / name).read_text()
        if want != got:
            diff = "".join(
                difflib.unified_diff(want.splitlines(True), got.splitlines(True), "snapshot", "now", n=2)
            )
            pytest.fail(f"{name} changed:\n{diff[:6000]}")
        # the snapshot is a real report, not an empty shell
        data = json.loads(got)
        assert data["json"]["status"] == "done"
        assert data["json"]["signal"] in {"BUY", "SELL", "HOLD"}
        assert data["json"]["grounding"]["unverified"] == []


def test_snapshot_floats_ignore_the_machines_last_bits_but_not_a_real_change() -> None:
    sys.path.insert(0, str(HERE))
    try:
        from snapshot import round_floats
    finally:
        sys.path.remove(str(HERE))
    # the same VaR per share from two machines (their numpy sums in another order)
    assert round_floats({"per_share": 17.259397640678582}) == round_floats({"per_share": 17.25939764067859})
    # a change in the 10th significant digit is a difference; ints, strings and order are kept
    assert round_floats([17.2593976406]) != round_floats([17.2593976416])
    assert round_floats({"b": [1, "0.1234567890123456"], "a": 2}) == {"b": [1, "0.1234567890123456"], "a": 2}
    assert list(round_floats({"b": 1.0, "a": 2.0})) == ["b", "a"]
