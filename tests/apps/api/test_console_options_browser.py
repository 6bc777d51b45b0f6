"""The options pages of the console in a real headless Chromium (Playwright, the system's
browser), on analyses really run by the embedded CLI on the StockNet bars and the Lean AAPL
chains of ``../shared/data`` (SQLite, no broker): a put credit spread that is sized (AAPL
2014-06-06), one the sizing refuses (the same day on an account of 5,000 USD), a cash-secured
put (AAPL 2014-06-09, two contracts) and a covered call (AAPL 2014-06-06 on 100 shares bought at
600). Each page is loaded at 1280 and 390 px, checked against the stored report (the verdict,
the strikes, a citation that jumps to its tool call's row), fits a phone's width, and has no
serious or critical axe-core finding; then the crawler visits every console page from the
index, these four analyses among them. Skips with a reason without Chromium or the shared data."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from apps.api.auth import create_key
from core.settings import Settings
from tests.apps.api.conftest import serve_app
from tests.conftest import SHARED_DATA, STOCKNET_DIR
from tests.integration.browser_support import CHROMIUM_ARGS, axe, browser_path, crawl, non_blank, sign_in
from tests.integration.conftest import Service, _base_env

pytestmark = [pytest.mark.shared_data, pytest.mark.timeout(900)]

OPTIONS_DIR = SHARED_DATA / "options"
#: The analyses the pages show: name → ``finagent analyze`` arguments.
ANALYSES = {
    "spread": ("AAPL", "--type", "put_spread", "--as-of", "2014-06-06"),
    # one spread's margin (15 × 100 USD) is over 20 % of a 5,000 USD account: refused by sizing
    "spread_refused": ("AAPL", "--type", "put_spread", "--as-of", "2014-06-06", "--plan-option",
                       "account_value=5000"),
    "csp": ("AAPL", "--type", "csp", "--as-of", "2014-06-09"),
    "covered_call": ("AAPL", "--type", "covered_call", "--as-of", "2014-06-06", "--cost-basis", "600"),
}  # fmt: skip


@dataclass
class OptionsConsole:
    """A gateway on the SQLite state of the :data:`ANALYSES`: base URL, a key of the tenant that
    owns them, and each analysis's ``--json`` report by name."""

    base: str
    key: str
    reports: dict[str, dict[str, Any]]


@pytest.fixture(scope="module")
def options_console(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OptionsConsole]:
    if not (OPTIONS_DIR / "lean_aapl_2014-06").is_dir() or not STOCKNET_DIR.is_dir():
        pytest.skip(f"no Lean chains or StockNet bars under {SHARED_DATA} (see its README)")
    browser_path()  # skips without a browser, before the analyses run
    tmp = tmp_path_factory.mktemp("console-options")
    env = _base_env(tmp)
    env.update(
        FINAGENT_DATA_PROVIDER="csv",
        FINAGENT_DATA_DIR=str(STOCKNET_DIR),
        FINAGENT_OPTIONS_DIR=str(OPTIONS_DIR),
    )
    cli = Service(env=env, tmp=tmp)
    reports = {}
    for name, args in ANALYSES.items():  # one at a time: they share one SQLite file
        proc = cli.cli("analyze", *args, "--json", timeout=300)
        assert proc.returncode == 0, (name, proc.stderr[-2000:])
        reports[name] = json.loads(proc.stdout)
        assert reports[name]["status"] == "done", (name, reports[name].get("errors"))
    state = tmp / "state"
    settings = Settings(
        service_database_url=f"sqlite:///{state / 'finagent.sqlite3'}", service_state_dir=state
    )
    key = create_key(name="options-ui", settings=settings)
    with serve_app(settings) as base:
        yield OptionsConsole(base=base, key=key, reports=reports)


