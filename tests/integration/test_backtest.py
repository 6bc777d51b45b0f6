"""Backtests through a real worker (service mode: Redis, PostgreSQL, ``finagent worker``):

* every analysis is point in time: no stored tool result holds a bar, headline, fundamental or
  earnings row dated after its ``as_of``;
* re-running the same name enqueues nothing; Ctrl-C (SIGINT) cancels what has not started, and a
  re-run resumes it;
* the scorecard's numbers equal forward returns computed by hand from the CSV files;
* the scoring beat task is idempotent.
"""

from __future__ import annotations

import csv
import json
import re
import signal
import subprocess
import sys
import time
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, text

from tests.conftest import SHARED_DATA
from tests.integration.conftest import FINAGENT, Service

DATE_RE = re.compile(r"^(\d{4}-\d{2}-\d{2})")
#: Keys whose dates may lie after as_of, and why (anything else dated later is look-ahead):
#: the earnings calendar's ``checked_through`` (how far it vouches that no report is missing,
#: at most 30 days on) and ``coverage`` (the file's span), ``next`` (a report date already
#: announced at as_of, within 30 days), the news window's ``until`` (00:00 UTC after as_of), and
#: ``market_clock`` (``agents.data.market.clock``: where the data source ends, for the report's
#: "data ends …" line; the dataset's extent, not a price, headline or filing of that day), and
#: ``refused`` (get_fundamentals' list of sources it did NOT use because they are dated after
#: as_of: their dates, never their values).
FUTURE_OK = {"checked_through", "coverage", "next", "until", "market_clock", "refused"}


def _extra(stocknet_dir: Path) -> dict[str, str]:
    return {
        "FINAGENT_DATA_PROVIDER": "csv",
        "FINAGENT_DATA_DIR": str(stocknet_dir),
        "FINAGENT_DATA_NEWS_PROVIDER": "files",
        "FINAGENT_DATA_NEWS_DIR": str(SHARED_DATA / "news"),
        "FINAGENT_DATA_FUNDAMENTALS_DIR": str(SHARED_DATA / "fundamentals"),
    }


def _late_dates(value: Any, *, as_of: date, path: str = "") -> list[str]:
    """Every ``path=date`` in a JSON value dated after ``as_of`` outside ``FUTURE_OK`` keys."""
    found: list[str] = []
    if isinstance(value, dict):
        for key, item in value.items():
            if key in FUTURE_OK:
                continue
            found += _late_dates(item, as_of=as_of, path=f"{path}.{key}")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            found += _late_dates(item, as_of=as_of, path=f"{path}[{i}]")
    elif isinstance(value, str) and (m := DATE_RE.match(value)):
        try:
            day = date.fromisoformat(m.group(1))
        except ValueError:
            return found
        if day > as_of:
            found.append(f"{path}={value}")
    return found


def _adj(stocknet_dir: Path, symbol: str) -> tuple[list[str], list[float], list[float]]:
    """Dates, adjusted closes and adjusted opens (Open × Adj Close / Close) of a stocknet CSV."""
    with (stocknet_dir / f"{symbol}.csv").open() as fh:
        rows = [r for r in csv.DictReader(fh) if r["Adj Close"] != "null"]
    return (
        [r["Date"] for r in rows],
        [float(r["Adj Close"]) for r in rows],
        [float(r["Open"]) * float(r["Adj Close"]) / float(r["Close"]) for r in rows],
    )


