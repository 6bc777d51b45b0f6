"""The console's live views over real HTTP (uvicorn, SQLite, one analysis really run by the
embedded CLI; no browser): the stage stepper and timeline JSON a page polls, the interactive
chart's data against the PNG's layers, a watchlist run's per-ticker progress, the backtest and
scoring forms (CSRF, scopes, caps, another tenant's 404s), the scorecard's summary cards, and
the pure functions behind them. The browser flows are
``tests/integration/test_console_live_browser.py``."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import create_engine, text

from apps.api.auth import create_key
from apps.api.console.progress import STEP_NAMES, duration_text, stage_steps
from apps.chart_data import earnings_marks, risk_bands
from core.settings import Settings
from tests.apps.api.conftest import serve_app
from tests.integration.conftest import Service, _base_env

T0 = datetime(2026, 1, 2, 3, 4, 0, tzinfo=UTC)


def _at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def _mark(stage: str, start: float, end: float, iteration: int = 0) -> dict[str, Any]:
    return {"stage": stage, "iteration": iteration, "started_at": _at(start).isoformat(),
            "finished_at": _at(end).isoformat()}  # fmt: skip


def _row(status: str, *, marks: list[dict[str, Any]] | None = None, **extra: Any) -> dict[str, Any]:
    return {
        "status": status, "created_at": T0, "finished_at": None, "checkpoint": None,
        "lease_owner": None, "iteration": 0, "max_iterations": 3,
        "state": {"stage_marks": marks or [], "errors": []}, **extra,
    }  # fmt: skip


def _states(view: dict[str, Any]) -> list[tuple[str, str]]:
    return [(s["name"], s["state"]) for s in view["steps"]]


# --- the stepper (pure) ------------------------------------------------------------------


def test_a_queued_analysis_waits_with_its_clock_running() -> None:
    view = stage_steps(_row("queued"), now=_at(7.5))
    assert [name for name, _ in _states(view)] == list(STEP_NAMES)
    assert _states(view)[0] == ("queued", "waiting") and view["steps"][0]["seconds"] == 7.5
    assert view["steps"][0]["since"] == T0.isoformat()  # the page ticks on from here
    assert {state for _, state in _states(view)[1:]} == {"pending"}
    assert not view["finished"]


def test_a_running_stage_counts_from_the_previous_stages_end() -> None:
    marks = [_mark("research", 2.0, 2.5)]
    row = _row("analyzing", marks=marks, checkpoint="research", lease_owner="task-1")
    view = stage_steps(row, now=_at(4.0))
    assert _states(view) == [
        ("queued", "done"), ("research", "done"), ("analysis", "running"),
        ("recommendation", "pending"), ("review", "pending"), ("done", "pending"),
    ]  # fmt: skip
    steps = {s["name"]: s for s in view["steps"]}
    assert steps["queued"]["seconds"] == 2.0 and steps["research"]["seconds"] == 0.5
    assert steps["analysis"]["seconds"] == 1.5 and steps["analysis"]["since"] == _at(2.5).isoformat()
    # no worker holds the next step: it waits
    waiting = stage_steps({**row, "lease_owner": None}, now=_at(4.0))
    assert dict(_states(waiting))["analysis"] == "waiting"


def test_a_finished_analysis_shows_each_stages_time_summed_over_its_passes() -> None:
    marks = [
        _mark("research", 1, 2), _mark("analysis", 2.5, 3), _mark("recommendation", 3, 3.25),
        _mark("review", 3.5, 4), _mark("research", 5, 7, 1), _mark("analysis", 7, 7.5, 1),
        _mark("recommendation", 7.5, 8, 1), _mark("review", 8, 9, 1),
    ]  # fmt: skip
    row = _row("done", marks=marks, finished_at=_at(9.5), iteration=1)
    view = stage_steps(row, now=_at(60))
    assert {state for _, state in _states(view)} == {"done"}
    steps = {s["name"]: s for s in view["steps"]}
    assert steps["research"]["seconds"] == 3.0 and steps["research"]["passes"] == 2
    assert steps["review"]["seconds"] == 1.5 and steps["done"]["seconds"] == 9.5
    assert view["pass"] == 2 and view["finished"]


def test_a_failed_stage_is_marked_where_it_failed() -> None:
    row = _row("failed", marks=[_mark("research", 1, 2)], finished_at=_at(3))
    row["state"]["errors"] = [{"stage": "analysis", "critical": True, "code": "X", "message": "m"}]
    assert _states(stage_steps(row, now=_at(5))) == [
        ("queued", "done"), ("research", "done"), ("analysis", "failed"),
        ("recommendation", "pending"), ("review", "pending"), ("done", "failed"),
    ]  # fmt: skip


def test_rows_from_before_the_marks_show_their_stages_done_without_times() -> None:
    view = stage_steps(_row("done", finished_at=_at(3)), now=_at(5))
    assert {state for _, state in _states(view)} == {"done"}
    assert [s["seconds"] for s in view["steps"][:-1]] == [None] * (len(STEP_NAMES) - 1)
    assert view["steps"][-1]["seconds"] == 3.0


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [
        (0.123, "0.12 s"),
        (3.45, "3.5 s"),
        (42.4, "42 s"),
        (125, "2 min 05 s"),
        (3720, "1 h 02 min"),
        (None, ""),
    ],
)
def test_durations_read_as_a_person_says_them(seconds: float | None, shown: str) -> None:
    assert duration_text(seconds) == shown


# --- the chart's extra layers (pure) -----------------------------------------------------


def test_forecast_ranges_are_read_when_the_report_has_them_and_skipped_when_malformed() -> None:
    report = {
        "risk": {
            "ranges": [
                {"horizon": 20, "level": 0.9, "low": 90.0, "high": 110.0},
                {"label": "VaR band", "low": 95, "high": 105},
                {"low": 120, "high": 100},  # inverted
                {"low": None, "high": 100},
                "junk",
            ]
        }
    }
    assert risk_bands(report) == [
        {"label": "90 % range 20d", "low": 90.0, "high": 110.0, "horizon": 20},
        {"label": "VaR band", "low": 95.0, "high": 105.0, "horizon": None},
    ]
    assert risk_bands({}) == [] and risk_bands({"risk": {"ranges": "x"}}) == []
    # a forecast per horizon: the 20-session one's ranges (else the nearest horizon's)
    per_horizon = {
        "risk": {
            "horizons": [
                {"horizon": h, "ranges": [{"probability": 0.8, "low": 100 - h, "high": 100 + h}]}
                for h in (1, 5, 60)
            ]
        }
    }
    assert risk_bands(per_horizon) == [{"label": "80 % range 5d", "low": 95.0, "high": 105.0, "horizon": 5}]
    per_horizon["risk"]["horizons"].append(
        {"horizon": 20, "ranges": [{"probability": 0.5, "low": 90, "high": 99}]}
    )
    assert risk_bands(per_horizon) == [{"label": "50 % range 20d", "low": 90.0, "high": 99.0, "horizon": 20}]


def test_earnings_marks_fall_inside_the_drawn_bars() -> None:
    report = {
        "earnings": {
            "next": {"date": "2012-07-24", "days_until": 25},
            "recent": [
                {"date": "2012-04-24", "surprise": 0.2256},
                {"date": "2010-01-25", "surprise": 0.1},  # before the first bar
                {"date": "2012-01-24", "surprise": None},
            ],
        }
    }
    found = earnings_marks(report, first="2011-06-29", last="2012-06-29")
    assert found["marks"] == [
        {"date": "2012-01-24", "label": "Earnings"},
        {"date": "2012-04-24", "label": "Earnings (surprise +22.6 %)"},  # 0.2256: +22.56 % to one decimal
    ]
    assert found["next"] == {"date": "2012-07-24", "days_until": 25}
    assert earnings_marks({}, first="2011-01-01", last="2012-01-01") == {"marks": [], "next": None}


# --- over HTTP, on a real analysis -------------------------------------------------------


@dataclass
class Console:
    """A gateway on the state of one real analysis: the base URL, the settings, the analysis
    id, the default tenant's key (which owns it), a read-only key and another tenant's key."""

    base: str
    settings: Settings
    analysis_id: str
    key: str
    reader: str
    other: str
    tmp: Path


@pytest.fixture(scope="module")
def console(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Console]:
    tmp = tmp_path_factory.mktemp("console-live")
    cli = Service(env=_base_env(tmp), tmp=tmp)
    proc = cli.cli("analyze", "AAPL", "--as-of", "2012-06-29", "--json")
    assert proc.returncode == 0, proc.stderr[-2000:]
    analysis_id = json.loads(proc.stdout)["analysis_id"]
    state = tmp / "state"
    settings = Settings(
        service_database_url=f"sqlite:///{state / 'finagent.sqlite3'}", service_state_dir=state
    )
    keys = {
        "key": create_key(name="owner", settings=settings),
        "reader": create_key(name="reader", settings=settings, scopes=("read",)),
        "other": create_key(name="other", settings=settings, tenant="other"),
    }
    with serve_app(settings) as base:
        yield Console(base=base, settings=settings, analysis_id=analysis_id, tmp=tmp, **keys)


def _csrf(html: str) -> str:
    match = re.search(r'name="csrf" value="([^"]+)"', html)
    assert match, html[:2000]
    return match.group(1)


@contextmanager
def _client(console: Console, key: str) -> Iterator[httpx.Client]:
    """An HTTP client signed in to the console with ``key``."""
    with httpx.Client(base_url=console.base, timeout=60, headers={"Origin": console.base}) as client:
        token = _csrf(client.get("/console/login").text)
        assert client.post("/console/login", data={"api_key": key, "csrf": token}).status_code == 303
        yield client


def _sql(console: Console, query: str, **params: Any) -> list[Any]:
    engine = create_engine(console.settings.service.effective_database_url)
    try:
        with engine.connect() as conn:
            return list(conn.execute(text(query), params).all())
    finally:
        engine.dispose()


def _stored(console: Console) -> dict[str, Any]:
    """The analysis's row as every reader gets it (``db.repo.get_analysis``)."""
    from db import repo
    from db.engine import get_engine

    row = repo.get_analysis(
        engine=get_engine(console.settings.service.effective_database_url), analysis_id=console.analysis_id
    )
    assert row is not None
    return row


