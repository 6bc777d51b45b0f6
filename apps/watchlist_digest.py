"""The digest of a watchlist run: what it says (:func:`build_digest`, JSON) and how it reads
(:func:`digest_markdown`, :func:`digest_html`), with the chart links of its tickers. Pure
functions of the run's rows: ``apps.watchlists.finalize_run`` reads the rows and stores the
three forms; ``apps.watchlists`` re-exports the public names."""

from __future__ import annotations

import html
from collections.abc import Callable, Sequence
from datetime import date
from typing import Any, Final

from core.tickers import drop_subject

#: How a ticker refused for a quota begins its reason (``apps.metering.RunQuota.refusal``).
QUOTA_MARK: Final = "quota:"


def build_digest(
    *,
    name: str,
    run_date: date,
    items: Sequence[dict[str, Any]],
    previous_date: date | None,
    previous_items: Sequence[dict[str, Any]],
    timeout_s: int,
) -> dict[str, Any]:
    """The digest as JSON: ``{watchlist, run_date, previous_run_date, counts, tickers: [...]}``.

    Each ticker: ``symbol, analysis_id, as_of, outcome (ok|failed), signal, p_outperform (the
    calibrated p(outperform the benchmark) at the signal horizon, ``agents.quant.calibration``;
    ``None`` for reports written before it), headline (the report's one-line answer,
    ``pipeline.report.headline_text``), details (``{confidence}``: the author's raw figure,
    not evidence), previous_signal,
    change (new|unchanged|"BUY → HOLD"|None), error, chart_url``. Failures are
    refused tickers (the reason: validation, or a quota, ``"quota: …"``), failed analyses (their
    error) and analyses unfinished after ``timeout_s``. ``counts`` has ``tickers, ok, failed,
    changed, refused`` (never started) and ``refused_by_quota`` (of those, for a quota).
    ``chart_url`` is the gateway-relative URL of the analysis's chart PNG (:func:`chart_url`)
    for a successful ticker, ``None`` for a failure.
    """
    before = {i["symbol"]: i.get("signal") for i in previous_items if i.get("analysis_status") == "done"}
    rows = []
    for item in items:
        ok = item["status"] == "enqueued" and item["analysis_status"] == "done"
        if item["status"] == "refused":
            error = item["error"]
        elif item["analysis_status"] == "failed":
            error = item["analysis_error"] or "the analysis failed"
        elif not ok:
            error = f"did not finish within {timeout_s} s (status {item['analysis_status']})"
        else:
            error = None
        if error is not None and error != drop_subject(item["symbol"], error):
            # stacked "ZZZZ: ZZZZ: …" (rows written before the service named it once) → once
            error = f"{item['symbol']}: {drop_subject(item['symbol'], error)}"
        signal = item["signal"] if ok else None
        prev = before.get(item["symbol"])
        change: str | None = None
        if ok:
            if previous_date is None or item["symbol"] not in before:
                change = "new"
            elif prev == signal:
                change = "unchanged"
            else:
                change = f"{prev} → {signal}"
        rows.append(
            {
                "symbol": item["symbol"],
                "analysis_id": item["analysis_id"],
                "as_of": item["as_of"].isoformat() if item.get("as_of") else None,
                "outcome": "ok" if ok else "failed",
                "signal": signal,
                "p_outperform": item.get("p_outperform") if ok else None,
                # the report's one-line answer: an option plan's verdict, or "HOLD: no evidence"
                "headline": item.get("headline") if ok else None,
                # the raw confidence is a detail, not evidence (as in the HTTP API)
                "details": {"confidence": item["confidence"]} if ok else None,
                "previous_signal": prev,
                "change": change,
                "error": error,
                "chart_url": chart_url(item["analysis_id"]) if ok else None,
            }
        )
    return {
        "watchlist": name,
        "run_date": run_date.isoformat(),
        "previous_run_date": previous_date.isoformat() if previous_date else None,
        "counts": {
            "tickers": len(rows),
            "ok": sum(r["outcome"] == "ok" for r in rows),
            "failed": sum(r["outcome"] == "failed" for r in rows),
            "changed": sum(1 for r in rows if r["change"] not in (None, "new", "unchanged")),
            "refused": sum(1 for i in items if i["status"] == "refused"),
            "refused_by_quota": sum(
                1 for i in items if i["status"] == "refused" and str(i["error"]).startswith(QUOTA_MARK)
            ),
        },
        "tickers": rows,
    }


