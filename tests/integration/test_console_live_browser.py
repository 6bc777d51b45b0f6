"""The console a person lives in, in a real headless Chromium (Playwright, the system's browser)
against ``finagent serve``, a real ``finagent worker``, Redis and PostgreSQL:

1. work started from the console while no worker runs (an analysis, a watchlist run of two
   tickers, a backtest of three grid points) waits on its pages; then a worker starts, and each
   page follows it without a reload: the analysis's stage stepper and timeline, the run's
   per-ticker progress then its digest (whose tickers open their analyses), the backtest's
   progress then the way to its scorecard;
2. the analysis's interactive chart answers hover and the arrow keys with the day's open, high,
   low and close, the very bar ``chart.json`` serves;
3. scoring the backtest from the console shows one summary card per horizon;
4. a crawler follows every link of the console from the index, signed in, and finds no
   template text (``{{`` or ``{%``), no server error, no page wider than a 390 px phone, and no
   serious or critical axe-core violation at 1280 and 390 px.

Skips with a reason when no Chromium is installed (``.ci/run`` installs one).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from apps.watchlists import analysis_id_for
from tests.integration.browser_support import (
    CHROMIUM_ARGS,
    UUID,
    Console,
    axe,
    browser_path,
    crawl,
    non_blank,
    serve_console,
    sign_in,
)
from tests.integration.conftest import Service
from tests.integration.ops_support import Http

#: Records, on every change of the page's <main>, the stepper's step states and the number of
#: timeline rows, and keeps a marker that only a reload would clear.
OBSERVE = """() => {
  window.__noReload = true;
  window.__seen = [];
  const record = () => {
    const steps = [...document.querySelectorAll('#stepper li')]
      .map(li => li.dataset.step + ':' + li.className.replace('step step-', '')).join(',');
    const rows = document.querySelectorAll('#timeline-rows tr[data-key]').length;
    const last = window.__seen[window.__seen.length - 1];
    if (!last || last.steps !== steps || last.rows !== rows) { window.__seen.push({steps, rows}); }
  };
  new MutationObserver(record).observe(document.getElementById('main'), {subtree: true, childList: true});
  record();
}"""
TOOLTIP = re.compile(
    r"(\d{4}-\d{2}-\d{2})  O ([\d,]+\.\d\d)  H ([\d,]+\.\d\d)  L ([\d,]+\.\d\d)  C ([\d,]+\.\d\d)  Vol [\d,]+"
)


@pytest.fixture
def idle_console(service: Service) -> Iterator[Console]:
    """``finagent serve`` and two tenants' keys, and no worker yet (the test starts one)."""
    yield from serve_console(service, None)


