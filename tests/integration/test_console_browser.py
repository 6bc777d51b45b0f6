"""The web console in a real headless Chromium (Playwright, the system's browser) against
``finagent serve`` and a real ``finagent worker`` on Redis and PostgreSQL: sign-in, every page,
a new analysis followed live until ``done``, tenant isolation, CSRF refusal, sign-out;
each page is screenshotted (checked non-blank) and scanned with axe-core (vendored in
``tests/integration/axe/``, no serious or critical violation). Skips with a reason when no
Chromium is installed (``.ci/run`` installs one)."""

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
    browser_path,
    serve_console,
)
from tests.integration.browser_support import check as _check
from tests.integration.browser_support import non_blank as _non_blank
from tests.integration.browser_support import sign_in as _sign_in
from tests.integration.conftest import Service
from tests.integration.ops_support import Http, poll


@pytest.fixture
def console(service: Service, start_worker: Any) -> Iterator[Console]:
    """``finagent serve`` on a free port, a worker, and one key in each of two tenants."""
    yield from serve_console(service, start_worker)


def test_console_end_to_end_in_chromium(console: Console, tmp_path: Path) -> None:
    from playwright.sync_api import sync_playwright

    executable = browser_path()
    shots = tmp_path / "shots"
    shots.mkdir()
    base = console.base
    api = Http(base=base, key=console.acme)
    # a watchlist of acme's and a run of it, started over the JSON API, for the watchlist pages
    status, _ = api.post("/watchlists", {"name": "tech", "tickers": ["IBM"]})
    assert status == 201
    status, _ = api.post("/watchlists/tech/runs", {"run_date": "2012-06-29"})
    assert status == 202
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        try:
            acme = browser.new_context(viewport={"width": 1280, "height": 900})
            page = acme.new_page()

            # any console page without a session goes to the sign-in page, and back after it
            page.goto(f"{base}/console/watchlists")
            assert page.url.startswith(f"{base}/console/login?next=")
            _check(page, shots, "login")
            # the keyboard reaches the skip link first, and focus is visible
            page.keyboard.press("Tab")
            focused = page.evaluate(
                "() => [document.activeElement.className,"
                " getComputedStyle(document.activeElement).outlineStyle]"
            )
            assert focused == ["skip", "solid"], focused

            # a wrong key: the form again, with the reason, no session
            page.fill("#api_key", "fa_000000000000_" + "x" * 43)
            with page.expect_response(f"{base}/console/login") as answer:
                page.click("form.card button[type=submit]")
            assert answer.value.status == 403
            assert "invalid API key" in page.inner_text("[role=alert]")

            page.fill("#api_key", console.acme)
            page.click("form.card button[type=submit]")
            assert page.url == f"{base}/console/watchlists"
            cookie = next(c for c in acme.cookies() if c["name"] == "finagent_console")
            assert cookie["httpOnly"] and cookie["sameSite"] == "Lax" and console.acme not in cookie["value"]
            assert "tech" in page.inner_text("main")
            _check(page, shots, "watchlists")
            page.click("text=tech")
            assert page.url == f"{base}/console/watchlists/tech"
            assert "IBM" in page.inner_text("main")
            assert page.locator("a[href='/console/watchlists/tech/runs/2012-06-29']").count() == 1
            _check(page, shots, "watchlist")

            # a new analysis: the form, then its page, which follows it live until done
            page.click("nav >> text=New analysis")
            _check(page, shots, "new")
            page.fill("#symbol", "ZZZZ")
            page.click("form.card button[type=submit]")
            assert "not in the embedded dataset" in page.inner_text("[role=alert]")
            page.fill("#symbol", "AAPL")
            page.fill("#as_of", "2012-06-29")
            page.click("form.card button[type=submit]")
            assert re.fullmatch(rf"{base}/console/analyses/{UUID}", page.url), page.url
            analysis_id = page.url.rsplit("/", 1)[1]
            # the page polls its progress and swaps the finished analysis in
            page.wait_for_selector("#h-headline", timeout=240_000)
            assert page.inner_text("#status").strip() == "done"
            _, shown = api.get(f"/analyses/{analysis_id}")
            assert shown["status"] == "done"
            assert page.inner_text(".signal").strip() == shown["signal"]
            # 2012 is before any scored call: the calibration abstains, and the page says so in one
            # plain sentence with the measured hit rate; no p and no raw confidence as evidence
            assert shown["direction"].startswith("No evidence that any signal here predicts AAPL against SPY")
            # the same sentence, each number bound to its unit by a no-break space ("52\u00a0%")
            direction = page.inner_text("#direction").strip()
            assert not re.search(r"\d (?:%|USD\b)", direction), direction
            assert direction.replace("\u00a0", " ") == shown["direction"]
            assert page.locator("#p-outperform").count() == 0
            assert "confidence" not in shown and shown["details"]["confidence"] is not None
            card = page.locator("section.headline")
            assert "Confidence" not in card.inner_text() and "confidence" not in card.inner_text()
            # the interactive chart is drawn; its PNG (the same render_chart tool as
            # GET /analyses/{id}/chart.png) stays one link away
            page.wait_for_selector(".pricechart[data-ready=drawn]", timeout=60_000)
            png = acme.request.get(f"{base}/console/analyses/{analysis_id}/chart.png")
            assert png.status == 200 and png.body()[:8] == b"\x89PNG\r\n\x1a\n"
            assert int(page.inner_text("#numbers-checked")) > 0
            # a citation jumps to its tool call's row in the timeline
            cite = page.locator("a.cite").first
            target = cite.get_attribute("href")
            assert target and target.startswith("#call-")
            cite.click()
            row = page.locator(f"tr{target}")
            assert target[len("#call-") :] in row.inner_text()
            assert page.locator("table.timeline tbody tr").count() >= 3
            _check(page, shots, "analysis")
            # at phone width nothing but the tables' own scroll boxes is wider than the screen
            page.set_viewport_size({"width": 390, "height": 844})
            assert page.evaluate("() => document.documentElement.scrollWidth <= window.innerWidth + 1")
            page.screenshot(path=str(shots / "analysis-phone.png"))
            _non_blank(shots / "analysis-phone.png")
            page.set_viewport_size({"width": 1280, "height": 900})

            # the list, with its filters
            page.goto(f"{base}/console/analyses?symbol=AAPL&status=done&type=composite")
            row = page.locator("tbody tr", has=page.locator(f"a[href='/console/analyses/{analysis_id}']"))
            assert row.count() == 1 and "composite" in row.inner_text() and "done" in row.inner_text()
            _check(page, shots, "analyses")
            page.goto(f"{base}/console/analyses?symbol=MSFT")
            assert "No analyses match these filters" in page.inner_text("main")
            page.goto(f"{base}/console/analyses?type=csp")
            assert page.locator(f"a[href='/console/analyses/{analysis_id}']").count() == 0

            # the run (started before the analysis) has finished by now or soon: its digest
            poll(
                lambda: api.get("/watchlists/tech/runs/2012-06-29")[1]["status"] == "done",
                timeout=240,
                what="the watchlist run done",
            )
            page.goto(f"{base}/console/watchlists/tech/runs/2012-06-29")
            digest = page.inner_text(".report")
            assert "IBM" in digest, digest
            _, run = api.get("/watchlists/tech/runs/2012-06-29")
            ibm = next(t for t in run["digest"]["tickers"] if t["symbol"] == "IBM")
            assert ibm["outcome"] in digest or str(ibm.get("signal")) in digest, (ibm, digest)
            chart_link = page.locator(".report a", has_text="chart")
            assert chart_link.get_attribute("href") == f"/console/analyses/{ibm['analysis_id']}/chart.png"
            assert acme.request.get(f"{base}/console/analyses/{ibm['analysis_id']}/chart.png").status == 200
            _check(page, shots, "run")

            page.goto(f"{base}/console/scorecard")
            assert page.inner_text("h1") == "Backtests and scorecard"
            _check(page, shots, "scorecard")

            # another tenant sees none of it: the same 404 as an unknown analysis
            globex = browser.new_context()
            other = globex.new_page()
            _sign_in(other, base, console.globex)
            assert other.url == f"{base}/console/analyses"
            assert "No analyses" in other.inner_text("main")
            answer = other.goto(f"{base}/console/analyses/{analysis_id}")
            assert answer is not None and answer.status == 404
            assert "No such analysis" in other.inner_text("main")
            for path in (f"analyses/{analysis_id}/chart.png", f"analyses/{analysis_id}/status.json"):
                assert globex.request.get(f"{base}/console/{path}").status == 404
            assert other.goto(f"{base}/console/watchlists/tech").status == 404  # type: ignore[union-attr]
            _check(other, shots, "not-found")

            # CSRF: a form post without the session's token, or with another one, is refused (sent
            # with the console's own Origin, as a browser's form, so the token is what refuses it)
            for form in ({"symbol": "MSFT"}, {"symbol": "MSFT", "csrf": "forged"}):
                refused = globex.request.post(
                    f"{base}/console/analyses", form=form, max_redirects=0, headers={"Origin": base}
                )
                assert refused.status == 403 and "CSRF" in refused.text()
            assert api.get("/analyses?symbol=MSFT", key=console.globex)[1]["items"] == []
            # a sign-in posted without the token (say, from another site) is refused too
            fresh = browser.new_context()
            refused = fresh.request.post(
                f"{base}/console/login", form={"api_key": console.globex}, max_redirects=0
            )
            assert refused.status == 403
            assert not [c for c in fresh.cookies() if c["name"] == "finagent_console"]

            # sign-out ends the session
            page.click("text=Sign out")
            assert page.url == f"{base}/console/login"
            page.goto(f"{base}/console/analyses")
            assert page.url.startswith(f"{base}/console/login")
        finally:
            browser.close()