def test_live_json_has_the_stepper_and_every_call_row(console: Console) -> None:
    with _client(console, console.key) as client:
        live = client.get(f"/console/analyses/{console.analysis_id}/live.json")
        assert live.status_code == 200 and live.headers["cache-control"] == "no-store"
        body = live.json()
        assert body["status"] == "done" and body["finished"] and body["progress"] is None
        assert [s["name"] for s in body["steps"]] == list(STEP_NAMES)
        assert {s["state"] for s in body["steps"]} == {"done"}
        # each stage's time is the run time the worker stored with the state
        state = _stored(console)["state"]
        marks = {m["stage"]: m for m in state["stage_marks"]}
        assert set(marks) == {"research", "analysis", "recommendation", "review"}
        for step in body["steps"][1:-1]:
            mark = marks[step["name"]]
            ran = datetime.fromisoformat(mark["finished_at"]) - datetime.fromisoformat(mark["started_at"])
            assert step["seconds"] == pytest.approx(ran.total_seconds(), abs=1e-3)
        rows = _sql(console, "SELECT id FROM tool_calls WHERE analysis_id = :a", a=console.analysis_id)
        assert body["count"] == len(rows) and {e["key"] for e in body["events"]} == {r[0] for r in rows}
        assert all("result" not in e for e in body["events"])  # no stored results travel
        # the page already has them all: no rows sent again
        again = client.get(f"/console/analyses/{console.analysis_id}/live.json", params={"n": body["count"]})
        assert "events" not in again.json()
    with _client(console, console.other) as client:
        assert client.get(f"/console/analyses/{console.analysis_id}/live.json").status_code == 404