def _bar_of(tooltip: str, bars: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The bar the tooltip names, checked against its printed open, high, low and close."""
    found = TOOLTIP.fullmatch(tooltip.strip())
    assert found, tooltip
    bar = bars[found.group(1)]
    printed = [float(g.replace(",", "")) for g in found.groups()[1:]]
    assert printed == pytest.approx([bar["open"], bar["high"], bar["low"], bar["close"]], abs=0.006)
    return bar


def test_live_console_chart_backtest_scorecard_and_every_page_in_chromium(
    idle_console: Console, start_worker: Any, tmp_path: Path
) -> None:
    from playwright.sync_api import sync_playwright

    executable = browser_path()
    shots = tmp_path / "shots"
    shots.mkdir()
    base = idle_console.base
    api = Http(base=base, key=idle_console.acme)
    errors: list[str] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        try:
            context = browser.new_context(viewport={"width": 1280, "height": 900})
            context.on("weberror", lambda e: errors.append(str(e.error)))
            page = context.new_page()
            sign_in(page, base, idle_console.acme)
            assert page.url == f"{base}/console/analyses"

            # 1a. an analysis from the form: no worker runs, so it waits, its clock ticking
            page.goto(f"{base}/console/new")
            page.fill("#symbol", "AAPL")
            page.fill("#as_of", "2012-06-29")
            page.click("form.card button[type=submit]")
            assert re.fullmatch(rf"{base}/console/analyses/{UUID}", page.url), page.url
            analysis_id = page.url.rsplit("/", 1)[1]
            queued = page.locator("#stepper li[data-step=queued]")
            assert "step-waiting" in (queued.get_attribute("class") or "")
            assert page.locator("#stepper li.step-pending").count() == 5
            clock = queued.locator(".step-time").inner_text()
            page.wait_for_function(
                "t => document.querySelector('#stepper li[data-step=queued] .step-time').textContent !== t",
                arg=clock,
                timeout=30_000,
            )
            page.evaluate(OBSERVE)

            # 1b. a watchlist and its run from the console's forms, in a second tab
            run_page = context.new_page()
            run_page.goto(f"{base}/console/watchlists")
            run_page.fill("#name", "duo")
            run_page.fill("#tickers", "IBM, MSFT")
            run_page.fill("#schedule", "0 22 * * 1-5")
            run_page.click("form[action='/console/watchlists'] button[type=submit]")
            assert run_page.url == f"{base}/console/watchlists/duo"
            run_page.fill("#run_date", "2012-06-29")
            run_page.click("form[action='/console/watchlists/duo/runs'] button[type=submit]")
            assert run_page.url == f"{base}/console/watchlists/duo/runs/2012-06-29"
            rows = run_page.locator("#ticker-rows tr")
            assert rows.count() == 2 and "queued" in rows.first.inner_text()
            assert "0 of 2 analyses finished" in run_page.inner_text("#run-counts")
            run_page.evaluate("window.__noReload = true")

            # 1c. a backtest from the console's form, in a third tab: 2012-01-02, -01-30, -02-27
            bt_page = context.new_page()
            bt_page.goto(f"{base}/console/scorecard")
            bt_page.fill("#bt-symbols", "IBM")
            bt_page.fill("#bt-start", "2012-01-02")
            bt_page.fill("#bt-end", "2012-02-27")
            bt_page.fill("#bt-every", "4w")
            bt_page.fill("#bt-name", "ibm-q1")
            bt_page.click("form[action='/console/backtests'] button[type=submit]")
            assert bt_page.url == f"{base}/console/backtests/ibm-q1"
            assert "0 of 3 analyses finished" in bt_page.inner_text("#backtest-counts")
            bt_page.evaluate("window.__noReload = true")

            # 2. a worker: every page follows its work without a reload
            start_worker()
            page.wait_for_selector("#h-headline", timeout=240_000)
            assert page.evaluate("window.__noReload") is True
            seen = page.evaluate("window.__seen")
            assert seen[0]["steps"].startswith("queued:waiting") and seen[0]["rows"] == 0, seen
            final = "queued:done,research:done,analysis:done,recommendation:done,review:done,done:done"
            assert seen[-1]["steps"] == final, seen
            live = context.request.get(f"{base}/console/analyses/{analysis_id}/live.json").json()
            assert seen[-1]["rows"] == live["count"] > 0
            assert all(step["seconds"] is not None for step in live["steps"])  # each stage's time
            _, shown = api.get(f"/analyses/{analysis_id}")
            assert page.inner_text(".signal").strip() == shown["signal"]

            # the interactive chart: hover shows the day under the pointer, the arrow keys step
            page.wait_for_selector(".pricechart[data-ready=drawn]", timeout=60_000)
            data = context.request.get(f"{base}/console/analyses/{analysis_id}/chart.json").json()
            bars = {b["time"]: b for b in data["bars"]}
            chart = page.locator(".pricechart")
            box = chart.bounding_box()
            assert box is not None
            chart.hover(position={"x": box["width"] * 0.4, "y": box["height"] * 0.5})  # scrolls to it
            page.wait_for_function(
                "last => !document.querySelector('.chart-tooltip').textContent.startsWith(last)",
                arg=data["bars"][-1]["time"],
                timeout=10_000,
            )
            hovered = _bar_of(page.inner_text(".chart-tooltip"), bars)
            assert hovered["time"] != data["bars"][-1]["time"]  # the pointer's day, not the last
            chart.focus()
            page.keyboard.press("End")
            assert _bar_of(page.inner_text(".chart-tooltip"), bars) == data["bars"][-1]
            page.keyboard.press("ArrowLeft")
            assert _bar_of(page.inner_text(".chart-tooltip"), bars) == data["bars"][-2]
            assert "Stop:" in page.inner_text(".chart-legend")
            page.screenshot(path=str(shots / "analysis-live.png"), full_page=True)
            non_blank(shots / "analysis-live.png")

            # the run: per-ticker progress, then its digest swapped in; tickers open analyses
            run_page.wait_for_selector(".report a[href^='/console/analyses/']", timeout=240_000)
            assert run_page.evaluate("window.__noReload") is True
            _, run = api.get("/watchlists/duo/runs/2012-06-29")
            ibm = analysis_id_for(run_id=run["run_id"], symbol="IBM")
            link = run_page.locator(".report a", has_text="IBM").first
            assert link.get_attribute("href") == f"/console/analyses/{ibm}"
            link.click()
            assert run_page.url == f"{base}/console/analyses/{ibm}"
            assert run_page.inner_text("#status").strip() in ("done", "failed")

            # the backtest: its progress, then scoring it from the console: the summary cards
            bt_page.wait_for_selector("#h-bt-next", timeout=300_000)
            assert bt_page.evaluate("window.__noReload") is True
            assert "3 of 3 analyses finished" in bt_page.inner_text("#backtest-counts")
            # scoring and the scorecard's first build import scipy in the gateway: seconds on a
            # loaded machine
            bt_page.click("#h-bt-next ~ form button[type=submit]", timeout=180_000)
            assert re.fullmatch(rf"{base}/console/scorecard\?backtest=ibm-q1&scored=9&open=0", bt_page.url), (
                bt_page.url
            )
            cards = bt_page.locator(".summary-card")
            assert cards.count() == 3
            assert [cards.nth(i).locator("h3").inner_text() for i in range(3)] == [
                "5 trading days",
                "20 trading days",
                "60 trading days",
            ]
            for i in range(3):
                words = cards.nth(i).inner_text()
                assert "coin flip" in words or "were HOLD" in words, words
            assert bt_page.locator("details.expert").count() == 1
            assert not bt_page.locator("details.expert").evaluate("d => d.open")

            # 3. the crawler: every console page reachable from the index, at 1280 and 390 px
            _crawl(page, base, shots)
            other = browser.new_context(viewport={"width": 390, "height": 844})
            signed_out = other.new_page()
            signed_out.goto(f"{base}/console/login")
            axe(signed_out, "login at 390 px")
            sign_in(signed_out, base, idle_console.globex)
            assert signed_out.goto(f"{base}/console/backtests/ibm-q1").status == 404  # type: ignore[union-attr]
            axe(signed_out, "not found at 390 px")
            assert context.request.get(f"{base}/").url == f"{base}/console/analyses"
        finally:
            browser.close()
    assert not errors, errors


def _crawl(page: Any, base: str, shots: Path) -> None:
    """:func:`~tests.integration.browser_support.crawl` from ``/console/analyses``, then: the
    index, the lists, the forms and one of each object's pages were among the pages visited."""
    visited = crawl(page, base, shots)
    # the index, the lists, the forms and one of each object's pages at least
    for expected in ("/console/new", "/console/watchlists", "/console/watchlists/duo",
                     "/console/watchlists/duo/runs/2012-06-29", "/console/scorecard",
                     "/console/backtests/ibm-q1", "/console/watchlists/duo/edit"):  # fmt: skip
        assert expected in visited, (expected, visited)
    assert sum(1 for p in visited if re.fullmatch(rf"/console/analyses/{UUID}", p)) >= 6, visited