#: The real data of the options page's check (``../shared/data``, see its README): the Lean
#: end-of-day AAPL chains of June 2014 and the StockNet daily bars.
SHARED_DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"
LEAN_CHAINS = SHARED_DATA / "options" / "lean_aapl_2014-06"


@pytest.fixture
def lean_console(service: Service, start_worker: Any) -> Iterator[Console]:
    """As :func:`console`, with the gateway and the worker reading the StockNet bars and the
    Lean option chains of ``../shared/data`` (skips when they are absent)."""
    if not LEAN_CHAINS.is_dir() or not (SHARED_DATA / "ohlcv" / "stocknet").is_dir():
        pytest.skip(f"no Lean chains or StockNet bars under {SHARED_DATA} (see its README)")
    service.env.update(
        FINAGENT_DATA_PROVIDER="csv",
        FINAGENT_DATA_DIR=str(SHARED_DATA / "ohlcv" / "stocknet"),
        FINAGENT_OPTIONS_DIR=str(SHARED_DATA / "options"),
        # the June 2014 chains pass no put at the default 0.5 % weekly ROC (docs/options.md)
        FINAGENT_OPTIONS_MIN_WEEKLY_ROC="0.002",
        # one contract of the 620 put secures 62,000 USD: 62 % of the default paper account, which
        # the plan's sizing refuses; 12.4 % of this one
        FINAGENT_BROKER_STARTING_CASH="500000",
    )
    yield from serve_console(service, start_worker)