def chart_url(analysis_id: str) -> str:
    """The gateway-relative URL of an analysis's chart PNG, ``/analyses/{analysis_id}/chart.png``
    (served by ``GET /analyses/{id}/chart.png`` with the same ``X-API-Key``)."""
    return f"/analyses/{analysis_id}/chart.png"


def _probability(value: float | None, headline: str | None = None) -> str:
    """The calibrated p of a digest row, and "no evidence" beside it when the calibration
    abstained (the report's headline says so): 0.50 is then no estimate, only no view."""
    if value is None:
        return ""
    return f"{value:.2f}" + (" (no evidence)" if headline and headline.endswith(": no evidence") else "")


def digest_markdown(
    digest: dict[str, Any],
    *,
    chart_note: str | None = None,
    ticker_url: Callable[[dict[str, Any]], str | None] | None = None,
) -> str:
    """Render the digest JSON of :func:`build_digest` as Markdown (a table, then failures);
    ``chart_note`` replaces the closing sentence on how to open the chart links (the web
    console's links need no key); ``ticker_url(row)`` of a ticker's row, when given, makes its
    symbol a link (the web console links each ticker to its analysis's page)."""

    def ticker(r: dict[str, Any], text: str) -> str:
        url = ticker_url(r) if ticker_url is not None and r.get("analysis_id") else None
        return f"[{text}]({url})" if url else text

    c = digest["counts"]
    since = digest["previous_run_date"] or "no previous run"
    lines = [
        f"# Watchlist {digest['watchlist']}: {digest['run_date']}",
        "",
        f"{c['tickers']} tickers: {c['ok']} analysed, {c['failed']} failed, "
        f"{c['changed']} signal changes since {since}.",
        *([f"Market clock: {digest['market_clock']['note']}."] if digest.get("market_clock") else []),
        *([_refused_line(c)] if c.get("refused") else []),
        "",
        "| ticker | signal | p(outperform, 20d) | change | as of | chart |",
        "|---|---|---|---|---|---|",
    ]
    for r in digest["tickers"]:
        if r["outcome"] == "ok":
            chart = f"[chart]({r['chart_url']})" if r.get("chart_url") else ""
            lines.append(
                f"| {ticker(r, r['symbol'])} | {r['signal']} "
                f"| {_probability(r.get('p_outperform'), r.get('headline'))} "
                f"| {r['change']} | {r['as_of'] or ''} | {chart} |"
            )
    failures = [r for r in digest["tickers"] if r["outcome"] == "failed"]
    if failures:
        lines += ["", "## Failures", ""]
        # the bold symbol names it: the text does not repeat it
        lines += [
            f"- {ticker(r, '**' + r['symbol'] + '**')}: {drop_subject(r['symbol'], str(r['error']))}"
            for r in failures
        ]
    note = chart_note or (
        "Chart links are signed and expire; ask the gateway for the digest again for fresh ones."
        if digest.get("charts_signed")
        else "Chart links are relative to the HTTP gateway and need its X-API-Key header."
    )
    if digest.get("llm"):
        lines += ["", _llm_line(digest["llm"])]
    lines += _scorecard_lines(digest.get("scorecard"))
    lines += ["", note, ""]
    return "\n".join(lines)


def _refused_line(counts: dict[str, Any]) -> str:
    """One sentence on the tickers a run never started (Markdown and HTML digests)."""
    quota = counts.get("refused_by_quota", 0)
    return (
        f"Not started: {counts['refused']} tickers ({quota} for a quota, "
        f"{counts['refused'] - quota} refused by validation); each is listed with its reason below."
    )


def _scorecard_lines(section: dict[str, Any] | None) -> list[str]:
    from apps.scorecard import digest_markdown_lines  # lazy, as in _scorecard_section

    return digest_markdown_lines(section)


def with_signed_charts(digest: dict[str, Any], *, sign: Callable[[str], str]) -> dict[str, Any]:
    """A copy of ``digest`` whose ``chart_url`` values are passed through ``sign`` (e.g.
    :func:`apps.api.auth.sign_path`) and marked ``charts_signed: true``; the stored digest
    keeps its plain links, so signatures are minted fresh each time a digest is served."""
    tickers = [
        {**r, "chart_url": sign(r["chart_url"]) if r.get("chart_url") else r.get("chart_url")}
        for r in digest["tickers"]
    ]
    return {**digest, "tickers": tickers, "charts_signed": True}