def test_the_analysis_page_has_the_stepper_chart_and_timeline(console: Console) -> None:
    with _client(console, console.key) as client:
        page = client.get(f"/console/analyses/{console.analysis_id}")
        assert page.status_code == 200
        html = page.text
        assert "{{" not in html and "{%" not in html
        assert len(re.findall(r'<li class="step step-done" data-step="', html)) == len(STEP_NAMES)
        assert f'data-chart="/console/analyses/{console.analysis_id}/chart.json"' in html
        assert "/console/static/vendor/lightweight-charts.standalone.production.js" in html
        rows = _sql(console, "SELECT count(*) FROM tool_calls WHERE analysis_id = :a", a=console.analysis_id)
        assert html.count("<tr data-key=") == rows[0][0]
        # a finished page does not refresh itself; the scroll box is a named, focusable region
        assert 'http-equiv="refresh"' not in html
        assert '<div class="scroll" tabindex="0" role="region" aria-labelledby="h-timeline">' in html
        for asset in (
            "/console/static/chart.js",
            "/console/static/vendor/lightweight-charts.standalone.production.js",
        ):
            assert client.get(asset).status_code == 200


def test_chart_json_draws_the_same_layers_as_the_png(console: Console) -> None:
    from apps.analysis_chart import render_analysis_chart

    with _client(console, console.key) as client:
        answer = client.get(f"/console/analyses/{console.analysis_id}/chart.json")
        assert answer.status_code == 200
        data = answer.json()
        etag = answer.headers["etag"]
        assert (
            client.get(
                f"/console/analyses/{console.analysis_id}/chart.json", headers={"If-None-Match": etag}
            ).status_code
            == 304
        )
    assert data["symbol"] == "AAPL" and data["bars"][-1]["time"] == "2012-06-29"
    assert all(
        b["low"] <= min(b["open"], b["close"]) <= max(b["open"], b["close"]) <= b["high"]
        for b in data["bars"]
    )
    png = render_analysis_chart(analysis_id=console.analysis_id, settings=console.settings)
    drawn = png.data["annotations"]
    levels = data["levels"]
    assert [lv["price"] for lv in levels if lv["kind"] == "support"] == drawn["support"]
    assert [lv["price"] for lv in levels if lv["kind"] == "resistance"] == drawn["resistance"]
    assert {lv["label"]: lv["price"] for lv in levels if lv["kind"] == "fib"} == {
        f"Fib {k}": v for k, v in drawn["fib_levels"].items()
    }
    assert png.data["bars_used"] == len(data["bars"])
    report = _stored(console)["report_json"]  # references into the state resolved, as every reader
    assert [lv["price"] for lv in levels if lv["kind"] == "stop"] == [report["stop_loss"]["value"]]
    assert data["earnings"]["next"]["date"] == report["earnings"]["next"]["date"]
    with _client(console, console.other) as client:
        assert client.get(f"/console/analyses/{console.analysis_id}/chart.json").status_code == 404


