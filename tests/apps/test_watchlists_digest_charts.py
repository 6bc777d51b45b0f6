"""Digest chart links: every successful ticker links ``/analyses/{id}/chart.png`` in the JSON,
Markdown and HTML digests; refused tickers, failed and unfinished analyses get none."""

from __future__ import annotations

import re
from datetime import date
from typing import Any

from apps.watchlists import build_digest, chart_url, digest_html, digest_markdown


def _item(symbol: str, *, analysis_status: str | None = "done", refused: str | None = None) -> dict[str, Any]:
    done = analysis_status == "done" and refused is None
    return {
        "symbol": symbol,
        "status": "refused" if refused else "enqueued",
        "analysis_id": None if refused else f"00000000-0000-0000-0000-{symbol.lower():0>12}",
        "error": refused,
        "analysis_status": None if refused else analysis_status,
        "signal": "BUY" if done else None,
        "confidence": 0.61 if done else None,
        "p_outperform": 0.56 if done else None,
        "analysis_error": "research failed: NO_DATA" if analysis_status == "failed" else None,
        "as_of": None if refused else date(2012, 6, 29),
    }


def _digest() -> dict[str, Any]:
    return build_digest(
        name="tech",
        run_date=date(2012, 6, 29),
        items=[
            _item("AAPL"),
            _item("IBM", analysis_status="failed"),
            _item("MSFT", analysis_status="analyzing"),
            _item("ZZZZ", refused="ZZZZ: not in the embedded dataset"),
        ],
        previous_date=None,
        previous_items=[],
        timeout_s=60,
    )


def test_chart_url_is_the_gateway_relative_png_path() -> None:
    assert chart_url("abc") == "/analyses/abc/chart.png"


def test_json_digest_links_charts_of_successful_tickers_only() -> None:
    rows = {r["symbol"]: r for r in _digest()["tickers"]}
    aapl_id = rows["AAPL"]["analysis_id"]
    assert rows["AAPL"]["chart_url"] == f"/analyses/{aapl_id}/chart.png"
    for failed in ("IBM", "MSFT", "ZZZZ"):
        assert rows[failed]["outcome"] == "failed" and rows[failed]["chart_url"] is None


def test_markdown_digest_links_the_chart_in_the_ticker_row() -> None:
    digest = _digest()
    aapl_id = digest["tickers"][0]["analysis_id"]
    md = digest_markdown(digest)
    assert f"| AAPL | BUY | 0.56 | new | 2012-06-29 | [chart](/analyses/{aapl_id}/chart.png) |" in md
    assert md.count("chart.png") == 1  # none for IBM (failed), MSFT (unfinished), ZZZZ (refused)
    assert "- **IBM**: research failed: NO_DATA" in md


def test_html_digest_links_the_chart_in_the_ticker_row() -> None:
    digest = _digest()
    aapl_id = digest["tickers"][0]["analysis_id"]
    page = digest_html(digest)
    assert "<th>chart</th>" in page
    link = f'<a href="/analyses/{aapl_id}/chart.png" type="image/png">chart</a>'
    assert re.search(rf"<tr><td>AAPL</td>(?:(?!</tr>).)*<td>{re.escape(link)}</td></tr>", page)
    assert page.count("chart.png") == 1
    assert "<li><strong>IBM</strong>" in page and "<li><strong>ZZZZ</strong>" in page


def test_html_digest_escapes_the_chart_url() -> None:
    digest = _digest()
    digest["tickers"][0]["chart_url"] = '/analyses/"><script>/chart.png'
    page = digest_html(digest)
    assert "<script>" not in page and "&quot;&gt;&lt;script&gt;" in page


def test_signed_digest_embeds_images_and_leaves_the_stored_digest_alone() -> None:
    from apps.watchlists import with_signed_charts

    digest = _digest()
    signed = with_signed_charts(digest, sign=lambda path: f"{path}?expires=9&sig=ab")
    assert signed["charts_signed"] is True and "charts_signed" not in digest
    urls = [t["chart_url"] for t in signed["tickers"] if t["chart_url"]]
    assert urls and all(u.endswith("?expires=9&sig=ab") for u in urls)
    assert all(t["chart_url"] is None or "sig=" not in t["chart_url"] for t in digest["tickers"])
    page = digest_html(signed)
    assert page.count("<img src=") == len(urls) and "?expires=9&amp;sig=ab" in page
    assert "signed and expire" in page and "signed and expire" in digest_markdown(signed)
    assert "<img" not in digest_html(digest)