def _hand_excess(
    analyses: list[Any], series: dict[str, tuple[list[str], list[float], list[float]]], h: int, entry: str
) -> list[tuple[str, float, float]]:
    """``(signal, stated p, excess)`` per analysis against the equal-weighted pair, entered at
    the next session's open (``entry="open"``) or at the as-of close; the stated p is the
    calibrated p(outperform) its report printed at ``h`` (agents.quant.calibration)."""
    out = []
    for a in analyses:
        rets = {}
        for s, (dates, closes, opens) in series.items():
            i = dates.index(a.as_of.isoformat())
            start = opens[i + 1] if entry == "open" else closes[i]
            rets[s] = closes[i + h] / start - 1.0
        report = a.report_json if isinstance(a.report_json, dict) else json.loads(a.report_json)
        stated = report["probability"]["horizons"][str(h)]["p"]
        out.append((a.signal, stated, rets[a.symbol] - (rets["ABBV"] + rets["ABB"]) / 2))
    return out


def test_backtest_is_point_in_time_resumable_and_scored_by_hand(
    service: Service, start_worker, stocknet_dir: Path, tmp_path: Path
) -> None:
    extra = _extra(stocknet_dir)
    start_worker(**extra)
    args = ["backtest", "--symbols", "ABBV,ABB", "--from", "2017-03-11", "--to", "2017-03-16"]
    args += ["--every", "2d", "--name", "pit"]
    proc = service.cli(*args, timeout=400, extra_env=extra)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "map to the previous trading day" in " ".join(
        proc.stderr.split()
    )  # Saturday 2017-03-11 → Friday 03-10
    engine = create_engine(service.env["FINAGENT_SERVICE_DATABASE_URL"])
    with engine.connect() as conn:
        analyses = conn.execute(
            text(
                "SELECT a.id, a.symbol, a.as_of, a.status, a.signal, a.confidence, a.report_json "
                "FROM analyses a "
                "JOIN backtest_items i ON i.analysis_id = a.id WHERE i.backtest_name = 'pit'"
            )
        ).all()
        calls = conn.execute(
            text("SELECT analysis_id, tool, status, result FROM tool_calls WHERE analysis_id IS NOT NULL")
        ).all()
    assert len(analyses) == 6 and {a.status for a in analyses} == {"done"}
    assert {a.as_of for a in analyses} == {date(2017, 3, 10), date(2017, 3, 13), date(2017, 3, 15)}

    # Point in time: no tool result of any analysis holds a date after its as_of.
    as_of = {a.id: a.as_of for a in analyses}
    tools_seen: dict[str, int] = {}
    headlines: dict[date, list[str]] = {}
    for call in calls:
        tools_seen[call.tool] = tools_seen.get(call.tool, 0) + 1
        result = call.result if isinstance(call.result, (dict, list)) else json.loads(call.result or "null")
        assert _late_dates(result, as_of=as_of[call.analysis_id]) == [], (call.tool, as_of[call.analysis_id])
        if call.tool == "get_news" and call.status == "success":
            cutoff = datetime.combine(as_of[call.analysis_id] + timedelta(days=1), datetime.min.time())
            for item in result["news"]:
                published = datetime.fromisoformat(item["published_at"]).replace(tzinfo=None)
                assert published < cutoff, item
                headlines.setdefault(as_of[call.analysis_id], []).append(item["published_at"])
    for tool in ("get_history", "get_stock_data", "get_news", "get_fundamentals"):
        assert tools_seen.get(tool, 0) >= 6, tools_seen  # every analysis read every source
    assert tools_seen.get("get_earnings_dates", 0) >= 3, tools_seen  # the calendar has ABBV, not ABB
    # ABBV's Benzinga headline of 2017-03-10 06:14 ET is seen as of 03-10 and 03-13; the one of
    # 03-14 08:04 ET (after as_of 03-13) never is, but is as of 03-15.
    assert any(h.startswith("2017-03-10") for h in headlines[date(2017, 3, 13)])
    assert not any(h.startswith("2017-03-14") for h in headlines[date(2017, 3, 13)])
    assert any(h.startswith("2017-03-14") for h in headlines[date(2017, 3, 15)])

    # Resumable: the same name enqueues nothing.
    again = service.cli(*args, timeout=200, extra_env=extra)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "enqueued 0, done before 6" in " ".join(again.stderr.split())

    # Scorecard against hand-computed forward returns (benchmark: the equal-weighted pair).
    card_proc = service.cli(
        "scorecard",
        "--backtest",
        "pit",
        "--json",
        "--plots",
        str(tmp_path / "plots"),
        timeout=300,
        extra_env=extra,
    )
    assert card_proc.returncode == 0, card_proc.stderr[-3000:]
    card = json.loads(card_proc.stdout)
    assert card["benchmark"] == ["equal-weighted universe (2 symbols)"]
    # every recommendation of this grid is the scorer's: one rules version in the breakdown
    from agents.analysts.versions import rules_version

    assert list(card["breakdown"]["prompt_version"]) == [rules_version()]
    series = {s: _adj(stocknet_dir, s) for s in ("ABBV", "ABB")}
    assert card["entry"] == "open" and card["stale"] == 0
    assert any(note.startswith("Survivorship") and "stocknet" in note for note in card["notes"])
    for h in (5, 20, 60):
        excess = _hand_excess(analyses, series, h, "open")
        got = card["strategies"]["pipeline"][str(h)]
        assert got["n"] == 6
        for sig in ("BUY", "HOLD", "SELL"):
            xs = [x for s, _, x in excess if s == sig]
            assert got["signals"][sig]["n"] == len(xs)
            if xs:
                assert got["signals"][sig]["mean_excess"] == pytest.approx(sum(xs) / len(xs), abs=1e-6)
        signed = [{"BUY": 1, "HOLD": 0, "SELL": -1}[s] * x for s, _, x in excess]
        assert got["mean_signed_excess"] == pytest.approx(sum(signed) / 6, abs=1e-6)
        calls = [(s == "BUY") == (x > 0) for s, _, x in excess if s != "HOLD"]
        if calls:
            assert (got["directional"]["successes"], got["directional"]["n"]) == (sum(calls), len(calls))
        p = [stated for _, stated, _ in excess]  # the scorecard scores the stated p
        y = [1.0 if x > 0 else 0.0 for _, _, x in excess]
        assert got["brier"] == pytest.approx(
            sum((a - b) ** 2 for a, b in zip(p, y, strict=True)) / 6, abs=1e-6
        )
        # buy-and-hold of the pair is the benchmark itself: its mean excess is zero
        assert card["strategies"]["buy_and_hold"][str(h)]["mean_signed_excess"] == pytest.approx(
            0.0, abs=1e-9
        )
    for png in card["plots"].values():
        assert Path(png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    # Another entry rule: the stored rows are stale (left out) until --rescore recomputes them.
    def close_card(*flags: str) -> dict[str, Any]:
        proc = service.cli(
            "scorecard",
            "--backtest",
            "pit",
            "--json",
            "--entry",
            "close",
            *flags,
            timeout=300,
            extra_env=extra,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        return dict(json.loads(proc.stdout))

    stale = close_card()
    assert stale["stale"] == 18 and stale["recommendations"] == 0
    assert any("--rescore" in note for note in stale["notes"])
    rescored = close_card("--rescore")
    assert rescored["rescored"] == 18 and rescored["stale"] == 0 and rescored["entry"] == "close"
    for h in (5, 20, 60):
        signed = [
            {"BUY": 1, "HOLD": 0, "SELL": -1}[s] * x for s, _, x in _hand_excess(analyses, series, h, "close")
        ]
        assert rescored["strategies"]["pipeline"][str(h)]["mean_signed_excess"] == pytest.approx(
            sum(signed) / 6, abs=1e-6
        )

    # The beat task on the worker: nothing new to write, then re-scores exactly what is missing.
    def score_task() -> dict[str, Any]:
        code = (
            "from tasks.app import app; import json; "
            "print(json.dumps(app.send_task('finagent.scorecard.score').get(timeout=120)))"
        )
        run = subprocess.run(
            [sys.executable, "-c", code],
            env={**service.env, **extra},
            capture_output=True,
            text=True,
            timeout=180,
            check=True,
        )
        return json.loads(run.stdout.strip().splitlines()[-1])

    assert score_task()["written"] == 0
    with engine.begin() as conn:
        assert conn.execute(text("SELECT count(*) FROM recommendation_scores")).scalar_one() == 18
        conn.execute(
            text("DELETE FROM recommendation_scores WHERE analysis_id = :id"), {"id": analyses[0].id}
        )
    assert score_task()["written"] == 3
    with engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM recommendation_scores")).scalar_one() == 18
    engine.dispose()


def test_ctrl_c_cancels_what_has_not_started_and_a_rerun_resumes_it(
    service: Service, start_worker, stocknet_dir: Path
) -> None:
    extra = {"FINAGENT_DATA_PROVIDER": "csv", "FINAGENT_DATA_DIR": str(stocknet_dir)}
    args = ["backtest", "--symbols", "AAPL,MSFT", "--from", "2016-01-04", "--to", "2016-03-01"]
    args += ["--every", "1w", "--name", "cancel-me"]
    engine = create_engine(service.env["FINAGENT_SERVICE_DATABASE_URL"])
    # no worker yet: nothing can start, so Ctrl-C must cancel all of it
    proc = subprocess.Popen(
        [FINAGENT, *args],
        env={**service.env, **extra},
        cwd=service.tmp,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        with engine.connect() as conn:
            n = conn.execute(
                text("SELECT count(*) FROM backtest_items WHERE backtest_name = 'cancel-me'")
            ).scalar()
        if n == 18:
            break
        time.sleep(0.3)
    assert n == 18
    time.sleep(2)  # the command is in its progress loop
    proc.send_signal(signal.SIGINT)
    # a bound, not a speed check: on two loaded cores the cancel (revoke + 18 row updates, then
    # the CLI's own exit) once took over 60 s in the clean-clone CI
    _, err = proc.communicate(timeout=180)
    assert proc.returncode == 1, err[-3000:]
    assert "cancelled 18 analyses not started" in " ".join(err.split())
    with engine.connect() as conn:
        rows = conn.execute(text("SELECT status, error, finished_at FROM analyses")).all()
    assert len(rows) == 18
    assert all(r.status == "failed" and r.error.startswith("CANCELLED") and r.finished_at for r in rows)

    start_worker(**extra)
    resumed = service.cli(*args, timeout=400, extra_env=extra)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "enqueued 18" in " ".join(resumed.stderr.split())
    with engine.connect() as conn:
        items = conn.execute(
            text(
                "SELECT i.attempt, a.status FROM backtest_items i JOIN analyses a ON a.id = i.analysis_id "
                "WHERE i.backtest_name = 'cancel-me'"
            )
        ).all()
        total = conn.execute(text("SELECT count(*) FROM analyses")).scalar_one()
    assert len(items) == 18 and {(i.attempt, i.status) for i in items} == {(1, "done")}
    assert total == 36  # the cancelled attempts stay as a record; nothing is stuck
    engine.dispose()


@pytest.mark.parametrize("bad", [["--every", "5x"], ["--symbols", "AAPL;DROP"]])
def test_invalid_backtests_exit_2_and_enqueue_nothing(service: Service, bad: list[str]) -> None:
    args = {"--symbols": "AAPL", "--from": "2012-01-03", "--to": "2012-02-01", "--every": "1w"}
    args.update(dict(zip(bad[::2], bad[1::2], strict=True)))
    proc = service.cli("backtest", *[x for kv in args.items() for x in kv], "--name", "bad", timeout=120)
    assert proc.returncode == 2, proc.stderr[-2000:]
    engine = create_engine(service.env["FINAGENT_SERVICE_DATABASE_URL"])
    with engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM analyses")).scalar_one() == 0
    engine.dispose()