def test_a_run_page_lists_each_tickers_progress_and_the_digest_links_them(console: Console) -> None:
    from apps import watchlists

    api = {"X-API-Key": console.key}
    assert (
        httpx.post(
            f"{console.base}/watchlists", headers=api, json={"name": "live", "tickers": ["IBM", "MSFT"]}
        ).status_code
        == 201
    )
    started = httpx.post(f"{console.base}/watchlists/live/runs", headers=api, json={"run_date": "2012-06-29"})
    assert started.status_code == 202, started.text
    with _client(console, console.key) as client:
        # no worker runs in this gateway: both tickers wait, and the page says so
        live = client.get("/console/watchlists/live/runs/2012-06-29/live.json").json()
        assert live["finished"] is False and live["counts"] == {
            "total": 2, "done": 0, "failed": 0, "running": 0, "queued": 2, "refused": 0
        }  # fmt: skip
        assert [(t["symbol"], t["state"], t["step"]) for t in live["tickers"]] == [
            ("IBM", "queued", 0),
            ("MSFT", "queued", 0),
        ]
        assert all(t["url"] == f"/console/analyses/{t['analysis_id']}" for t in live["tickers"])
        page = client.get("/console/watchlists/live/runs/2012-06-29").text
        assert 'data-kind="run"' in page and page.count('<progress max="5" value="0"') == 2
        assert 'http-equiv="refresh"' in page  # without scripts it refreshes itself
    with _client(console, console.other) as client:
        assert client.get("/console/watchlists/live/runs/2012-06-29/live.json").status_code == 404
        assert client.get("/console/watchlists/live/runs/2012-06-29").status_code == 404
    # the digest the page shows once done: each ticker a link to its analysis
    digest = {
        "watchlist": "live", "run_date": "2012-06-29", "previous_run_date": None,
        "counts": {"tickers": 2, "ok": 1, "failed": 1, "changed": 0, "refused": 0},
        "tickers": [
            {"symbol": "IBM", "analysis_id": "a-1", "outcome": "ok", "signal": "HOLD", "p_outperform": 0.5,
             "change": "new", "as_of": "2012-06-29", "chart_url": "/analyses/a-1/chart.png", "error": None},
            {"symbol": "MSFT", "analysis_id": "a-2", "outcome": "failed", "signal": None,
             "error": "MSFT: no bars"},
        ],
    }  # fmt: skip
    text_ = watchlists.digest_markdown(digest, ticker_url=lambda r: f"/console/analyses/{r['analysis_id']}")
    assert "| [IBM](/console/analyses/a-1) | HOLD |" in text_
    assert "- [**MSFT**](/console/analyses/a-2): no bars" in text_
    assert "| IBM | HOLD |" in watchlists.digest_markdown(digest)  # the stored digest is unchanged