def _chart_cell(r: dict[str, Any], *, embed: bool) -> str:
    url = r.get("chart_url")
    if not url:
        return ""
    if embed:
        alt = html.escape(f"{r['symbol']} chart")
        return f'<a href="{html.escape(url)}"><img src="{html.escape(url)}" alt="{alt}" width="400"></a>'
    return f'<a href="{html.escape(url)}" type="image/png">chart</a>'


def digest_html(digest: dict[str, Any]) -> str:
    """Render the digest JSON as a standalone HTML page (every value escaped); each successful
    ticker's row links its chart PNG. With signed links (``charts_signed``, see
    :func:`with_signed_charts`) the chart is embedded as an ``<img>``; plain links need the
    gateway's ``X-API-Key``, which a browser does not send for an image, so they stay links."""
    embed = bool(digest.get("charts_signed"))
    e = html.escape
    c = digest["counts"]
    since = digest["previous_run_date"] or "no previous run"
    rows = "".join(
        f"<tr><td>{e(r['symbol'])}</td><td>{e(str(r['signal']))}</td>"
        f"<td>{e(_probability(r.get('p_outperform'), r.get('headline')))}</td><td>{e(str(r['change']))}</td>"
        f"<td>{e(r['as_of'] or '')}</td><td>{_chart_cell(r, embed=embed)}</td></tr>"
        for r in digest["tickers"]
        if r["outcome"] == "ok"
    )
    failures = "".join(
        f"<li><strong>{e(r['symbol'])}</strong>: {e(drop_subject(r['symbol'], str(r['error'])))}</li>"
        for r in digest["tickers"]
        if r["outcome"] == "failed"
    )
    title = f"Watchlist {e(digest['watchlist'])}: {e(digest['run_date'])}"
    return (
        f'<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><title>{title}</title></head>'
        f"<body><h1>{title}</h1>"
        f"<p>{c['tickers']} tickers: {c['ok']} analysed, {c['failed']} failed, {c['changed']} signal "
        f"changes since {e(since)}.</p>"
        + (f"<p>Market clock: {e(digest['market_clock']['note'])}.</p>" if digest.get("market_clock") else "")
        + (f"<p>{e(_refused_line(c))}</p>" if c.get("refused") else "")
        + "<table><thead><tr><th>ticker</th><th>signal</th><th>p(outperform, 20d)</th><th>change</th>"
        f"<th>as of</th><th>chart</th></tr></thead><tbody>{rows}</tbody></table>"
        + (f"<h2>Failures</h2><ul>{failures}</ul>" if failures else "")
        + (f"<p>{e(_llm_line(digest['llm']))}</p>" if digest.get("llm") else "")
        + _scorecard_html(digest.get("scorecard"))
        + (
            "<p>Chart links are signed and expire; ask the gateway for the digest again for fresh ones.</p>"
            if embed
            else "<p>Chart links are relative to the HTTP gateway and need its X-API-Key header.</p>"
        )
        + "</body></html>\n"
    )


def _scorecard_html(section: dict[str, Any] | None) -> str:
    """The scorecard section as HTML (every value escaped); empty without one."""
    lines = [line[2:] for line in _scorecard_lines(section) if line.startswith("- ")]
    if not lines:
        return ""
    items = "".join(f"<li>{html.escape(line)}</li>" for line in lines)
    return f"<h2>Scorecard (these tickers, matured recommendations)</h2><ul>{items}</ul>"


def _llm_line(llm: dict[str, Any]) -> str:
    """One sentence on the run's LLM use and budget (Markdown and HTML digests)."""
    cost = "unknown" if llm["cost_usd"] is None else f"${llm['cost_usd']:.4f}"
    limits = [f"{llm['budget_tokens']} tokens" if llm["budget_tokens"] is not None else ""]
    limits.append(f"${llm['budget_usd']:.2f}" if llm["budget_usd"] is not None else "")
    limit = " / ".join(x for x in limits if x) or "none"
    text = (
        f"LLM: {llm['calls']} calls answered, {llm['failed_calls']} failed, {llm['attempts']} attempts; "
        f"{llm['prompt_tokens'] + llm['completion_tokens']} tokens; cost {cost}; run budget {limit}."
    )
    if llm["budget_hit"]:
        text += (
            " The run's LLM budget was spent: the analysts of "
            + ", ".join(llm["deterministic_after_budget"])
            + " ran deterministically from then on."
        )
    return text