def test_console_watchlist_forms_and_options_page_in_chromium(lean_console: Console, tmp_path: Path) -> None:
    from playwright.sync_api import sync_playwright

    executable = browser_path()
    shots = tmp_path / "shots"
    shots.mkdir()
    base = lean_console.base
    api = Http(base=base, key=lean_console.acme)
    status, _ = Http(base=base, key=lean_console.globex).post(
        "/watchlists", {"name": "theirs", "tickers": ["AAPL"]}
    )
    assert status == 201
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        try:
            context = browser.new_context(viewport={"width": 1280, "height": 900})
            page = context.new_page()
            _sign_in(page, base, lean_console.acme)

            # create: a bad schedule is shown on the form with the API's reason, then fixed
            page.goto(f"{base}/console/watchlists")
            page.fill("#name", "lean")
            page.fill("#tickers", "aapl, GOOG")
            page.fill("#schedule", "61 * * * *")
            with page.expect_response(f"{base}/console/watchlists") as answer:
                page.click("form[action='/console/watchlists'] button[type=submit]")
            assert answer.value.status == 422
            assert "schedule" in page.inner_text("[role=alert]")
            assert page.input_value("#tickers") == "aapl, GOOG"  # what was typed stays
            _check(page, shots, "watchlist-create-refused")
            page.fill("#schedule", "0 22 * * 1-5")
            page.click("form[action='/console/watchlists'] button[type=submit]")
            assert page.url == f"{base}/console/watchlists/lean"
            _, stored = api.get("/watchlists/lean")
            assert stored["tickers"] == ["AAPL", "GOOG"] and stored["schedule"] == "0 22 * * 1-5"
            _check(page, shots, "watchlist-created")

            # edit: the form holds the stored values; a change is saved through PATCH's function
            page.click("text=Edit this watchlist")
            assert page.input_value("#tickers") == "AAPL, GOOG"
            _check(page, shots, "watchlist-edit")
            page.fill("#tickers", "AAPL")
            page.select_option("#as_of", "latest")
            page.click("form.card button[type=submit]")
            assert page.url == f"{base}/console/watchlists/lean"
            _, stored = api.get("/watchlists/lean")
            assert stored["tickers"] == ["AAPL"] and stored["options"] == {"as_of": "latest"}

            # another tenant's watchlist: 404 for its edit page and its forms
            assert page.goto(f"{base}/console/watchlists/theirs/edit").status == 404  # type: ignore[union-attr]
            token = page.locator("input[name=csrf]").first.get_attribute("value")
            for action in ("edit", "delete", "runs"):
                answer = context.request.post(
                    f"{base}/console/watchlists/theirs/{action}",
                    form={"csrf": token or ""},
                    max_redirects=0,
                    headers={"Origin": base},  # as the browser's own form sends it
                )
                assert answer.status == 404, action

            # run now: a date after today is refused on the form; a past one opens its run
            page.goto(f"{base}/console/watchlists/lean")
            page.fill("#run_date", "2999-01-01")
            with page.expect_response(f"{base}/console/watchlists/lean/runs") as answer:
                page.click("form[action='/console/watchlists/lean/runs'] button[type=submit]")
            assert answer.value.status == 422 and "The run was not started" in page.inner_text("[role=alert]")
            page.fill("#run_date", "2014-06-06")
            page.click("form[action='/console/watchlists/lean/runs'] button[type=submit]")
            assert page.url == f"{base}/console/watchlists/lean/runs/2014-06-06"
            _, run = api.get("/watchlists/lean/runs/2014-06-06")
            assert run["trigger"] == "api"
            run_analysis = analysis_id_for(run_id=run["run_id"], symbol="AAPL")

            # delete (the run goes with it)
            page.goto(f"{base}/console/watchlists/lean")
            page.click("button.danger")
            assert page.url == f"{base}/console/watchlists"
            assert api.get("/watchlists/lean")[0] == 404

            # a cash-secured put on the Lean chains, started from the form: its options section
            page.goto(f"{base}/console/new")
            page.fill("#symbol", "AAPL")
            page.fill("#as_of", "2014-06-06")
            page.select_option("#analysis_type", "csp")
            page.click("form.card button[type=submit]")
            assert re.fullmatch(rf"{base}/console/analyses/{UUID}", page.url), page.url
            analysis_id = page.url.rsplit("/", 1)[1]
            page.wait_for_selector("#h-options", timeout=300_000)
            _, shown = api.get(f"/analyses/{analysis_id}")
            csp = shown["report_json"]["csp"]
            assert csp["status"] == "suggested", csp.get("reasons")
            section = page.locator("section.options")
            assert csp["suggestion"]["contract"] in section.locator("p.signal").inner_text()
            for alternative in csp["alternatives"]:
                assert alternative["contract"] in section.inner_text()
            # the ladder: one row per expiry, each expiry once
            ladder = section.locator("table").nth(2).locator("tbody tr td:nth-child(2)").all_inner_texts()
            assert ladder and len(ladder) == len(set(ladder)) and ladder == sorted(ladder)
            assert "passes" in section.inner_text() and "fails:" in section.inner_text()
            cite = section.locator("a.cite", has_text="filter_options_").first
            target = cite.get_attribute("href")
            assert target and target.startswith("#call-filter_options_")
            cite.click()
            assert page.locator(f"tr{target}").count() == 1
            # the interactive chart marks the put's strike and breakeven and draws its ±1σ cone
            # at expiry as a band, with the expiry named in the legend
            page.wait_for_selector(".pricechart[data-ready=drawn]", timeout=60_000)
            legend = page.inner_text(".chart-legend")
            strike = csp["suggestion"]["strike"]
            assert "Plan (strike, breakeven)" in legend and f"{strike:,.2f}" in legend, legend
            chart = context.request.get(f"{base}/console/analyses/{analysis_id}/chart.json").json()
            # the overlay's expiry is the contract's last trading day (a Saturday expiry's Friday)
            expiry = chart["option"]["expiry"]
            assert expiry <= str(csp["suggestion"]["expiry"]) and f"Option expiry {expiry}" in legend, legend
            assert f"±1σ by expiry {expiry}" in legend, legend
            _check(page, shots, "options")
            section.screenshot(path=str(shots / "options-section.png"))
            _non_blank(shots / "options-section.png")

            # the scorecard's plots: the run's AAPL analysis of 2014-06-06, scored on the real
            # StockNet bars that follow it by `finagent scorecard`
            poll(
                lambda: api.get(f"/analyses/{run_analysis}")[1].get("status") in ("done", "failed"),
                timeout=300,
                what="the run's analysis finished",
            )
            scored = lean_console.service.cli("scorecard", timeout=300)
            assert scored.returncode == 0, scored.stderr
            page.goto(f"{base}/console/scorecard")
            plots = page.locator("section.plots img")
            assert plots.count() == 2
            page.wait_for_function(
                "() => [...document.querySelectorAll('section.plots img')].every(i => i.complete)",
                timeout=120_000,
            )
            widths = page.evaluate(
                "() => [...document.querySelectorAll('section.plots img')].map(i => i.naturalWidth)"
            )
            assert widths == [770, 990], widths
            _check(page, shots, "scorecard-plots")
        finally:
            browser.close()