def _backtest(client: httpx.Client, **fields: str) -> httpx.Response:
    token = _csrf(client.get("/console/scorecard").text)
    form = {"csrf": token, "symbols": "IBM", "start": "2012-01-02", "end": "2012-02-27", "every": "2w",
            "analysis_type": "composite", **fields}  # fmt: skip
    return client.post("/console/backtests", data=form)


def test_the_backtest_form_starts_a_tenants_backtest_under_the_rules(console: Console) -> None:
    with _client(console, console.reader) as client:
        refused = _backtest(client)
        assert refused.status_code == 403 and "analyze" in refused.text
    with _client(console, console.key) as client:
        assert client.post("/console/backtests", data={"symbols": "IBM"}).status_code == 403  # no CSRF
        too_big = _backtest(client, symbols="IBM MSFT AAPL", start="2011-01-03", end="2012-06-29", every="1d")
        assert too_big.status_code == 422 and "at most 500" in too_big.text
        assert _backtest(client, start="2012-13-01").status_code == 422
        bad_every = _backtest(client, every="3x")
        assert bad_every.status_code == 422 and "every &#39;3x&#39;: use Nd" in bad_every.text
        assert "--every" not in bad_every.text
        started = _backtest(client, name="mine")
        assert started.status_code == 303 and started.headers["location"] == "/console/backtests/mine"
        page = client.get("/console/backtests/mine")
        assert page.status_code == 200 and 'data-kind="backtest"' in page.text
        live = client.get("/console/backtests/mine/live.json").json()
        # 2012-01-02 .. 2012-02-27 every two weeks: five grid dates, no worker here to run them
        assert live == {"progress": {"total": 5, "done": 0, "failed": 0, "cancelled": 0, "refused": 0,
                                     "running": 0, "queued": 5}, "finished": False}  # fmt: skip
        owners = _sql(
            console,
            "SELECT DISTINCT a.tenant FROM analyses a JOIN backtest_items i ON i.analysis_id = a.id "
            "WHERE i.backtest_name = 'mine'",
        )
        assert [r[0] for r in owners] == ["default"]
        # one running backtest at a time; the same form again resumes (no second copy)
        second = _backtest(client, name="another", symbols="MSFT")
        assert second.status_code == 409 and "still running" in second.text
        assert _backtest(client, name="mine").status_code == 303
        assert _sql(console, "SELECT count(*) FROM backtest_items WHERE backtest_name = 'mine'")[0][0] == 5
    with _client(console, console.other) as client:
        assert client.get("/console/backtests/mine").status_code == 404
        assert client.get("/console/backtests/mine/live.json").status_code == 404
        taken = _backtest(client, name="mine")
        assert taken.status_code == 409 and "is taken" in taken.text
        assert "mine" not in client.get("/console/scorecard").text