@pytest.fixture
def browser_page(options_console: OptionsConsole) -> Iterator[Any]:
    """A signed-in Playwright page at 1280 × 900 px."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=browser_path(), args=CHROMIUM_ARGS)
        try:
            page = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
            sign_in(page, options_console.base, options_console.key)
            yield page
        finally:
            browser.close()


def _at_both_widths(page: Any, url: str, shots: Path, name: str) -> None:
    """Load ``url`` at 1280 then 390 px: no template text, the chart drawn, axe-clean at both,
    no wider than a 390 px screen, screenshots with content."""
    for width in (1280, 390):
        page.set_viewport_size({"width": width, "height": 900 if width > 400 else 844})
        answer = page.goto(url)
        assert answer is not None and answer.status == 200, url
        assert "{{" not in answer.text() and "{%" not in answer.text()
        if page.locator(".pricechart").count():
            page.wait_for_selector(".pricechart[data-ready=drawn]", timeout=60_000)
        assert page.evaluate("() => document.documentElement.scrollWidth") <= width + 1, (name, width)
        axe(page, f"{name} at {width} px")
        shot = shots / f"{name}-{width}.png"
        page.screenshot(path=str(shot), full_page=True)
        non_blank(shot)
    page.set_viewport_size({"width": 1280, "height": 900})


def _follow(page: Any, section: Any, prefix: str) -> None:
    """The section's first citation of a ``prefix`` call is a link to that call's timeline row."""
    cite = section.locator("a.cite", has_text=prefix).first
    target = cite.get_attribute("href")
    assert target and target.startswith(f"#call-{prefix}"), target
    cite.click()
    row = page.locator(f"tr{target}")
    assert row.count() == 1 and prefix in row.inner_text()


def _money(value: float) -> str:
    return f"{value:,.2f}"


NBSP = "\u00a0"
#: A number and its unit on either side of a plain (breakable) space: what the console never shows.
_SPLITTABLE = re.compile(r"\d (?:%|USD\b|DTE\b)")


def _plain(text: str) -> str:
    """``text`` as the report writes it: the console binds each number to its unit with a no-break
    space (asserted by :data:`_SPLITTABLE` finding nothing), the report with a plain one."""
    assert not _SPLITTABLE.search(text), text
    return text.replace(NBSP, " ")


def test_put_spread_pages_show_the_verdict_first_with_strikes_and_citations(
    options_console: OptionsConsole, browser_page: Any, tmp_path: Path
) -> None:
    page, base = browser_page, options_console.base
    sized = options_console.reports["spread"]
    plan = sized["put_spread"]
    assert plan["status"] == "suggested", plan["reasons"]
    spread, n = plan["spread"], plan["sizing"]["contracts"]
    url = f"{base}/console/analyses/{sized['analysis_id']}"
    _at_both_widths(page, url, tmp_path, "put-spread")
    section = page.locator("section.put-spread")
    verdict = _plain(section.locator("#put-spread-verdict").inner_text())
    assert verdict.startswith(f"Sell {n} put credit spread"), verdict
    # the whole decision: every rung's strikes and the totals the sizing states, not the first rung's
    sizing = plan["sizing"]
    assert len(sizing["rungs"]) > 1 and f"({spread['dte']} DTE)" in verdict
    for rung in sizing["rungs"]:
        pair = f"{rung['contracts']} × the {_money(rung['strike'])} / {_money(rung['long_strike'])}"
        assert pair in verdict, verdict
    assert (
        f"a credit of {_money(sizing['net_premium'])} USD and a max loss of {_money(sizing['max_loss'])} USD "
        "in all" in verdict
    ), verdict
    # the analyses list shows the stored headline whole (wrapped), with the same totals
    page.goto(f"{base}/console/analyses")
    row = page.locator(f"tr:has(a[href='/console/analyses/{sized['analysis_id']}'])")
    listed = _plain(row.locator("td.answer").inner_text())
    assert listed == sized["headline"] and "…" not in listed
    assert f"credit {_money(sizing['net_premium'])} USD, max loss {_money(sizing['max_loss'])} USD" in listed
    page.goto(url)
    # the verdict is the page's answer too, above the direction call
    assert _plain(page.locator(".headline .verdict").inner_text()) == verdict
    strikes = section.locator("#put-spread-strikes").inner_text()
    short, long, width = (_money(spread[k]) for k in ("short_strike", "long_strike", "width"))
    assert strikes == f"{short} / {long} (width {width})"
    text = section.inner_text()
    assert spread["short"] in text and spread["long"] in text and spread["expiry"] in text
    assert f"{plan['sizing']['share_of_account'] * 100:.1f}\u00a0%" in text  # the share of the account
    assert f"{spread['pop_rw'] * 100:.1f}\u00a0%" in text and "risk forecast" in text  # the real-world POP
    _follow(page, section, "filter_options_")
    _follow(page, section, "get_portfolio_")
    # the interactive chart marks both strikes and the breakeven
    page.wait_for_selector(".pricechart[data-ready=drawn]", timeout=60_000)
    legend = page.inner_text(".chart-legend")
    assert f"short put {short}" in legend and f"long put {long}" in legend, legend
    assert f"breakeven {_money(spread['breakeven'])}" in legend, legend

    refused = options_console.reports["spread_refused"]
    plan = refused["put_spread"]
    assert plan["status"] == "rejected" and plan["rejected_by"] == "sizing", plan["reasons"]
    _at_both_widths(page, f"{base}/console/analyses/{refused['analysis_id']}", tmp_path, "put-spread-refused")
    section = page.locator("section.put-spread")
    verdict = _plain(section.locator("#put-spread-verdict").inner_text())
    first = plan["reasons"][0]["text"]
    assert verdict.startswith(f"No put credit spread on AAPL: rejected by the sizing analyst: {first}"), (
        verdict
    )
    assert "The spread it weighed (not traded)" in section.inner_text()
    _follow(page, section, "get_portfolio_")


def test_csp_and_covered_call_pages_show_the_contract_and_citations(
    options_console: OptionsConsole, browser_page: Any, tmp_path: Path
) -> None:
    page, base = browser_page, options_console.base
    for name, key, screen in (
        ("csp", "csp", "filter_options_"),
        ("covered_call", "covered_call", "filter_calls_"),
    ):
        report = options_console.reports[name]
        plan = report[key]
        assert plan["status"] == "suggested", plan["reasons"]
        _at_both_widths(page, f"{base}/console/analyses/{report['analysis_id']}", tmp_path, name)
        section = page.locator("section.options")
        title = "cash-secured put" if name == "csp" else "covered call"
        assert section.locator("h2").inner_text() == f"Options: {title}"
        signal = section.locator("p.signal").inner_text()
        assert re.match(rf"Sell {plan['sizing']['contracts']} ", signal), signal
        assert plan["suggestion"]["contract"] in signal
        assert f"strike {plan['suggestion']['strike']:.2f}" in section.inner_text()
        # the Answer card: the plan's full verdict (no "…"), its strike to cents, its citations
        answer = _plain(page.locator(".headline .verdict").inner_text())
        n = plan["sizing"]["contracts"]
        assert answer.startswith(f"Sell {n} {title}{'s' if n != 1 else ''} on AAPL"), answer
        assert f"the {_money(plan['suggestion']['strike'])} {'put' if name == 'csp' else 'call'}" in answer
        if len(plan["sizing"]["rungs"]) > 1:  # a ladder: every rung and the premium in all
            assert all(r["contract"] in answer for r in plan["sizing"]["rungs"]), answer
            assert f"a premium of {_money(plan['sizing']['net_premium'])} USD in all" in answer, answer
        assert f"({plan['suggestion']['dte']} DTE)" in answer and "…" not in answer
        assert "[" + plan["options"]["source_refs"][0] + "]" in answer
        _follow(page, section, screen)


def test_the_crawler_visits_the_options_pages(
    options_console: OptionsConsole, browser_page: Any, tmp_path: Path
) -> None:
    visited = crawl(browser_page, options_console.base, tmp_path)
    for name, report in options_console.reports.items():
        assert f"/console/analyses/{report['analysis_id']}" in visited, (name, visited)