def test_scoring_from_the_console_fills_the_summary_cards(console: Console) -> None:
    with _client(console, console.key) as client:
        page = client.get("/console/scorecard")
        token = _csrf(page.text)
        assert client.post("/console/scorecard/score", data={}).status_code == 403  # no CSRF
        scored = client.post("/console/scorecard/score", data={"csrf": token, "since": "2012-06-29"})
        assert scored.status_code == 303
        location = scored.headers["location"]
        assert re.fullmatch(r"/console/scorecard\?since=2012-06-29&scored=3&open=0", location), location
        card = client.get(location).text
        assert "Scored 3 new recommendation horizons" in card
        assert card.count('class="card summary-card') == 3
        for horizon in (5, 20, 60):
            assert f'<h3 id="h-card-{horizon}">{horizon} trading days</h3>' in card
        # the expert tables are folded below the cards
        assert card.index("summary-card") < card.index('<details class="expert">')
        assert client.post("/console/scorecard/score", data={"csrf": token, "since": "x"}).status_code == 422
        assert (
            client.post("/console/scorecard/score", data={"csrf": token, "backtest": "nope"}).status_code
            == 404
        )
    with _client(console, console.other) as client:
        token = _csrf(client.get("/console/scorecard").text)
        nothing = client.post("/console/scorecard/score", data={"csrf": token})
        assert nothing.headers["location"] == "/console/scorecard?scored=0&open=0"  # none of theirs


def test_the_root_opens_the_console(console: Console) -> None:
    answer = httpx.get(console.base + "/", follow_redirects=False)
    assert answer.status_code == 307 and answer.headers["location"] == "/console/analyses"


def test_markdown_tables_scroll_in_named_focusable_boxes() -> None:
    from apps.api.console.views import markdown_html

    html = str(markdown_html("# Card\n\n## 5 days <b>\n\n| a |\n|---|\n| 1 |\n"))
    assert (
        '<div class="scroll" tabindex="0" role="region" aria-label="Table 1: 5 days &lt;b&gt;"><table>'
        in html
    )
    assert html.rstrip().endswith("</table>\n</div>")


def test_the_options_captions_name_the_right_in_words() -> None:
    from apps.api.console.views import options_view, templates

    contract = {"contract": "AAPL140621P00600000", "expiry": date(2014, 6, 27), "dte": 21, "strike": 600.0,
                "bid": 5.0, "ask": 5.2, "delta": -0.3, "iv": 0.2, "pop": 0.7, "open_interest": 10,
                "fill": 5.1, "net_premium": 500.0, "net_weekly_roc": 0.003, "iv_hv_ratio": 1.2}  # fmt: skip
    record = {"status": "suggested", "suggestion": contract, "alternatives": [contract], "options": {}}
    for kind, right in (("csp", "put"), ("covered_call", "call")):
        html = templates.get_template("_options.html").render(
            options=options_view(record, None, None, kind=kind), cited=set()
        )
        assert f"Alternatives (the next passing {right}s by the screen&#39;s ranking)" in html
        assert "{{" not in html and "{%" not in html


def test_the_settings_page_says_what_is_used_and_hides_where_from_all_but_the_operator(
    console: Console,
) -> None:
    database = str(console.settings.service.effective_database_url).split("///")[-1]
    with _client(console, console.key) as client:
        page = client.get("/console/settings")
        assert page.status_code == 200
        html = page.text
        assert '<h2 id="h-data">Data</h2>' in html and '<h2 id="h-services">Services</h2>' in html
        assert re.search(
            r"<td>bars</td><td>embedded</td>\s*<td><span class=\"check check-ok\">ok</span>", html
        )
        assert "5 tickers" in html and "AAPL, FB, GOOG, IBM, MSFT" in html
        assert "FINAGENT_DATA_PROVIDER=yfinance" in html  # current data is one switch away
        assert database not in html and '<th scope="col">Where</th>' not in html
    operator = create_key(name="operator", settings=console.settings, scopes=("read", "operator"))
    with _client(console, operator) as client:
        html = client.get("/console/settings").text
        assert '<th scope="col">Where</th>' in html and database in html


def test_the_new_analysis_form_suggests_the_datas_tickers_and_span(console: Console) -> None:
    with _client(console, console.key) as client:
        html = client.get("/console/new").text
    assert re.findall(r'<option value="([A-Z]+)"></option>', html) == ["AAPL", "FB", "GOOG", "IBM", "MSFT"]
    assert 'list="known-tickers"' in html
    # the embedded data ends on 2013-03-01 (README): the date field stops there
    assert 'max="2013-03-01"' in html and "(2013-03-01)" in html
